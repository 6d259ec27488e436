"""Paper 1's claims judged by the one engine (lamina.trajectory.judging -> lamina.evidence.decide):
preconditions on the main effect being present, the claim's own alpha and permutation
budget, one sidedness, "reversed" for the bands only when elaboration is below both
neighbours, vanish rows with controls that cannot fail."""

import math

import numpy as np

from lamina.evidence.decide import ControlResult, decide_across
from lamina.evidence.declare import check_declarations
from lamina.trajectory.claims import CHAPTER_CLAIMS, CLAIMS, UNIVERSAL
from lamina.trajectory.judging import judge_chapter
from lamina.trajectory.phase_stats import three_phase_test


def _peak(**kw: float) -> dict:
    s = {"peak": 0.5, "ci_low": 0.45, "ci_high": 0.55, "p": 1 / 10_001, "n_permutations": 10_000,
         "rank_biserial": 0.9, "peak_fraction": 0.6, "fraction_low": 0.4, "fraction_high": 0.9,
         "p_mc_error": 0.0001, "n_units": 60}
    return s | kw


def _rows(chapter: str, s: dict, **kw) -> dict:
    return {r.claim_id: r for r in judge_chapter(chapter, s, "m", "c", **kw)}


def test_every_paper1_claim_is_declared_once_with_a_calibration_status():
    specs = check_declarations(CLAIMS)
    assert all(cid.startswith(("p1-", "self-reanalysis-")) for cid in specs)
    assert sum(s.main for s in CHAPTER_CLAIMS["convergence"]) == 1
    vanish = [s for s in CLAIMS if s.kind == "vanish"]
    assert len(vanish) == 4 and all({c.name for c in s.controls} ==
                                    {"shuffled layers", "random embeddings"} for s in vanish)


def test_the_peak_needs_enough_permutations_for_its_alpha():
    assert _rows("convergence", _peak(n_permutations=2000, p=1 / 2001))["p1-convergence-peak"].verdict == "not testable"
    row = _rows("convergence", _peak())["p1-convergence-peak"]
    assert row.verdict == "reproduced" and row.present and "Monte-Carlo SE" in row.test
    assert row.sided == "greater"


def test_the_depth_row_needs_the_peak_present_not_reproduced():
    """Issue 32: convergence significant on three sources (p = 1e-4) read "no convergence to
    locate" because the depth row was gated on the verdict; it is gated on presence now."""
    small = _rows("convergence", _peak(peak=0.2, ci_low=0.15, ci_high=0.25))
    assert small["p1-convergence-peak"].verdict == "smaller than claimed"
    assert small["p1-convergence-peak-depth"].verdict == "located as claimed"
    absent = _rows("convergence", _peak(p=0.2))
    assert absent["p1-convergence-peak-depth"].verdict == "not testable"
    wide = _rows("convergence", _peak(fraction_low=0.0, fraction_high=1.0))
    assert wide["p1-convergence-peak-depth"].verdict == "location uncertain"


def _bands(margin: float, lo: float, hi: float, p: float = 1e-4, p_opposite: float = 0.9) -> dict:
    return {"margin": margin, "margin_low": lo, "margin_high": hi, "p": p,
            "p_opposite": p_opposite, "rank_biserial": 0.9, "n_units": 40}


def test_three_phases_need_a_size_and_reversed_means_elaboration_below_both():
    assert _rows("three_phase", _bands(0.006, 0.003, 0.009))["p1-three-phase-bands"].verdict != "reproduced"
    assert _rows("three_phase", _bands(0.12, 0.09, 0.15))["p1-three-phase-bands"].verdict == "reproduced"
    # a monotone rise: elaboration below one neighbour only is not the opposite shape
    rising = three_phase_test(np.tile(np.linspace(0.5, 0.9, 12), (30, 1))
                              + np.random.default_rng(0).normal(0, 0.01, (30, 12)), n_bootstrap=50)
    row = _rows("three_phase", rising)["p1-three-phase-bands"]
    assert rising["margin"] < 0 and row.verdict == "absent"
    dip = three_phase_test(np.tile(np.r_[np.full(4, 0.9), np.full(5, 0.5), np.full(3, 0.9)], (30, 1))
                           + np.random.default_rng(1).normal(0, 0.01, (30, 12)), n_bootstrap=50)
    assert _rows("three_phase", dip)["p1-three-phase-bands"].verdict == "reversed"


def test_the_detected_phases_row_is_a_count_never_present():
    """Declared undecidable at this design (tests/trajectory/test_phase_count.py): it reads so
    whatever the count, and is never present."""
    s = _bands(0.12, 0.09, 0.15) | {"phases": {"k_bic": 2, "k_low": 2.0, "k_high": 3.0,
                                                "share_three": 0.3}}
    row = _rows("three_phase", s)["p1-three-phase-detected"]
    assert row.kind == "count" and row.verdict == "undecidable at this design" and not row.present


def test_the_universal_row_is_an_across_row():
    ok = [judge_chapter("three_phase", _bands(0.12, 0.09, 0.15), f"m{i}", "c")[0] for i in range(3)]
    bad = judge_chapter("three_phase", _bands(0.006, 0.003, 0.009), "gpt2", "c")[0]
    assert decide_across(UNIVERSAL, ok[:2]).verdict == "not testable"
    assert decide_across(UNIVERSAL, ok).verdict == "reproduced"
    row = decide_across(UNIVERSAL, [*ok, bad])
    assert row.verdict == "not reproduced" and "gpt2" in row.reason and row.model == "all sources"


