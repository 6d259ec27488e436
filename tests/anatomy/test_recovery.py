"""Recovery time resolved between evaluations, so that layers rank rather than tie."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lamina.anatomy.recovery import crossing_step, measure_recovery, speed_rank
from lamina.chapters.layer_anatomy.config import BUDGETS


def test_crossing_step_interpolates_in_log_ppl_between_evaluations():
    curve = [(0, 100.0), (1, 40.0), (2, 10.0)]
    step = crossing_step(curve, 20.0)
    assert 1 < step < 2
    assert np.isclose(step, 1 + np.log(40 / 20) / np.log(40 / 10))
    assert crossing_step([(0, 10.0)], 20.0) == 0.0
    assert crossing_step([(0, 100.0), (1, 50.0)], 20.0) is None


def test_layers_recovering_between_the_same_two_evaluations_still_rank():
    """With evaluation every 3 steps (2a683dc's budget) both layers read 3 steps: a tie."""
    a = speed_rank([(0, 100.0), (1, 60.0), (2, 30.0), (3, 19.0)], 18.0, 20.0, 12)
    b = speed_rank([(0, 100.0), (1, 80.0), (2, 50.0), (3, 19.9)], 18.0, 20.0, 12)
    assert a < b < 3


def test_censored_layers_rank_after_recovered_ones_by_the_damage_left():
    ok = speed_rank([(0, 100.0), (12, 19.0)], 18.0, 20.0, 12)
    near = speed_rank([(0, 100.0), (12, 25.0)], 18.0, 20.0, 12)
    far = speed_rank([(0, 100.0), (12, 60.0)], 18.0, 20.0, 12)
    assert ok < 12 < near < far


def test_the_pretrained_budget_evaluates_after_every_step():
    b = BUDGETS["pretrained"]
    assert b["recovery_eval_every"] == 1 and b["recovery_budget"] >= 12
    assert b["recovery_layers"] >= 8


def test_a_recovery_correlation_with_too_few_layers_says_so():
    imp = pd.Series([1.0, 2.0, 3.0], index=[0, 1, 2])
    rec = pd.DataFrame(
        {
            "layer": [0, 1, 2],
            "steps_ranked": [1.0, 2.0, 3.0],
            "perturbed_ppl": 30.0,
            "baseline_ppl": 20.0,
            "recovered": True,
        }
    )
    assert "needs 5" in measure_recovery(imp, rec, 100, 0)["untestable"]
