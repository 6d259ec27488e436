"""The verdict matrix, the one-line summary and the scannable scorecard, from the claims table.

Input is :func:`lamina.scorecard.claims_table`: one row per claim × model (× stage) with
columns paper, chapter, claim_id, claim, paper_value, model, context, measured, ci_low,
ci_high, p, verdict, note, self_check. Output is HTML (the matrix, styled by
``book/_static/lamina.css``) and Markdown (the scorecard's sections); no number is typed here.

Links assume the page sits next to ``executed/`` (``book/intro.md``, ``book/scorecard.md``).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Collection
from typing import Any

import pandas as pd

from lamina.book.badges import VERDICTS, badge, verdict_slug
from lamina.book.charts import canonical_model, model_colors

__all__ = [
    "display_model",
    "fmt_number",
    "cell_state",
    "cell_states",
    "legend_html",
    "matrix_html",
    "matrix_row_anchor",
    "model_order",
    "scorecard_markdown",
    "section_anchor",
    "short_label",
    "summary_line",
]

# the word a matrix cell prints under its value, so colour is never the only signal
CELL_WORD = {
    "reproduced": "yes",
    "partially": "partly",
    "smaller than claimed": "smaller",
    "not reproduced": "no",
    "absent": "absent",
    "reversed": "reversed",
    "not testable": "n/t",
    "undecidable at this design": "undec.",
    "count as claimed": "as claimed",
    "count uncertain": "uncertain",
    "fewer than claimed": "fewer",
    "more than claimed": "more",
    "located as claimed": "located",
    "location uncertain": "uncertain",
    "located elsewhere": "elsewhere",
    "not run": "not run",
    "mixed": "mixed",
    "check passed": "pass",
    "check failed": "fail",
}
PASSED = ("reproduced", "check passed")  # a self-check's verdict when it passes


MODEL_ORDER = (
    "smollm2-135m-instruct", "gemma-3-270m", "peer-gpt2", "minilm", "organism-gpt2",
    "organism-llama",
)  # fmt: skip
"""The matrix's columns and the summary's models, in the chapters' default order (issue 10):
the pretrained causal LMs first, then paper 1's released states and MiniLM, then the
organisms; any other model after them, by name."""

SELF_CHECKS_TITLE = "Self-checks of lamina (not counted as claims of the papers)"


def fmt_number(x: Any, digits: int = 3) -> str:
    """A number as a cell shows it: ``digits`` significant digits, scientific notation below
    1e-3 or from 1e4; "–" for None and NaN; anything else as text."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, (int, float)):
        if x != 0 and (abs(x) >= 1e4 or abs(x) < 1e-3):
            return f"{x:.2e}"
        return f"{x:.{digits}g}"
    return str(x)


def display_model(name: str) -> str:
    """A model's name as a column header shows it: a local folder (absolute or relative
    path) by its last component, prefixed with "…/"; any other name unchanged."""
    s = str(name)
    if s.startswith(("/", "./", "../", "~")):
        return "…/" + s.rstrip("/").rsplit("/", 1)[-1]
    return s


def section_anchor(claim_id: str) -> str:
    """The HTML id of a claim's section on the scorecard: ``sc-`` + a slug of the id."""
    return "sc-" + (re.sub(r"[^a-z0-9]+", "-", str(claim_id).lower()).strip("-") or "claim")


_PREFIX = re.compile(r"^(?:[pP]([123])[-.]|(self)[-.])")


def short_label(claim_id: str, paper: int, short: str = "") -> str:
    """A claim's short label: ``short`` when the claim declares one, else built from its id:
    "P<paper>" then the id's words without its paper prefix (``p1-convergence-peak`` ->
    "P1 convergence peak", ``P2.align_qk_enriched`` -> "P2 align qk enriched"; a self-check
    ``self-reanalysis-released-ci`` -> "check reanalysis released ci"; a chapter that did not
    run, ``curvature:*`` -> "P1 curvature (not run)")."""
    if short and short.strip():
        return short.strip()
    cid = str(claim_id)
    if cid.endswith(":*"):
        return f"P{paper} {cid[:-2].replace('_', ' ')} (not run)"
    m = _PREFIX.match(cid)
    head = "check" if m and m.group(2) else f"P{paper}"
    words = [w for w in re.split(r"[-_.]+", cid[m.end() if m else 0 :]) if w]
    return " ".join([head, *words])


def matrix_row_anchor(claim_id: str) -> str:
    """The HTML id of a claim's row in the detailed matrix: ``m-`` + a slug of the id."""
    return "m-" + (re.sub(r"[^a-z0-9]+", "-", str(claim_id).lower()).strip("-") or "claim")


