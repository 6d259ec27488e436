"""Calibration rates of declared claims: how often each claim's rule says "yes" on a null, and
how often it says what it should where an effect of the paper's size (or half of it) is planted.

Each science package runs its claims' rules on its own known-answer sources and returns the
runs as one table (:data:`RUN_COLUMNS`: one row per claim, source and seed, with the row's
verdict, kind and presence); :func:`calibration_rates` turns them into rates and
:func:`calibration_table` joins them to the declarations, so that the calibration page lists
every declared claim: its rates, or "not calibrated" with the reason.

Sources: ``null`` (no effect, every hazard the claim must survive kept), ``planted`` (the
paper's effect at its stated size), ``half`` (at half of it).

* **False-positive rate** on the null: the share of seeds where the row is testable whose row
  says "yes" (:func:`says_yes`): an effect row *present* (significant in the claimed direction,
  whatever its size word), a count or location row "as claimed", a vanish or across row
  "reproduced". A row "not testable" on more than half the null seeds is not calibrated.
  A row that requires another claim's effect (``requires=Present(...)``) is not testable on
  the plain null by design; its FPR is read on its declared ``conditional_null`` (a source
  that keeps the precondition and breaks the row's own claim: "half" for a size claim, a
  science package's "elsewhere" for a location), where a "yes" is the claimed answer.
* **Power** at the paper's size: the share of planted seeds whose row reads as claimed
  (:data:`AS_CLAIMED`: "reproduced" for effect, vanish and across rows).
* **Half size** (effect rows): the share of seeds reading "smaller than claimed", the right
  answer there, and the share reading "reproduced", a false reproduction.

* **Coverage** (rows whose runs carry the optional column ``covered``: 1 when the row's CI
  contains the planted source's known population value, 0 when not, NaN where not checked;
  :func:`covers`): the share of planted seeds whose CI covers, against the CI's nominal
  two-sided level (:attr:`lamina.evidence.declare.ClaimSpec.ci_level`: 95% for a two-sided
  row, 90% for a one-sided one, whose ends are one-sided 95% bounds) less
  :data:`COVERAGE_SLACK` (:func:`coverage_target`: :data:`COVERAGE_TARGET` for a 95% CI).

Each rate comes with its Wilson 95% interval (:func:`lamina.evidence.stats.wilson`).

Rows with no rate: a claim declared ``undecidable``, or whose rule read "undecidable at this
design" on more than half the null seeds, is listed as undecidable with the reason (its 0% on the
null would hold by construction); a level row without an equivalence test has "FPR n/a: no
test" (its "present" is False by construction). Neither is counted as calibrated.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from lamina.evidence.claims import NOT_TESTABLE, REPRODUCED, SMALLER, UNDECIDABLE
from lamina.evidence.declare import NO_TEST, ClaimSpec
from lamina.evidence.runs import COVERAGE_COLUMN, RUN_COLUMNS, SOURCES, covers
from lamina.evidence.stats import wilson

__all__ = ["AS_CLAIMED", "COVERAGE_COLUMN", "COVERAGE_SLACK", "COVERAGE_TARGET", "FPR_TARGET",
           "NO_TEST", "covers", "coverage_target",
           "POWER_TARGET", "RUN_COLUMNS", "SOURCES", "calibration_rates", "calibration_table",
           "says_yes", "seeds_for_halfwidth"]  # fmt: skip

FPR_TARGET, POWER_TARGET, HALFWIDTH, COVERAGE_TARGET = 0.05, 0.80, 0.05, 0.90
COVERAGE_SLACK = 0.95 - COVERAGE_TARGET  # a CI may cover this far below its nominal level


AS_CLAIMED = {"effect": REPRODUCED, "count": "count as claimed",
              "location": "located as claimed", "vanish": REPRODUCED, "across": REPRODUCED}  # fmt: skip


def coverage_target(nominal: float) -> float:
    """The least coverage (a fraction) a CI of two-sided ``nominal`` level may show on its
    known-answer source: ``nominal`` - :data:`COVERAGE_SLACK` (0.90 for a 95% CI, 0.85 for
    a one-sided row's 90% CI of two 95% bounds)."""
    return nominal - COVERAGE_SLACK


def says_yes(verdict: str, kind: str, present: bool) -> bool:
    """Whether a row says the claim holds, for the false-positive rate: an effect row that is
    present; any other row that reads as claimed (:data:`AS_CLAIMED`)."""
    if kind == "effect":
        return bool(present)
    return verdict == AS_CLAIMED.get(kind)


def _rate(hits: int, n: int) -> dict[str, float]:
    r, lo, hi = wilson(hits, n)
    return {"rate": r, "low": lo, "high": hi, "hits": hits, "n": n}


def calibration_rates(runs: pd.DataFrame, specs: Iterable[ClaimSpec] = ()) -> pd.DataFrame:
    """Per claim id, from runs with :data:`RUN_COLUMNS`: fpr_source (the source the FPR is
    read on: "null", or the row's declared ``conditional_null`` among ``specs``, where a
    "yes" is a verdict as claimed, the precondition holding there by design), n_null,
    n_null_testable (both on fpr_source), fpr (with
    fpr_low, fpr_high, fpr_hits), power (power_low, power_high, power_hits, n_planted), half_smaller
    and half_reproduced (with their hits and n_half), null_untestable_reason (the commonest
    reason where the row was not testable on fpr_source), n_planted_undecidable and
    planted_undecidable_reason (planted seeds whose rule read "undecidable at this design"),
    and, where the runs have the column
    :data:`COVERAGE_COLUMN`, coverage (coverage_low, coverage_high, coverage_hits, n_coverage:
    planted seeds with a finite value; NaN where none) and coverage_nominal (the CI's
    two-sided level, from ``specs``; 0.95 for a row not among them)."""
    missing = set(RUN_COLUMNS) - set(runs.columns)
    if missing:
        raise ValueError(f"calibration runs lack the columns {sorted(missing)}")
    specs = list(specs)
    conditional = {s.id: s.conditional_null for s in specs if s.conditional_null}
    nominal = {s.id: s.ci_level for s in specs}
    rows = []
    for cid, part in runs.groupby("claim_id", sort=False):
        kind = str(part["kind"].iloc[0])
        fpr_source = conditional.get(str(cid), "null")
        null = part[part["source"] == fpr_source]
        testable = null[~null["verdict"].isin((NOT_TESTABLE, UNDECIDABLE))]
        if fpr_source == "null":
            yes = sum(says_yes(v, kind, p) for v, p in zip(testable["verdict"], testable["present"], strict=True))
        else:  # the precondition holds there by design: a "yes" is the claimed answer
            yes = int((testable["verdict"] == AS_CLAIMED.get(kind, "")).sum())
        fpr = _rate(int(yes), len(testable))
        planted = part[(part["source"] == "planted")]
        pw = _rate(int((planted["verdict"] == AS_CLAIMED.get(kind, "")).sum()), len(planted))
        half = part[part["source"] == "half"]
        sm = _rate(int((half["verdict"] == SMALLER).sum()), len(half))
        rep = _rate(int((half["verdict"] == REPRODUCED).sum()), len(half))
        untestable = null[null["verdict"] == NOT_TESTABLE]["reason"]
        undecided = null[null["verdict"] == UNDECIDABLE]["reason"]
        planted_undecided = planted[planted["verdict"] == UNDECIDABLE]["reason"]
        cov: dict[str, float] = {}
        if COVERAGE_COLUMN in part:
            c = pd.to_numeric(planted[COVERAGE_COLUMN], errors="coerce").dropna()
            r = _rate(int((c > 0.5).sum()), len(c)) if len(c) else {}
            cov = {"coverage": r.get("rate", float("nan")), "coverage_low": r.get("low", float("nan")),
                   "coverage_high": r.get("high", float("nan")), "coverage_hits": r.get("hits", 0),
                   "n_coverage": len(c), "coverage_nominal": nominal.get(str(cid), 0.95)}  # fmt: skip
        rows.append({
            "claim_id": cid, "kind": kind, "fpr_source": fpr_source, "n_null": len(null),
            "n_null_testable": len(testable),
            "fpr": fpr["rate"], "fpr_low": fpr["low"], "fpr_high": fpr["high"],
            "fpr_hits": fpr["hits"], "n_planted": len(planted), "power": pw["rate"],
            "power_low": pw["low"], "power_high": pw["high"], "power_hits": pw["hits"],
            "n_half": len(half), "half_smaller": sm["rate"], "half_smaller_hits": sm["hits"],
            "half_reproduced": rep["rate"], "half_reproduced_hits": rep["hits"],
            "null_untestable_reason": untestable.mode().iloc[0] if len(untestable) else "",
            "n_null_undecidable": len(undecided),
            "null_undecidable_reason": undecided.mode().iloc[0] if len(undecided) else "",
            "n_planted_undecidable": len(planted_undecided),
            "planted_undecidable_reason": (planted_undecided.mode().iloc[0]
                                           if len(planted_undecided) else ""),
        } | cov)  # fmt: skip
    return pd.DataFrame(rows)


def calibration_table(specs: Iterable[ClaimSpec], rates: pd.DataFrame) -> pd.DataFrame:
    """One row per declared claim, in declaration order: its rates (:func:`calibration_rates`)
    and ``status``: "calibrated"; "undecidable at this design: <reason>" (declared, or read on
    more than half the null seeds or more than half the planted seeds, where no power is
    possible); ":data:`NO_TEST`" for a level row without an equivalence
    test; or "not calibrated: <reason>" -- the declaration's reason, or the null's when the row
    was not testable on more than half the null seeds.

    Raises ValueError naming a claim declared ``calibrated`` that has no runs (or none on its
    declared conditional null), or runs of a claim id that no declaration holds (a stale or
    misspelt id)."""
    specs = list(specs)
    known = {s.id for s in specs}
    by_id = {r["claim_id"]: r for r in rates.to_dict("records")} if len(rates) else {}
    stray = sorted(set(by_id) - known)
    if stray:
        raise ValueError(f"calibration runs name claims that are not declared: {stray}")
    out = []
    for s in specs:
        r = by_id.get(s.id)
        if s.undecidable:
            status = f"{UNDECIDABLE}: {s.undecidable}"
        elif not s.has_test:
            status = NO_TEST
        elif s.not_calibrated:
            status = f"not calibrated: {s.not_calibrated}"
        elif r is None:
            raise ValueError(f"claim {s.id} is declared calibrated ({s.calibrated}) but has no "
                             "calibration runs")  # fmt: skip
        elif s.conditional_null and not r["n_null"]:
            raise ValueError(f"claim {s.id} declares the conditional null "
                             f"{s.conditional_null!r} but has no runs there")  # fmt: skip
        elif r["n_null"] and r.get("n_null_undecidable", 0) * 2 > r["n_null"]:
            status = (f"{UNDECIDABLE}: on {r['n_null_undecidable']} of {r['n_null']} "
                      f"{r.get('fpr_source', 'null')} seeds ({r['null_undecidable_reason']})")  # fmt: skip
        elif r.get("n_planted") and r.get("n_planted_undecidable", 0) * 2 > r["n_planted"]:
            status = (f"{UNDECIDABLE}: on {r['n_planted_undecidable']} of {r['n_planted']} "
                      f"planted seeds ({r['planted_undecidable_reason']})")  # fmt: skip
        elif r["n_null"] and r["n_null_testable"] * 2 < r["n_null"]:
            status = (f"not calibrated: not testable on {r['n_null'] - r['n_null_testable']} of "
                      f"{r['n_null']} {r.get('fpr_source', 'null')} seeds ({r['null_untestable_reason']})")  # fmt: skip
        else:
            status = "calibrated"
        row = {"claim_id": s.id, "claim": s.claim, "kind": s.kind, "main": s.main,
               "null": s.calibrated, "status": status}  # fmt: skip
        out.append(row | {k: v for k, v in (r or {}).items() if k not in row})
    return pd.DataFrame(out)


def seeds_for_halfwidth(rate: float, halfwidth: float = HALFWIDTH, limit: int = 100_000) -> int:
    """The smallest number of seeds n (a multiple of 10) whose Wilson 95% interval around an
    observed share ``rate`` (in [0, 1]) reaches at most ``halfwidth`` from the estimate on
    either side; ``limit`` when none below it does."""
    n = 10
    while n < limit:
        share, low, high = wilson(round(rate * n), n)
        if max(share - low, high - share) <= halfwidth:
            return n
        n += 10
    return limit
