"""Weight predictability across depth and per-layer weight structure (paper 3).

Matrix types are the adapter's read/write roles (``q``, ``k``, ``v``, ``mlp_up``, ``mlp_gate``,
``attn_out``, ``mlp_out``; GPT-2's fused ``qkv``). One matrix type stacked over depth is an
(L, P) array: row l is layer l's weight, flattened.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch import nn

from lamina.anatomy.layers import check_layer
from lamina.sources.models import get_adapter, weight_of

__all__ = [
    "RIDGE_ALPHA",
    "SUMMARIES",
    "delta_correlation",
    "depth_features",
    "depth_fit_terms",
    "fit_terms",
    "layer_structure",
    "matrix_structure",
    "matrix_types",
    "predicted_layer_state",
    "ridge",
    "ridge_depth_fit",
    "scaled_stacks",
    "singular_spectra",
    "stacked_weights",
    "summary_predictability",
    "summary_stacks",
    "weight_predictability",
]


RIDGE_ALPHA = 0.01
"""The depth fit's ridge penalty (on the depth terms, not the intercept). With depth
z = l / (L - 1) in [0, 1] the terms z, z^2 vary by about 0.1 over the layers, so a penalty of 1
shrinks a depth trend away: a target that is exactly quadratic in depth gets a
leave-one-layer-out R^2 of 0.02 at alpha = 1 and 0.99 at 0.01 (30 layers); 0.01 keeps the fit
stable without erasing the trend it is asked to find (reimplementation choice: paper 3 says
"ridge regression" without its penalty)."""


def matrix_types(model: nn.Module) -> dict[str, str]:
    """Role -> dotted path inside a block, for every read and write matrix of the architecture."""
    adapter = get_adapter(model)
    return {**adapter.read, **adapter.write}


def stacked_weights(model: nn.Module, role: str) -> np.ndarray:
    """(L, P) float64: layer l's ``role`` weight, flattened (stored layout; GPT-2 Conv1D is
    (d_in, d_out), which does not change any quantity computed here)."""
    adapter = get_adapter(model)
    path = matrix_types(model)[role]
    rows = [
        weight_of(adapter.block_part(model, l, path)).detach().double().reshape(-1).cpu().numpy()
        for l in range(adapter.n_layers(model))
    ]
    return np.stack(rows)


def depth_features(layers: np.ndarray, n_layers: int, degree: int = 2) -> np.ndarray:
    """(n, degree+1) polynomial depth features [1, z, z^2, ...], z = l / (L-1) in [0, 1].

    Reimplementation choice: paper 3 says "ridge regression across depth" without features;
    a polynomial in normalised depth of degree ``degree`` is ours.
    """
    z = np.asarray(layers, dtype=np.float64) / max(n_layers - 1, 1)
    return np.vander(z, degree + 1, increasing=True)


def ridge(x: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    """Closed-form ridge B = (X^T X + alpha D)^{-1} X^T Y, D = diag(0, 1, ..., 1): the intercept
    is not penalised. x: (n, k), y: (n, P) -> (k, P)."""
    penalty = alpha * np.eye(x.shape[1])
    penalty[0, 0] = 0.0
    return np.linalg.solve(x.T @ x + penalty, x.T @ y)


def ridge_depth_fit(
    weights: np.ndarray, *, alpha: float = RIDGE_ALPHA, degree: int = 2
) -> tuple[float, np.ndarray, np.ndarray]:
    """Leave-one-layer-out ridge prediction of each layer's weights from its depth.

    weights: (L, P). For each layer j, fit ridge on the other L-1 layers (features
    :func:`depth_features`) and predict W_j. Returns (r2, r2_per_layer (L,), predictions (L, P)):

        R^2 = 1 - sum_j ||W_j - What_j||^2 / sum_j ||W_j - Wbar||^2,   Wbar = mean_l W_l,

    pooled over layers and entries; r2_per_layer uses layer j's terms only.
    """
    w = np.asarray(weights, dtype=np.float64)
    n = w.shape[0]
    if n < degree + 2:
        raise ValueError(f"{n} layers are too few for a degree-{degree} leave-one-out fit")
    x = depth_features(np.arange(n), n, degree)
    pred = np.empty_like(w)
    for j in range(n):
        keep = np.arange(n) != j
        pred[j] = x[j] @ ridge(x[keep], w[keep], alpha)
    sse, sst = fit_terms(w, pred)
    with np.errstate(
        divide="ignore", invalid="ignore"
    ):  # a layer at the mean: its own R2 is undefined
        per_layer = 1.0 - sse / sst
    return float(1.0 - sse.sum() / sst.sum()), per_layer, pred


def fit_terms(weights: np.ndarray, pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sse, sst), each (L,): layer j's squared error ||W_j - What_j||^2 and its squared
    deviation from the mean layer ||W_j - Wbar||^2 (weights, pred: (L, P)); the pooled
    R^2 = 1 - sum(sse) / sum(sst) over any set of layers."""
    sse = ((weights - pred) ** 2).sum(axis=1)
    sst = ((weights - weights.mean(axis=0)) ** 2).sum(axis=1)
    return sse, sst


