"""The landing page's verdict picture and per-model counts, from the claims table.

Input is :func:`lamina.book.scorecard.claims_table` (one row per claim × model × stage). The
picture is an HTML grid that fits one screen: the claims of the papers (self-checks are left to
the detailed matrix) in two balanced columns, each claim one line with its short label
(:func:`short_label`), each model one narrow column, each cell coloured by verdict and marked
with a one-letter code (:data:`CELL_CODE`), so colour is never the only signal. A label links
to the claim's row of the detailed matrix (:func:`lamina.book.matrix.matrix_html`, which holds
the claim's full text), a cell to the claim's section of the scorecard. The counts are a
stacked bar per model (:func:`counts_svg`, Altair rendered to static SVG offline). No number
is typed here.
"""

from __future__ import annotations

import html
from collections.abc import Collection
from typing import Any

import pandas as pd

from lamina.book.badges import VERDICTS, verdict_slug
from lamina.book.charts import model_colors, theme_config
from lamina.book.matrix import (
    calibration_mark,
    cell_state,
    cell_states,
    display_model,
    fmt_number,
    legend_html,
    matrix_row_anchor,
    model_order,
    section_anchor,
    short_label,
)

__all__ = [
    "CELL_CODE",
    "VERDICT_COLORS",
    "counts_svg",
    "picture_html",
]

CELL_CODE = {
    "reproduced": "Y",
    "partially": "P",
    "smaller than claimed": "S",
    "not reproduced": "N",
    "absent": "A",
    "reversed": "R",
    "not testable": "–",
    "undecidable at this design": "U",
    "count as claimed": "=",
    "count uncertain": "?",
    "fewer than claimed": "<",
    "more than claimed": ">",
    "located as claimed": "L",
    "location uncertain": "?",
    "located elsewhere": "E",
    "not run": "·",
    "mixed": "M",
    "check passed": "Y",
    "check failed": "N",
}
"""The letter a picture cell prints: the verdict's initial (not testable: a dash)."""

VERDICT_COLORS = {
    "reproduced": "#2da44e",
    "partially": "#d4a72c",
    "smaller than claimed": "#e8a33d",
    "not reproduced": "#cf222e",
    "absent": "#f47067",
    "reversed": "#82071e",
    "not testable": "#afb8c1",
    "undecidable at this design": "#6e7781",
    "count as claimed": "#0969da",
    "count uncertain": "#54aeff",
    "fewer than claimed": "#bf3989",
    "more than claimed": "#bf3989",
    "located as claimed": "#0969da",
    "location uncertain": "#54aeff",
    "located elsewhere": "#bf3989",
    "not run": "#d0d7de",
}
"""A verdict's colour in the counts chart (the stylesheet's verdict hues, one per verdict)."""

def _cell(rows: pd.DataFrame, model: str, anchor: str) -> str:
    if rows.empty:
        return '<td class="lamina-pic-cell lamina-cell--empty"></td>'
    state = cell_state(rows)
    tip = f"{display_model(model)}: " + "; ".join(
        f"{(r.context + ': ') if r.context else ''}{fmt_number(r.measured)} ({r.verdict})"
        for r in rows.itertuples()
    )
    extra, note = calibration_mark(rows)
    if note:
        tip = f"{tip}; {note}"
    return (
        f'<td class="lamina-pic-cell lamina-cell--{verdict_slug(state)}{extra}" '
        f'title="{html.escape(tip, quote=True)}"><a href="scorecard.html#{anchor}">'
        f"{html.escape(CELL_CODE.get(state, '?'))}</a></td>"
    )


def _items(table: pd.DataFrame, titles: dict[int, str]) -> list[tuple[str, Any]]:
    """The picture's lines in order: ("group", paper title) then ("claim", rows) per claim."""
    items: list[tuple[str, Any]] = []
    paper = table[~table["self_check"].astype(bool)]
    for p, group in paper.groupby("paper", sort=True):
        items.append(("group", titles.get(int(p), f"Paper {p}")))
        items += [("claim", rows) for _, rows in group.groupby("claim_id", sort=False)]
    return items


