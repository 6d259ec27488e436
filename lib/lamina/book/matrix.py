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
from typing import Any

import pandas as pd

from lamina.book.badges import VERDICTS, badge, verdict_slug
from lamina.book.charts import canonical_model, model_colors

__all__ = [
    "display_model",
    "matrix_html",
    "scorecard_markdown",
    "section_anchor",
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


def _fmt(x: Any, digits: int = 3) -> str:
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


def _model_order(models: list[str]) -> list[str]:
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
    for model in _model_order(paper["model"].astype(str).tolist()):
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
    verdicts = list(dict.fromkeys(rows["verdict"].astype(str)))
    state = verdicts[0] if len(verdicts) == 1 else "mixed"
    tip = "; ".join(
        f"{(r.context + ': ') if r.context else ''}{_fmt(r.measured)} ({r.verdict})"
        for r in rows.itertuples()
    )
    shifts = [q for q in rows.get("quant_shift", pd.Series(dtype=str)) if isinstance(q, str) and q]
    if shifts:
        tip += "; quantisation control: " + " | ".join(dict.fromkeys(shifts))
    if len(rows) == 1:
        value = _fmt(rows.iloc[0]["measured"])
    else:
        value = f"{int((rows['verdict'] == 'reproduced').sum())}/{len(rows)}"
        tip = f"{len(rows)} stages, reproduced in {value}: {tip}"
    word = CELL_WORD.get(state, state)
    return (
        f'<td class="lamina-cell lamina-cell--{verdict_slug(state)}" '
        f'title="{html.escape(tip, quote=True)}"><a href="scorecard.html#{anchor}">'
        f'<span class="lamina-cell-value">{html.escape(value)}</span>'
        f'<span class="lamina-cell-word">{html.escape(word)}</span></a></td>'
    )


def _legend() -> str:
    items = "".join(
        f'<span class="lamina-legend-item"><span class="lamina-swatch lamina-cell--'
        f'{verdict_slug(v)}"></span>{html.escape(CELL_WORD[v])} = {html.escape(v)}</span>'
        for v in (*VERDICTS[:7], "mixed")
    )
    return f'<p class="lamina-legend">{items}</p>'


def matrix_html(table: pd.DataFrame, *, titles: dict[int, str] | None = None) -> str:
    """The verdict matrix as an HTML table: claims as rows grouped by paper (self-checks
    last, in their own group), models as columns, each cell coloured by verdict and showing
    the measured value (several stages: how many reproduced, of how many). A claim links to
    its chapter, a cell to the claim's section of the scorecard."""
    run = table[table["verdict"] != "not run"]
    models = _model_order(run["model"].astype(str).tolist())
    colors = model_colors(models)
    head = "".join(
        f'<th class="lamina-model" scope="col" style="border-top-color:{colors[m]}" '
        f'title="{html.escape(m, quote=True)}">{html.escape(display_model(m))}</th>'
        for m in models
    )
    ncol = len(models) + 1
    body: list[str] = []
    for title, group in _groups(table, titles):
        body.append(
            f'<tr class="lamina-group"><th colspan="{ncol}" scope="colgroup">'
            f"{html.escape(str(title))}</th></tr>"
        )
        for cid, rows in group.groupby("claim_id", sort=False):
            first = rows.iloc[0]
            href = f"executed/{first['chapter']}.html"
            label = (
                f'<th class="lamina-claim" scope="row"><a href="{href}">'
                f"{html.escape(str(first['claim']))}</a></th>"
            )
            if first["verdict"] == "not run":
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
            body.append(f"<tr>{label}{cells}</tr>")
    return (
        '<div class="lamina-matrix-wrap lamina-scroll">'
        '<table class="lamina-matrix">'
        f'<thead><tr><th class="lamina-claim-head" scope="col">claim</th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>\n{_legend()}\n"
    )


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _ci(r: pd.Series) -> str:
    if r["ci_low"] is None or r["ci_high"] is None or pd.isna(r["ci_low"]):
        return "–"
    return f"[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]"


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
                    {m: i for i, m in enumerate(_model_order(rows["model"].tolist()))}
                )
            ).sort_values("_o", kind="stable")
            for _, r in ordered.iterrows():
                who = f"`{_md(display_model(r['model']))}`" + (
                    f" {_md(r['context'])}" if r["context"] else ""
                )
                lines.append(
                    f"| {who} | {_fmt(r['measured'])} | {_ci(r)} | {_fmt(r['p'])} | "
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
