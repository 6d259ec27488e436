"""Audit a built book's results against the rules every verdict obeys (``make check-book``).

The engine (:func:`lamina.evidence.decide.decide`) enforces these rules when it writes a row;
this audit rereads what reached the results files and the calibration page, so that a row
written by another path, an old results file, or a chapter that never ran is caught after the
build. It decides nothing: it only reports rows that break a rule, by rule:

* ``id``: the claim id follows the one scheme (``p1-``, ``p2-``, ``p3-``, ``self-``;
  :func:`lamina.evidence.claims.check_id`);
* ``word``: the verdict is one of its kind's words (:data:`lamina.evidence.claims.VERDICTS`);
* ``significance``: an effect row that reads "reproduced" or "partially" has p < its alpha
  (vanish rows, whose p is a control's, and rows without a test are exempt);
* ``ci``: a judged row's estimate lies in its CI, or the row names the estimate its CI belongs
  to (``ci_of``);
* ``present``: only effect rows count as present;
* ``across``: at least one row over several sources (kind ``across``) is in the results;
* ``calibration``: every claim id of the papers appears on the calibration page (lamina's
  self-checks, ``self-``, are not claims of the papers);
* ``not run``: every chapter of the book has results;
* ``memory``: every chapter's (those without claims too) last completed run of the book recorded its kernel's peak
  resident memory (``peak_memory_gib`` of ``book/executed/<chapter>.report.json``), at most
  :data:`MEMORY_BUDGET_GIB`;
* ``mark``: every claim whose calibration misses a target (the calibration page's outcomes,
  ``calibration.json`` beside it) or has no measured rate is marked (‡ / †) on every row of
  the generated pages that show it (the matrix of ``scorecard.md``, the picture and matrix of
  ``abstract.md``): a miss the reader cannot see is a finding.

Run ``python -m lamina.book.audit [RESULTS] [CALIBRATION_PAGE]``; exit status 1 on any finding.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lamina.book.matrix import matrix_row_anchor
from lamina.book.scorecard import (
    CALIBRATION_OUTCOMES,
    CHAPTER_PAPER,
    load_records,
    read_calibration_outcomes,
)
from lamina.core import registry
from lamina.evidence.claims import VERDICTS, check_id
from lamina.states.io import results_dir

__all__ = ["MEMORY_BUDGET_GIB", "Finding", "audit_book", "audit_marks", "audit_memory",
           "audit_rows", "main"]  # fmt: skip

MEMORY_BUDGET_GIB = 12.0
"""The most resident memory a chapter's kernel may reach (GiB): a nightly runner has 16 GB."""

_JUDGED = ("reproduced", "partially", "smaller than claimed", "not reproduced", "reversed")


@dataclass(frozen=True)
class Finding:
    """One broken rule: which rule, which row (claim id and model), and the values."""

    rule: str
    claim_id: str
    model: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.claim_id} on {self.model}: {self.detail}"


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _row_findings(row: dict[str, Any], model: str) -> list[Finding]:
    cid = str(row.get("claim_id", ""))
    kind = str(row.get("kind") or "effect")
    kind = "effect" if kind == "paper" else kind
    verdict = str(row.get("verdict", ""))
    out: list[Finding] = []

    def bad(rule: str, detail: str) -> None:
        out.append(Finding(rule, cid, model, detail))

    try:
        check_id(cid)
    except ValueError as err:
        bad("id", str(err))
    if kind not in VERDICTS:
        bad("word", f"kind {kind!r} is not one of {tuple(VERDICTS)}")
    elif verdict not in VERDICTS[kind]:
        bad("word", f"{verdict!r} is not a word of a {kind} row {VERDICTS[kind]}")
    p, alpha = _num(row.get("p")), _num(row.get("alpha"))
    if kind == "effect" and verdict in ("reproduced", "partially") and p >= alpha:
        bad("significance", f"reads {verdict!r} with p = {p:.3g} >= alpha {alpha:g}")
    est, lo, hi = _num(row.get("measured")), _num(row.get("ci_low")), _num(row.get("ci_high"))
    if (
        verdict in _JUDGED
        and not str(row.get("ci_of") or "")
        and all(math.isfinite(v) for v in (est, lo, hi))
        and not lo - 1e-9 * max(1.0, abs(lo)) <= est <= hi + 1e-9 * max(1.0, abs(hi))
    ):
        bad("ci", f"estimate {est:.4g} outside its CI [{lo:.4g}, {hi:.4g}], no ci_of")
    if bool(row.get("present")) and kind != "effect":
        bad("present", f"a {kind} row counts as present")
    return out


