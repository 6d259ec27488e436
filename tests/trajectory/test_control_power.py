"""The positive and negative controls of the convergence claim's shuffled-layers control
(lamina.trajectory.control_power): the check can find the control able to decide, unable to
fail and unable to remove, and an unable control makes the vanish row undecidable."""

import numpy as np
import pandas as pd
import pytest

from lamina.evidence.decide import ControlResult
from lamina.states.controls import shuffle_layers
from lamina.trajectory.control_power import (
    _relabel,
    invariant_share,
    shuffled_cannot_fail,
    shuffled_cannot_remove,
)
from lamina.trajectory.convergence_stats import (
    convergence_test,
    distance_stack,
    item_units,
    shuffled_distance_stack,
)
from lamina.trajectory.judging import judge_chapter
from lamina.trajectory.sizes import CHAPTER_POOLING, chapter_prompts
from lamina.trajectory.stat_tests import control_summaries, paper1_test
from lamina.trajectory.synthetic import synthetic_states

TABLE = chapter_prompts("convergence")


def _peak(x: np.ndarray, seed: int, n_permutations: int = 200) -> dict:
    return paper1_test("convergence", x, TABLE, list(range(x.shape[1])), n_bootstrap=50,
                       n_permutations=n_permutations, seed=seed)  # fmt: skip


@pytest.mark.parametrize("seed", [0, 1])
def test_on_the_realistic_background_shuffled_layers_remove_a_layer_invariant_code(seed):
    """On the background fitted to SmolLM2's states, at the paper's convergence, a category code
    of one direction at every layer keeps under half its peak when the layers are shuffled
    (0.42 at seeds 0 and 1 when written): the control cannot fail there."""
    x = synthetic_states(TABLE, "survivor", seed, CHAPTER_POOLING["convergence"])
    s = _peak(x, seed)
    c = invariant_share(x, TABLE, s["effect"], seed)
    assert abs(c.peak - s["effect"]) < 1e-3 * s["effect"]  # the code is matched to the effect
    assert 0.2 < c.share < 0.5 and c.can_fail is False, c
    assert c.specific_share < 0.25 and c.can_remove is True, c  # it removes a per-layer code
    why = shuffled_cannot_fail(c)["shuffled layers"]
    assert f"{c.share:.0%}" in why and "layer-invariant" in why


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_at_the_fitted_models_own_peak_the_control_has_no_floor_and_cannot_fail(seed):
    """At the peak SmolLM2 itself has at the background's layers (0.0157). A single shuffle of
    these states gave a peak of that size by chance (0.014-0.042 with no code at all), so a
    code of each layer's own kept 112% and 180% of its peak and the control could not remove
    anything. On the expected shuffled distances there is no such floor: the per-layer code
    keeps 4%, and the real effect's control keeps under a tenth. What is left is the mix of
    depths, which dilutes a layer-invariant code as well (9% kept when written): the control
    cannot fail, and the check says so."""
    x = synthetic_states(TABLE, "removable-model", seed, CHAPTER_POOLING["convergence"])
    layers = list(range(x.shape[1]))
    s = _peak(x, seed, 9_999)  # a decision at the claim's alpha 0.001
    shuffled = control_summaries("convergence", {"shuffled layers": shuffle_layers(x, seed)},
                                 TABLE, layers, seed=seed)["shuffled layers"]  # fmt: skip
    assert shuffled["effect"] < 0.1 * s["effect"], (shuffled["effect"], s["effect"])
    c = invariant_share(x, TABLE, s["effect"], seed)
    assert c.specific_share < 0.25 and c.can_remove is True, c
    assert c.can_fail is False and c.share < 0.5, c
    assert shuffled_cannot_remove(c) == ""
    why = shuffled_cannot_fail(c)
    removed = {"shuffled layers": ControlResult(0.05, 0.5, 0.1),
               "random embeddings": ControlResult(0.02, 0.5, 0.08)}
    rows = {r.claim_id: r for r in judge_chapter("convergence", s, "m", "c", controls=removed,
                                                  cannot_fail=why)}  # fmt: skip
    row = rows["p1-convergence-controls-vanish"]
    assert row.verdict == "undecidable at this design" and "layer-invariant" in row.reason


