"""Verdict badges: styled text, never emoji.

A badge is ``<span class="lamina-verdict lamina-verdict--<slug>">word</span>``; the colours
live in ``book/_static/lamina.css``, so a reader whose fonts lack emoji still reads the word.
The same slugs colour the cells of the verdict matrix (``lamina-cell--<slug>``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any

from lamina.evidence.claims import PAPER_VERDICTS

__all__ = [
    "VERDICTS",
    "badge",
    "is_self_check",
    "verdict_slug",
]

# every verdict word the book prints, in the order legends and counts list them
VERDICTS: tuple[str, ...] = (*PAPER_VERDICTS, "not run", "check passed", "check failed")

# claim ids that test lamina's own machinery (e.g. "lamina reproduces the released
# curvature"), not a claim of the papers; used when a result row carries no ``self_check``
SELF_CHECK_PREFIXES: tuple[str, ...] = ("self", "check", "sanity", "reanalysis_released")


def verdict_slug(verdict: str) -> str:
    """CSS slug of a verdict word: lower case, runs of non-letters as one hyphen
    (``"not reproduced"`` -> ``"not-reproduced"``); an empty verdict is ``"unknown"``."""
    slug = re.sub(r"[^a-z0-9]+", "-", str(verdict).strip().lower()).strip("-")
    return slug or "unknown"


def badge(verdict: str, *, title: str | None = None) -> str:
    """HTML for one verdict badge: the verdict word itself, in a span whose classes
    (``lamina-verdict lamina-verdict--<slug>``) colour it. ``title`` becomes the tooltip."""
    word = str(verdict).strip() or "unknown"
    tip = f' title="{html.escape(title, quote=True)}"' if title else ""
    return (
        f'<span class="lamina-verdict lamina-verdict--{verdict_slug(word)}"{tip}>'
        f"{html.escape(word)}</span>"
    )


def is_self_check(row: Mapping[str, Any]) -> bool:
    """Whether a claims row checks lamina itself rather than a claim of the papers.

    A row's own ``self_check`` flag, or its ``kind`` ("self-check" or "paper", as
    ``lamina.evidence.claims.Claim`` writes it), decides when present; otherwise a claim id starting
    with one of :data:`SELF_CHECK_PREFIXES` is a self-check."""
    kind = row.get("kind")
    if isinstance(kind, str) and kind.strip():
        return kind.strip().lower() == "self-check"
    flag = row.get("self_check")
    if flag is not None and not (isinstance(flag, float) and flag != flag):
        if isinstance(flag, str):
            return flag.strip().lower() in ("1", "true", "yes")
        return bool(flag)
    cid = str(row.get("claim_id", "")).strip().lower()
    return cid.startswith(SELF_CHECK_PREFIXES)
