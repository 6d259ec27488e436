"""Decidability as a state of the engine (issue 50, item 1): a row whose rule cannot read its
claimed answer at this design reads "undecidable at this design" with the reason; a level row
is judged by an equivalence test, or has no false-positive rate at all ("FPR n/a: no test").
Each test below failed on the engine before the state existed (1575fa5)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lamina.book.picture import picture_html
from lamina.book.scorecard import calibration_misses, claims_table
from lamina.evidence.calibration import calibration_rates, calibration_table
from lamina.evidence.claims import UNDECIDABLE
from lamina.evidence.decide import Context, ControlResult, Measurement, decide
from lamina.evidence.declare import NO_TEST, ClaimSpec, Control, Gate, Present
from lamina.trajectory import calibration as trajectory_calibration

CTX = Context(model="m")


def _level(**kw: object) -> ClaimSpec:
    base: dict[str, object] = dict(id="p1-curvature-reasoning-range", claim="c", paper_value="v",
                                   kind="effect", statistic="s", unit="rad",
                                   claimed=(0.71, 0.83), calibrated="a null")  # fmt: skip
    return ClaimSpec(**(base | kw))  # type: ignore[arg-type]


def test_a_control_unable_to_fail_makes_the_vanish_row_undecidable():
    of = ClaimSpec(id="p1-x-effect", claim="c", paper_value="v", kind="effect", statistic="s",
                   unit="u", test="t", direction=1, claimed=(0.1, math.inf), calibrated="n")  # fmt: skip
    spec = ClaimSpec(id="p1-x-controls-vanish", claim="c", paper_value="v", kind="vanish",
                     statistic="s", unit="u", of=of.id, calibrated="n",
                     controls=(Control("shuffled", can_fail=False, why="by construction"),))  # fmt: skip
    real = decide(of, Measurement(estimate=0.5, ci_low=0.3, ci_high=0.7, p=0.001,
                                  sided="two-sided"), CTX)  # fmt: skip
    assert real.present
    row = decide(spec, Measurement(controls={"shuffled": ControlResult(0.0, 0.9, 0.2)}),
                 Context(model="m", rows={of.id: real}))  # fmt: skip
    assert row.verdict == UNDECIDABLE and "cannot fail: by construction" in row.reason


def test_a_one_point_count_judged_on_a_ci_that_cannot_reach_it_is_undecidable():
    spec = ClaimSpec(id="p1-three-phase-detected", claim="c", paper_value="3", kind="count",
                     statistic="phases", unit="phases", claimed=(3.0, 3.0), calibrated="n")  # fmt: skip
    row = decide(spec, Measurement(estimate=3.0, ci_low=2.4, ci_high=3.6), CTX)
    assert row.verdict == UNDECIDABLE and "whole numbers" in row.reason
    # a CI of whole numbers can reach the point: judged as before
    assert decide(spec, Measurement(estimate=3.0, ci_low=3.0, ci_high=3.0),
                  CTX).verdict == "count as claimed"  # fmt: skip
    assert decide(spec, Measurement(estimate=3.0, ci_low=2.0, ci_high=3.0),
                  CTX).verdict == "count uncertain"  # fmt: skip


def test_a_declared_undecidable_claim_reads_so_after_its_preconditions():
    spec = _level(equivalence=True, undecidable="30 layers cannot resolve it; 60 would",
                  requires=(Gate("sft"),))  # fmt: skip
    m = Measurement(estimate=0.77, ci_low=0.75, ci_high=0.79, sided="two-sided")
    assert decide(spec, m, CTX).verdict == "not testable"  # the gate was not measured
    from lamina.evidence.decide import GateResult

    row = decide(spec, m, Context(model="m", gates={"sft": GateResult(True)}))
    assert row.verdict == UNDECIDABLE and "60 would" in row.reason and not row.present


def test_a_level_row_is_judged_by_an_equivalence_test_against_its_range():
    spec = _level(equivalence=True)

    def m(e: float, lo: float = math.nan, hi: float = math.nan) -> Measurement:
        return Measurement(estimate=e, ci_low=lo, ci_high=hi, sided="two-sided")

    inside = decide(spec, m(0.77, 0.74, 0.80), CTX)
    assert inside.verdict == "reproduced" and inside.present and "equivalence" in inside.reason
    # the estimate in range, the CI past it: no equivalence (the old rule's half-width slack
    # read this as reproduced)
    wide = decide(spec, m(0.80, 0.76, 0.86), CTX)
    assert wide.verdict == "partially" and not wide.present
    below = decide(spec, m(0.5, 0.45, 0.55), CTX)
    assert below.verdict == "smaller than claimed"
    assert decide(spec, m(0.77), CTX).verdict == "not testable"


def test_equivalence_is_only_for_level_rows():
    with pytest.raises(ValueError, match="level row"):
        _level(equivalence=True, test="a t test", direction=1)
    with pytest.raises(ValueError, match="level row"):
        _level(equivalence=True, claimed=(0.7, math.inf))


def _runs(cid: str, verdict: str, present: bool, n: int = 20) -> pd.DataFrame:
    return pd.DataFrame([{"claim_id": cid, "source": src, "seed": s, "verdict": verdict,
                          "kind": "effect", "present": present, "reason": "r"}
                         for src in ("null", "planted") for s in range(n)])  # fmt: skip


def test_a_level_row_without_a_test_has_no_rate_never_a_zero_by_construction():
    spec = _level()  # no test, no direction, no equivalence: "present" is always False
    table = calibration_table([spec], calibration_rates(_runs(spec.id, "reproduced", False)))
    assert table["status"].iloc[0] == NO_TEST
    assert spec.calibration_text() == NO_TEST


def test_a_level_row_with_an_equivalence_test_has_a_rate_that_can_fail():
    spec = _level(equivalence=True)
    table = calibration_table([spec], calibration_rates(_runs(spec.id, "reproduced", True)))
    assert table["status"].iloc[0] == "calibrated" and table["fpr"].iloc[0] == 1.0


def test_a_rule_undecidable_on_most_null_seeds_is_listed_as_undecidable():
    spec = _level(equivalence=True)
    table = calibration_table([spec], calibration_rates(_runs(spec.id, UNDECIDABLE, False)))
    assert table["status"].iloc[0].startswith(UNDECIDABLE)


def test_paper_1_level_rows_all_have_an_equivalence_test():
    level = [s for s in trajectory_calibration.CLAIMS if s.is_level]
    assert level and all(s.equivalence for s in level)


def test_the_picture_marks_a_claim_that_misses_its_calibration_target():
    rows = [{"claim_id": "p1-curvature-gap", "claim": "c", "paper_value": "0.4", "model": "minilm",
             "measured": 0.5, "ci_low": 0.4, "ci_high": 0.6, "p": 0.01, "verdict": "reproduced",
             "calibration": "calibrated"}]  # fmt: skip
    table = claims_table([{"chapter": "curvature", "model": "minilm",
                           "summary": {"claims": rows}}])  # fmt: skip
    outcomes = {"p1-curvature-gap": {"status": "calibrated", "targets": "FPR above 5%",
                                     "fpr": 0.2, "fpr_low": 0.1, "fpr_high": 0.3, "n_null": 40}}  # fmt: skip
    pic = picture_html(calibration_misses(table, outcomes))
    assert "lamina-miscalibrated" in pic and "FPR above 5%" in pic


def test_a_level_ci_wider_than_its_range_is_undecidable_with_the_units_that_would_decide():
    """A CI wider than the claimed range can never lie inside it: on the previous engine it
    read "partially" on every source, a verdict no design of that size could lift."""
    spec = _level(equivalence=True, resampling="pair")  # claimed 0.71-0.83, 0.12 wide
    wide = decide(spec, Measurement(estimate=0.78, ci_low=0.6, ci_high=0.96, n_units=20, sided="two-sided"), CTX)
    assert wide.verdict == UNDECIDABLE and not wide.present
    assert "0.36 wide" in wide.reason and "about 180 pairs (here 20)" in wide.reason
    # a narrow CI that overlaps the range is judged as before
    assert decide(spec, Measurement(estimate=0.8, ci_low=0.76, ci_high=0.86, sided="two-sided"), CTX).verdict == "partially"
    # a wide CI wholly outside the range decides: the level is not the claimed one
    assert decide(spec, Measurement(estimate=1.2, ci_low=1.0, ci_high=1.4, sided="two-sided"), CTX).verdict == "not reproduced"


def _conditional(**kw: object) -> ClaimSpec:
    base: dict[str, object] = dict(id="p1-x-size", claim="c", paper_value="v", kind="effect",
                                   statistic="s", unit="x", test="t", direction=1, null=1.0,
                                   claimed=(4.9, math.inf), requires=(Present("p1-x-main"),),
                                   calibrated="a null", conditional_null="half")  # fmt: skip
    return ClaimSpec(**(base | kw))  # type: ignore[arg-type]


def _source_runs(cid: str, verdicts: dict[str, list[str]]) -> pd.DataFrame:
    return pd.DataFrame([{"claim_id": cid, "source": src, "seed": s, "verdict": v,
                          "kind": "effect", "present": v != "not testable", "reason": "r"}
                         for src, vs in verdicts.items() for s, v in enumerate(vs)])  # fmt: skip


def test_a_conditional_row_reads_its_fpr_on_a_null_that_keeps_its_precondition():
    """A row that requires another claim's effect is "not testable" on the plain null, so the
    previous page called it "not calibrated" whatever its rule did; on its conditional null
    (the effect present, at half size) a false "yes" is the claimed answer."""
    spec = _conditional()
    runs = _source_runs(spec.id, {"null": ["not testable"] * 20,
                                  "half": ["reproduced"] * 3 + ["smaller than claimed"] * 17,
                                  "planted": ["reproduced"] * 20})  # fmt: skip
    plain = calibration_table([spec], calibration_rates(runs))
    assert plain["status"].iloc[0].startswith("not calibrated")
    r = calibration_table([spec], calibration_rates(runs, [spec])).iloc[0]
    assert r["status"] == "calibrated" and r["fpr_source"] == "half"
    assert r["fpr"] == pytest.approx(3 / 20) and r["n_null_testable"] == 20
    with pytest.raises(ValueError, match="no runs there"):
        calibration_table([spec], calibration_rates(runs[runs["source"] != "half"], [spec]))
    with pytest.raises(ValueError, match="conditional null"):
        _conditional(requires=())


def test_a_rule_undecidable_on_most_planted_seeds_has_no_power_and_says_so():
    spec = _level(equivalence=True)
    runs = _source_runs(spec.id, {"null": ["smaller than claimed"] * 20,
                                  "planted": [UNDECIDABLE] * 15 + ["reproduced"] * 5})  # fmt: skip
    status = calibration_table([spec], calibration_rates(runs))["status"].iloc[0]
    assert status.startswith(UNDECIDABLE) and "15 of 20 planted seeds" in status