def _paper_rows(table: pd.DataFrame) -> pd.DataFrame:
    return table[~table["self_check"].astype(bool)]


def _groups(table: pd.DataFrame, titles: dict[int, str] | None) -> list[tuple[str, pd.DataFrame]]:
    """(title, rows) per paper, in paper order, then the self-checks (if any) as one group."""
    titles = titles or {}
    groups = [(titles.get(int(p), f"Paper {p}"), g) for p, g in _paper_rows(table).groupby("paper")]
    checks = table[table["self_check"].astype(bool)]
    if len(checks):
        groups.append((SELF_CHECKS_TITLE, checks))
    return groups


def model_order(models: list[str]) -> list[str]:
    """``models`` without repeats, in :data:`MODEL_ORDER`; any other model after them, by name."""
    known = {m: i for i, m in enumerate(MODEL_ORDER)}
    return sorted(
        dict.fromkeys(models),
        key=lambda m: (known.get(canonical_model(m), len(known)), str(m)),
    )


def summary_line(table: pd.DataFrame) -> str:
    """One sentence counting the verdicts on claims of the papers only (self-checks and
    chapters not run are counted apart), e.g. "12 claims of the papers, tested on 3 models:
    of the 30 verdicts (claim × model × stage), 10 reproduced, …", then the same counts per
    model, named, in :data:`MODEL_ORDER` ("By model: `smollm2-135m-instruct` 4 reproduced,
    …")."""
    run = table[table["verdict"] != "not run"]
    paper = _paper_rows(run)
    counts = paper["verdict"].value_counts()
    order = [v for v in VERDICTS if v in counts] + [v for v in counts.index if v not in VERDICTS]
    parts = ", ".join(f"{int(counts[v])} {v}" for v in order) or "none yet"
    line = (
        f"{paper['claim_id'].nunique()} claims of the papers, tested on "
        f"{paper['model'].nunique()} model(s): of the {len(paper)} verdicts "
        f"(claim × model × stage), {parts}."
    )
    by_model = []
    for model in model_order(paper["model"].astype(str).tolist()):
        mine = paper.loc[paper["model"].astype(str) == model, "verdict"].value_counts()
        tally = ", ".join(f"{int(mine[v])} {v}" for v in order if v in mine)
        by_model.append(f"`{_md(display_model(model))}` {tally}")
    if by_model:
        line += f" By model: {'; '.join(by_model)}."
    checks = run[run["self_check"].astype(bool)]
    if len(checks):
        ok = int(checks["verdict"].isin(PASSED).sum())
        line += f" Not counted: {len(checks)} self-checks of lamina itself, {ok} of them passed."
    missing = sorted(table.loc[table["verdict"] == "not run", "chapter"].unique())
    if missing:
        line += f" Not run: {', '.join(missing)}."
    return line


def _cell(rows: pd.DataFrame, anchor: str) -> str:
    state = cell_state(rows)
    tip = "; ".join(
        f"{(r.context + ': ') if r.context else ''}{fmt_number(r.measured)} ({r.verdict})"
        for r in rows.itertuples()
    )
    shifts = [q for q in rows.get("quant_shift", pd.Series(dtype=str)) if isinstance(q, str) and q]
    if shifts:
        tip += "; quantisation control: " + " | ".join(dict.fromkeys(shifts))
    if len(rows) == 1:
        value = fmt_number(rows.iloc[0]["measured"])
    else:
        value = f"{int((rows['verdict'] == 'reproduced').sum())}/{len(rows)}"
        tip = f"{len(rows)} stages, reproduced in {value}: {tip}"
    word = CELL_WORD.get(state, state)
    extra, note = calibration_mark(rows)
    if note:
        tip = f"{note}; {tip}"
    return (
        f'<td class="lamina-cell lamina-cell--{verdict_slug(state)}{extra}" '
        f'title="{html.escape(tip, quote=True)}"><a href="scorecard.html#{anchor}">'
        f'<span class="lamina-cell-value">{html.escape(value)}</span>'
        f'<span class="lamina-cell-word">{html.escape(word)}</span></a></td>'
    )


def calibration_mark(rows: pd.DataFrame) -> tuple[str, str]:
    """The calibration mark of one cell's rows, shared by the matrix and the picture: ("
    lamina-uncalibrated", why) for a claim with no measured false-positive rate (not
    calibrated, or a level row with no test: the stylesheet adds †), (" lamina-miscalibrated",
    the miss) for one whose calibration misses a target (``calibration_miss``: ‡), else
    ("", "")."""
    uncal = [c for c in rows.get("calibration", pd.Series(dtype=str))
             if str(c).startswith(("not ", "FPR n/a"))]  # fmt: skip
    missed = [c for c in rows.get("calibration_miss", pd.Series(dtype=str)) if isinstance(c, str) and c]
    if uncal:
        return " lamina-uncalibrated", str(uncal[0])
    if missed:
        return " lamina-miscalibrated", str(missed[0])
    return "", ""


