"""The book: chapter execution (:mod:`~lamina.book.execute`, ``python -m lamina.book``),
offline charts and glue (:mod:`~lamina.book.glue`), the methods page
(:mod:`~lamina.book.methods`), the scorecard pages (:mod:`~lamina.book.scorecard`) and the
blocks the chapter notebooks share (:mod:`~lamina.book.chapter`, imported on its own).

``CHAPTERS`` and ``execute_chapter`` are imported on first use (PEP 562 ``__getattr__`` over
``_LAZY``), so that a chapter notebook's ``from lamina.book import glue`` does not import the
executor, the methods page and the scorecard, which import every chapter package. The reuse
key (:mod:`lamina.book.reuse`) reads ``_LAZY`` to count only what a notebook really imports.
"""

import importlib
from typing import Any

from lamina.book.glue import glue, setup_altair

_LAZY = {"CHAPTERS": "lamina.book.execute", "execute_chapter": "lamina.book.execute"}
"""``{name: module defining it}`` for the names imported on first use."""

__all__ = ["CHAPTERS", "execute_chapter", "glue", "setup_altair"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'lamina.book' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
