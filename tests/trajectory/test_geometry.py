"""Properties of lamina.trajectory and lamina.trajectory.phases (issue 4): invariances, known paths, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina import trajectory as g
from lamina.states.controls import permute_labels

FAST = settings(max_examples=25, deadline=None)
seeds = st.integers(0, 2**32 - 1)


def random_states(seed: int, n: int = 6, layers: int = 7, d: int = 5) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, layers, d))


def random_rotation(seed: int, d: int) -> np.ndarray:
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def clusters(seed: int, n_per: int = 20, layers: int = 4, d: int = 8, spread: float = 0.05):
    """Two tight clusters around orthogonal centres, at every layer."""
    rng = np.random.default_rng(seed)
    centres = np.eye(d)[:2]
    labels = np.repeat(["a", "b"], n_per)
    x = centres[np.repeat([0, 1], n_per)][:, None, :] + spread * rng.standard_normal(
        (2 * n_per, layers, d)
    )
    return x, labels


# ----------------------------------------------------------------------------- known paths
@FAST
@given(seed=seeds, layers=st.integers(3, 12), d=st.integers(2, 9))
def test_curvature_of_straight_path_is_zero(seed: int, layers: int, d: int) -> None:
    rng = np.random.default_rng(seed)
    direction = rng.standard_normal(d)
    steps = rng.uniform(0.01, 3.0, layers)
    path = rng.standard_normal(d) + np.cumsum(steps)[:, None] * direction
    kappa = g.curvature(path[None])
    assert kappa.shape == (1, layers - 2)
    np.testing.assert_allclose(kappa, 0.0, atol=1e-6)


@FAST
@given(seed=seeds, layers=st.integers(3, 12))
def test_right_angle_staircase_turns_by_half_pi(seed: int, layers: int) -> None:
    rng = np.random.default_rng(seed)
    axes = np.eye(2)[np.arange(layers - 1) % 2] * rng.uniform(0.1, 5.0, (layers - 1, 1))
    path = np.vstack([np.zeros(2), np.cumsum(axes, axis=0)])
    np.testing.assert_allclose(g.curvature(path[None]), np.pi / 2, atol=1e-12)
    np.testing.assert_allclose(g.mean_curvature(path[None]), np.pi / 2, atol=1e-12)


def test_zero_length_step_gives_nan_angles_not_zero() -> None:
    path = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1.0, 1.0], [2.0, 1.0]])
    kappa = g.curvature(path[None])[0]
    assert np.isnan(kappa[0]) and np.isnan(kappa[1])
    assert kappa[2] == pytest.approx(np.pi / 2)
    assert g.mean_curvature(path[None])[0] == pytest.approx(np.pi / 2)
    assert np.isnan(g.mean_curvature(np.zeros((1, 4, 3)))[0])


def test_length_and_cosine_of_a_known_path() -> None:
    path = np.array([[[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]])
    assert g.trajectory_length(path)[0] == pytest.approx(2.0)
    assert g.trajectory_length(path, normalize=True)[0] == pytest.approx(
        2 * np.sqrt(2 - np.sqrt(2))
    )
    np.testing.assert_allclose(g.layerwise_cosine(path)[0], [np.sqrt(0.5), np.sqrt(0.5)])


def test_zero_norm_state_gives_nan_cosine() -> None:
    x = np.ones((1, 3, 4))
    x[0, 1] = 0.0
    assert np.isnan(g.layerwise_cosine(x)).all()
    assert np.isnan(g.stability(x, x)[0, 1]) and g.stability(x, x)[0, 0] == pytest.approx(1.0)


# ----------------------------------------------------------------------------- invariances
@FAST
@given(seed=seeds, d=st.integers(2, 8))
def test_every_metric_is_invariant_under_orthogonal_rotation(seed: int, d: int) -> None:
    x = random_states(seed, d=d)
    y = random_states(seed + 1, d=d)
    q = random_rotation(seed, d)
    xr, yr = x @ q, y @ q
    labels = np.array([0, 0, 0, 1, 1, 1])
    close = dict(rtol=1e-9, atol=1e-9)
    for fn in (g.curvature, g.layerwise_cosine, g.mean_curvature):
        np.testing.assert_allclose(fn(x), fn(xr), **close)
    for norm in (False, True):
        np.testing.assert_allclose(
            g.trajectory_length(x, norm), g.trajectory_length(xr, norm), **close
        )
    np.testing.assert_allclose(g.stability(x, y), g.stability(xr, yr), **close)
    np.testing.assert_allclose(g.bifurcation(x, y).delta, g.bifurcation(xr, yr).delta, **close)
    for fn in (g.convergence_index_pooled, g.convergence_index_per_prompt):
        np.testing.assert_allclose(fn(x, labels), fn(xr, labels), **close)
    ci, cir = g.convergence_index(x, labels), g.convergence_index(xr, labels)
    for key in ci:
        np.testing.assert_allclose(ci[key], cir[key], **close)


@FAST
@given(seed=seeds, scale=st.floats(1e-3, 1e3))
def test_length_scales_linearly_and_normalised_length_does_not(seed: int, scale: float) -> None:
    x = random_states(seed)
    np.testing.assert_allclose(
        g.trajectory_length(scale * x), scale * g.trajectory_length(x), rtol=1e-10
    )
    np.testing.assert_allclose(
        g.trajectory_length(scale * x, normalize=True),
        g.trajectory_length(x, normalize=True),
        rtol=1e-10,
    )


def test_torch_float32_input_matches_numpy() -> None:
    x = random_states(3).astype(np.float32)
    t = torch.from_numpy(x)
    np.testing.assert_allclose(g.curvature(t), g.curvature(x))
    np.testing.assert_allclose(g.stability(t, t.flip(0)), g.stability(x, x[::-1]))
    assert g.layerwise_cosine(t.to(torch.bfloat16)).shape == (6, 6)


def test_chunked_threaded_computation_keeps_prompt_order() -> None:
    x = random_states(4, n=150, layers=9, d=700).astype(np.float32)  # several chunks
    h = x.astype(np.float64)
    v = np.diff(h, axis=1)
    expected = np.linalg.norm(v, axis=2).sum(axis=1)
    np.testing.assert_allclose(g.trajectory_length(x), expected, rtol=1e-12)
    cos = (
        (h[:, :-1] * h[:, 1:]).sum(-1)
        / np.linalg.norm(h[:, :-1], axis=2)
        / np.linalg.norm(h[:, 1:], axis=2)
    )
    np.testing.assert_allclose(g.layerwise_cosine(x), cos, rtol=1e-12)


# ----------------------------------------------------------------------------- convergence index
def brute_force_ci(x: np.ndarray, labels: np.ndarray, layer: int) -> tuple[dict, float]:
    u = x[:, layer] / np.linalg.norm(x[:, layer], axis=1, keepdims=True)
    dist = np.linalg.norm(u[:, None] - u[None], axis=2)
    off = ~np.eye(len(labels), dtype=bool)
    same = labels[:, None] == labels[None]
    per_cat = {}
    for c in np.unique(labels):
        m = labels == c
        per_cat[c] = dist[np.ix_(m, ~m)].mean() - dist[np.ix_(m, m)][off[np.ix_(m, m)]].mean()
    return per_cat, dist[~same].mean() - dist[same & off].mean()


def test_convergence_index_matches_brute_force_pairs() -> None:
    x = random_states(5, n=13, layers=4, d=6)
    labels = np.array(list("aaaabbbbbcccc"))
    ci = g.convergence_index(x, labels)
    pooled = g.convergence_index_pooled(x, labels)
    per_prompt = g.convergence_index_per_prompt(x, labels)
    for layer in range(4):
        per_cat, pooled_bf = brute_force_ci(x, labels, layer)
        assert pooled[layer] == pytest.approx(pooled_bf, abs=1e-12)
        for c, value in per_cat.items():
            assert ci[c][layer] == pytest.approx(value, abs=1e-12)
            assert per_prompt[labels == c, layer].mean() == pytest.approx(value, abs=1e-12)


@FAST
@given(seed=seeds)
def test_ci_of_separated_clusters_is_positive_and_vanishes_under_shuffled_labels(seed: int) -> None:
    x, labels = clusters(seed, n_per=30)
    ci = g.convergence_index(x, labels)
    assert all((v > 1.0).all() for v in ci.values())  # chord distance between centres = sqrt(2)
    true_pooled = g.convergence_index_pooled(x, labels)
    null = np.array([g.convergence_index_pooled(x, permute_labels(labels, s)) for s in range(5)])
    assert np.abs(null.mean(axis=0)).max() < 0.1 * true_pooled.min()


def test_singleton_category_gives_nan_within_distance() -> None:
    x = random_states(6, n=5)
    labels = np.array([0, 0, 0, 0, 1])
    assert np.isnan(g.convergence_index(x, labels)[1]).all()
    assert np.isnan(g.convergence_index_per_prompt(x, labels)[4]).all()
    assert np.isfinite(g.convergence_index(x, labels)[0]).all()


# ----------------------------------------------------------------------------- bifurcation
def test_bifurcation_ratio_and_onset_of_a_planted_split() -> None:
    layers, d = 11, 6
    base = np.tile(np.eye(d)[0], (layers, 1))
    angle = np.r_[np.full(3, 0.05), np.linspace(0.05, 1.0, layers - 3)]  # rise starts at layer 3
    other = np.cos(angle)[:, None] * np.eye(d)[0] + np.sin(angle)[:, None] * np.eye(d)[1]
    res = g.bifurcation(base * 3.0, other, threshold=0.1)
    expected = np.linalg.norm(base - other, axis=1)
    np.testing.assert_allclose(res.delta, expected)
    assert res.ratio == pytest.approx(expected[-1] / expected[0])
    rise = expected - expected[0]
    assert res.onset_layer == int(np.argmax(rise >= 0.1 * rise.max()))
    assert res.onset_layer >= 4 and res.onset_fraction == pytest.approx(res.onset_layer / 10)
    batch = g.bifurcation(np.stack([base, base]), np.stack([other, base]))
    assert batch.delta.shape == (2, layers)
    assert batch.onset_layer.tolist() == [res.onset_layer, -1] and np.isnan(batch.ratio[1])


# ----------------------------------------------------------------------------- phases
def test_fixed_phase_bands_follow_the_paper() -> None:
    bands = g.fixed_phase_bands(30)  # floor(30/4) = 7, floor(90/4) = 22
    assert bands.tolist() == [0] * 8 + [1] * 15 + [2] * 7
    assert g.fixed_phase_bands(12).tolist() == [0] * 4 + [1] * 6 + [2] * 2


def test_phase_summary_reports_band_means_and_ranges() -> None:
    sim = np.array([[0.4, 0.5, 0.7, 0.8, 0.6, 0.65], [0.4, 0.5, 0.8, 0.9, 0.6, 0.65]])
    table = g.phase_summary(sim, np.array([0, 0, 1, 1, 2, 2]))
    assert table["name"].tolist() == list(g.PHASE_NAMES)
    assert table["mean"].tolist() == pytest.approx([0.45, 0.8, 0.625])
    assert table.loc[1, ["profile_min", "profile_max"]].tolist() == pytest.approx([0.75, 0.85])


@FAST
@given(
    cut1=st.integers(2, 12),
    width=st.integers(2, 12),
    levels=st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3),
)
def test_change_points_recover_a_noise_free_three_phase_profile(
    cut1: int, width: int, levels: list[float]
) -> None:
    cut2 = cut1 + width
    if abs(levels[0] - levels[1]) < 0.05 or abs(levels[1] - levels[2]) < 0.05:
        levels = [0.2, 0.8, 0.5]
    profile = np.r_[
        np.full(cut1, levels[0]), np.full(width, levels[1]), np.full(30 - cut2, levels[2])
    ]
    if 30 - cut2 < 2:
        return
    res = g.detect_phases(profile)
    assert res.n_phases == 3 and res.change_points == (cut1, cut2)


PLANTED = np.r_[np.full(8, 0.45), np.full(14, 0.8), np.full(8, 0.65)]


@pytest.mark.parametrize(("method", "min_rate"), [("bic", 0.9), ("cv", 0.75)])
def test_change_points_recover_a_noisy_planted_profile_in_most_draws(
    method: str, min_rate: float
) -> None:
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(100):
        res = g.detect_phases(PLANTED + rng.normal(0, 0.03, 30), method=method)
        hits += res.n_phases == 3 and all(
            abs(a - b) <= 1 for a, b in zip(res.change_points, (8, 22), strict=False)
        )
    assert hits >= min_rate * 100


def test_bic_does_not_invent_phases_in_a_flat_noisy_profile() -> None:
    rng = np.random.default_rng(12)
    singles = sum(g.detect_phases(rng.normal(0.7, 0.03, 30)).n_phases == 1 for _ in range(100))
    assert singles >= 90
    assert g.detect_phases(np.full(30, 0.7)).n_phases == 1


def test_detect_phases_uses_the_mean_over_rows() -> None:
    rows = PLANTED + np.random.default_rng(13).normal(0, 0.05, (40, 30))
    res = g.detect_phases(rows)
    assert res.n_phases == 3 and res.bands.shape == (30,)
    assert g.phase_summary(rows, res.bands).shape[0] == 3


# ----------------------------------------------------------------------------- bad input
def test_bad_input_raises_clear_value_errors() -> None:
    x = random_states(7)
    with pytest.raises(ValueError, match=r"shape \(n, L\+1, d\)"):
        g.curvature(x[0])
    with pytest.raises(ValueError, match="at least 3 layers"):
        g.curvature(x[:, :2])
    with pytest.raises(ValueError, match="labels has length 5 but states has n=6"):
        g.convergence_index(x, [0, 0, 1, 1, 1])
    with pytest.raises(ValueError, match="at least 2 categories"):
        g.convergence_index_pooled(x, np.zeros(6))
    with pytest.raises(ValueError, match="same shape"):
        g.stability(x, x[:, :-1])
    with pytest.raises(ValueError, match="real numeric"):
        g.trajectory_length(np.full((2, 3, 4), "a"))
    with pytest.raises(ValueError, match="threshold"):
        g.bifurcation(x, x, threshold=0.0)
    with pytest.raises(ValueError, match="method"):
        g.detect_phases(np.ones(10), method="aic")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finite"):
        g.detect_phases(np.array([0.1, np.nan, 0.3]))