def test_the_shuffled_distances_are_the_mean_over_shuffles():
    """The convergence control's distance stack is the expectation of one shuffle's stack: a
    Monte-Carlo mean over shuffles approaches it, every layer carries the same matrix, and a
    shuffle of the states leaves it unchanged."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 4, 5)) + np.arange(4)[None, :, None]  # depth-dependent means
    exact = shuffled_distance_stack(x)
    mc = np.mean([distance_stack(shuffle_layers(x, k)) for k in range(4_000)], axis=0)
    assert exact.shape == (4, 6, 6) and np.allclose(exact, exact[0])
    err = np.abs(mc - exact)  # Monte-Carlo error: sd about 0.005 per entry
    assert err.mean() < 0.01 and err.max() < 0.04, (err.mean(), err.max())
    same_layer = distance_stack(x).mean(0)  # what a shuffle shared by all prompts would keep
    assert np.abs(same_layer - exact[0]).max() > 0.1
    assert np.allclose(shuffled_distance_stack(shuffle_layers(x, 7)), exact)
    assert np.allclose(np.diagonal(exact[0]), 0.0)
    with pytest.raises(ValueError, match="distances must be"):
        convergence_test(x, np.array([0, 0, 0, 1, 1, 1]), [0, 1, 2, 3], distances=exact[:2])


def test_where_layers_share_their_structure_the_control_can_fail():
    """States whose layers are alike (no per-layer direction or norm): a layer-invariant code
    survives a shuffle, so the check says the control can fail."""
    rng = np.random.default_rng(0)
    n, m, d = len(TABLE), 9, 64
    own = rng.standard_normal((n, 1, d))
    x = own + 0.5 * rng.standard_normal((n, m, d))  # every layer the same distribution
    c = invariant_share(x, TABLE, 0.3, 0)
    assert c.share > 0.8 and c.can_fail is True, c
    assert c.specific_share < 0.5 and c.can_remove is True, c
    assert shuffled_cannot_fail(c) == {} and shuffled_cannot_remove(c) == ""


def test_the_relabelling_keeps_units_whole_and_category_sizes():
    units = item_units(TABLE)
    labels = TABLE["category"].astype(str).to_numpy()
    y = _relabel(labels, units, np.random.default_rng(3))
    assert sorted(y) == sorted(labels)
    assert pd.Series(y).groupby(units).nunique().max() == 1  # one label per unit
    assert (y != labels).mean() > 0.5  # unrelated to the real categories


def test_the_check_refuses_what_it_cannot_test():
    x = np.zeros((len(TABLE), 3, 8))
    with pytest.raises(ValueError, match="states must be"):
        invariant_share(x[:5], TABLE, 0.3)
    c = invariant_share(x + 1.0, TABLE, 0.0)
    assert c.can_fail is None and "no positive peak" in c.reason
    assert shuffled_cannot_fail(c) == {} and shuffled_cannot_remove(c) == ""


@pytest.mark.slow
def test_an_unable_shuffled_control_makes_the_convergence_vanish_row_undecidable():
    x = synthetic_states(TABLE, "removable", 0, CHAPTER_POOLING["convergence"])
    s = _peak(x, 0, 9_999)  # a decision at the claim's alpha 0.001
    removed = {"shuffled layers": ControlResult(0.05, 0.5, 0.1),
               "random embeddings": ControlResult(0.02, 0.5, 0.08)}
    cannot = shuffled_cannot_fail(invariant_share(x, TABLE, s["effect"], 0))
    rows = {r.claim_id: r for r in judge_chapter("convergence", s, "m", "c", controls=removed,
                                                  cannot_fail=cannot)}  # fmt: skip
    row = rows["p1-convergence-controls-vanish"]
    assert row.verdict == "undecidable at this design"
    assert "layer-invariant" in row.reason
    plain = {r.claim_id: r for r in judge_chapter("convergence", s, "m", "c", controls=removed)}
    assert plain["p1-convergence-controls-vanish"].verdict == "reproduced"


def test_a_flat_profile_names_no_peak_layer_and_a_real_one_does():
    """The shuffled control's expected stack is the same at every layer, so its profile is flat
    and no layer is its peak: the summary says NaN rather than the first layer (review of
    stop 60). The unshuffled states of the same prompts still name their peak."""
    rng = np.random.default_rng(2)
    labels = np.repeat([0, 1, 2], 4)
    x = rng.standard_normal((12, 5, 6))
    x[:, 3] += 3.0 * np.eye(6)[labels]  # a category code at layer 3 only
    real = convergence_test(x, labels, list(range(5)), n_bootstrap=20, n_permutations=20)
    assert real["peak_layer"] == 3 and real["peak_fraction"] == 0.75
    flat = convergence_test(x, labels, list(range(5)), n_bootstrap=20, n_permutations=20,
                            distances=shuffled_distance_stack(x))  # fmt: skip
    assert np.ptp(flat["profile"]) < 1e-12
    assert all(np.isnan(flat[k]) for k in ("peak_layer", "peak_fraction", "fraction_low",
                                           "fraction_high"))  # fmt: skip
    assert np.isfinite(flat["peak"])  # the value is still the control's (flat) level


def test_the_expected_shuffle_is_refused_when_convergence_would_fix_layers(monkeypatch):
    """control_summaries tests convergence's shuffled layers on the expectation over free
    permutations; if shuffle_options ever fixed a layer for convergence, that expectation
    would be wrong, and the call must fail rather than test it."""
    import lamina.trajectory.stat_tests as st

    x = np.random.default_rng(0).standard_normal((len(TABLE), 3, 4))
    monkeypatch.setattr(st, "shuffle_options", lambda name, table, s: {"fixed": (0,)})
    with pytest.raises(ValueError, match="fixes layers or groups"):
        control_summaries("convergence", {"shuffled layers": x}, TABLE, [0, 1, 2])
