"""The one engine: every verdict rule of lamina.evidence.decide, on hand-made measurements."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lamina.evidence.claims import PRESENT, Claim
from lamina.evidence.decide import (
    Context,
    ControlResult,
    GateResult,
    Judge,
    Measurement,
    decide,
    decide_across,
    vanish_measurement,
)
from lamina.evidence.declare import ClaimSpec, Control, Gate, Present, check_declarations
from lamina.evidence.stats import t_summary

INF = math.inf
CTX = Context(model="m")


def spec(**kw: object) -> ClaimSpec:
    base: dict[str, object] = {
        "id": "p1-test-effect", "claim": "x", "paper_value": "y", "kind": "effect",
        "statistic": "difference", "unit": "rad", "test": "Mann-Whitney U",
        "direction": 1, "claimed": (0.4, INF), "not_calibrated": "a test fixture",
    }  # fmt: skip
    return ClaimSpec(**(base | kw))  # type: ignore[arg-type]


def two(e: float, lo: float, hi: float, p: float | None, **kw: object) -> Measurement:
    return Measurement(estimate=e, ci_low=lo, ci_high=hi, p=p, sided="two-sided", **kw)  # type: ignore[arg-type]


def test_an_effect_of_the_claimed_size_that_is_not_significant_is_absent_never_partially() -> None:
    # chapters/results.verdict said "partially" for this (P3-recovery at p = 0.17)
    row = decide(spec(), two(0.5, 0.45, 0.55, 0.17), CTX)
    assert row.verdict == "absent"
    assert not row.present
    assert "0.17" in row.reason


def test_significant_effects_by_size() -> None:
    s = spec()
    assert decide(s, two(0.5, 0.45, 0.55, 0.001), CTX).verdict == "reproduced"
    assert decide(s, two(0.5, 0.3, 0.7, 0.001), CTX).verdict == "partially"
    assert decide(s, two(0.2, 0.1, 0.3, 0.001), CTX).verdict == "smaller than claimed"
    closed = spec(claimed=(0.4, 0.6))
    assert decide(closed, two(2.0, 1.8, 2.2, 0.001), CTX).verdict == "not reproduced"
    for v in ("reproduced", "partially", "smaller than claimed"):
        assert v in PRESENT


def test_presence_is_significance_in_the_claimed_direction_not_the_verdict() -> None:
    small = decide(spec(), two(0.2, 0.1, 0.3, 0.001), CTX)
    assert small.verdict == "smaller than claimed" and small.present
    wrong_way = decide(spec(), two(-0.2, -0.3, -0.1, 0.001), CTX)
    assert wrong_way.verdict == "reversed" and not wrong_way.present


def test_reversed_needs_the_opposite_shape_not_any_other_shape() -> None:
    # bands: margin = min(elab - left, elab - right); a monotone rising profile gives a negative
    # margin (elab < right) without elaboration lying below both neighbours
    bands = spec(opposite="elaboration below both neighbours", claimed=(0.06, INF))
    rising = two(-0.05, -0.08, -0.02, 0.001, p_opposite=0.6)
    assert decide(bands, rising, CTX).verdict == "absent"
    dip = two(-0.05, -0.08, -0.02, 0.001, p_opposite=0.001)
    assert decide(bands, dip, CTX).verdict == "reversed"
    untested_opposite = two(-0.05, -0.08, -0.02, 0.001)
    assert decide(bands, untested_opposite, CTX).verdict == "absent"


def test_a_one_sided_test_needs_its_own_p_for_reversed() -> None:
    one = spec(sided="greater")
    m = Measurement(estimate=-0.3, ci_low=-0.4, ci_high=-0.2, p=0.999, sided="greater")
    assert decide(one, m, CTX).verdict == "absent"
    m2 = Measurement(estimate=-0.3, ci_low=-0.4, ci_high=-0.2, p=0.999, p_opposite=0.001,
                     sided="greater")  # fmt: skip
    assert decide(one, m2, CTX).verdict == "reversed"


def test_the_direction_is_judged_against_the_tests_own_null_where_it_has_one() -> None:
    # Gemma's gate_proj: R2 -0.26 with every shuffled layer order lower (median -0.262, p =
    # 0.001); against R2 = 0 it read "absent, p = 1" beside its own p = 0.001
    s = spec(sided="greater", test="shuffled layer order", claimed=(0.81, 1.0))
    one = {"sided": "greater", "ci_low": -0.33, "ci_high": -0.21}
    m = Measurement(estimate=-0.26, p=0.001, p_opposite=1.0, null=-0.262, **one)
    row = decide(s, m, CTX)
    assert row.verdict == "smaller than claimed" and row.present
    assert decide(s, Measurement(estimate=-0.26, p=0.001, p_opposite=1.0, **one), CTX).verdict == "absent"
    below = Measurement(estimate=-0.26, p=0.999, p_opposite=0.002, null=-0.2, **one)
    assert decide(s, below, CTX).verdict == "reversed"
    assert decide(s, Measurement(estimate=-0.26, p=0.3, p_opposite=0.7, null=-0.27, **one),
                  CTX).verdict == "absent"  # fmt: skip


def test_a_ci_of_another_sidedness_than_the_declared_test_is_refused() -> None:
    with pytest.raises(ValueError, match="sidedness"):
        decide(spec(sided="greater"), two(0.5, 0.45, 0.55, 0.01), CTX)
    with pytest.raises(ValueError, match="sidedness"):
        decide(spec(), Measurement(estimate=0.5, ci_low=0.4, ci_high=0.6, p=0.01), CTX)


def test_t_summary_p_and_ci_agree_on_either_side() -> None:
    # G-order-reverse read "reproduced" with a two-sided CI [0.997, 1.059] beside a one-sided
    # p = 0.031: a one-sided p must come with one-sided bounds and vice versa
    rng = np.random.default_rng(0)
    for _ in range(200):
        x = rng.normal(0.2, 1.0, size=int(rng.integers(3, 12)))
        for sided in ("greater", "two-sided"):
            m, lo, hi, p = t_summary(x, sided=sided)
            assert lo <= m <= hi
            assert (p < 0.05) == (lo > 0 if sided == "greater" else (lo > 0 or hi < 0))


def test_an_estimate_outside_its_own_ci_is_not_testable_unless_it_says_whose_ci() -> None:
    # Gemma's convergence estimate 0.0156 against its CI [0.0082, 0.0143]
    s = spec(claimed=(0.0, INF), direction=0)
    row = decide(s, two(0.0156, 0.0082, 0.0143, 0.001), CTX)
    assert row.verdict == "not testable" and "outside its own CI" in row.reason
    named = two(0.0156, 0.0082, 0.0143, 0.001, ci_of="the bootstrap mean")
    assert decide(s, named, CTX).verdict != "not testable"


def test_a_failed_gate_makes_every_claim_that_reads_the_stage_not_testable() -> None:
    reads_dpo = spec(requires=(Gate("dpo"),))
    ok = two(0.5, 0.45, 0.55, 0.001)
    failed = Context(model="m", gates={"dpo": GateResult(False, "content 0.61 < 0.70")})
    row = decide(reads_dpo, ok, failed)
    assert row.verdict == "not testable" and "0.61" in row.reason
    assert row.measured == 0.5  # the values are kept beside "not testable"
    assert decide(reads_dpo, ok, CTX).verdict == "not testable"  # never measured
    passed = Context(model="m", gates={"dpo": GateResult(True)})
    assert decide(reads_dpo, ok, passed).verdict == "reproduced"


def test_a_secondary_row_needs_the_main_effect_present_not_reproduced() -> None:
    # convergence significant (p = 1e-4) but smaller than claimed: its depth is still testable
    main = spec(id="p1-test-main")
    depth = spec(id="p1-test-depth", kind="location", claimed=(1 / 3, INF), direction=0,
                 test="", requires=(Present("p1-test-main"),))  # fmt: skip
    judge = Judge(Context(model="m"))
    assert judge(main, two(0.2, 0.1, 0.3, 1e-4)).verdict == "smaller than claimed"
    where = judge(depth, Measurement(estimate=0.6, ci_low=0.5, ci_high=0.7))
    assert where.verdict == "located as claimed"
    judge2 = Judge(Context(model="m"))
    judge2(main, two(0.2, -0.1, 0.4, 0.3))
    assert judge2(depth, Measurement(estimate=0.6, ci_low=0.5, ci_high=0.7)).verdict == (
        "not testable")


def test_count_and_location_rows_have_their_own_words_and_are_never_present() -> None:
    phases = spec(kind="count", claimed=(3, 3), direction=0, test="")
    assert decide(phases, Measurement(estimate=3), CTX).verdict == "count as claimed"
    two_phases = decide(phases, Measurement(estimate=2), CTX)
    assert two_phases.verdict == "fewer than claimed" and not two_phases.present
    assert decide(phases, Measurement(estimate=4), CTX).verdict == "more than claimed"
    assert decide(phases, Measurement(estimate=3, ci_low=2, ci_high=4), CTX).verdict == (
        "count uncertain")
    anti = spec(kind="count", claimed=(1, INF), direction=0, test="")
    assert decide(anti, Measurement(estimate=0), CTX).verdict == "fewer than claimed"
    onset = spec(kind="location", claimed=(0.17, 0.27), direction=0, test="")
    assert decide(onset, Measurement(estimate=0.9, ci_low=0.8, ci_high=1.0), CTX).verdict == (
        "located elsewhere")
    assert decide(onset, Measurement(estimate=0.2), CTX).verdict == "not testable"
    with pytest.raises(ValueError, match="only an effect row"):
        Claim(claim_id="p1-x-y", claim="", paper_value="", model="m", measured=2.0,
              verdict="count as claimed", kind="count", present=True)  # fmt: skip


def _vanish(**kw: object) -> ClaimSpec:
    controls = (Control("shuffled layers"), Control("random embeddings"))
    return spec(id="p1-test-vanish", kind="vanish", of="p1-test-effect", test="", direction=0,
                claimed=(-INF, INF), controls=kw.pop("controls", controls), **kw)  # type: ignore[arg-type]  # fmt: skip


def test_vanish_rows() -> None:
    judge = Judge(CTX)
    judge(spec(), two(0.5, 0.45, 0.55, 0.001))
    gone = {"shuffled layers": ControlResult(0.1, 0.6, 0.3),
            "random embeddings": ControlResult(-0.2, 0.9, 0.1)}  # fmt: skip
    assert judge(_vanish(), vanish_measurement(gone)).verdict == "reproduced"
    kept = gone | {"random embeddings": ControlResult(0.8, 0.001, 0.95)}
    row = judge(_vanish(), vanish_measurement(kept))
    assert row.verdict == "partially" and "random embeddings: 0.8 remains, upper bound 0.95" in row.reason
    missing = {"shuffled layers": ControlResult(0.1, 0.6, 0.3)}
    assert judge(_vanish(), vanish_measurement(missing)).verdict == "not testable"
    unbounded = gone | {"shuffled layers": ControlResult(0.1, 0.6)}
    row = judge(_vanish(), vanish_measurement(unbounded))
    assert row.verdict == "not testable" and "no confidence bound" in row.reason
    iid = (Control("shuffled layers"), Control("random embeddings", can_fail=False,
                                               why="drawn independently per prompt"))  # fmt: skip
    row = judge(_vanish(controls=iid), vanish_measurement(gone))
    assert row.verdict == "undecidable at this design" and "independently" in row.reason
    per_source = vanish_measurement(gone, cannot_fail={"shuffled layers": "one layer"})
    assert judge(_vanish(), per_source).verdict == "undecidable at this design"
    absent = Judge(CTX)
    absent(spec(), two(0.5, 0.45, 0.55, 0.3))
    assert absent(_vanish(), vanish_measurement(gone)).verdict == "not testable"


def test_a_vanish_row_is_an_equivalence_test_on_the_remaining_share() -> None:
    """A control removes the effect when the upper bound of the share that remains is below one
    half: a small remainder that is significant still counts as removed, and a remainder that
    is not significant but may be half the effect does not (at 69acbaf rule 7 read both
    the other way: "not significant and under half")."""
    judge = Judge(CTX)
    judge(spec(), two(0.5, 0.45, 0.55, 0.001))
    small = {"shuffled layers": ControlResult(0.07, 0.01, 0.12),
             "random embeddings": ControlResult(0.0, 0.8, 0.02)}  # fmt: skip
    assert judge(_vanish(), vanish_measurement(small)).verdict == "reproduced"
    noisy = small | {"shuffled layers": ControlResult(0.3, 0.2, 0.7)}
    assert judge(_vanish(), vanish_measurement(noisy)).verdict == "partially"
    none_left = small | {"shuffled layers": ControlResult(0.0, 0.9, 0.0)}  # a bound of exactly 0
    assert judge(_vanish(), vanish_measurement(none_left)).verdict == "reproduced"
    edge = small | {"shuffled layers": ControlResult(0.3, 0.2, 0.5)}
    assert judge(_vanish(), vanish_measurement(edge)).verdict == "partially"


def test_across_rows_judge_every_source_and_reach_a_row() -> None:
    s = spec(id="p1-test-universal", kind="across", of="p1-test-effect", min_sources=3,
             test="", direction=0, claimed=(1, 1))  # fmt: skip
    rows = [decide(spec(), two(0.5, 0.45, 0.55, 0.001), Context(model=m)) for m in "abc"]
    assert decide_across(s, rows).verdict == "reproduced"
    assert decide_across(s, rows[:2]).verdict == "not testable"
    bad = rows[:2] + [decide(spec(), two(0.5, 0.45, 0.55, 0.3), Context(model="c"))]
    out = decide_across(s, bad)
    assert out.verdict == "not reproduced" and "c" in out.reason and out.model == "all sources"
    assert out.row()["claim_id"] == "p1-test-universal"


def test_declarations_are_checked() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        spec(not_calibrated="")
    with pytest.raises(ValueError, match="direction"):
        spec(sided="greater", direction=-1)
    with pytest.raises(ValueError, match="breaks the scheme"):
        spec(id="P3-core")
    with pytest.raises(ValueError, match="cannot fail"):
        Control("random embeddings", can_fail=False)
    with pytest.raises(ValueError, match="not declared"):
        check_declarations([spec(requires=(Present("p1-test-other"),))])
    with pytest.raises(ValueError, match="twice"):
        check_declarations([spec(), spec()])


def test_self_checks() -> None:
    s = spec(id="self-test-check", kind="self-check", test="", direction=0)
    assert decide(s, Measurement(passed=True), CTX).verdict == "check passed"
    assert decide(s, Measurement(passed=False), CTX).verdict == "check failed"
    assert decide(s, Measurement(), CTX).verdict == "not testable"
    # the measurement's detail is the whole reason (it read "; failed: ..." in the book)
    assert decide(s, Measurement(passed=False, detail="failed: x"), CTX).reason == "failed: x"
