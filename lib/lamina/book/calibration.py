"""The calibration page: every declared claim of the three papers, with its false-positive rate
on a null that keeps what threatens it, its power at the paper's size, what it says at half
that size -- or "not calibrated" and why.

Each paper's science package declares its claims (``CLAIMS``) and runs them on its own
known-answer sources (``calibration_runs(n_seeds, jobs=...)``, described by
``CALIBRATION_SOURCES``); :func:`lamina.evidence.calibration.calibration_table` joins the two,
so a claim cannot be declared without appearing here. The rates' definitions are those of
:mod:`lamina.evidence.calibration`, quoted on the page.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd

from lamina.anatomy import calibration as anatomy_calibration
from lamina.core.arguments import count
from lamina.core.machine import machine_cores
from lamina.core.provenance import atomic_write_text, data_dir
from lamina.evidence.calibration import (
    COVERAGE_TARGET,
    FPR_TARGET,
    HALFWIDTH,
    POWER_TARGET,
    calibration_rates,
    calibration_table,
    coverage_target,
    seeds_for_halfwidth,
)
from lamina.evidence.claims import UNDECIDABLE
from lamina.evidence.declare import NO_TEST, ClaimSpec
from lamina.trajectory import calibration as trajectory_calibration
from lamina.weights import calibration as weights_calibration

__all__ = [
    "PAPERS", "Section", "calibration_page", "claim_outcomes", "new_results", "paper_section",
    "progress", "section_markdown",
]  # fmt: skip


@dataclass(frozen=True)
class Section:
    """One paper's part of the page: its title, declared claims, calibration runs
    (``lamina.evidence.calibration.RUN_COLUMNS``), the sources' descriptions by name, and the
    cost of the runs (text)."""

    title: str
    claims: Sequence[ClaimSpec]
    runs: pd.DataFrame
    sources: Mapping[str, str]
    cost: str = ""


def _pct(x: Any) -> str:
    return "–" if not isinstance(x, int | float) or not math.isfinite(x) else f"{100 * x:.0f}%"


def _rate(r: Mapping[str, Any], key: str, hits: str, n: str) -> str:
    if not r.get(n):
        return "–"
    low, high = r.get(f"{key}_low"), r.get(f"{key}_high")
    ci = f" [{_pct(low)}, {_pct(high)}]" if low is not None else ""
    return f"{_pct(r[key])}{ci} ({int(r[hits])}/{int(r[n])})"


def _num(r: Mapping[str, object], key: str) -> float:
    v = r.get(key)
    return float(v) if isinstance(v, int | float) else math.nan


def _coverage(r: Mapping[str, object]) -> str:
    """The coverage cell: the rate, its Wilson interval and the CI's nominal level."""
    cell = _rate(r, "coverage", "coverage_hits", "n_coverage")
    nominal = _num(r, "coverage_nominal")
    return cell if cell == "–" or not math.isfinite(nominal) else f"{cell} of a {_pct(nominal)} CI"


def _targets(r: Mapping[str, object]) -> str:
    """Whether a calibrated row meets FPR <= 5%, power >= 80% at the paper's size, and, where its
    CI's coverage of a known value was measured, coverage at least its nominal level less 5
    points (:func:`lamina.evidence.calibration.coverage_target`: 90% for a 95% CI). A rate on
    the wrong side of its target is a miss whatever its interval; the text says whether the
    Wilson 95% interval excludes the target (a rule of exact 5% size reads above 5% on about
    half of all pages)."""
    if r["status"] != "calibrated":
        return ""
    miss = []
    if _num(r, "fpr") > FPR_TARGET:
        sure = _num(r, "fpr_low") > FPR_TARGET
        miss.append("FPR above 5%" + ("" if sure else " (its interval reaches 5%)"))
    if _num(r, "power") < POWER_TARGET:  # every row (issue 50, item 5), not only a main one
        sure = _num(r, "power_high") < POWER_TARGET
        miss.append("power below 80%" + ("" if sure else " (its interval reaches 80%)"))
    nominal = _num(r, "coverage_nominal")
    target = coverage_target(nominal) if math.isfinite(nominal) else COVERAGE_TARGET
    if _num(r, "coverage") < target:
        sure = _num(r, "coverage_high") < target
        miss.append(f"CI coverage below {_pct(target)}"
                    + ("" if sure else f" (its interval reaches {_pct(target)})"))  # fmt: skip
    return "; ".join(miss) if miss else "met"


