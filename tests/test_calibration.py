"""Known-answer sources and the calibration harness (small N: the book page uses more)."""

import numpy as np
import pandas as pd
import pytest

from lamina.chapters.states import load_model_states
from lamina.chapters.trajectory import Convention, TrajectoryConfig
from lamina.evidence.stats import wilson
from lamina.trajectory.calibration import calibrate, run_seed, summarise
from lamina.trajectory.synthetic import synthetic_states

MAIN = {
    "p1-convergence-peak",
    "p1-curvature-gap",
    "p1-bifurcation-ratio",
    "p1-three-phase-bands",
}


def test_synthetic_sources_flow_through_the_state_loader():
    t = pd.DataFrame({"prompt": ["a cat", "two dogs ran"], "family": ["lexical", "reasoning"]})
    ms = load_model_states("synthetic-planted", t, TrajectoryConfig(model="synthetic-planted"))
    x, layers = ms.pools["mean"].states(Convention("mean"))
    assert x.shape == (2, 13, 128) and layers == list(range(13))
    assert list(ms.pools["mean"].n_tokens) == [2, 3]
    assert ms.random_input is not None and ms.control is not None
    a = synthetic_states(t, "null", 3)
    assert np.array_equal(a, synthetic_states(t, "null", 3))
    assert not np.array_equal(a, synthetic_states(t, "null", 4))
    with pytest.raises(ValueError, match="kind"):
        synthetic_states(t, "planted-ish", 0)


POWER_SEEDS = range(10)


@pytest.mark.slow  # 10 seeds x (null, planted) x the four tests: about 2 min
def test_known_answers_in_the_harness():
    """Over seeds 0-9 in the calibration harness: no claim row on the null is "reproduced",
    and each main claim on the planted source (the paper's sizes) is reproduced in at least 8
    of the 10 seeds (the issue's power target, 80%; a fixed seed can miss by chance: the
    chapter-path acceptance over seeds 0-4 is tests/test_known_answers.py). Fails on a
    source whose effect is not planted or planted too small (the bifurcation source before
    its controls were planted realised 4.7x, 'partially' on 2 of seeds 0-4)."""
    kw = {"n_bootstrap": 100, "vanish": False}
    hits = dict.fromkeys(MAIN, 0)
    for seed in POWER_SEEDS:
        null = run_seed("null", seed, **kw)
        assert [c.claim_id for c in null if c.verdict == "reproduced"] == [], seed
        for c in run_seed("planted", seed, **kw):
            hits[c.claim_id] = hits.get(c.claim_id, 0) + (c.verdict == "reproduced")
    assert {k: hits[k] >= 8 for k in MAIN} == dict.fromkeys(MAIN, True), hits


def test_calibration_summary_shape_and_wilson():
    runs = calibrate(range(2), tests=("bifurcation", "three_phase"), n_bootstrap=50)
    s = summarise(runs).set_index("claim_id")
    assert s.loc["p1-bifurcation-ratio", "n_seeds"] == 2
    assert {"power", "power_half", "fpr_halfwidth", "calibrated"} <= set(s.columns)
    # a row "not testable" on the null is not calibrated (not 0% FPR), naming why
    assert not s.loc["p1-bifurcation-onset", "calibrated"]
    assert "no bifurcation" in s.loc["p1-bifurcation-onset", "not_calibrated"]
    assert np.isnan(s.loc["p1-bifurcation-onset", "fpr"])
    assert s.loc["p1-three-phase-bands", "calibrated"]
    _, lo, hi = wilson(0, 20)
    assert lo == pytest.approx(0.0, abs=1e-12) and 0.1 < hi < 0.2


def test_calibration_runs_at_the_chapters_sizes():
    """The calibration reads the chapters' prompt sets from lamina.trajectory.sizes, which the
    chapters read too; bifurcation's pooling matches its notebook's parameter."""
    import re
    from pathlib import Path

    from lamina.chapters.bifurcation import SPEC as BIF
    from lamina.chapters.convergence import SPEC as CONV
    from lamina.trajectory.calibration import _families, _tables
    from lamina.trajectory.sizes import CHAPTER_FAMILIES, CHAPTER_POOLING

    assert CONV.families == CHAPTER_FAMILIES["convergence"]
    assert BIF.families == CHAPTER_FAMILIES["bifurcation"]
    tb = _tables()
    assert len(_families(tb, "convergence")) == 180
    assert _families(tb, "bifurcation")["pair_id"].nunique() == 20
    nb = (Path(__file__).resolve().parents[1] / "notebooks" / "bifurcation.py").read_text()
    assert re.search(r'^pooling = "(\w+)"', nb, re.M).group(1) == CHAPTER_POOLING["bifurcation"]


@pytest.mark.slow  # each spawned worker solves the planted sources' gains once (about 1 min)
def test_parallel_calibration_equals_the_serial_run_and_is_cached(tmp_path, monkeypatch):
    """Seeds run in 2 spawned worker processes give the serial rows exactly; each seed's rows
    are cached under a key of the options (and code, prompts), and a warm call computes
    nothing."""
    from lamina.trajectory import calibration

    kw = {"tests": ("three_phase",), "n_bootstrap": 20, "n_permutations": 200}
    serial = calibrate(range(3), **kw)
    parallel = calibrate(range(3), jobs=2, cache=tmp_path, **kw)
    # the workers run one BLAS thread, this process several: sums may differ in the last
    # bits, so numbers agree to rounding and every verdict and reason exactly
    pd.testing.assert_frame_equal(serial, parallel, check_exact=False, rtol=1e-9, atol=1e-12)
    assert len(list(tmp_path.glob("*/seed-*.json"))) == 3

    def boom(*args, **kwargs):
        raise AssertionError("a cached seed was computed again")

    monkeypatch.setattr(calibration, "_timed_seed", boom)
    warm = calibrate(range(3), cache=tmp_path, **kw)
    pd.testing.assert_frame_equal(parallel, warm)  # the cache gives back what was computed
    assert warm.attrs["seconds"] == parallel.attrs["seconds"]
    with pytest.raises(AssertionError, match="computed again"):  # other options: another key
        calibrate(range(1), cache=tmp_path, **{**kw, "n_bootstrap": 21})
    with pytest.raises(ValueError, match="jobs"):
        calibrate(range(1), jobs=0, **kw)
