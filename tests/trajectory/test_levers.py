"""The levers solve each effect on the statistic its chapter tests (lamina.trajectory.levers)."""

import numpy as np

from lamina.trajectory import layerwise_cosine
from lamina.trajectory.fitted import background
from lamina.trajectory.levers import statistic
from lamina.trajectory.phase_stats import three_phase_test
from lamina.trajectory.realistic import Levers, compose, draw, source_tokens
from lamina.trajectory.sizes import CHAPTER_POOLING, chapter_mask, chapter_prompts
from lamina.trajectory.stat_tests import units_of


def test_the_null_is_flattened_on_the_margin_the_chapter_estimates():
    """The null's flattening is solved on the lever's "margin"; it must be the three-phase
    test's own estimate (band means per independent unit: a lexical variant's unit is its base
    word), or the null keeps a margin the chapter then finds. At 3d1884f the lever weighed
    prompts, not units (this test fails there): on null seeds 0 and 1 the lever read +0.0002
    while the test estimated +0.010 with its CI above 0, and the bands row read present on 4 of
    4 null seeds."""
    pool = CHAPTER_POOLING["three_phase"]
    t, bg = chapter_prompts("three_phase"), background(pool)
    x = compose(t, draw(t, 12_345, bg), bg, Levers(neutral=0.3, phi=0.2))  # (n, L+1, d)
    rows = chapter_mask("three_phase", t, source_tokens(t, bg))
    lever = statistic("margin", t, bg)(x)
    test = three_phase_test(np.asarray(layerwise_cosine(x[rows])), units=units_of(t[rows]),
                            n_bootstrap=50, seed=0)
    assert np.isclose(lever, test["margin"], atol=1e-9), (lever, test["margin"])


def test_the_model_sized_sources_carry_the_peak_the_fit_measures_on_the_model():
    """The survivor and removable sources at the fitted model's own size (levers
    "planted-model") have the convergence peak that lamina.trajectory.fit.model_effects
    measures, by the same function (on SmolLM2: lamina.trajectory.fitted.EFFECTS), within the
    spread of one draw; the paper's planted source has its own, 30 times larger."""
    from lamina.trajectory.fit import model_effects
    from lamina.trajectory.fitted import EFFECTS
    from lamina.trajectory.synthetic import synthetic_states, synthetic_tokens

    t = chapter_prompts("convergence")
    target = EFFECTS["convergence_peak"]
    for kind in ("survivor-model", "removable-model", "planted"):
        x = synthetic_states(t, kind, 3, CHAPTER_POOLING["convergence"])  # (n, 13, d)
        fit = {"table": t, "states": {CHAPTER_POOLING["convergence"]: x},
               "n_tokens": synthetic_tokens(t)}
        peak = model_effects(fit)["convergence_peak"]
        if kind == "planted":
            assert peak > 20 * target, peak
        else:
            assert abs(peak - target) < 0.25 * target, (kind, peak, target)
