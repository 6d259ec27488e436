"""Paper 3's claims about the weights, item (1) of its abstract, measured with their nulls:
regularity across depth (R^2 = 0.91) against a shuffled layer order, and the delta
correlation (about -0.50) against independent layers.

**R^2.** The leave-one-layer-out ridge fit of each matrix type's weights on depth
(:func:`lamina.anatomy.predictability.ridge_depth_fit`) gives per layer j a squared error
sse_j and a squared deviation sst_j; R^2 = 1 - sum_j sse_j / sum_j sst_j per type, averaged
over types. CIs resample layers (the units of a fit across depth); the p is the share of
shuffled layer orders whose mean R^2 is at least as large (:func:`permuted_r2`). The claims'
target is the entries with every layer at unit RMS (:data:`SCALED`,
:func:`lamina.anatomy.predictability.scaled_stacks`): a shuffled order is an exchangeable draw
of layers only once their scales are removed; on raw entries, a pattern shared by every layer
whose scale drifts smoothly with depth (as real layers' norms do) earns R^2 from the scale
profile alone, which the shuffled order destroys (a false "follows depth" at every seed).

**Delta correlation.** rho(l) = corr(W_{l+1} - W_l, W_{l+2} - W_{l+1}) is about -0.5 for
independent layers (:func:`delta_table` gives the exact value for unequal variances), so
the oscillation claim is the correlation *below* that null. Consecutive pairs of one type
share a delta, so the unit is the matrix type: its mean of rho - rho0 over layers.

Each ``measure_*`` returns the keyword arguments of a
:class:`lamina.evidence.decide.Measurement` (:mod:`lamina.anatomy.claims`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from scipy import stats

from lamina.anatomy.heldout import expanded_level
from lamina.anatomy.predictability import depth_features, matrix_types, ridge, stacked_weights

__all__ = [
    "GATE",
    "SCALED",
    "delta_table",
    "loo_hat_matrix",
    "measure_delta",
    "measure_delta_structure",
    "measure_r2",
    "model_stacks",
    "permuted_r2",
]

GATE = "mlp_gate"  # the adapter's role name of gate_proj, whose R^2 the paper reports
SCALED = "scaled entries"  # the R^2 claims' target: each layer at unit RMS (scaled_stacks)


def delta_table(stacks: dict[str, np.ndarray]) -> pd.DataFrame:
    """Per matrix type (stacks: type -> (L, P) weights over depth) and layer l = 0..L-3: the
    delta correlation rho(l) = corr(W(l+1) - W(l), W(l+2) - W(l+1)) and its value for
    independent layers,

        rho0(l) = -s2(l+1) / sqrt((s2(l) + s2(l+1)) (s2(l+1) + s2(l+2))),

    s2(l) = the centred variance of layer l's flattened weight (-0.5 when all are equal).
    Columns matrix, layer, corr, corr_null."""
    rows = []
    for role, w in stacks.items():
        w = np.asarray(w, np.float64)
        d = np.diff(w, axis=0)
        s2 = w.var(axis=1)
        for l in range(len(s2) - 2):
            den = np.sqrt((s2[l] + s2[l + 1]) * (s2[l + 1] + s2[l + 2]))
            rows.append(
                {
                    "matrix": role,
                    "layer": l,
                    "corr": float(np.corrcoef(d[l], d[l + 1])[0, 1]),
                    "corr_null": float(-s2[l + 1] / den),
                }
            )
    return pd.DataFrame(rows, columns=["matrix", "layer", "corr", "corr_null"])


def model_stacks(model: torch.nn.Module) -> dict[str, np.ndarray]:
    """Matrix type -> (L, P) weights over depth of every read and write matrix of ``model``."""
    return {role: stacked_weights(model, role) for role in matrix_types(model)}


def loo_hat_matrix(n_layers: int, alpha: float, degree: int) -> np.ndarray:
    """(L, L) H with What_j = sum_i H[j, i] W_i: the leave-one-layer-out ridge prediction of
    ``lamina.anatomy.predictability.ridge_depth_fit`` is linear in the other layers' weights,
    with coefficients that depend on depth only (H[j, j] = 0)."""
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
    m = resid.T @ resid  # SSE = tr(R G_perm R^T) = sum_ij M_ij G_perm[i, j]
    grams = np.stack([w @ w.T for w in stacks])  # (T, L, L)
    sst = np.trace(grams, axis1=1, axis2=2) - grams.sum(axis=(1, 2)) / n  # (T,)
    rng = np.random.default_rng(seed)
    orders = np.stack([rng.permutation(n) for _ in range(n_permutations)])  # (B, L)
    null = np.empty(n_permutations)
    for lo in range(0, n_permutations, 256):  # (b, T, L, L) permuted Grams, in chunks
        o = orders[lo : lo + 256]
        g = grams[:, o[:, :, None], o[:, None, :]]  # (T, b, L, L)
        sse = np.einsum("ij,tbij->tb", m, g)
        null[lo : lo + 256] = (1 - sse / sst[:, None]).mean(0)
    return null


def _mean_r2(sse: np.ndarray, sst: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """(B,) mean over types of 1 - sum sse / sum sst over the resampled layers idx (B, L);
    sse, sst: (T, L)."""
    return (1 - sse[:, idx].sum(-1) / sst[:, idx].sum(-1)).mean(0)


def measure_r2(
    terms: pd.DataFrame, null: np.ndarray, n_bootstrap: int, seed: int, what: str = ""
) -> dict[str, object]:
    """The mean leave-one-layer-out R^2 over the matrix types of ``terms`` (columns matrix,
    layer, sse, sst: :func:`lamina.anatomy.predictability.depth_fit_terms`), its one-sided
    permutation p against ``null`` (:func:`permuted_r2` of the same types) and the p of the
    opposite (R^2 below a shuffled order's), the null's median as the value of no effect
    (``null``: the direction rule compares the estimate with it, not with 0), and a CI whose
    ends are one-sided 95% bounds (expanded percentile over resampled layers). ``what``: the
    target, for the detail."""
    if terms.empty:
        return {"untestable": f"no {what or 'weights'} to fit"}
    sse = terms.pivot(index="matrix", columns="layer", values="sse").to_numpy(float)
    sst = terms.pivot(index="matrix", columns="layer", values="sst").to_numpy(float)
    n_layers = sse.shape[1]
    est = float(_mean_r2(sse, sst, np.arange(n_layers)[None])[0])
    idx = np.random.default_rng(seed).integers(0, n_layers, (n_bootstrap, n_layers))
    draws = _mean_r2(sse, sst, idx)
    draws = draws[np.isfinite(draws)]
    a = 1 - expanded_level(0.90, n_layers)
    lo, hi = np.quantile(draws, [a / 2, 1 - a / 2]) if draws.size >= 10 else (np.nan, np.nan)
    null = np.asarray(null, float)
    out: dict[str, object] = {
        "estimate": est,
        "ci_low": float(lo),
        "ci_high": float(hi),
        "sided": "greater",
        "effect_size": float(np.median(null)) if null.size else np.nan,
        "effect_name": "median R2 with the layer order shuffled",
        "n_units": n_layers,
        "detail": f"{what}: {sse.shape[0]} matrix type(s), {n_layers} layers",
    }
    if null.size:
        out["p"] = float((1 + np.sum(null >= est)) / (1 + null.size))
        out["p_opposite"] = float((1 + np.sum(null <= est)) / (1 + null.size))
        out["null"] = float(np.median(null))  # the test's centre: "no effect" is a shuffled
        # order's R2 (often below 0 for a poor fit), not R2 = 0
        out["detail"] = f"{out['detail']}; no effect: a shuffled order's median R2, {out['null']:.3g}"
    else:
        out["untestable"] = "no permutation null"
    return out


def _type_means(delta: pd.DataFrame) -> pd.DataFrame:
    """Per matrix type: mean corr and mean corr - corr_null over its consecutive pairs."""
    d = delta.assign(diff=delta["corr"] - delta["corr_null"])
    return d.groupby("matrix", sort=False)[["corr", "diff"]].mean()


def _type_ci(x: np.ndarray, level: float, n_bootstrap: int, seed: int) -> tuple[float, float]:
    """Expanded percentile CI of the mean of ``x`` (one value per type) over resampled types."""
    n = len(x)
    if n < 3 or n_bootstrap <= 0:
        return float("nan"), float("nan")
    draws = x[np.random.default_rng(seed).integers(0, n, (n_bootstrap, n))].mean(1)
    a = 1 - expanded_level(level, n)
    lo, hi = np.quantile(draws, [a / 2, 1 - a / 2])
    return float(lo), float(hi)


def measure_delta_structure(delta: pd.DataFrame, n_bootstrap: int, seed: int) -> dict[str, object]:
    """The oscillation beyond independence: the mean over matrix types of each type's mean
    rho - rho0 (``delta``: columns matrix, layer, corr, corr_null), a one-sided Wilcoxon
    signed-rank test over types that it is below 0 (and the opposite), and a CI whose ends
    are one-sided 95% bounds (expanded percentile over types)."""
    t = _type_means(delta)
    x = t["diff"].to_numpy(float)
    lo, hi = _type_ci(x, 0.90, n_bootstrap, seed)
    out: dict[str, object] = {
        "estimate": float(x.mean()) if len(x) else np.nan,
        "ci_low": lo,
        "ci_high": hi,
        "sided": "less",
        "n_units": len(x),
        "effect_size": float(delta["corr_null"].mean()) if len(delta) else np.nan,
        "effect_name": "mean correlation independent layers give",
    }
    if len(x) < 2 or not np.any(x != 0):
        return out | {"untestable": f"{len(x)} matrix type(s): too few for a test"}
    out["p"] = float(stats.wilcoxon(x, alternative="less").pvalue)
    out["p_opposite"] = float(stats.wilcoxon(x, alternative="greater").pvalue)
    return out


def measure_delta(delta: pd.DataFrame, n_bootstrap: int, seed: int) -> dict[str, object]:
    """The delta correlation itself: the mean over matrix types of each type's mean rho, with
    its 95% expanded percentile CI over types (no test: -0.5 is what independent layers give,
    so the claim's precondition is the structure beyond that null)."""
    x = _type_means(delta)["corr"].to_numpy(float)
    lo, hi = _type_ci(x, 0.95, n_bootstrap, seed)
    return {
        "estimate": float(x.mean()) if len(x) else np.nan,
        "ci_low": lo,
        "ci_high": hi,
        "sided": "two-sided",
        "n_units": len(x),
        "effect_size": float(delta["corr_null"].mean()) if len(delta) else np.nan,
        "effect_name": "mean correlation independent layers give",
    }
