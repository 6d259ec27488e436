"""The claims scorecard and the book's generated pages, assembled from results files only.

Chapters write ``<results>/<model>/<chapter>.json`` (``lamina.states.io.write_results``) whose
``summary["claims"]`` is a list of rows ``{claim_id, claim, paper_value, measured, ci_low,
ci_high, p, verdict, model}``. This module reads those files and writes Markdown pages; no
number on them is typed by hand.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from lamina.book.badges import is_self_check
from lamina.book.matrix import matrix_html, scorecard_markdown, summary_line
from lamina.core import registry
from lamina.core.provenance import atomic_write_text, provenance
from lamina.states.io import read_result_file, read_results, results_dir

__all__ = ["CHAPTER_PAPER", "claims_table", "write_pages"]


# Which paper each chapter tests (from the registry, lamina.core.registry). A chapter's claims (their text, the paper's value and the
# measured value) come from its results file, never from this module.
CHAPTER_PAPER: dict[str, int] = registry.chapter_paper()
PAPER_TITLES = {
    1: "Paper 1: trajectory geometry across layers",
    2: "Paper 2: the weight-update signature",
    3: "Paper 3: layer anatomy and Growth Training",
}


def _num(x: Any) -> float | None:
    try:
        value = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def claims_table(records: Iterable[dict[str, Any]] | None = None) -> pd.DataFrame:
    """One row per claim row found in the results (claim × model × stage), plus a "not run"
    row for every chapter of :data:`CHAPTER_PAPER` without results. Columns: paper, chapter,
    claim_id, claim, paper_value, model, context, measured, ci_low, ci_high, p, verdict, note,
    self_check (the row checks lamina itself, not a
    claim of the papers: :func:`lamina.book.badges.is_self_check`), quant_shift (the
    quantisation control's text for a quantised model, ``lamina.states.quant_control``; "" otherwise),
    commit."""
    records = list(read_results() if records is None else records)
    rows = []
    for record in records:
        chapter = record.get("chapter", "")
        if chapter not in CHAPTER_PAPER:
            continue
        for row in record.get("summary", {}).get("claims", []) or []:
            context = " / ".join(
                str(row[k]) for k in ("stage",) if row.get(k) not in (None, "", "-")
            )
            cid = str(row.get("claim_id", ""))
            kind = str(row.get("kind") or ("self-check" if cid.startswith("self-") else "paper"))
            rows.append(
                {
                    "paper": CHAPTER_PAPER[chapter],
                    "chapter": chapter,
                    "kind": kind,
                    "claim_id": cid,
                    "claim": str(row.get("claim", "")),
                    "paper_value": str(row.get("paper_value", "")),
                    "model": str(row.get("model") or record.get("model")),
                    "context": context,
                    "measured": _num(row.get("measured")),
                    "ci_low": _num(row.get("ci_low")),
                    "ci_high": _num(row.get("ci_high")),
                    "p": _num(row.get("p")),
                    "verdict": str(row.get("verdict", "not testable")),
                    "osc": str(row.get("osc") or ""),  # direction and p < 0.05 (claims.osc_replicates)
                    "note": str(row.get("note") or row.get("reason") or ""),
                    "self_check": is_self_check(row),
                    "quant_shift": str(row.get("quant_shift") or ""),
                    "commit": record.get("provenance", {}).get("lamina_commit", ""),
                }
            )
    done = {r["chapter"] for r in rows}
    for chapter, paper in CHAPTER_PAPER.items():
        if chapter not in done:
            rows.append(
                {
                    "paper": paper,
                    "chapter": chapter,
                    "kind": "paper",
                    "claim_id": f"{chapter}:*",
                    "claim": f"every claim of the {chapter.replace('_', ' ')} chapter",
                    "paper_value": "",
                    "model": "–",
                    "context": "",
                    "measured": None,
                    "ci_low": None,
                    "ci_high": None,
                    "p": None,
                    "verdict": "not run",
                    "note": "no results file",
                    "self_check": False,
                    "quant_shift": "",
                    "commit": "",
                }
            )
    order = {c: i for i, c in enumerate(CHAPTER_PAPER)}
    frame = pd.DataFrame(rows)
    frame["_order"] = frame["chapter"].map(order)
    frame["_first"] = frame.groupby("claim_id", sort=False).ngroup()
    return (
        frame.sort_values(["paper", "_order", "_first", "model"], kind="stable")
        .drop(columns=["_order", "_first"])
        .reset_index(drop=True)
    )


def _scorecard_md(table: pd.DataFrame) -> str:
    return "\n".join(
        [
            summary_line(table),
            "",
            matrix_html(table, titles=PAPER_TITLES),
            "",
            scorecard_markdown(table, titles=PAPER_TITLES),
        ]
    )


def _abstract_md(table: pd.DataFrame) -> str:
    return f"{summary_line(table)}\n\n{matrix_html(table, titles=PAPER_TITLES)}\n"


def _reproducibility_md(executed: Path) -> str:

    prov = provenance()
    lines = ["| item | value |", "|---|---|"]
    for key in (
        "lamina_version",
        "lamina_commit",
        "python",
        "torch",
        "transformers",
        "numpy",
        "machine",
        "date",
    ):
        lines.append(f"| {key} | `{prov[key]}` |")
    lines += ["", "| chapter | parameters | seconds | status |", "|---|---|---|---|"]
    total = 0.0
    for report in sorted(executed.glob("*.report.json")):
        r = json.loads(report.read_text())
        total += float(r.get("seconds", 0))
        lines.append(
            f"| {r['chapter']} | `{json.dumps(r.get('parameters', {}))}` | {r.get('seconds')} | {r.get('status')} |"
        )
    lines.append(f"| **total** | | {total:.0f} | |")
    return "\n".join(lines) + "\n"


def _comparison_md(table: pd.DataFrame) -> str:
    if (table.verdict == "not run").all():
        return "No results yet.\n"
    return _abstract_md(table)


def write_pages(root: str | os.PathLike, results: str | os.PathLike | None = None) -> list[Path]:
    """Write ``book/generated/{scorecard,abstract,comparison,reproducibility}.md`` under ``root``
    from the results files (default :func:`lamina.states.io.results_dir`, plus ``book/runs/*``).
    A ``results`` folder that does not exist raises FileNotFoundError naming it."""
    root = Path(root)
    folder = Path(results) if results is not None else results_dir()
    if results is None and not folder.is_dir():  # a fresh checkout: say so, do not guess
        import warnings

        warnings.warn(f"no results folder at {folder}: every chapter shows 'not run'", stacklevel=2)
        records = []
    else:  # a named folder must exist; a corrupt file raises naming it
        records = read_results(folder)
    runs = root / "book" / "runs"
    if runs.is_dir():
        for path in sorted(runs.glob("*/results/*/*.json")):
            records.append(read_result_file(path))
    table = claims_table(records)
    out = root / "book" / "generated"
    pages = {
        "scorecard.md": _scorecard_md(table),
        "abstract.md": _abstract_md(table),
        "comparison.md": _comparison_md(table),
        "reproducibility.md": _reproducibility_md(root / "book" / "executed"),
    }
    return [atomic_write_text(out / name, text) for name, text in pages.items()]
