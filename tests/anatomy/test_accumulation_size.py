"""The accumulation row's test holds its size where a sign flip does not: per-unit interactions
with mean 0 that are skewed to the left (many units slightly superadditive, a few strongly
subadditive), and the calibration's null keeps that threat."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

from lamina.anatomy.calibration_sources import robustness_sweep
from lamina.anatomy.importance import unit_sums
from lamina.anatomy.robustness import interaction_p
from lamina.evidence.stats import bootstrap_t_test, sign_flip_test

N_UNITS, DRAWS, B = 48, 1_000, 2_000  # the chapter's units of held-out text


def _rates(draw: Callable[[np.random.Generator], np.ndarray]) -> tuple[float, float]:
    """(sign-flip rate, interaction_p rate) of rejecting "greater" at 5% over DRAWS samples."""
    rng = np.random.default_rng(11)
    flip = both = 0
    for r in range(DRAWS):
        x = draw(rng)
        flip += sign_flip_test(x, B, r, alternative="greater") <= 0.05
        both += interaction_p(x, B, r, "greater") <= 0.05
    return flip / DRAWS, both / DRAWS


@pytest.mark.slow
def test_a_left_skewed_interaction_breaks_the_sign_flip_but_not_the_accumulation_test():
    # mean 0, sd 1, skewness -2: a mirrored exponential
    flip, both = _rates(lambda rng: 1.0 - rng.standard_exponential(N_UNITS))
    assert flip > 0.065, f"the threat: a sign flip alone rejects {flip:.1%} of zero-mean draws"
    assert both <= 0.065, f"the accumulation test rejects {both:.1%} of zero-mean draws"


@pytest.mark.slow
def test_the_accumulation_test_holds_its_size_on_symmetric_heavy_tails():
    # t with 3 df: the bootstrap-t alone is anti-conservative here; the sign flip is exact
    _, both = _rates(lambda rng: rng.standard_t(3, N_UNITS))
    assert both <= 0.065, f"the accumulation test rejects {both:.1%} of t(3) draws"


def test_bootstrap_t_test_finds_a_mean_and_refuses_what_it_cannot_test():
    rng = np.random.default_rng(0)
    assert bootstrap_t_test(rng.normal(1.0, 1.0, 30), 2_000, 0) < 0.01
    assert bootstrap_t_test(rng.normal(1.0, 1.0, 30), 2_000, 0, alternative="less") > 0.9
    assert bootstrap_t_test(rng.normal(0.0, 1.0, 30), 2_000, 0) > 0.01
    with pytest.raises(ValueError, match="at least 3"):
        bootstrap_t_test([1.0, 2.0], 100, 0)
    with pytest.raises(ValueError, match="every value is equal"):
        bootstrap_t_test([1.0, 1.0, 1.0], 100, 0)
    with pytest.raises(ValueError, match="alternative"):
        bootstrap_t_test([1.0, 2.0, 3.0], 100, 0, alternative="two-sided")  # type: ignore[arg-type]


def test_the_calibration_null_keeps_the_skew_threat():
    skews = []
    for seed in range(20):
        sweep, docs, joint = robustness_sweep("null", seed)
        us = unit_sums(sweep[sweep["surgery"] == "predicted"].sort_values("layer"), docs)
        g = np.unique(np.asarray(docs)[: len(joint)], return_inverse=True)[1]
        interaction = (np.bincount(g, joint) - us.base - (us.layers - us.base[:, None]).sum(1)) / us.counts
        skews.append(stats.skew(interaction))
    assert np.median(skews) < -1.0, f"median skewness {np.median(skews):+.2f}"
