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
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from lamina.book.badges import MARKS_CSS, is_self_check, marks_css
from lamina.book.matrix import matrix_html, scorecard_markdown, summary_line
from lamina.book.picture import counts_svg, picture_html
from lamina.core import registry
from lamina.core.provenance import EnvPathError, atomic_write_text, provenance
from lamina.evidence.claims import PAPER_VERDICTS, SELF_VERDICTS
from lamina.states.io import ResultsFileError, read_result_file, results_dir
from lamina.states.runs import model_folder

__all__ = [
    "CALIBRATION_OUTCOMES", "CHAPTER_PAPER", "calibration_misses", "claims_table", "load_records",
    "read_calibration_outcomes", "validate_record", "write_pages",
]  # fmt: skip


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


def _short(value: Any) -> str:
    """A parameter value as a column label shows it: a path by its last part."""
    if isinstance(value, list):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    text = str(value)
    return Path(text).name if text.startswith("/") and Path(text).name else text


def _run_label(record: dict[str, Any]) -> str:
    """Which run a record comes from, as its column shows it: "" for the book's own run, else
    "run <namespace>: <the parameters it varied>" (the model aside when it is the record's
    own), "quick", and "unfinished" for a run that failed or never ended."""
    run = record.get("run") or {}
    config = record.get("config") or {}
    quick = bool(run.get("quick") if run.get("quick") is not None else config.get("quick"))
    varied = {k: v for k, v in (run.get("varied") or {}).items()
              if not (k == "model" and v == record.get("model"))}  # fmt: skip
    parts = [f"run {run['namespace']}"] if run.get("namespace") else []
    if varied:
        parts[-1:] = [f"{parts[-1] if parts else 'run'}: " + ", ".join(
            f"{k}={_short(v)}" for k, v in sorted(varied.items()))]  # fmt: skip
    elif quick:
        parts.append("quick")
    if run.get("status") in ("running", "failed"):
        parts.append("unfinished" if run["status"] == "running" else "failed run")
    return "; ".join(parts)


def _misplaced(record: dict[str, Any], path: Path, folder: Path) -> str | None:
    """Why the record at ``path`` (under the results ``folder``) is not where its run puts it
    (:mod:`lamina.states.runs`): a copy in another folder (``<model>/old/``), another model's
    folder or a namespace that is not its own; None when it is in place."""
    rel = path.relative_to(folder).parts
    run = record.get("run") or {}
    namespace = run.get("namespace")
    if rel[0] != model_folder(str(record.get("model"))):
        return f"its model {record.get('model')!r} belongs in {model_folder(str(record.get('model')))}/"
    if len(rel) == 2 and namespace:
        return f"it is from run {namespace}, not the book's own"
    if len(rel) == 3 and rel[1] != namespace:
        return f"it is from {'the book' if not namespace else f'run {namespace}'}, not run {rel[1]!r}"
    return None


