"""The claims scorecard and the book's generated pages, assembled from results files only.

Chapters write ``<results>/<model>/<chapter>.json`` (``lamina.states.io.write_results``) whose
``summary["claims"]`` is a list of rows ``{claim_id, claim, paper_value, measured, ci_low,
ci_high, p, verdict, model}``. This module reads those files and writes Markdown pages; no
number on them is typed by hand.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from lamina.book.badges import is_self_check
from lamina.book.matrix import matrix_html, scorecard_markdown, summary_line
from lamina.book.picture import counts_svg, picture_html
from lamina.core import registry
from lamina.core.provenance import EnvPathError, atomic_write_text, provenance
from lamina.evidence.claims import PAPER_VERDICTS, SELF_VERDICTS
from lamina.states.io import ResultsFileError, read_result_file, results_dir

__all__ = ["CHAPTER_PAPER", "claims_table", "load_records", "validate_record", "write_pages"]


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


def validate_record(record: dict[str, Any], path: str | os.PathLike) -> dict[str, Any]:
    """``record`` (a results file's content) if its chapter is one of the book's and every
    claim row holds a ``claim_id``, a verdict of :data:`lamina.evidence.claims.PAPER_VERDICTS`
    or ``SELF_VERDICTS`` and a numeric (or null) ``measured``; else
    :class:`lamina.states.io.ResultsFileError` naming ``path`` and the row."""
    chapters = registry.names()
    if record.get("chapter") not in chapters:
        raise ResultsFileError(
            f"{path}: chapter {record.get('chapter')!r} is not a chapter of the book; "
            f"chapters: {chapters}"
        )
    summary = record.get("summary")
    if not isinstance(summary, dict):
        raise ResultsFileError(f"{path}: 'summary' must be an object, got {summary!r:.80}")
    claims = summary.get("claims") or []
    if not isinstance(claims, list):
        raise ResultsFileError(f"{path}: summary.claims must be a list, got {claims!r:.80}")
    allowed = tuple(dict.fromkeys((*PAPER_VERDICTS, *SELF_VERDICTS)))
    for i, row in enumerate(claims):
        where = f"{path}: summary.claims[{i}]"
        if not isinstance(row, dict):
            raise ResultsFileError(f"{where} must be an object, got {row!r:.80}")
        cid = row.get("claim_id")
        if not isinstance(cid, str) or not cid.strip():
            raise ResultsFileError(f"{where} has no claim_id (got {cid!r})")
        if row.get("verdict") not in allowed:
            raise ResultsFileError(
                f"{where} ({cid}): verdict {row.get('verdict')!r} is not one of {allowed}"
            )
        measured = row.get("measured")
        if measured is not None and (
            isinstance(measured, bool) or not isinstance(measured, int | float)
        ):
            raise ResultsFileError(
                f"{where} ({cid}): measured must be a number or null, got {measured!r:.80}"
            )
    return record


def _run_label(record: dict[str, Any]) -> str:
    """Which run a record comes from, as its column shows it: "" for the book's own run, else
    "run <namespace>" and/or "quick" (quick mode from the run's parameters or the config)."""
    run = record.get("run") or {}
    config = record.get("config") or {}
    quick = bool(run.get("quick") if run.get("quick") is not None else config.get("quick"))
    parts = [f"run {run['namespace']}"] if run.get("namespace") else []
    if run.get("varied"):
        parts[-1:] = [f"{parts[-1] if parts else 'run'}: " + ", ".join(
            f"{k}={v}" for k, v in sorted(run["varied"].items()))]  # fmt: skip
    elif quick:
        parts.append("quick")
    return "; ".join(parts)


def load_records(folder: Path, root: Path | None = None) -> list[dict[str, Any]]:
    """Every results record of the book, validated (:func:`validate_record`): the book's
    own (``<folder>/<model>/<chapter>.json``), other runs' namespaces
    (``<folder>/<model>/<namespace>/<chapter>.json``) and ``<root>/book/runs/*/results``.
    Raises FileNotFoundError naming ``folder`` when it is not a folder, and
    :class:`ResultsFileError` when no valid record is found."""
    if not folder.is_dir():
        raise FileNotFoundError(f"results folder {str(folder)!r} does not exist")
    paths = sorted(folder.glob("*/*.json")) + sorted(folder.glob("*/*/*.json"))
    runs = root / "book" / "runs" if root is not None else None
    if runs is not None and runs.is_dir():
        paths += sorted(runs.glob("*/results/*/*.json")) + sorted(runs.glob("*/results/*/*/*.json"))
    records = [validate_record(read_result_file(p), p) for p in paths]
    if not records:
        raise ResultsFileError(
            f"results folder {str(folder)!r} holds no results record (<model>/<chapter>.json); "
            "run the chapters first (make book, or python -m lamina.book execute CHAPTER)"
        )
    return records


def _claim_row(
    record: dict[str, Any], row: dict[str, Any], chapter: str, label: str
) -> dict[str, Any]:
    """The :func:`claims_table` row of one claim row of a chapter's results ``record``."""
    context = " / ".join(str(row[k]) for k in ("stage",) if row.get(k) not in (None, "", "-"))
    cid = str(row.get("claim_id", ""))
    kind = str(row.get("kind") or ("self-check" if cid.startswith("self-") else "paper"))
    return {
        "paper": CHAPTER_PAPER[chapter],
        "chapter": chapter,
        "kind": kind,
        "claim_id": cid,
        "claim": str(row.get("claim", "")),
        "short": str(row.get("short") or ""),
        "paper_value": str(row.get("paper_value", "")),
        "model": str(row.get("model") or record.get("model")) + (f" ({label})" if label else ""),
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
        "calibration": str(row.get("calibration") or ""),
        "commit": record.get("provenance", {}).get("lamina_commit", ""),
        "run": label,
    }


def _not_run_row(chapter: str, paper: int) -> dict[str, Any]:
    """The :func:`claims_table` row of a chapter without results."""
    return {
        "paper": paper,
        "chapter": chapter,
        "kind": "paper",
        "claim_id": f"{chapter}:*",
        "claim": f"every claim of the {chapter.replace('_', ' ')} chapter",
        "short": "",
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
        "calibration": "",
        "commit": "",
        "run": "",
    }


def claims_table(records: Iterable[dict[str, Any]] | None = None) -> pd.DataFrame:
    """One row per claim row found in the results (claim × model × stage), plus a "not run"
    row for every chapter of :data:`CHAPTER_PAPER` without results. Columns: paper, chapter,
    claim_id, claim, paper_value, model, context, measured, ci_low, ci_high, p, verdict, note,
    self_check (the row checks lamina itself, not a
    claim of the papers: :func:`lamina.book.badges.is_self_check`), quant_shift (the
    quantisation control's text for a quantised model, ``lamina.states.quant_control``; "" otherwise),
    commit, run (which run the row comes from: "" for the book's own, else its namespace and
    the parameters that differ, or "quick"; a row from another run is shown under the model
    name followed by this label, so it never takes the book's cell)."""
    records = list(load_records(results_dir(create=False)) if records is None else records)
    rows = []
    for record in records:
        chapter = record.get("chapter", "")
        if chapter not in CHAPTER_PAPER:
            continue
        label = _run_label(record)
        for row in record.get("summary", {}).get("claims", []) or []:
            rows.append(_claim_row(record, row, chapter, label))
    done = {r["chapter"] for r in rows}
    rows += [_not_run_row(c, paper) for c, paper in CHAPTER_PAPER.items() if c not in done]
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


def _code_html(text: str) -> str:
    """Markdown text with inline code as HTML (a raw HTML block renders no Markdown)."""
    return re.sub(r"`([^`]*)`", r"<code>\1</code>", html.escape(text))


def _abstract_md(table: pd.DataFrame) -> str:
    """The landing page's results: the verdict picture (one screen), the verdicts per model
    as a stacked bar (inline static SVG), then the detailed matrix folded, opening with the
    counts sentence."""
    svg = "\n".join(line for line in counts_svg(table).splitlines() if line.strip())
    counts = f'<div class="lamina-counts">\n{svg}\n</div>\n\n' if svg else ""
    detail = matrix_html(
        table, titles=PAPER_TITLES,
        folded="The detailed matrix: the measured value per claim and model, the claims' full text",
    )  # fmt: skip
    detail = detail.replace(
        '<div class="lamina-matrix-wrap', f"<p>{_code_html(summary_line(table))}</p>\n"
        '<div class="lamina-matrix-wrap', 1,
    )  # fmt: skip
    return f"{picture_html(table, titles=PAPER_TITLES)}\n{counts}{detail}\n"


def _matrix_md(table: pd.DataFrame) -> str:
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
    return _matrix_md(table)


def write_pages(root: str | os.PathLike, results: str | os.PathLike | None = None) -> list[Path]:
    """Write ``book/generated/{scorecard,abstract,comparison,reproducibility}.md`` under ``root``
    from the results files (default :func:`lamina.states.io.results_dir`, plus ``book/runs/*``),
    each validated (:func:`load_records`). A results folder that does not exist, or holds no
    valid record, raises naming it (``$LAMINA_RESULTS`` named when it came from there); a
    malformed file or claim row raises naming the file and the row."""
    root = Path(root)
    try:
        folder = Path(results).absolute() if results is not None else results_dir(create=False)
    except EnvPathError as exc:
        raise FileNotFoundError(str(exc)) from None
    if results is None and "LAMINA_RESULTS" not in os.environ and not folder.is_dir():
        raise FileNotFoundError(
            f"no results folder at {folder}: run the chapters first (make book), or name one "
            "with --results / $LAMINA_RESULTS"
        )
    table = claims_table(load_records(folder, root))
    out = root / "book" / "generated"
    pages = {
        "scorecard.md": _scorecard_md(table),
        "abstract.md": _abstract_md(table),
        "comparison.md": _comparison_md(table),
        "reproducibility.md": _reproducibility_md(root / "book" / "executed"),
    }
    return [atomic_write_text(out / name, text) for name, text in pages.items()]