def cell_state(rows: pd.DataFrame) -> str:
    """The state one cell (a claim on a model) shows: its rows' one verdict, or "mixed" when
    they (stages, contexts) disagree."""
    verdicts = set(rows["verdict"].astype(str))
    return verdicts.pop() if len(verdicts) == 1 else "mixed"


def cell_states(table: pd.DataFrame) -> set[str]:
    """The states the cells of ``table`` show (:func:`cell_state` per claim and model)."""
    return {cell_state(rows) for _, rows in table.groupby(["claim_id", "model"], sort=False)}


def legend_html(
    item: Callable[[str], tuple[str, str]],
    shown: Collection[str],
    swatch: str = "lamina-swatch",
    css: str = "",
) -> str:
    """The verdict legend under a verdict table (the matrix, the picture): one item per state
    in ``shown`` (:func:`cell_states` of the table: the words its cells carry, count,
    location and vanish words included), in the order of
    :data:`lamina.book.badges.VERDICTS` then "mixed"; each a coloured swatch (class
    ``swatch`` and the state's cell class) holding ``item(state)[0]``, then the text
    ``item(state)[1]`` (both HTML-escaped here); ``css``: more classes of the ``<p>``."""
    items = "".join(
        f'<span class="lamina-legend-item"><span class="{swatch} lamina-cell--{verdict_slug(v)}">'
        f"{html.escape(mark)}</span>{html.escape(text)}</span>"
        for v in (*VERDICTS, "mixed")
        if v in shown
        for mark, text in [item(v)]
    )
    return f'<p class="{" ".join(["lamina-legend", *css.split()])}">{items}</p>'


def _legend(shown: Collection[str]) -> str:
    """The matrix's legend: an empty swatch, then "<cell word> = <verdict>" for each state
    ``shown``, the mark of a claim without a calibration and that of a claim whose calibration
    misses a target (``calibration_miss``, :func:`lamina.book.scorecard.calibration_misses`)."""
    return legend_html(lambda v: ("", f"{CELL_WORD.get(v, v)} = {v}"), shown).replace(
        "</p>", '<span class="lamina-legend-item">† = the claim is not calibrated (no '
        "measured false-positive rate: see the calibration page)</span>"
        '<span class="lamina-legend-item">‡ = the claim\'s calibration misses a target (a '
        "false-positive rate above 5% on its null, a power below 80% at the paper's size, or its "
        "CI's coverage of a known value more than 5 points below its nominal level: see the "
        "calibration page)</span></p>", 1)


def _claim_label(rows: pd.DataFrame, seen: dict[str, str]) -> str:
    """The matrix's claim cell: the short label, then the claim's full text linking to its
    chapter, or, when an earlier row already stated the same text (paper 1's claims on the
    released GPT-2 states), a link to that row instead of the text again. ``seen`` maps a
    claim text to the anchor of the row that stated it, and is updated."""
    first = rows.iloc[0]
    cid, text = str(first["claim_id"]), str(first["claim"])
    short = short_label(cid, int(first["paper"]), str(first.get("short", "") or ""))
    href = f"executed/{first['chapter']}.html"
    head = f'<span class="lamina-claim-short">{html.escape(short)}</span> '
    if text in seen and first["verdict"] != "not run":
        body = (
            f'<a href="{href}">{html.escape(str(first["chapter"]).replace("_", " "))}</a>: '
            f'the same claim as <a href="#{seen[text]}">above</a>'
        )
    else:
        seen.setdefault(text, matrix_row_anchor(cid))
        body = f'<a href="{href}">{html.escape(text)}</a>'
    return f'<th class="lamina-claim" scope="row">{head}{body}</th>'