def load_records(folder: Path, root: Path | None = None) -> list[dict[str, Any]]:
    """Every results record of the book, validated (:func:`validate_record`): the book's
    own (``<folder>/<model>/<chapter>.json``) and other runs' namespaces
    (``<folder>/<model>/<namespace>/<chapter>.json``). A record whose model or namespace
    disagrees with its folder (a backup copy under ``<model>/old/``, a file moved by hand) is
    left out with a printed note naming it. Raises FileNotFoundError naming ``folder`` when
    it is not a folder, and :class:`ResultsFileError` when no valid record is found."""
    if not folder.is_dir():
        raise FileNotFoundError(f"results folder {str(folder)!r} does not exist")
    records = []
    for path in sorted(folder.glob("*/*.json")) + sorted(folder.glob("*/*/*.json")):
        try:  # where the record says it belongs, before its tables are checked
            peek = json.loads(path.read_text(encoding="utf-8"))
            why = _misplaced(peek, path, folder) if isinstance(peek, dict) else None
        except (OSError, ValueError, RecursionError):
            why = None  # read_result_file names the problem
        if why is not None:
            print(f"[lamina] pages: left out {path}: {why}", file=sys.stderr)
            continue
        records.append(validate_record(read_result_file(path), path))
    if not records:
        raise ResultsFileError(
            f"results folder {str(folder)!r} holds no results record (<model>/<chapter>.json); "
            "run the chapters first (make book, or lamina run CHAPTER)"
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


CALIBRATION_OUTCOMES = "calibration.json"
"""In ``book/generated/``: the calibration page's outcome per claim, as data
(:func:`lamina.book.calibration.claim_outcomes`, written beside the page before these pages)."""


def read_calibration_outcomes(path: Path) -> dict[str, dict[str, Any]]:
    """The calibration outcomes at ``path`` (claim id -> ``status``, ``targets``, ``fpr``,
    ``fpr_low``, ``fpr_high``, ``n_null``); {} when there is no such file (the pages are then
    built before any calibration). A file that is not such a mapping raises ValueError naming
    it and the entry."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a calibration outcomes file ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of claim ids, got {type(data).__name__}")
    for cid, item in data.items():
        if not isinstance(item, dict) or not isinstance(item.get("status"), str):
            raise ValueError(f"{path}: claim {cid!r} has no calibration status")
        if item["status"] == "calibrated" and not isinstance(item.get("targets"), str):
            raise ValueError(f"{path}: calibrated claim {cid!r} has no targets")
    return data


def calibration_misses(table: pd.DataFrame, outcomes: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """``table`` (:func:`claims_table`) with a column ``calibration_miss``: for a row whose
    claim is calibrated but misses a target on the calibration page, e.g. "its calibration
    misses a target: FPR above 5% (13% [8%, 20%] on its null, 130 seeds)"; "" otherwise."""

    def pct(x: float) -> str:
        return f"{100 * x:.0f}%"

    def miss(cid: str) -> str:
        o = outcomes.get(cid) or {}
        if o.get("status") != "calibrated" or o.get("targets") in (None, "met"):
            return ""
        return (f"its calibration misses a target: {o['targets']} (FPR {pct(o['fpr'])} "
                f"[{pct(o['fpr_low'])}, {pct(o['fpr_high'])}] on its null, "
                f"{o['n_null']} seeds)")  # fmt: skip

    out = table.copy()
    out["calibration_miss"] = [miss(str(c)) for c in out["claim_id"]]
    return out


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
        if report.name.endswith(".failed.report.json"):  # an attempt that failed: not the page's run
            continue
        try:
            r = json.loads(report.read_text())
            r["chapter"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ResultsFileError(f"{report}: not a readable run report ({exc.__class__.__name__}: "
                                   f"{exc}); rerun the chapter (make book)") from None  # fmt: skip
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
    from the results files (default :func:`lamina.states.io.results_dir`),
    each validated (:func:`load_records`), and the calibration page's outcomes when they are
    there (:data:`CALIBRATION_OUTCOMES`: the matrix marks a claim that misses a target), with
    ``book/generated/static/calibration-marks.css`` (:func:`lamina.book.badges.marks_css`:
    the same marks on the chapters' badges). A
    results folder that does not exist, or holds no valid record, raises naming it
    (``$LAMINA_RESULTS`` named when it came from there); a malformed file or claim row raises
    naming the file and the row."""
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
    out = root / "book" / "generated"
    outcomes = read_calibration_outcomes(out / CALIBRATION_OUTCOMES)
    table = calibration_misses(claims_table(load_records(folder, root)), outcomes)
    atomic_write_text(out / "static" / MARKS_CSS, marks_css(outcomes))
    pages = {
        "scorecard.md": _scorecard_md(table),
        "abstract.md": _abstract_md(table),
        "comparison.md": _comparison_md(table),
        "reproducibility.md": _reproducibility_md(root / "book" / "executed"),
    }
    return [atomic_write_text(out / name, text) for name, text in pages.items()]
