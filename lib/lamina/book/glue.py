"""What a chapter's notebook needs to show results in the book: offline (static SVG) Altair
charts with lamina's theme, tables in scroll containers, and ``glue`` for numbers quoted in
the prose."""

from __future__ import annotations

import warnings
from typing import Any

from lamina.book.charts import register_theme
from lamina.book.tables import install_table_formatter

__all__ = ["glue", "setup_altair"]

# A chapter's page shows results, not library chatter: inside a kernel without ipywidgets,
# tqdm warns when it is first imported (by a chapter module, after this one), and the warning
# would print on the chapter's first screen. lamina's own progress bars do not need widgets.
warnings.filterwarnings("ignore", message="IProgress not found")


def setup_altair() -> None:
    """Render Altair charts as static SVG (via vl-convert), so the book needs no network:
    the default renderer loads vega from a CDN. Also apply lamina's chart theme
    (:mod:`lamina.book.charts`) and show data frames in scroll containers
    (:mod:`lamina.book.tables`)."""
    import altair as alt

    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:
        pass
    alt.renderers.enable("svg")
    alt.data_transformers.disable_max_rows()

    register_theme()
    install_table_formatter()


def glue(name: str, value: Any, *, display: bool = False) -> None:
    """``myst_nb.glue`` when available (inside the book), a no-op otherwise. Returns None,
    so a glue call as the last line of a cell prints nothing."""
    try:
        from myst_nb import glue as _glue
    except ImportError:
        return
    _glue(name, value, display=display)
