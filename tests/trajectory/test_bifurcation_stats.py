"""The bifurcation test: an onset that does not move with the effect's size, and a
shuffled-layers control that can fail (issue 33, items 4 and 5)."""

import numpy as np
import pandas as pd
import pytest

from lamina.states.controls import shuffle_layers
from lamina.trajectory.bifurcation_stats import bifurcation_test, ramp_onset
from lamina.trajectory.judging import control_result
from lamina.trajectory.stat_tests import control_summaries, paper1_test, shuffle_options


def test_the_onset_does_not_move_with_the_size_of_the_effect():
    """Known answer: one ramp from layer 2 of 12 at full and at half height, with the same
    noise. On 2a683dc (the first layer past 10% of the largest rise) it read layer 3.45 at full
    and 3.55 at half size on average (the ramp's first step is 10% of a 10-layer ramp, so the
    noise decides), never its start; the fitted ramp's start is 2 at both."""
    layers = np.arange(13)
    ramp = np.clip((layers - 2) / 10, 0, 1)
    rng = np.random.default_rng(0)
    got = []
    for _ in range(20):
        noise = rng.normal(0, 0.02, 13)
        got.append((ramp_onset(ramp + noise, 0), ramp_onset(0.5 * ramp + noise, 0)))
    full, half = np.array(got).T
    assert abs(full.mean() - half.mean()) < 0.2
    assert full.mean() == pytest.approx(2.0, abs=0.25) and half.mean() == pytest.approx(2.0, abs=0.25)
    assert ramp_onset(3 * ramp, 0) == ramp_onset(ramp, 0) == 2.0
    assert np.isnan(ramp_onset(-ramp, 0))  # no rise


def _step_pairs(seed: int, n: int = 20, m: int = 9, d: int = 24) -> tuple[np.ndarray, pd.DataFrame]:
    """Homograph and control pairs whose contexts coincide at layer 0, separate by s at layer 1
    and then jump: homographs to 5.6 s from layer 2 on, controls to 1.1 s (a step, not a
    ramp: the separation does not depend on the layers' order after layer 1)."""
    rng = np.random.default_rng(seed)
    prof = {"ambiguous": np.r_[0.0, 0.1, np.full(m - 2, 0.56)],
            "control": np.r_[0.0, 0.1, np.full(m - 2, 0.11)]}  # fmt: skip
    rows, x = [], []
    for p in range(n):
        for role in ("ambiguous", "control"):
            base = rng.normal(size=d)
            z = rng.normal(size=d)
            z -= (z @ base) / (base @ base) * base
            z *= np.linalg.norm(base) / np.linalg.norm(z)
            g = prof[role] * np.exp(rng.normal(0, 0.05))
            for k, sense in enumerate(("ctx1", "ctx2")):
                x.append(base[None] + (1 if k else -1) * 0.5 * g[:, None] * z[None])
                rows.append({"role": role, "pair_id": f"p{p}", "sense": sense})
    return np.stack(x), pd.DataFrame(rows)


def test_a_shuffled_layers_control_keeps_an_effect_that_does_not_depend_on_layer_order():
    """Known answer: a homograph separation that is a step after the baseline layer survives a
    shuffle of the other layers. On 2a683dc every prompt's layers were shuffled on their own,
    delta(L) and delta(0) became exchangeable, and the excess vanished whatever the states
    (at most 0.075 of an adversarial split remained): a control that could not fail."""
    x, t = _step_pairs(0)
    layers = list(range(x.shape[1]))
    s = paper1_test("bifurcation", x, t, layers, n_bootstrap=100, seed=0)
    assert s["base_layer"] == 1 and s["excess"] > 4
    kept = shuffle_layers(x, 1, **shuffle_options("bifurcation", t, s))
    assert np.array_equal(kept[:, :2], x[:, :2])  # the baseline stays in place
    per_prompt = shuffle_layers(x, 1)
    out = control_summaries("bifurcation", {"kept": kept, "per prompt": per_prompt}, t, layers)
    assert control_result(s, out["kept"]).fraction > 0.5  # the control can fail
    assert control_result(s, out["per prompt"]).fraction < 0.5  # the old one could not


def test_rotary_pairs_use_layer_one_as_the_ratios_baseline():
    x, t = _step_pairs(1)
    a = t.index[(t.role == "ambiguous") & (t.sense == "ctx1")]
    b = t.index[(t.role == "ambiguous") & (t.sense == "ctx2")]
    ca = t.index[(t.role == "control") & (t.sense == "ctx1")]
    cb = t.index[(t.role == "control") & (t.sense == "ctx2")]
    s = bifurcation_test(x[a], x[b], x[ca], x[cb], n_bootstrap=50)
    assert s["base_layer"] == 1 and not s["base_defined"] and s["n_zero_base"] == 20
    assert s["onset"] == pytest.approx(1 / 8, abs=0.1)
