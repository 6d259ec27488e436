"""Paper 3's claims about the weights: the depth fit, its shuffled-order null, and the delta
correlation against independent layers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from lamina.anatomy.predictability import (
    RIDGE_ALPHA,
    depth_fit_terms,
    ridge_depth_fit,
    summary_predictability,
    summary_stacks,
)
from lamina.anatomy.regularity import (
    delta_table,
    loo_hat_matrix,
    measure_delta,
    measure_delta_structure,
    measure_r2,
    model_stacks,
    permuted_r2,
)

from ..conftest import tiny_model


def test_the_depth_fit_finds_a_trend_exactly_quadratic_in_depth():
    """At 2a683dc's ridge penalty (1.0) a target exactly quadratic in depth had R2 0.02."""
    z = np.linspace(0, 1, 30)
    target = np.c_[(z - 0.5) ** 2, np.abs(z - 0.5)]
    assert ridge_depth_fit(target[:, :1], alpha=RIDGE_ALPHA)[0] > 0.95
    assert ridge_depth_fit(target[:, 1:], alpha=RIDGE_ALPHA)[0] > 0.85
    assert ridge_depth_fit(target[:, :1], alpha=1.0)[0] < 0.1  # the old penalty


def test_r2_from_terms_resamples_layers_and_tests_against_shuffled_orders():
    rng = np.random.default_rng(0)
    z = np.linspace(0, 1, 20)[:, None]
    stacks = {r: z * rng.standard_normal(100) + 0.1 * rng.standard_normal((20, 100)) for r in "abc"}
    terms = depth_fit_terms(stacks)
    m = measure_r2(terms, permuted_r2(list(stacks.values()), RIDGE_ALPHA, 2, 200, 0), 500, 0)
    assert m["sided"] == "greater" and m["ci_low"] < m["estimate"] < m["ci_high"]
    assert m["estimate"] > 0.8 and m["p"] < 0.01 and m["p_opposite"] > 0.9
    assert m["null"] < 0.5  # the direction rule's centre: a shuffled order's median R2
    assert f"{m['null']:.3g}" in str(m["detail"])  # and the reason says so
    assert "untestable" in measure_r2(terms, np.array([]), 100, 0)


def _perm_p(stacks: list[np.ndarray], seed: int) -> tuple[float, float]:
    r2 = np.mean([ridge_depth_fit(w)[0] for w in stacks])
    null = permuted_r2(stacks, RIDGE_ALPHA, 2, 99, seed)
    return float(r2), float((1 + np.sum(null >= r2)) / (1 + null.size))


def test_the_shuffled_order_null_gives_uniform_p_on_iid_layers():
    rng = np.random.default_rng(5)
    ps = np.array([_perm_p([rng.normal(size=(12, 200))], s)[1] for s in range(40)])
    assert 0.3 < ps.mean() < 0.7 and (ps < 0.05).mean() <= 0.15


def test_the_summary_target_finds_a_depth_trend_the_raw_entries_hide():
    rng = np.random.default_rng(6)
    depth = np.linspace(0, 1, 12)[:, None]
    stacks = rng.normal(size=(12, 400)) * (1 + 2 * depth)  # i.i.d. entries, scale grows
    structure = pd.DataFrame(
        [
            {
                "layer": l,
                "matrix": "q",
                "frobenius": np.linalg.norm(w),
                "spectral": np.abs(w).max(),
                "stable_rank": 1 + l + rng.uniform(0, 0.1),
                "effective_rank": 2 + l**1.2,
            }
            for l, w in enumerate(stacks)
        ]
    )
    assert summary_predictability(structure)["r2"].iloc[0] > 0.5
    assert _perm_p(list(summary_stacks(structure).values()), 0)[1] < 0.05
    r2_raw, p_raw = _perm_p([stacks], 0)
    assert r2_raw < 0 and p_raw > 0.05


def test_gram_permutation_r2_equals_refitting_ridge_on_permuted_layers():
    rng = np.random.default_rng(0)
    w = np.linspace(0, 1, 7)[:, None] * rng.standard_normal(50) + 0.3 * rng.standard_normal((7, 50))
    h = loo_hat_matrix(7, alpha=0.5, degree=2)
    assert np.allclose(h @ w, ridge_depth_fit(w, alpha=0.5, degree=2)[2])
    null = permuted_r2([w], 0.5, 2, n_permutations=5, seed=3)
    gen = np.random.default_rng(3)
    refit = [ridge_depth_fit(w[gen.permutation(7)], alpha=0.5, degree=2)[0] for _ in range(5)]
    assert np.allclose(null, refit)


def test_the_independence_value_is_minus_half_for_equal_variances_and_follows_them():
    model = tiny_model("llama", n_layers=8)
    t = delta_table(model_stacks(model))
    assert np.allclose(t["corr_null"], -0.5, atol=0.05)
    assert abs((t["corr"] - t["corr_null"]).mean()) < 0.02
    with (
        torch.no_grad()
    ):  # alternating variances: -9/10 after a quiet layer, -1/10 after a loud one
        for block in model.model.layers[1::2]:
            block.self_attn.q_proj.weight.mul_(3.0)
    q = delta_table(model_stacks(model)).query("matrix == 'q'")["corr_null"].to_numpy()
    assert np.allclose(q[0::2], -0.9, atol=0.03) and np.allclose(q[1::2], -0.1, atol=0.03)


def test_independent_layers_sit_at_minus_half_and_show_no_structure():
    rng = np.random.default_rng(3)
    t = delta_table({r: rng.normal(size=(12, 2000)) for r in "abcdefg"})
    assert abs(measure_delta(t, 300, 0)["estimate"] + 0.5) < 0.05  # the paper's value...
    s = measure_delta_structure(t, 300, 0)
    assert s["p"] > 0.05  # ...is the independence null


def test_an_oscillation_beyond_independence_is_detected_over_matrix_types():
    rng = np.random.default_rng(4)
    sign = (-1.0) ** np.arange(12)[:, None]
    t = delta_table(
        {r: 0.6 * sign * rng.normal(size=2000) + rng.normal(size=(12, 2000)) for r in "abcdefg"}
    )
    s = measure_delta_structure(t, 300, 0)
    assert s["estimate"] < -0.1 and s["p"] < 0.01 and s["n_units"] == 7
