"""Nulls and controls behind paper 3's verdicts (issue 11 item 7, issue 12 item 4): the
permutation null of the critical-core share, the partial correlation of recovery with
importance given the initial damage, one depth convention for the paper's layer names, and
the predictability nulls (independent layers' delta correlation, shuffled layer order)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from scipy import stats

from lamina.anatomy.predictability import depth_features, matrix_types, ridge, stacked_weights

__all__ = [
    "PAPER_ANTI",
    "PAPER_CORE",
    "PAPER_L",
    "core_share_p",
    "delta_null",
    "loo_hat_matrix",
    "paper_layers",
    "partial_spearman",
    "permuted_r2",
]

PAPER_L = 30  # SmolLM2-135M
PAPER_CORE = [8, 9, 10, 11]  # the critical core L8-11 (0-based indices of 30)
PAPER_ANTI = [14, 17]  # the anti-layers L14, L17


def paper_layers(paper_layers_: list[int], n_layers: int, paper_l: int = PAPER_L) -> list[int]:
    """Layers of an L-layer model whose depth span [l/L, (l+1)/L) overlaps the span
    [p/paper_l, (p+1)/paper_l) of any of the paper's layers p (0-based). The one depth
    convention of the chapter, for the critical core (L8-11) and the anti-layers (L14, L17)
    alike (reimplementation choice)."""
    out = set()
    for p in paper_layers_:
        lo, hi = p / paper_l, (p + 1) / paper_l
        out |= {l for l in range(n_layers) if l / n_layers < hi and (l + 1) / n_layers > lo}
    return sorted(out)


def core_share_p(n_layers: int, n_core: int, n_top: int, hits: int) -> float:
    """P(at least ``hits`` of the ``n_top`` most important layers lie in a core of ``n_core``
    layers) when the layer order is random: the exact permutation null of the core share,
    hypergeometric(N = n_layers, K = n_core, n = n_top). 1.0 when hits <= 0."""
    if hits <= 0:
        return 1.0
    return float(stats.hypergeom.sf(hits - 1, n_layers, n_core, n_top))


def partial_spearman(
    x: np.ndarray, y: np.ndarray, z: np.ndarray, n_bootstrap: int = 0, seed: int = 0
) -> dict[str, float]:
    """Spearman partial correlation of x and y given z (ranks, then
    r_xy.z = (r_xy - r_xz r_yz) / sqrt((1 - r_xz²)(1 - r_yz²))), its two-sided p from
    t = r sqrt((n - 3) / (1 - r²)) on n - 3 degrees of freedom, and a percentile bootstrap
    95% CI over the units (rows). -> {rho, p, ci_low, ci_high, n}; NaN when undefined."""
    x, y, z = (np.asarray(v, dtype=float) for v in (x, y, z))
    n = len(x)
    nan = float("nan")
    out = {"rho": nan, "p": nan, "ci_low": nan, "ci_high": nan, "n": n}

    def rho_of(idx: np.ndarray) -> float:
        r = np.corrcoef([stats.rankdata(v[idx]) for v in (x, y, z)])
        den = (1 - r[0, 2] ** 2) * (1 - r[1, 2] ** 2)
        return float((r[0, 1] - r[0, 2] * r[1, 2]) / np.sqrt(den)) if den > 0 else nan

    if n < 5 or min(np.ptp(x), np.ptp(y), np.ptp(z)) == 0:
        return out
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = rho_of(np.arange(n))
        if not np.isfinite(rho):
            return out
        t = rho * np.sqrt((n - 3) / max(1 - rho**2, 1e-12))
        out["rho"], out["p"] = rho, float(2 * stats.t.sf(abs(t), n - 3))
        if n_bootstrap > 0:
            rng = np.random.default_rng(seed)
            draws = np.array([rho_of(rng.integers(0, n, n)) for _ in range(n_bootstrap)])
            draws = draws[np.isfinite(draws)]
            if len(draws) >= 10:
                out["ci_low"], out["ci_high"] = (
                    float(q) for q in np.quantile(draws, [0.025, 0.975])
                )
    return out


def delta_null(model: torch.nn.Module) -> pd.DataFrame:
    """Delta correlation expected if each layer's weights were independent draws:

        rho0(l) = -s2(l+1) / sqrt((s2(l) + s2(l+1)) (s2(l+1) + s2(l+2))),

    s2(l) = the centred variance of layer l's flattened weight (-0.5 when all are equal).
    Returns columns matrix, layer, corr_null (same rows as ``anatomy.delta_correlation``)."""

    rows = []
    for role in matrix_types(model):
        s2 = stacked_weights(model, role).var(axis=1)
        for l in range(len(s2) - 2):
            den = np.sqrt((s2[l] + s2[l + 1]) * (s2[l + 1] + s2[l + 2]))
            rows.append({"matrix": role, "layer": l, "corr_null": float(-s2[l + 1] / den)})
    return pd.DataFrame(rows)


def loo_hat_matrix(n_layers: int, alpha: float, degree: int) -> np.ndarray:
    """(L, L) H with What_j = sum_i H[j, i] W_i: the leave-one-layer-out ridge prediction of
    ``lamina.anatomy.predictability.ridge_depth_fit`` is linear in the other layers' weights, with
    coefficients that depend on depth only (H[j, j] = 0)."""

    x = depth_features(np.arange(n_layers), n_layers, degree)
    h = np.zeros((n_layers, n_layers))
    for j in range(n_layers):
        keep = np.arange(n_layers) != j
        h[j, keep] = x[j] @ ridge(x[keep], np.eye(n_layers - 1), alpha)
    return h


def permuted_r2(
    stacks: list[np.ndarray], alpha: float, degree: int, n_permutations: int, seed: int
) -> np.ndarray:
    """(n_permutations,) mean LOO R^2 over matrix types with the layer order shuffled: the
    null of "weights follow depth". stacks: one (L, P) array per type. Uses the Gram matrix
    G = W W^T: SSE = tr((I - H) G_perm (I - H)^T), SST = tr(G) - 1^T G 1 / L."""
    n = stacks[0].shape[0]
    resid = np.eye(n) - loo_hat_matrix(n, alpha, degree)
    grams = [w @ w.T for w in stacks]
    sst = [np.trace(g) - g.sum() / n for g in grams]
    rng = np.random.default_rng(seed)
    null = np.empty(n_permutations)
    for b in range(n_permutations):
        order = rng.permutation(n)
        r2 = [
            1 - np.trace(resid @ g[np.ix_(order, order)] @ resid.T) / t
            for g, t in zip(grams, sst, strict=True)
        ]
        null[b] = np.mean(r2)
    return null