def audit_rows(
    records: Iterable[dict[str, Any]], calibration_page: str | None = None
) -> list[Finding]:
    """Every :class:`Finding` over the claims rows of ``records`` (results records as
    :func:`lamina.book.scorecard.load_records` returns them). ``calibration_page``: the
    calibration page's text, or None to skip the ``calibration`` rule."""
    findings: list[Finding] = []
    ids: set[str] = set()
    chapters: set[str] = set()
    across = False
    for record in records:
        chapter = str(record.get("chapter", ""))
        chapters.add(chapter)
        for row in record.get("summary", {}).get("claims", []) or []:
            model = str(row.get("model") or record.get("model") or "?")
            findings += _row_findings(row, model)
            ids.add(str(row.get("claim_id", "")))
            across |= str(row.get("kind")) == "across"
    if not across:
        findings.append(Finding("across", "-", "-", "no row over several sources in the results"))
    for chapter in CHAPTER_PAPER:
        if chapter not in chapters:
            findings.append(Finding("not run", f"{chapter}:*", "-", "the chapter has no results"))
    if calibration_page is not None:
        listed = set(re.findall(r"`([a-z0-9-]+)`", calibration_page))
        for cid in sorted(i for i in ids - listed if not i.startswith("self-")):
            findings.append(Finding("calibration", cid, "-", "not on the calibration page"))
    return findings


def _needs_mark(item: dict[str, Any]) -> bool:
    status = str(item.get("status", ""))
    return (status == "calibrated" and item.get("targets") not in (None, "met")) or status.startswith(
        ("not calibrated", "FPR n/a"))


def audit_marks(
    outcomes: dict[str, dict[str, Any]], pages: dict[str, str], ids: Iterable[str]
) -> list[Finding]:
    """The ``mark`` rule: for each claim id in ``ids`` (those with results) whose outcome needs
    a mark, every table row of each page in ``pages`` (name -> HTML/markdown text) that names
    the claim's matrix anchor must carry the mark's class (``lamina-miscalibrated`` or
    ``lamina-uncalibrated``)."""
    out: list[Finding] = []
    for cid in sorted(set(ids)):
        item = outcomes.get(cid)
        if item is None or not _needs_mark(item):
            continue
        anchor = matrix_row_anchor(cid)
        for name, text in pages.items():
            rows = [r for r in re.split(r"<tr[ >]", text) if f'"{anchor}"' in r or f'"#{anchor}"' in r]
            bare = [r for r in rows if "lamina-miscalibrated" not in r.split("</tr>")[0]
                    and "lamina-uncalibrated" not in r.split("</tr>")[0]]  # fmt: skip
            if bare:
                out.append(Finding("mark", cid, "-", f"{len(bare)} of {len(rows)} row(s) of "
                                   f"{name} show it unmarked ({item.get('targets') or item['status']})"))  # fmt: skip
    return out


def audit_memory(executed: Path, chapters: Iterable[str] | None = None) -> list[Finding]:
    """The ``memory`` rule: a finding for each of ``chapters`` (default every chapter of the
    book, :func:`lamina.core.registry.names`, those without claims too) whose report in ``executed``
    (``<chapter>.report.json``, a completed run's) is missing, records no peak, or records a
    peak above :data:`MEMORY_BUDGET_GIB` (GiB)."""
    out: list[Finding] = []
    for chapter in registry.names() if chapters is None else chapters:
        path = Path(executed) / f"{chapter}.report.json"
        try:
            peak = float(json.loads(path.read_text(encoding="utf-8"))["peak_memory_gib"])
        except (OSError, ValueError, KeyError, TypeError):
            out.append(Finding("memory", f"{chapter}:*", "-", f"no recorded peak memory in {path}"))
            continue
        if not peak <= MEMORY_BUDGET_GIB:
            out.append(Finding("memory", f"{chapter}:*", "-", f"its kernel peaked at {peak:.1f} "
                               f"GiB, above the {MEMORY_BUDGET_GIB:g} GiB budget ({path})"))  # fmt: skip
    return out


def audit_book(results: Path | None = None, calibration: Path | None = None,
               executed: Path | None = None) -> list[Finding]:  # fmt: skip
    """:func:`audit_rows` over the book's results folder (default: :func:`results_dir`) and
    its calibration page (default ``book/generated/calibration.md``; a missing page is a
    finding, not a skip), and :func:`audit_memory` over the book's chapter reports (default
    ``book/executed``)."""
    folder = results if results is not None else results_dir(create=False)
    page = calibration if calibration is not None else Path("book/generated/calibration.md")
    text = page.read_text(encoding="utf-8") if page.is_file() else None
    records = load_records(folder)
    findings = audit_rows(records, text)
    findings += audit_memory(executed if executed is not None else Path("book/executed"))
    if text is None:
        findings.append(Finding("calibration", "-", "-", f"no calibration page at {page}"))
    outcomes_file = page.with_name(CALIBRATION_OUTCOMES)
    if outcomes_file.is_file():
        pages = {f.name: f.read_text(encoding="utf-8") for f in
                 (page.with_name("scorecard.md"), page.with_name("abstract.md")) if f.is_file()}  # fmt: skip
        ids = [str(r.get("claim_id", "")) for rec in records
               for r in rec.get("summary", {}).get("claims", []) or []]  # fmt: skip
        findings += audit_marks(read_calibration_outcomes(outcomes_file), pages, ids)
    return findings


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    results = Path(args[0]) if args else None
    page = Path(args[1]) if len(args) > 1 else None
    findings = audit_book(results, page)
    for f in findings:
        print(f)
    by_rule: dict[str, int] = {}
    for f in findings:
        by_rule[f.rule] = by_rule.get(f.rule, 0) + 1
    print(f"audit: {len(findings)} findings" + (f" {by_rule}" if by_rule else ""))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
