"""The six rule defects of issue 22, each pinned by a test that failed on the code before it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lamina.evidence.claims import Claim
from lamina.evidence.resampling import max_permutation_test
from lamina.trajectory.stat_tests import (
    bifurcation_test,
    convergence_test,
    item_units,
    three_phase_test,
)
from lamina.trajectory.verdicts import (
    IID_RANDOM_INPUTS,
    bifurcation_claims,
    convergence_claims,
    three_phase_claims,
    universal_claim,
    vanish_claim,
)


def _real(verdict: str = "reproduced") -> Claim:
    return Claim(claim_id="p1-convergence-peak", claim="c", paper_value="v", model="m",
                 measured=0.5, verdict=verdict)


def test_vanish_needs_every_named_control() -> None:
    """Defect 1: a vanish row judged on shuffled layers alone read "reproduced"."""
    row = vanish_claim("convergence", "Convergence", _real(), {"shuffled layers": (0.1, 0.6)})
    assert row.verdict == "not testable"
    assert "random embeddings" in row.reason
    nan = vanish_claim("convergence", "Convergence", _real(),
                       {"shuffled layers": (0.1, 0.6), "random embeddings": (math.nan, None)})
    assert nan.verdict == "not testable" and "random embeddings" in nan.reason
    both = vanish_claim("convergence", "Convergence", _real(),
                        {"shuffled layers": (0.1, 0.6), "random embeddings": (0.0, 0.9)})
    assert both.verdict == "reproduced"


def _item_null(seed: int, n_cat: int = 3, n_items: int = 10, per_item: int = 3):
    """States with a common direction and an item component (an item's prompts share it) and
    no category effect: (n, 4, 16) states, labels (n,), item units (n,)."""
    rng = np.random.default_rng(seed)
    d, m = 16, 4
    common = rng.normal(size=d) * 3
    xs, labels, units = [], [], []
    for c in range(n_cat):
        for i in range(n_items):
            item = rng.normal(size=(1, d)) * 1.5
            for _ in range(per_item):
                xs.append(common + item + rng.normal(size=(m, d)))
                labels.append(f"c{c}")
                units.append(f"c{c}:i{i}")
    return np.stack(xs), np.array(labels), np.array(units)


def test_convergence_permutes_items_not_prompts() -> None:
    """Item-level permutation: on an item-clustered null the prompt-level p is tiny (the old
    behaviour, units=None), the item-level p is not."""
    x, lab, units = _item_null(0)
    layers = [0, 1, 2, 3]
    prompt = convergence_test(x, lab, layers, n_bootstrap=50, n_permutations=500, seed=0)
    item = convergence_test(x, lab, layers, n_bootstrap=50, n_permutations=500, seed=0,
                            units=units)
    assert prompt["p"] <= 0.01
    assert item["p"] > 0.05
    assert item["n_units"] == 30 and 0 < item["p_mc_error"] < 0.05


def test_convergence_item_units_from_the_table() -> None:
    t = pd.DataFrame({"category": ["a", "a", "b"], "item": ["x", "x", "y"]})
    assert list(item_units(t)) == ["a:x", "a:x", "b:y"]
    assert item_units(t.drop(columns="item")) is None


def test_permutation_p_needs_enough_exceedances() -> None:
    """Defect 5c: 2,000 permutations decided p < 0.001 on 2 exceedances; now a decision at
    alpha = 0.001 needs >= 10 exceedances' worth of permutations, and p carries its MC error."""
    s = {"peak": 0.5, "ci_low": 0.45, "ci_high": 0.55, "p": 1 / 2001, "n_permutations": 2000,
         "rank_biserial": 0.9, "peak_fraction": 0.6, "fraction_low": 0.5,
         "fraction_high": 0.8, "p_mc_error": 0.0005}
    assert convergence_claims(s, "m", "c")[0].verdict == "not testable"
    s.update(n_permutations=10_000, p=1 / 10_001)
    row = convergence_claims(s, "m", "c")[0]
    assert row.verdict == "reproduced" and "Monte-Carlo SE" in row.test
    null = max_permutation_test(lambda y: np.array([float(np.mean(y[:5]))]), np.arange(20.0),
                                n_permutations=400, seed=1)
    p = null["p_value"]
    assert null["mc_error"] == pytest.approx(np.sqrt(p * (1 - p) / 400))
    assert (1 + null["exceedances"]) / 401 == pytest.approx(p)


def test_peak_depth_can_fail_on_its_ci() -> None:
    """Defect 3: a depth CI from the first to the last layer read "reproduced"."""
    s = {"peak": 0.5, "ci_low": 0.45, "ci_high": 0.55, "p": 1 / 10_001, "n_permutations": 10_000,
         "rank_biserial": 0.9, "peak_fraction": 0.6, "fraction_low": 0.0, "fraction_high": 1.0}
    depth = convergence_claims(s, "m", "c")[1]
    assert depth.claim_id == "p1-convergence-peak-depth" and depth.verdict != "reproduced"
    s.update(fraction_low=0.4, fraction_high=0.9)
    assert convergence_claims(s, "m", "c")[1].verdict == "reproduced"
    s.update(peak_fraction=0.1, fraction_low=0.0, fraction_high=0.2)
    assert convergence_claims(s, "m", "c")[1].verdict != "reproduced"


def _rotary_pairs(rng: np.random.Generator, n: int, m: int = 8, d: int = 24) -> tuple:
    """Two contexts of n words whose states coincide at layer 0 (delta(0) = 0, as on a rotary
    model) and separate as s_l = 0.05 ... 0.3 with per-pair noise: (n, m, d) twice."""
    scale = np.linspace(0.0, 0.3, m)
    scale[1] = 0.05
    base = rng.normal(size=(n, 1, d))
    grow = scale[None, :, None] * np.exp(rng.normal(0, 0.3, size=(n, 1, 1)))
    return (base + grow * rng.normal(size=(n, 1, d)) + 0.01 * grow * rng.normal(size=(n, m, d)),
            base + grow * rng.normal(size=(n, 1, d)) + 0.01 * grow * rng.normal(size=(n, m, d)))


def test_bifurcation_baseline_does_not_manufacture_ratios_on_rotary_models() -> None:
    """Defect 2: with delta(0) = 0 the baseline moved to layer 1 and any pair got a ratio near
    6; on a null whose controls separate exactly as homographs do, the main row read
    "partially" or better in most seeds. It may now do so at most at about the test's level."""
    hits = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        a, b = _rotary_pairs(rng, 20)
        ca, cb = _rotary_pairs(rng, 20)
        s = bifurcation_test(a, b, ca, cb, n_bootstrap=200, seed=seed)
        assert s["base_layer"] == 1 and not s["base_defined"] and s["ratio"] > 3
        rows = {c.claim_id: c for c in bifurcation_claims(s, "m", "c")}
        hits += rows["p1-bifurcation-ratio"].verdict in ("reproduced", "partially")
        assert rows["p1-bifurcation-homograph-ratio"].verdict == "not testable"
    assert hits <= 4, hits


def _bands(margin: float, lo: float, hi: float, p: float = 1e-4) -> dict:
    return {"margin": margin, "margin_low": lo, "margin_high": hi, "p": p, "rank_biserial": 0.9}


def test_three_phases_need_a_size_not_a_direction() -> None:
    """Defect 4a: peer-gpt2's margin of 0.006 read "reproduced" on direction alone."""
    assert three_phase_claims(_bands(0.006, 0.003, 0.009), "m", "c")[0].verdict != "reproduced"
    assert three_phase_claims(_bands(0.12, 0.09, 0.15), "m", "c")[0].verdict == "reproduced"


def test_universal_is_its_own_row_over_the_sources() -> None:
    """Defect 4b: "universal across architectures" had no row."""
    ok = [three_phase_claims(_bands(0.12, 0.09, 0.15), f"m{i}", "c")[0] for i in range(3)]
    bad = three_phase_claims(_bands(0.006, 0.003, 0.009), "gpt2", "c")[0]
    assert universal_claim(ok[:2]).verdict == "not testable"
    assert universal_claim(ok).verdict == "reproduced"
    row = universal_claim([*ok, bad])
    assert row.verdict == "not reproduced" and "gpt2" in row.reason
    assert row.claim_id == "p1-three-phase-universal" and row.measured == 0.75


def test_three_phase_units_are_base_words() -> None:
    """Item 2: lexical variants of one base word are one unit in the three-phase test."""
    rng = np.random.default_rng(0)
    sim = rng.normal(0.5, 0.05, size=(24, 12))
    units = np.repeat(np.arange(4), 6)
    s = three_phase_test(sim, units=units, n_bootstrap=50)
    assert s["n_units"] == 4 and three_phase_test(sim, n_bootstrap=50)["n_units"] == 24


def test_reanalysis_convention_is_fixed_in_advance() -> None:
    """Defect 5b: the reanalysis took the convention with the highest peak (Bonferroni on p
    only, the estimate and CI left selected). Now the paper text's convention, whatever peaks."""
    from lamina.chapters.reanalysis import headline_convergence

    def s(peak: float) -> dict:
        return {"peak": peak, "ci_low": peak - 0.05, "ci_high": peak + 0.05, "p": 1e-4,
                "n_permutations": 10_000, "rank_biserial": 0.5, "peak_fraction": 0.5,
                "fraction_low": 0.4, "fraction_high": 0.6}

    sens = pd.DataFrame({"convention": ["paper text", "released code"],
                         "_s": [s(0.2), s(0.5)]})
    row = headline_convergence(sens)
    assert row.measured == 0.2 and "paper text" in row.convention and row.p == 1e-4


def test_a_control_that_cannot_fail_is_no_evidence() -> None:
    """Defect 6: random-embedding draws independent per prompt remove any category effect by
    construction, so convergence and bifurcation "vanished" under them whatever the model did."""
    ctl = {"shuffled layers": (0.1, 0.6), "random embeddings": (0.0, 0.9)}
    row = vanish_claim("convergence", "Convergence", _real(), ctl,
                       cannot_fail={"random embeddings": IID_RANDOM_INPUTS})
    assert row.verdict == "not testable" and "cannot fail" in row.reason
    assert vanish_claim("curvature", "Curvature", _real(), ctl).verdict == "reproduced"


def test_convergence_chapter_judges_the_shared_draw_control() -> None:
    """Defect 6, fixed at the source: the random-embedding control now shares its draws
    (a random vocabulary; on a known-answer source, one draw per unit), so the chapter judges
    the vanish row on it instead of declaring the control void."""
    from lamina.chapters.convergence import run_convergence
    from lamina.chapters.trajectory import TrajectoryConfig

    c = run_convergence(TrajectoryConfig(model="synthetic-planted", seed=0, n_bootstrap=50,
                                         n_permutations=10_000, sensitivity=False)).claims
    row = c.set_index("claim_id").loc["p1-convergence-controls-vanish"]
    assert "cannot fail" not in row["reason"] and "missing" not in row["reason"]
    assert row["verdict"] != "not testable", row["reason"]


def test_released_range_is_computed_from_the_release(tmp_path) -> None:
    """Item 6: RELEASED_RANGE was typed in (0.94, 1.27); it is now read from the release."""
    from lamina.chapters.reanalysis_models import RELEASED_TABLE, released_range

    assert released_range(tmp_path) is None
    path = tmp_path / RELEASED_TABLE
    path.parent.mkdir(parents=True)
    path.write_text("metric,category,mean\ncurvature,a,1.5\ncurvature,b,0.7\nlength_norm,a,3\n")
    assert released_range(tmp_path) == (0.7, 1.5)
    path.write_text("metric,category\ncurvature,a\n")
    with pytest.raises(ValueError, match="mean"):
        released_range(tmp_path)
    real = Path(__file__).resolve().parents[1] / ".." / "shared" / "peer" / "latent-trajectories"
    if (real / RELEASED_TABLE).is_file():
        lo, hi = released_range(real)
        assert round(lo, 2) == 0.94 and round(hi, 2) == 1.27