def depth_fit_terms(
    stacks: dict[str, np.ndarray], *, alpha: float = RIDGE_ALPHA, degree: int = 2
) -> pd.DataFrame:
    """The per-layer terms of :func:`ridge_depth_fit` for each stack (type -> (L, P)):
    columns matrix, layer, sse, sst (:func:`fit_terms`), so that R^2 can be recomputed over
    resampled layers."""
    rows = []
    for role, w in stacks.items():
        _, _, pred = ridge_depth_fit(w, alpha=alpha, degree=degree)
        sse, sst = fit_terms(np.asarray(w, np.float64), pred)
        rows += [
            {"matrix": role, "layer": l, "sse": float(a), "sst": float(b)}
            for l, (a, b) in enumerate(zip(sse, sst, strict=True))
        ]
    return pd.DataFrame(rows, columns=["matrix", "layer", "sse", "sst"])


def scaled_stacks(stacks: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each stack (type -> (L, P) weights over depth) with every layer at unit scale:

        U_l = W_l / rms(W_l),   rms(W_l) = sqrt(mean_p W_lp^2)   (dimensionless, (L, P)),

    a layer of zeros left at zero. The depth fit of U reads the entries' *pattern* across depth,
    not their scale: layers whose scales differ (real layers' norms change with depth) but
    whose entries are independent draws up to scale, ``W_l = s_l E_l``, give exchangeable
    U_l -- the assumption of the shuffled-order null (:func:`lamina.anatomy.regularity.
    permuted_r2`) -- whereas on W a pattern shared by every layer, scaled by a depth-smooth
    s_l, earns R^2 from the scale profile alone (the scale's own regularity is the summary
    target's, :func:`summary_stacks`)."""
    out = {}
    for role, w in stacks.items():
        w = np.asarray(w, np.float64)
        rms = np.sqrt((w**2).mean(axis=1, keepdims=True))
        out[role] = np.divide(w, rms, out=np.zeros_like(w), where=rms > 0)
    return out


def weight_predictability(
    model: nn.Module, *, alpha: float = RIDGE_ALPHA, degree: int = 2, per_layer: bool = False
) -> pd.DataFrame:
    """Leave-one-layer-out R^2 of :func:`ridge_depth_fit` for every matrix type.

    Returns one row per type (matrix, r2, n_layers, n_params, alpha, degree, target = "raw
    entries"), or with ``per_layer=True`` one row per (matrix, layer) with that layer's r2.
    Independent layers give an R² below 0 (about -0.25 at L = 12), whatever their
    distribution: compare with a permutation null.
    """
    rows = []
    for role in matrix_types(model):
        w = stacked_weights(model, role)
        r2, r2_layer, _ = ridge_depth_fit(w, alpha=alpha, degree=degree)
        base = {"matrix": role, "alpha": alpha, "degree": degree}
        if per_layer:
            rows += [{**base, "layer": l, "r2": float(v)} for l, v in enumerate(r2_layer)]
        else:
            rows.append(
                {
                    **base,
                    "r2": r2,
                    "n_layers": w.shape[0],
                    "n_params": w.shape[1],
                    "target": "raw entries",
                }
            )
    return pd.DataFrame(rows)


SUMMARIES = ("frobenius", "spectral", "stable_rank", "effective_rank")
"""The per-layer summaries of :func:`layer_structure` that the summary target fits."""


def summary_stacks(structure: pd.DataFrame) -> dict[str, np.ndarray]:
    """Matrix type -> (L, S) per-layer summaries of :func:`layer_structure`: the log of each
    of :data:`SUMMARIES`, z-scored across layers (so that every summary weighs alike in the
    pooled R²); summaries constant across depth are dropped (types with none left too)."""
    out = {}
    for role, t in structure.sort_values("layer").groupby("matrix", sort=False):
        x = np.log(t[list(SUMMARIES)].to_numpy(np.float64))
        sd = x.std(axis=0)
        keep = sd > 1e-12
        if keep.any():
            out[str(role)] = (x[:, keep] - x[:, keep].mean(0)) / sd[keep]
    return out


def summary_predictability(
    structure: pd.DataFrame, *, alpha: float = RIDGE_ALPHA, degree: int = 2
) -> pd.DataFrame:
    """Leave-one-layer-out R^2 of :func:`ridge_depth_fit` on the per-layer summaries
    (:func:`summary_stacks`: log norms and spectra, z-scored) instead of the raw entries:
    the "regularity across depth" read as the summaries' trend. One row per type (matrix, r2,
    n_layers, n_params = number of summaries, alpha, degree, target = "layer summaries")."""
    rows = []
    for role, w in summary_stacks(structure).items():
        r2, _, _ = ridge_depth_fit(w, alpha=alpha, degree=degree)
        rows.append(
            {
                "matrix": role,
                "alpha": alpha,
                "degree": degree,
                "r2": r2,
                "n_layers": w.shape[0],
                "n_params": w.shape[1],
                "target": "layer summaries",
            }
        )
    return pd.DataFrame(rows)


def delta_correlation(model: nn.Module) -> pd.DataFrame:
    """Pearson correlation of consecutive weight updates across depth, per type and layer.

    rho(l) = corr(vec(W_{l+1} - W_l), vec(W_{l+2} - W_{l+1})),  l = 0..L-3.

    Note: for weights drawn i.i.d. across layers rho = -0.5 exactly in expectation, so -0.5
    is the no-structure baseline, not evidence of oscillation.
    Returns columns matrix, layer, corr.
    """
    rows = []
    for role in matrix_types(model):
        d = np.diff(stacked_weights(model, role), axis=0)
        for l in range(d.shape[0] - 1):
            rows.append(
                {"matrix": role, "layer": l, "corr": float(np.corrcoef(d[l], d[l + 1])[0, 1])}
            )
    return pd.DataFrame(rows)


def predicted_layer_state(
    model: nn.Module, layer: int, *, alpha: float = RIDGE_ALPHA, degree: int = 2
) -> dict[str, torch.Tensor]:
    """Ridge-predicted weights of every matrix type of block ``layer``, fitted on the other
    layers (leave-one-out, as in :func:`ridge_depth_fit`). Keys are relative to the block
    (``"self_attn.q_proj.weight"``), ready for :func:`lamina.anatomy.surgery.substitute_weights`."""
    layer = check_layer(model, layer)
    adapter = get_adapter(model)
    n = adapter.n_layers(model)
    x = depth_features(np.arange(n), n, degree)
    keep = np.arange(n) != layer
    out = {}
    for role, path in matrix_types(model).items():
        w = stacked_weights(model, role)
        pred = x[layer] @ ridge(x[keep], w[keep], alpha)
        ref = weight_of(adapter.block_part(model, layer, path))
        out[f"{path}.weight"] = torch.from_numpy(pred).reshape(ref.shape).to(ref.dtype)
    return out


def _spectrum(w: torch.Tensor) -> np.ndarray:
    return torch.linalg.svdvals(w.detach().double()).cpu().numpy()


def layer_structure(model: nn.Module) -> pd.DataFrame:
    """Per-layer, per-matrix structure of ``model``'s weights (:func:`matrix_structure`)."""
    adapter = get_adapter(model)
    return matrix_structure(
        {
            role: [
                weight_of(adapter.block_part(model, l, path)).detach().double().cpu().numpy()
                for l in range(adapter.n_layers(model))
            ]
            for role, path in matrix_types(model).items()
        }
    )


def matrix_structure(mats: dict[str, list[np.ndarray]]) -> pd.DataFrame:
    """Per-layer, per-matrix structure from the singular values s_1 >= s_2 >= ... of W
    (``mats``: type -> one (m, n) matrix per layer):

    frobenius = ||W||_F;  spectral = ||W||_2 = s_1;
    stable_rank = ||W||_F^2 / ||W||_2^2;
    effective_rank = exp(-sum_i p_i log p_i),  p_i = s_i / sum_j s_j  (Roy & Vetterli 2007).

    Returns columns layer, matrix, frobenius, spectral, stable_rank, effective_rank.
    """
    rows = []
    for role, layers in mats.items():
        for l, w in enumerate(layers):
            s = np.linalg.svd(np.asarray(w, np.float64), compute_uv=False)
            p = s / s.sum()
            p = p[p > 0]
            rows.append(
                {
                    "layer": l,
                    "matrix": role,
                    "frobenius": float(np.sqrt((s**2).sum())),
                    "spectral": float(s[0]),
                    "stable_rank": float((s**2).sum() / s[0] ** 2),
                    "effective_rank": float(np.exp(-(p * np.log(p)).sum())),
                }
            )
    return pd.DataFrame(rows).sort_values("layer", kind="stable", ignore_index=True)


def singular_spectra(model: nn.Module) -> dict[str, np.ndarray]:
    """Matrix type -> (L, min(m, n)) singular values of each layer's weight, descending."""
    adapter = get_adapter(model)
    return {
        role: np.stack(
            [
                _spectrum(weight_of(adapter.block_part(model, l, path)))
                for l in range(adapter.n_layers(model))
            ]
        )
        for role, path in matrix_types(model).items()
    }
