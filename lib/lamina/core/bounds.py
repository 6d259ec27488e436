"""A config's numeric fields, declared once with their type and range.

A config dataclass lists ``BOUNDS`` (field name -> :class:`Bound`) beside its fields and calls
:func:`check_bounds` in its ``__post_init__``. The chapter's notebook builds the config
(``Config.from_globals``) and ``lamina run`` builds the same config from the same values
before any kernel starts (``lamina.book.preflight.check_config``), so both refuse a negative
count, a string for a number or a fraction above 1 with the same one-line ValueError naming
the field, the range and the value.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["COUNT", "FRACTION", "POSITIVE", "SEED", "Bound", "check_bounds"]


@dataclass(frozen=True)
class Bound:
    """The values a numeric field takes: at least ``low`` (above it when ``above``), at most
    ``high``; a whole number when ``integer``; None too when ``optional``; with ``each``, a
    list or tuple whose every item is such a value."""

    low: float | None = None
    high: float | None = None
    integer: bool = False
    above: bool = False
    optional: bool = False
    each: bool = False

    def describe(self) -> str:
        """The range in words, e.g. "a whole number >= 1", "a list of numbers in [0, 1]"."""
        kind = ("whole numbers" if self.integer else "numbers") if self.each else (
            "a whole number" if self.integer else "a number")  # fmt: skip
        if self.low is not None and self.high is not None and not self.above:
            text = f"{kind} in [{_number(self.low)}, {_number(self.high)}]"
        else:
            parts = [f"{'>' if self.above else '>='} {_number(self.low)}"] if self.low is not None else []
            parts += [f"<= {_number(self.high)}"] if self.high is not None else []
            text = " ".join([kind, " and ".join(parts)]).strip()
        return ("a list of " if self.each else "") + text + (" or None" if self.optional else "")

    def accepts(self, value: Any) -> bool:
        """Whether a field's value is in range: None when ``optional``; with ``each``, a list
        or tuple of values that :meth:`holds`; else one such value."""
        if value is None and self.optional:
            return True
        if self.each:
            return isinstance(value, list | tuple) and all(self.holds(v) for v in value)
        return self.holds(value)

    def holds(self, value: Any) -> bool:
        """Whether one value (an item, for ``each``) is in range and of the right type."""
        if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy's too
            return False
        if self.integer and not isinstance(value, numbers.Integral):
            return False
        if not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.above else value < self.low):
            return False
        return self.high is None or value <= self.high


def _number(value: float) -> str:
    """A bound as written: whole numbers in full (4294967295), others as ``:g``."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


COUNT = Bound(1, integer=True)
"""A count of samples, steps or items: a whole number >= 1."""
POSITIVE = Bound(0, above=True)
"""A scale or learning rate: a number > 0."""
FRACTION = Bound(0, 1)
"""A fraction: a number in [0, 1]."""
SEED = Bound(0, 2**32 - 1, integer=True)
"""A random seed: a whole number in [0, 2**32 - 1] (numpy's range)."""


def check_bounds(config: Any, bounds: Mapping[str, Bound]) -> None:
    """ValueError naming the first field of ``bounds`` whose value on ``config`` is out of its
    :class:`Bound` (range or type): "n_tokens must be a whole number >= 1; got -5"."""
    for name, bound in bounds.items():
        value = getattr(config, name)
        if not bound.accepts(value):
            raise ValueError(f"{name} must be {bound.describe()}; got {value!r}")