def section_markdown(section: Section) -> str:
    """One paper's section: its sources, then one table row per declared claim, then
    sentences (computed) naming the rows that miss a target or whose FPR interval is wider
    than +/-5 points, with the seeds that would narrow it."""
    table = calibration_table(section.claims, calibration_rates(section.runs, section.claims))
    lines = [f"## {section.title}", ""]
    for name, text in section.sources.items():
        lines.append(f"- **{name}**: {text}")
    if section.cost:
        lines += ["", section.cost]
    lines += ["", "| claim | kind | FPR on the null | power at the paper's size | half size: "
              "smaller than claimed / reproduced | CI coverage of the known value | status |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    notes = []
    for r in table.to_dict("records"):
        main = " (main)" if r["main"] else ""
        if r["status"] != "calibrated":
            fpr = "n/a: no test" if r["status"] == NO_TEST else "–"
            lines.append(f"| `{r['claim_id']}`{main} | {r['kind']} | {fpr} | – | – | – | "
                         f"{r['status']} |")  # fmt: skip
            continue
        half = "–"
        if r.get("n_half") and r["kind"] == "effect":
            half = (f"{_pct(r['half_smaller'])} / {_pct(r['half_reproduced'])} "
                    f"(n = {int(r['n_half'])})")  # fmt: skip
        ok = _targets(r)
        on = "" if r.get("fpr_source", "null") == "null" else f"on {r['fpr_source']}: "
        lines.append(f"| `{r['claim_id']}`{main} | {r['kind']} | "
                     f"{on}{_rate(r, 'fpr', 'fpr_hits', 'n_null_testable')} | "
                     f"{_rate(r, 'power', 'power_hits', 'n_planted')} | {half} | "
                     f"{_coverage(r)} | {ok} |")  # fmt: skip
        if ok != "met":
            notes.append(f"- `{r['claim_id']}` misses a target: {ok}.")
        width = max(r["fpr"] - r["fpr_low"], r["fpr_high"] - r["fpr"])
        if width > HALFWIDTH:
            notes.append(f"- The FPR interval of `{r['claim_id']}` is wider than +/-5 points "
                         f"({_pct(r['fpr_low'])}–{_pct(r['fpr_high'])} over "
                         f"{int(r['n_null_testable'])} testable null seeds); at its observed rate "
                         f"that needs about {seeds_for_halfwidth(r['fpr'])} seeds.")  # fmt: skip
    n_cal = int((table["status"] == "calibrated").sum())
    n_und = int(table["status"].str.startswith(UNDECIDABLE).sum())
    n_none = int((table["status"] == NO_TEST).sum())
    lines += ["", f"{n_cal} of {len(table)} declared claims are calibrated; {n_und} are "
              f"undecidable at this design; {n_none} have no test."]  # fmt: skip
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def calibration_page(sections: Sequence[Section], intro: str = "") -> str:
    """The page body: ``intro``, then one :func:`section_markdown` per paper."""
    return "\n".join([intro, *(section_markdown(s) for s in sections)]).lstrip() + "\n"


def claim_outcomes(sections: Sequence[Section]) -> dict[str, dict[str, Any]]:
    """What the page says of each declared claim, as data for the pages built after it (the
    matrix marks a claim whose calibration misses a target): claim id -> ``status``
    ("calibrated", or "not calibrated: <reason>") and, when calibrated, ``targets`` ("met", or
    the targets missed, e.g. "FPR above 5%"), ``fpr``, ``fpr_low``, ``fpr_high`` (fractions:
    the rate of false reproductions on the null and its Wilson 95% interval), ``n_null``
    (the null seeds on which the claim was testable) and, where measured, ``coverage`` (the
    share of planted seeds whose CI covers the known value)."""
    out: dict[str, dict[str, Any]] = {}
    for section in sections:
        table = calibration_table(section.claims, calibration_rates(section.runs, section.claims))
        for r in table.to_dict("records"):
            item: dict[str, Any] = {"status": str(r["status"])}
            if r["status"] == "calibrated":
                item.update(targets=_targets(r), fpr=float(r["fpr"]), fpr_low=float(r["fpr_low"]),
                            fpr_high=float(r["fpr_high"]), n_null=int(r["n_null_testable"]))  # fmt: skip
                if math.isfinite(_num(r, "coverage")):
                    item["coverage"] = _num(r, "coverage")
            out[str(r["claim_id"])] = item
    return out


PAPERS: tuple[tuple[str, ModuleType], ...] = (
    ("Paper 1: trajectory geometry", trajectory_calibration),
    ("Paper 2: weight-update signature", weights_calibration),
    ("Paper 3: layer anatomy and Growth Training", anatomy_calibration),
)
"""Each paper's section title and calibration module (``CLAIMS``, ``calibration_runs``,
``CALIBRATION_SOURCES``), in the page's order."""


def new_results(folder: Path, since: float) -> int:
    """How many seed results (``*.json``) under ``folder`` were written at or after ``since``
    (seconds since the epoch): the seeds this build computed, not those it read."""
    n = 0
    for f in folder.rglob("*.json") if folder.is_dir() else []:
        try:
            n += f.stat().st_mtime >= since
        except OSError:  # an atomic write's temporary file, renamed away meanwhile
            continue
    return n


@contextmanager
def progress(title: str, folder: Path, every: float = 60.0) -> Iterator[None]:
    """While the block runs, print every ``every`` seconds (when it changed) how many seed
    results the calibration has written under ``folder`` since the block began, and the
    minutes elapsed: the science modules compute their seeds in worker processes and cache
    each one, so the cache is where progress shows."""
    start, stop = time.time(), threading.Event()

    def watch() -> None:
        last = 0
        while not stop.wait(every):
            n = new_results(folder, start)
            if n != last:
                minutes = (time.time() - start) / 60
                print(f"[lamina] calibration: {title}: {n} seed result(s) computed "
                      f"({minutes:.1f} min)", flush=True)  # fmt: skip
                last = n

    thread = threading.Thread(target=watch, name="calibration-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def paper_section(title: str, module: ModuleType, n_seeds: int, *, jobs: int = 2) -> Section:
    """One paper's :class:`Section` over seeds 0..n_seeds-1 of ``module.calibration_runs``
    (``jobs`` one-thread processes, each seed cached by the module), with a cost line: the mean
    CPU seconds of a seed's computation (``runs.attrs["seconds"]``, recorded with a cached
    seed) and this build's wall time (seconds)."""
    start = time.perf_counter()
    with progress(title, data_dir() / "cache" / "calibration"):
        runs = module.calibration_runs(n_seeds, jobs=jobs)
    seconds = [float(x) for x in runs.attrs.get("seconds", [])]
    cpu = f"{sum(seconds) / len(seconds):.1f} s of one core per seed; " if seconds else ""
    cached = runs.attrs.get("cached")
    read = f", {sum(bool(c) for c in cached)} of them read from the cache" if cached is not None else ""
    cost = (f"{n_seeds} seeds per source: {cpu}{time.perf_counter() - start:.0f} s of wall "
            f"time in this build ({jobs} process(es){read}).")  # fmt: skip
    return Section(title, module.CLAIMS, runs, module.CALIBRATION_SOURCES, cost)


def _parse_main(argv: Sequence[str]) -> tuple[str, int, int]:
    """(page path, number of seeds, jobs) from the command line, checked before anything is
    computed: SystemExit(2) with a usage line naming the bad value (a count that is not a
    whole number >= 1, a page that cannot be written there), SystemExit(0) after ``--help``."""
    parser = argparse.ArgumentParser(
        prog="python -m lamina.book.calibration",
        description="Write the calibration page's body (every paper's claims) to OUT.md, from "
        "N_SEEDS seeds per known-answer source; each seed's rows are cached under "
        "<data>/cache/calibration, keyed by the code, prompts and budget.",
    )
    parser.add_argument("out", metavar="OUT.md")
    parser.add_argument("n_seeds", metavar="N_SEEDS", type=count("N_SEEDS"))
    parser.add_argument("--jobs", type=count("--jobs"), default=machine_cores(),
                        help="worker processes, one thread each (default: the machine's cores)")
    args = parser.parse_args(list(argv))
    out = Path(args.out).absolute()
    if out.is_dir() or not out.parent.is_dir() or not os.access(out.parent, os.W_OK):
        parser.error(f"page {args.out!r}: cannot write a file there (checked before computing)")
    return str(out), args.n_seeds, args.jobs


def main(argv: Sequence[str] | None = None) -> int:  # pragma: no cover (run by make methods)
    """``python -m lamina.book.calibration OUT.md N_SEEDS [--jobs J]``: write the page body,
    and beside it OUT.json (:func:`claim_outcomes`), which the scorecard pages read."""
    out, n_seeds, jobs = _parse_main(sys.argv[1:] if argv is None else argv)
    sections = []
    for title, module in PAPERS:
        print(f"[lamina] calibration: {title} ({n_seeds} seeds)", flush=True)
        sections.append(paper_section(title, module, n_seeds, jobs=jobs))
    print(atomic_write_text(out, calibration_page(sections)))
    outcomes = json.dumps(claim_outcomes(sections), indent=1, sort_keys=True)
    print(atomic_write_text(Path(out).with_suffix(".json"), outcomes + "\n"))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