def test_vanish_rows_need_every_control_and_say_when_one_cannot_fail():
    s = _peak()
    both = {"shuffled layers": ControlResult(0.1, 0.6, 0.3),
            "random embeddings": ControlResult(0.0, 0.9, 0.2)}  # fmt: skip
    assert _rows("convergence", s, controls=both)["p1-convergence-controls-vanish"].verdict == "reproduced"
    one = {"shuffled layers": ControlResult(0.1, 0.6, 0.3)}
    assert _rows("convergence", s, controls=one)["p1-convergence-controls-vanish"].verdict == "not testable"
    kept = {"shuffled layers": ControlResult(0.9, 0.001, 1.1),
            "random embeddings": ControlResult(0.0, 0.9, 0.2)}  # fmt: skip
    assert _rows("convergence", s, controls=kept)["p1-convergence-controls-vanish"].verdict == "partially"
    phases = _rows("three_phase", _bands(0.12, 0.09, 0.15), controls=both)
    row = phases["p1-three-phase-controls-vanish"]
    assert row.verdict == "undecidable at this design" and "cannot fail" in row.reason
    void = _rows("convergence", s, controls=both, cannot_fail={"random embeddings": "no vocabulary"})
    assert void["p1-convergence-controls-vanish"].verdict == "undecidable at this design"


def test_bifurcation_secondary_rows_need_the_excess_present():
    s = {"excess": 1.05, "excess_low": 0.9, "excess_high": 1.2, "p": 0.4, "rank_biserial": 0.1,
         "n_pairs": 20, "base_layer": 1, "base_defined": False, "n_zero_base": 20,
         "ratio": 6.0, "ratio_low": 5.0, "ratio_high": 7.0, "control_ratio": 5.8,
         "control_low": 5.0, "control_high": 6.5, "onset": 0.2, "onset_low": 0.15,
         "onset_high": 0.28}
    rows = _rows("bifurcation", s)
    assert rows["p1-bifurcation-ratio"].verdict == "absent"
    assert all(rows[k].verdict == "not testable" for k in ("p1-bifurcation-homograph-ratio",
               "p1-bifurcation-control-ratio", "p1-bifurcation-onset"))
    s.update(excess=5.0, excess_low=4.5, excess_high=5.5, p=1e-4)
    rows = _rows("bifurcation", s)
    assert rows["p1-bifurcation-ratio"].verdict == "reproduced"
    assert rows["p1-bifurcation-homograph-ratio"].verdict == "not testable"  # delta(0) = 0
    assert "delta(0) = 0" in rows["p1-bifurcation-homograph-ratio"].reason
    assert rows["p1-bifurcation-onset"].verdict == "located as claimed"


def _positional(base_separation: float, **ratio: float) -> dict:
    """A bifurcation summary with the excess present and delta(0) > 0 (learned positions): the
    pairs' median layer-0 separation and so the ratio's ceiling 2 / delta(0)."""
    return {"excess": 5.0, "excess_low": 4.5, "excess_high": 5.5, "p": 1e-4, "rank_biserial": 0.9,
            "n_pairs": 120, "base_layer": 0, "base_defined": True, "n_zero_base": 0,
            "control_ratio": 1.1, "control_low": 1.0, "control_high": 1.2, "onset": 0.2,
            "onset_low": 0.15, "onset_high": 0.28, "ratio_ceiling": 2 / base_separation,
            "base_separation": base_separation, **ratio}


def test_a_homograph_ratio_beyond_the_chord_ceiling_is_undecidable():
    """delta is a chord distance (at most 2), so r <= 2 / delta(0): a model whose pairs already
    separate by 0.6 at layer 0 cannot show 4.9x; its row says so instead of "not reproduced".
    Where delta(0) is small enough, the row is judged on its CI as before."""
    s = _positional(ratio=3.0, ratio_low=2.6, ratio_high=3.2, base_separation=0.6)
    row = _rows("bifurcation", s)["p1-bifurcation-homograph-ratio"]
    assert row.verdict == "undecidable at this design" and "cannot exceed 3.33x" in row.reason
    s.update(ratio_ceiling=2 / 0.1, base_separation=0.1)
    assert _rows("bifurcation", s)["p1-bifurcation-homograph-ratio"].verdict == "smaller than claimed"


def test_a_ceiling_below_the_papers_own_size_is_undecidable():
    """A ceiling above the claim's low end (4.9x) but below the paper's 5.6x (organism-gpt2's
    5.1x) leaves only a compressed effect to read: the planted source's median ratio reached
    5.09, and the rule read "reproduced" on 42% of its seeds. The row says the design cannot
    show the paper's size, and names the layer-0 separation that would."""
    s = _positional(ratio=5.0, ratio_low=4.6, ratio_high=5.1, base_separation=0.389)
    row = _rows("bifurcation", s)["p1-bifurcation-homograph-ratio"]
    assert row.verdict == "undecidable at this design", row.reason
    assert "below the paper's 5.6x" in row.reason and "less than 0.357" in row.reason
    s.update(ratio_ceiling=2 / 0.35, base_separation=0.35)
    assert _rows("bifurcation", s)["p1-bifurcation-homograph-ratio"].verdict == "reproduced"


def test_an_estimate_outside_its_ci_is_not_judged():
    row = _rows("convergence", _peak(peak=0.5, ci_low=0.3, ci_high=0.45))["p1-convergence-peak"]
    assert row.verdict == "not testable" and "outside its own CI" in row.reason
    assert math.isfinite(row.measured)
