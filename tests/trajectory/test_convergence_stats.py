"""The convergence test with items that appear in shared sentence frames (issue 33, item 3)."""

import numpy as np
import pandas as pd
import pytest

from lamina.trajectory import convergence_stats as cs
from lamina.trajectory.convergence_stats import (
    ci_profile,
    ci_profiles,
    convergence_test,
    distance_stack,
    label_codes,
    unit_rows,
)
from lamina.trajectory.sizes import chapter_prompts


def framed_states(seed: int, category: float = 0.8, item: float = 2.0, frame: float = 1.5,
                  m: int = 8, d: int = 48) -> tuple[np.ndarray, pd.DataFrame]:
    """The convergence chapter's 180 prompts (60 items x a topical sentence and two neutral
    frames shared by every category) as states: a frame vector (one per neutral frame, one per
    topical sentence), an item vector shared by an item's three prompts, a category vector
    rising with depth, and noise; every part one draw of the seed."""
    t = chapter_prompts("convergence")
    rng = np.random.default_rng(seed)
    fr = t["frame"].fillna(pd.Series([f"own{i}" for i in range(len(t))])).astype(str)
    vec = {k: rng.normal(size=d) for k in set(fr) | set(t["item"]) | set(t["category"])}
    depth = np.linspace(0, 1, m)[:, None]
    x = np.stack([frame * vec[f] + item * vec[i] + category * depth * vec[c]
                  + rng.normal(size=(m, d))
                  for f, i, c in zip(fr, t["item"], t["category"], strict=True)])  # fmt: skip
    return x, t


@pytest.mark.slow
def test_the_estimate_lies_inside_its_own_ci_with_shared_frames_and_items():
    """Known answer: items in shared frames with a category effect. On 2a683dc the item's own
    prompts in the other frames counted as within-category neighbours in the estimate, and a
    resample that drew an item twice counted its copies' siblings twice: the estimate lay
    outside its own 95% CI in most seeds. Now an item's prompts are left out of each other's
    within-category mean in the estimate and in every resample. (On 2a683dc with these
    states: outside in 5 of 5 seeds, e.g. 0.0873 against [0.0989, 0.1300].)"""
    inside = 0
    units = None
    for seed in range(5):
        x, t = framed_states(seed)
        units = (t["category"] + ":" + t["item"]).to_numpy()
        s = convergence_test(x, t["category"].to_numpy(), list(range(x.shape[1])), n_bootstrap=300,
                             n_permutations=200, seed=seed, units=units)
        inside += s["ci_low"] <= s["peak"] <= s["ci_high"]
    assert inside >= 4


def test_an_items_own_prompts_are_not_its_neighbours():
    """Two categories, two items each, two prompts per item: with its own item left out a
    prompt's within-category neighbours are the other item's prompts only."""
    x = np.zeros((8, 1, 2))
    x[:, 0, 0] = 1.0
    x[[0, 1], 0, 1] = 0.0  # item a (category 0): identical prompts
    x[[2, 3], 0, 1] = 1.0  # item b (category 0)
    x[[4, 5, 6, 7], 0, 1] = [5.0, 5.0, 6.0, 6.0]  # category 1
    lab = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    units = np.array(["a", "a", "b", "b", "c", "c", "d", "d"])
    D = distance_stack(x)
    with_siblings = ci_profile(D, lab)[0]
    without = ci_profile(D, lab, units=units)[0]
    assert without < with_siblings  # the siblings' zero distances inflated the index
    batch = ci_profiles(D, np.stack([lab, lab]), np.ones((2, 8)), units)
    assert np.allclose(batch[:, 0], without)
    # a resample drawing item a twice: its copies are its own unit, never its neighbours
    counts = np.array([[2, 2, 1, 1, 1, 1, 1, 1]], float)
    twice = ci_profiles(D, lab[None], counts, units)[0, 0]
    assert np.isfinite(twice)


@pytest.mark.parametrize("codes", [[0, 1, 2, 3], [0, 0, 0], [2, 0, 1, 0, 2, 2, 1, 0, 0],
                                   list(np.random.default_rng(3).integers(0, 7, 50))])
def test_unit_rows_lists_each_rows_unit_in_order_padded_with_minus_one(codes: list[int]) -> None:
    u = np.asarray(codes)
    table = unit_rows(u)
    width = int(np.bincount(u).max())
    assert table.shape == (len(u), width)
    for i in range(len(u)):
        members = np.flatnonzero(u == u[i])
        assert list(table[i]) == [*members, *[-1] * (width - len(members))]


@pytest.mark.parametrize("labels", [
    np.array([["b", "a", "c"], ["c", "b", "a"]], dtype=object),
    np.array(["zebra", "ant", "ant", "moth"], dtype=object),
    np.array([3, 1, 2, 1]),
    np.array(["x", "y", "x"]),
])  # fmt: skip
def test_label_codes_are_np_uniques_inverse(labels: np.ndarray) -> None:
    expected = np.unique(labels, return_inverse=True)[1].reshape(labels.shape)
    assert np.array_equal(label_codes(labels), expected)


def test_the_sums_by_unit_equal_the_sums_by_row():
    """Where labels and multiplicities are whole units (item-label permutations, item
    resamples), ci_profiles sums over each unit once on D's unit-by-unit sums; the profiles are
    those of the row-by-row sums, for units of unequal sizes too, and a batch whose labels or
    counts split a unit goes row by row (before, every batch did)."""
    rng = np.random.default_rng(4)
    n, m = 60, 5
    units = rng.integers(0, 23, n).astype(str)  # 23 units of unequal sizes
    _, u = np.unique(units, return_inverse=True)
    unit_label = rng.permutation(np.arange(23) % 4)
    D = distance_stack(rng.normal(size=(n, m, 8)) + np.eye(8)[unit_label[u] * 2][:, None, :])
    perms = np.stack([rng.permutation(unit_label)[u] for _ in range(30)])  # (30, n)
    counts = np.stack([np.bincount(rng.choice(23, 23), minlength=23)[u] for _ in range(30)])
    split = np.stack([rng.permutation(perms[0]) for _ in range(5)])  # rows, not units
    for labels, c in ((perms, np.ones(perms.shape)), (np.broadcast_to(perms[0], counts.shape),
                                                      counts.astype(float)),
                      (split, np.ones(split.shape))):  # fmt: skip
        rows = cs._by_rows(D, label_codes(labels), np.asarray(c, float), units)
        got = ci_profiles(D, labels, c, units)
        assert np.allclose(got, rows, rtol=0, atol=1e-12, equal_nan=True)
    assert np.isfinite(rows).all()
    # a resample that leaves a unit's category with no other unit has no within neighbour
    lonely = np.zeros((1, n))
    lonely[0, u == 0] = 1.0
    lonely[0, unit_label[u] != unit_label[0]] = 1.0
    assert np.allclose(ci_profiles(D, unit_label[u][None], lonely, units),
                       cs._by_rows(D, label_codes(unit_label[u][None]), lonely, units),
                       equal_nan=True)  # fmt: skip