def _split(items: list[tuple[str, Any]]) -> list[list[tuple[str, Any]]]:
    """Two columns of about equal length: at the paper boundary nearest the middle when it is
    within a tenth of the lines (at least 3) of it, else in the middle, where the paper cut in
    two repeats its title, marked "(cont.)", at the top of the second column."""
    if len(items) < 12:
        return [items]
    half = (len(items) + 1) // 2
    bounds = [i for i, (kind, _) in enumerate(items) if kind == "group" and i > 0]
    near = min(bounds, key=lambda i: abs(i - half), default=None)
    if near is not None and abs(near - half) <= max(3, len(items) // 10):
        half = near
    elif items[half - 1][0] == "group":  # never end a column on a title
        half -= 1
    first, second = items[:half], items[half:]
    if second and second[0][0] != "group":
        title = next(v for k, v in reversed(first) if k == "group")
        second = [("group", f"{title} (cont.)"), *second]
    return [first, second]


def _column(items: list[tuple[str, Any]], models: list[str], colors: dict[str, str]) -> str:
    head = "".join(
        f'<th class="lamina-pic-model" scope="col" style="border-bottom-color:{colors[m]}" '
        f'title="{html.escape(m, quote=True)}"><span>{html.escape(display_model(m))}</span></th>'
        for m in models
    )
    body = []
    for kind, value in items:
        if kind == "group":
            body.append(
                f'<tr class="lamina-pic-group"><th colspan="{len(models) + 1}" scope="colgroup">'
                f"{html.escape(str(value))}</th></tr>"
            )
            continue
        first = value.iloc[0]
        cid = str(first["claim_id"])
        label = short_label(cid, int(first["paper"]), str(first.get("short", "") or ""))
        row = (
            f'<th class="lamina-pic-claim" scope="row"><a href="#{matrix_row_anchor(cid)}" '
            f'title="{html.escape(str(first["claim"]), quote=True)}">{html.escape(label)}</a></th>'
        )
        if first["verdict"] == "not run":
            row += (
                f'<td class="lamina-pic-cell lamina-cell--not-run" colspan="{len(models) or 1}">'
                "not run</td>"
            )
        else:
            anchor = section_anchor(cid)
            row += "".join(_cell(value[value["model"] == m], m, anchor) for m in models)
        body.append(f"<tr>{row}</tr>")
    return (
        '<table class="lamina-picture-table"><thead><tr><th class="lamina-pic-corner"></th>'
        f"{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def _legend(shown: Collection[str]) -> str:
    """The picture's legend: for each state its cells show, the cell's letter in its swatch,
    then the verdict."""
    return legend_html(lambda v: (CELL_CODE.get(v, "?"), v), shown, "lamina-pic-swatch",
                       "lamina-pic-legend")


def picture_html(table: pd.DataFrame, *, titles: dict[int, str] | None = None) -> str:
    """The verdict picture (see the module docstring) as one ``div.lamina-picture``: the
    claims of the papers (rows, short labels) × the models that have results (columns, in
    :data:`lamina.book.matrix.MODEL_ORDER`), in two balanced columns, then the letter legend."""
    run = table[(table["verdict"] != "not run") & ~table["self_check"].astype(bool)]
    models = model_order(run["model"].astype(str).tolist())
    colors = model_colors(models)
    columns = "".join(
        f'<div class="lamina-picture-col">{_column(part, models, colors)}</div>'
        for part in _split(_items(table, titles or {}))
    )
    return (
        f'<div class="lamina-picture"><div class="lamina-picture-grid">{columns}</div>'
        f"{_legend(cell_states(table[~table['self_check'].astype(bool)]))}</div>\n"
    )


def _counts(table: pd.DataFrame) -> pd.DataFrame:
    """Verdicts of the papers' claims per model: columns model, verdict, n, order (the
    verdict's rank in :data:`VERDICTS`), rank (the model's in ``MODEL_ORDER``)."""
    paper = table[(table["verdict"] != "not run") & ~table["self_check"].astype(bool)]
    counts = paper.groupby(["model", "verdict"]).size().rename("n").reset_index()
    models = model_order(counts["model"].astype(str).tolist())
    counts["rank"] = counts["model"].map({m: i for i, m in enumerate(models)})
    counts["order"] = counts["verdict"].map(lambda v: VERDICTS.index(v) if v in VERDICTS else 99)
    counts["model"] = counts["model"].map(display_model)
    return counts


def counts_svg(table: pd.DataFrame) -> str:
    """The verdicts of the papers' claims per model as a horizontal stacked bar chart (one bar
    per model, one segment per verdict, in the order of :data:`VERDICTS`, coloured by
    :data:`VERDICT_COLORS`), rendered to a static SVG string with vl-convert (offline).
    "" when no claim of the papers has a verdict."""
    import altair as alt
    import vl_convert as vlc


    counts = _counts(table)
    if counts.empty:
        return ""
    present = [v for v in (*VERDICT_COLORS, *VERDICTS) if v in set(counts["verdict"])]
    present = list(dict.fromkeys(present + sorted(set(counts["verdict"]) - set(present))))
    scale = alt.Scale(
        domain=present, range=[VERDICT_COLORS.get(v, "#8250df") for v in present]
    )
    models = counts.sort_values("rank")["model"].drop_duplicates().tolist()
    chart = (
        alt.Chart(counts)
        .mark_bar(height=16)
        .encode(
            y=alt.Y("model:N", sort=models, title=None),
            x=alt.X("sum(n):Q", title="verdicts (claim × model × stage)"),
            color=alt.Color("verdict:N", scale=scale, title="verdict"),
            order=alt.Order("order:Q"),
            tooltip=["model:N", "verdict:N", "n:Q"],
        )
        .properties(width=420, height=22 * len(models), title="Verdicts per model")
    )
    spec = chart.to_dict()
    spec["config"] = {**theme_config()["config"], **spec.get("config", {})}
    svg = vlc.vegalite_to_svg(spec)
    return svg[svg.index("<svg") :] if "<svg" in svg else svg
