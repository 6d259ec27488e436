"""The book's chart theme, defined once: one colour per model, one width convention, facet
headers that never overlap, and figure captions built from the results.

Every chapter calls :func:`register_theme` (through ``lamina.book.setup_altair``) and draws
with these helpers::

    chart = alt.Chart(df).mark_line().encode(x="layer:Q", y="ci:Q", color=model_color(df))
    show_figure(facet(chart, "model", df["model"]),
                what="Convergence index per layer.", look_at="where the curve peaks",
                claims=result.claims, claim_id="convergence_peak")

Widths are in CSS pixels of the rendered page. The book's text column is about 730 px at a
1300 px window and about 760 px at 800 px (measured in Chromium with sphinx-book-theme 1.3);
a chart is at most :data:`PAGE_WIDTH` wide including its axes and legend, and the stylesheet
scales any wider SVG down to the column.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Required, TypedDict, Unpack

from lamina.book.badges import badge
from lamina.book.colors import MODEL_COLORS, canonical_model, model_color, model_colors

if TYPE_CHECKING:
    import altair as alt
    import pandas as pd

__all__ = [
    "FACET_MIN_WIDTH",
    "Caption",
    "MODEL_COLORS",
    "PAGE_WIDTH",
    "caption_html",
    "canonical_model",
    "facet",
    "facet_columns",
    "facet_width",
    "figure_html",
    "fit_titles",
    "grid",
    "header",
    "layer_axis",
    "model_color",
    "model_colors",
    "register_theme",
    "show_figure",
    "wrap_label",
    "wrap_title",
    "zoomed",
]

# ---------------------------------------------------------------------------------------
# widths (CSS px)
# ---------------------------------------------------------------------------------------
PAGE_WIDTH = 680  # the widest chart: plot area + axes + legend, inside the text column
LEGEND_WIDTH = 130  # room a right-hand legend takes
AXIS_WIDTH = 60  # room a y axis (labels and title) takes
FACET_SPACING = 16  # px between facets
FACET_MIN_WIDTH = 180  # no facet narrower: its header and tick labels stay readable
ROW_HEADER_WIDTH = 110  # room for a grid's row headers (left of the panels)
DEFAULT_HEIGHT = 240
HEADER_WRAP = 18  # characters per line of a wrapped facet header label
TITLE_CHAR_WIDTH = 8.0  # px per character of the bold 14 px title (a safe mean for sans-serif text)

# ---------------------------------------------------------------------------------------
# facets
# ---------------------------------------------------------------------------------------


def facet_columns(n: int, *, legend: bool = True, max_width: int = PAGE_WIDTH) -> int:
    """Facets per row for ``n`` facets: as many as fit at :data:`FACET_MIN_WIDTH` each next to
    an axis (and a legend), then balanced so the last row is not nearly empty (4 -> 2 + 2)."""
    if n <= 1:
        return 1
    room = max_width - AXIS_WIDTH - (LEGEND_WIDTH if legend else 0)
    fit = max(1, (room + FACET_SPACING) // (FACET_MIN_WIDTH + FACET_SPACING))
    rows = math.ceil(n / fit)
    return math.ceil(n / rows)


def facet_width(columns: int, *, legend: bool = True, max_width: int = PAGE_WIDTH) -> int:
    """Plot-area width (px) of each of ``columns`` facets in a row that fills the page."""
    room = max_width - AXIS_WIDTH - (LEGEND_WIDTH if legend else 0)
    return max(80, (room - FACET_SPACING * (columns - 1)) // max(1, columns))


def wrap_label(text: str, width: int = HEADER_WRAP) -> list[str]:
    """``text`` split into lines of at most ``width`` characters where possible, breaking
    after "-", "/", "_" or at spaces (a word longer than ``width`` stays whole)."""
    import re

    parts = re.findall(r"[^-/_\s]*[-/_]|[^-/_\s]+|\s+", str(text))
    lines: list[str] = []
    line = ""
    for part in parts:
        if part.isspace():
            part = " "
        if line and len(line) + len(part.rstrip()) > width:
            lines.append(line.rstrip())
            line = part.lstrip()
        else:
            line += part
    if line.strip():
        lines.append(line.rstrip())
    return lines or [str(text)]


def wrap_title(text: Any, width: int = PAGE_WIDTH) -> Any:
    """A chart title that fits ``width`` px: a string longer than a line (about
    :data:`TITLE_CHAR_WIDTH` px a character of the theme's 14 px title) becomes a list of
    lines broken at spaces, which Vega-Lite draws one under the other. A title that fits, a
    list (already lines) or a non-string (e.g. ``alt.TitleParams``) is returned unchanged."""
    import textwrap

    if not isinstance(text, str):
        return text
    chars = max(20, int(width / TITLE_CHAR_WIDTH))
    if len(text) <= chars:
        return text
    return textwrap.wrap(text, chars, break_long_words=False, break_on_hyphens=False)


def fit_titles(chart: Any, width: int = PAGE_WIDTH) -> Any:
    """``chart`` (any Altair chart) with every string title in it, its own and its layers',
    facets' and concatenated charts', wrapped to ``width`` px by :func:`wrap_title`; a
    ``TitleParams`` title has its ``text`` wrapped. Changes ``chart`` in place and returns it."""
    import altair as alt

    title = getattr(chart, "title", alt.Undefined)
    if isinstance(title, str):
        chart.title = wrap_title(title, width)
    elif isinstance(title, alt.TitleParams) and isinstance(title.text, str):
        title.text = wrap_title(title.text, width)
    for attr in ("layer", "hconcat", "vconcat", "concat"):
        for sub in getattr(chart, attr, None) or []:
            if isinstance(sub, alt.TopLevelMixin | alt.SchemaBase):
                fit_titles(sub, width)
    spec = getattr(chart, "spec", alt.Undefined)
    if isinstance(spec, alt.SchemaBase):
        fit_titles(spec, width)
    return chart


def layer_axis(
    frame: pd.DataFrame,
    layer: str = "layer",
    by: str = "model",
    *,
    title: str = "layer",
    n_layers: str | None = None,
) -> tuple[pd.DataFrame, alt.X, alt.Tooltip]:
    """The x encoding of a per-layer chart. When the ``by`` groups (models) of ``frame`` differ
    in depth, the axis is relative depth, ``layer / (n_layers - 1)`` in [0, 1], so a 12-layer
    and a 30-layer model span the same width; else it is the absolute ``layer``.

    ``n_layers``: a column holding each row's layer count; None: ``max(layer) + 1`` of the row's
    group. Returns ``(frame with a "depth" column, alt.X, alt.Tooltip of the absolute layer)``;
    the tooltip goes into the chart's ``tooltip`` list so the absolute layer stays readable."""
    import altair as alt
    import pandas as pd

    df = frame.copy()
    if n_layers is not None:
        last = df[n_layers].astype(float) - 1
    elif by in df.columns:
        last = df.groupby(by)[layer].transform("max").astype(float)
    else:
        last = pd.Series(float(df[layer].max()), index=df.index)
    df["depth"] = df[layer].astype(float) / last.clip(lower=1)
    tooltip = alt.Tooltip(f"{layer}:Q", title="layer")
    if by in df.columns and last.groupby(df[by]).max().nunique() > 1:
        x = alt.X("depth:Q", title=f"relative depth ({title} / last {title})",
                  scale=alt.Scale(domain=[0, 1]))
    else:
        x = alt.X(f"{layer}:Q", title=title)
    return df, x, tooltip


def zoomed(values: Iterable[float], *, pad: float = 0.1) -> alt.Scale:
    """A quantitative scale zoomed to ``values`` (finite ones; their range padded by ``pad`` of
    itself on each side), without zero, so differences small against the values' size (e.g.
    0.05 rad between curvatures near 1 rad) stay visible."""
    import altair as alt
    import numpy as np

    v = np.asarray([x for x in values if x is not None], dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return alt.Scale(zero=False)
    lo, hi = float(v.min()), float(v.max())
    margin = (hi - lo) * pad if hi > lo else max(abs(hi), 1.0) * pad
    return alt.Scale(zero=False, domain=[lo - margin, hi + margin], nice=False)


def facet(
    chart: alt.Chart | alt.LayerChart,
    field: str,
    values: Iterable[Any],
    *,
    legend: bool = True,
    height: int = DEFAULT_HEIGHT,
    title: str | None = None,
    data: Any = None,
) -> alt.FacetChart:
    """``chart`` as small multiples of ``field`` (nominal; ``values``: the values shown, e.g.
    the data's column; panels follow their first-seen order), wrapped into rows of :func:`facet_columns` facets, each
    :func:`facet_width` wide so the whole figure fits :data:`PAGE_WIDTH`. Header labels are
    horizontal, limited to the facet's width, and wrapped (:func:`wrap_label`)."""
    import altair as alt

    labels = [str(v) for v in dict.fromkeys(values)]
    cols = facet_columns(len(labels), legend=legend)
    width = facet_width(cols, legend=legend)
    inner = chart.properties(width=width, height=height)
    kwargs: dict[str, Any] = {}
    if data is not None:
        kwargs["data"] = data
    out = inner.facet(
        facet=alt.Facet(f"{field}:N", title=None, header=header(labels, width), sort=labels),
        columns=cols,
        spacing=FACET_SPACING,
        **kwargs,
    )
    return out.properties(title=wrap_title(title)) if title else out


def grid(
    chart: alt.Chart | alt.LayerChart,
    row: str,
    column: str,
    row_values: Iterable[Any],
    column_values: Iterable[Any],
    *,
    legend: bool = True,
    height: int = 160,
    title: str | None = None,
    data: Any = None,
) -> alt.FacetChart:
    """``chart`` as a grid of small multiples, ``row`` × ``column`` (both nominal), each panel
    :func:`facet_width` wide for the number of columns, so the grid fits :data:`PAGE_WIDTH`;
    headers as in :func:`facet`."""
    import altair as alt

    rows = [str(v) for v in dict.fromkeys(row_values)]
    cols = [str(v) for v in dict.fromkeys(column_values)]
    width = facet_width(len(cols), legend=legend, max_width=PAGE_WIDTH - ROW_HEADER_WIDTH)
    kwargs: dict[str, Any] = {"data": data} if data is not None else {}
    out = chart.properties(width=width, height=height).facet(
        row=alt.Row(f"{row}:N", title=None, header=header(rows, ROW_HEADER_WIDTH), sort=rows),
        column=alt.Column(f"{column}:N", title=None, header=header(cols, width), sort=cols),
        spacing=FACET_SPACING,
        **kwargs,
    )
    return out.properties(title=wrap_title(title)) if title else out


def header(labels: Iterable[str], width: int) -> alt.Header:
    """A facet header whose labels are horizontal, at most ``width`` px, and wrapped into
    lines (:func:`wrap_label`) sized to ``width`` (about 7 px a character)."""
    import json

    import altair as alt

    chars = max(6, width // 7)
    wrapped = {s: wrap_label(s, chars) for s in labels}
    long = {s: lines for s, lines in wrapped.items() if len(lines) > 1}
    expr = "datum.label"
    for value, lines in long.items():  # a chain of ternaries (Vega has no dict lookup by value)
        expr = f"datum.value == {json.dumps(value)} ? {json.dumps(lines)} : ({expr})"
    return alt.Header(labelAngle=0, labelLimit=width, labelFontSize=12, labelExpr=expr)


# ---------------------------------------------------------------------------------------
# the theme
# ---------------------------------------------------------------------------------------


def theme_config() -> dict[str, Any]:
    """The Vega-Lite config of lamina's theme: width convention, fonts, and headers that
    never overlap (horizontal, limited, wrapped)."""
    header = {
        "labelAngle": 0,
        "labelLimit": FACET_MIN_WIDTH,
        "labelFontSize": 12,
        "titleFontSize": 12,
    }
    return {
        "config": {
            "view": {
                "continuousWidth": PAGE_WIDTH - AXIS_WIDTH - LEGEND_WIDTH,
                "continuousHeight": DEFAULT_HEIGHT,
                "stroke": None,
            },
            "axis": {
                "labelFontSize": 11,
                "titleFontSize": 12,
                "labelLimit": 160,
                "grid": True,
                "gridOpacity": 0.4,
            },
            "header": header,
            "facet": {"spacing": FACET_SPACING},
            "concat": {"spacing": FACET_SPACING},
            "title": {"fontSize": 14, "anchor": "start", "limit": PAGE_WIDTH},
            "legend": {"labelFontSize": 11, "titleFontSize": 11, "labelLimit": 120},
        }
    }


def register_theme() -> None:
    """Register and enable the ``lamina`` Altair theme (:func:`theme_config`)."""
    import altair as alt

    @alt.theme.register("lamina", enable=True)
    def _theme() -> alt.theme.ThemeConfig:
        return theme_config()  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------
# captions
# ---------------------------------------------------------------------------------------


def _fmt(x: Any, spec: str = ".3g") -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "n/a"
    return "n/a" if not math.isfinite(v) else format(v, spec)


def _measured(claims: pd.DataFrame, claim_id: str, limit: int) -> str:
    frame = claims.reset_index() if "claim_id" not in claims.columns else claims
    rows = frame[frame["claim_id"] == claim_id]
    if rows.empty:
        return ""
    parts = []
    for _, r in rows.head(limit).iterrows():
        ctx = " ".join(
            str(r[k]) for k in ("stage",) if k in r.index and r[k] not in (None, "", "-")
        )
        value = _fmt(r.get("measured"))
        lo, hi = r.get("ci_low"), r.get("ci_high")
        ci = f" [{_fmt(lo)}, {_fmt(hi)}]" if _fmt(lo) != "n/a" and _fmt(hi) != "n/a" else ""
        p = f", p = {_fmt(r.get('p'), '.2g')}" if _fmt(r.get("p")) != "n/a" else ""
        who = html.escape(str(r.get("model", "")) + (f" ({ctx})" if ctx else ""))
        parts.append(f"{who}: {value}{ci}{p} {badge(str(r.get('verdict', '')))}")
    more = len(rows) - limit
    tail = f"; and {more} more rows in the claims table" if more > 0 else ""
    return "; ".join(parts) + tail


def caption_html(
    what: str,
    look_at: str = "",
    *,
    claims: pd.DataFrame | None = None,
    claim_id: str | None = None,
    limit: int = 6,
) -> str:
    """A figure caption: what the figure shows, what to look at, and (with ``claims`` and
    ``claim_id``) the measured value, 95% CI, p and verdict of that claim per model, read
    from the claims table, so the caption stays true when the chapter runs on other models.
    ``what`` and ``look_at`` must be neutral (describe, never conclude)."""
    text = f"<strong>Figure.</strong> {html.escape(what.strip())}"
    if look_at:
        text += f" <strong>Look at</strong> {html.escape(look_at.strip().rstrip('.'))}."
    if claims is not None and claim_id is not None:
        measured = _measured(claims, claim_id, limit)
        if measured:
            text += f" <strong>Measured</strong> ({html.escape(claim_id)}): {measured}."
    return f'<p class="lamina-caption">{text}</p>'


class Caption(TypedDict, total=False):
    """The caption of a figure, as keyword arguments of :func:`figure_html` and
    :func:`show_figure`, which pass them on to :func:`caption_html`: ``what`` (required),
    ``look_at`` (default ""), ``claims`` and ``claim_id`` (default None: no measured values)."""

    what: Required[str]
    look_at: str
    claims: pd.DataFrame | None
    claim_id: str | None


def figure_html(chart: Any, **caption: Unpack[Caption]) -> str:
    """``chart`` as static SVG (vl-convert, the book's renderer; titles wrapped by
    :func:`fit_titles`) followed by its :func:`caption_html` caption (:class:`Caption`), as one
    HTML string: a figure that can sit inside a folded ``<details>`` block
    (``lamina.book.tables``)."""
    import vl_convert

    svg = vl_convert.vegalite_to_svg(fit_titles(chart).to_dict())
    return f'<div class="lamina-figure">{svg}</div>{caption_html(**caption)}'


def show_figure(chart: Any, **caption: Unpack[Caption]) -> None:
    """Display ``chart``, its titles wrapped to the page (:func:`fit_titles`), followed by
    its :func:`caption_html` caption (:class:`Caption`)."""
    from IPython.display import HTML, display

    display(fit_titles(chart))
    display(HTML(caption_html(**caption)))