def matrix_html(
    table: pd.DataFrame, *, titles: dict[int, str] | None = None, folded: str = ""
) -> str:
    """The verdict matrix as an HTML table: claims as rows grouped by paper (self-checks
    last, in their own group), models as columns, each cell coloured by verdict and showing
    the measured value (several stages: how many reproduced, of how many). A claim shows its
    short label (:func:`short_label`) and links to its chapter, a cell to the claim's section
    of the scorecard; each row's id is :func:`matrix_row_anchor` of its claim. A claim text
    already stated by an earlier row is not repeated. With ``folded`` (a summary line), the
    table sits in a closed ``<details>`` whose summary is that line."""
    run = table[table["verdict"] != "not run"]
    models = model_order(run["model"].astype(str).tolist())
    colors = model_colors(models)
    head = "".join(
        f'<th class="lamina-model" scope="col" style="border-top-color:{colors[m]}" '
        f'title="{html.escape(m, quote=True)}">{html.escape(display_model(m))}</th>'
        for m in models
    )
    ncol = len(models) + 1
    body: list[str] = []
    seen: dict[str, str] = {}
    for title, group in _groups(table, titles):
        body.append(
            f'<tr class="lamina-group"><th colspan="{ncol}" scope="colgroup">'
            f"{html.escape(str(title))}</th></tr>"
        )
        for cid, rows in group.groupby("claim_id", sort=False):
            label = _claim_label(rows, seen)
            if rows.iloc[0]["verdict"] == "not run":
                cells = (
                    f'<td class="lamina-cell lamina-cell--not-run" colspan="{len(models) or 1}">'
                    f'<span class="lamina-cell-word">not run</span></td>'
                )
            else:
                anchor = section_anchor(str(cid))
                cells = "".join(
                    _cell(rows[rows["model"] == m], anchor)
                    if (rows["model"] == m).any()
                    else '<td class="lamina-cell lamina-cell--empty"></td>'
                    for m in models
                )
            body.append(f'<tr id="{matrix_row_anchor(str(cid))}">{label}{cells}</tr>')
    out = (
        '<div class="lamina-matrix-wrap lamina-scroll">'
        '<table class="lamina-matrix">'
        f'<thead><tr><th class="lamina-claim-head" scope="col">claim</th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>\n{_legend(cell_states(table))}\n"
    )
    if folded:
        out = (
            f'<details class="lamina-matrix-details"><summary>{html.escape(folded)}</summary>\n'
            f"{out}</details>\n"
        )
    return out


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _ci(r: pd.Series) -> str:
    if r["ci_low"] is None or r["ci_high"] is None or pd.isna(r["ci_low"]):
        return "–"
    return f"[{fmt_number(r['ci_low'])}, {fmt_number(r['ci_high'])}]"


def scorecard_markdown(table: pd.DataFrame, *, titles: dict[int, str] | None = None) -> str:
    """The scorecard's body: one section per claim (stated once, with its id, the paper's
    value and a link to its chapter), then a compact row per model (× stage):
    measured value, 95% CI, p, verdict badge (its tooltip: the verdict's reason) and the OSC
    criterion (direction and p < 0.05: yes / no; – where the claim has no test or direction).
    Why a claim was not testable follows the rows."""
    lines: list[str] = []
    for title, group in _groups(table, titles):
        lines += [f"## {title}", ""]
        for cid, rows in group.groupby("claim_id", sort=False):
            first = rows.iloc[0]
            lines += [
                f'<div id="{section_anchor(str(cid))}"></div>',
                "",
                f"### {_md(first['claim'])}",
                "",
            ]
            meta = [
                f"chapter: [{first['chapter'].replace('_', ' ')}](executed/{first['chapter']}.ipynb)"
            ]
            if first["paper_value"]:
                meta.insert(0, f"paper: {_md(first['paper_value'])}")
            lines += [f"<small>`{_md(cid)}`</small> · " + " · ".join(meta), ""]
            if first["verdict"] == "not run":
                lines += [f"{badge('not run')} {_md(first['note'])}", ""]
                continue
            lines += ["| model | measured | 95% CI | p | verdict | OSC |", "|---|---|---|---|---|---|"]
            notes = []
            ordered = rows.assign(
                _o=rows["model"].map(
                    {m: i for i, m in enumerate(model_order(rows["model"].tolist()))}
                )
            ).sort_values("_o", kind="stable")
            for _, r in ordered.iterrows():
                who = f"`{_md(display_model(r['model']))}`" + (
                    f" {_md(r['context'])}" if r["context"] else ""
                )
                lines.append(
                    f"| {who} | {fmt_number(r['measured'])} | {_ci(r)} | {fmt_number(r['p'])} | "
                    f"{badge(str(r['verdict']), title=str(r['note']) or None)} | "
                    f"{r['osc'] if isinstance(r.get('osc'), str) and r['osc'] else '–'} |"
                )
                if r["note"] and r["verdict"] in ("not testable", "not run"):
                    notes.append(f"- `{_md(display_model(r['model']))}`: {_md(r['note'])}")
                if isinstance(r.get("quant_shift"), str) and r["quant_shift"]:
                    notes.append(
                        f"- `{_md(display_model(r['model']))}`, quantisation control: "
                        f"{_md(r['quant_shift'])}"
                    )
            lines.append("")
            if notes:
                lines += [*dict.fromkeys(notes), ""]
    return "\n".join(lines)
