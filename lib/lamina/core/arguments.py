"""Command-line argument types shared by lamina's small CLIs (the calibration commands)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["count"]


def count(what: str) -> Callable[[str], int]:
    """An argparse ``type`` for a whole number >= 1 named ``what`` in its error
    (``argparse.ArgumentTypeError``: "N_SEEDS must be a whole number; got 'abc'", "N_SEEDS must
    be at least 1; got 0"), so the parser exits with a usage line before anything runs."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a whole number; got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{what} must be at least 1; got {value}")
        return value

    return parse
