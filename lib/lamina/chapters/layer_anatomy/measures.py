"""The statistics behind paper 3's claims: the critical core's layers, the importance
range and core share with bootstrap CIs over token windows, and recovery speed against
importance. Paper 3's 30-layer positions map to the layers whose depth span overlaps
theirs (:func:`lamina.chapters.layer_anatomy.nulls.paper_layers`).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import stats

from lamina.chapters.layer_anatomy.nulls import PAPER_CORE, PAPER_L, paper_layers
from lamina.evidence.stats import paired_bootstrap_ci, spearman_ci

__all__ = [
    "core_layers",
    "document_differences",
    "importance_bootstrap",
    "recovery_correlation",
    "skip_rows",
]


def skip_rows(sweep: pd.DataFrame) -> pd.DataFrame:
    """The skip-ablation rows of a sweep, by layer."""
    return sweep[sweep["surgery"] == "skip"].sort_values("layer")


def core_layers(n_layers: int) -> list[int]:
    """Layers of an L-layer model whose depth span [l/L, (l+1)/L) overlaps paper 3's critical
    core, layers 8-11 of 30, i.e. [8/30, 12/30) (reimplementation choice; the anti-layers use
    the same convention, :func:`lamina.chapters.layer_anatomy.nulls.paper_layers`)."""
    return paper_layers(PAPER_CORE, n_layers, PAPER_L)


def _document_sums(skip: pd.DataFrame, doc_ids: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """(C, S_b, S_1, ..., S_L), each (n_docs,): windows per document (C; equal-length windows)
    and the per-document NLL sums of the clean model (S_b) and of each skipped layer, from the
    skip rows' per-window NLLs (nats per token); ``doc_ids`` None: each window a document."""
    per = np.stack(skip["nll_per_seq"].to_list())  # (L, n_seq) nats per token
    base = np.asarray(skip["base_nll_per_seq"].iloc[0])
    groups = np.arange(per.shape[1]) if doc_ids is None else np.asarray(doc_ids)[: per.shape[1]]
    _, g = np.unique(groups, return_inverse=True)
    counts = np.bincount(g).astype(float)  # windows per document (equal-length windows)
    return (counts, *(np.bincount(g, row) for row in (base, *per)))


def _resampled_delta_pct(*arrays: np.ndarray, axis: int = -1) -> np.ndarray:
    """(..., L) delta_pct of each layer = 100 (exp((Σ_g S_lg - Σ_g S_bg) / Σ_g C_g) - 1) from
    :func:`_document_sums`'s arrays (C, S_b, S_1..S_L), summed over ``axis`` (documents)."""
    c = arrays[0].sum(axis=axis)
    b = arrays[1].sum(axis=axis)
    return np.stack([100 * np.expm1((a.sum(axis=axis) - b) / c) for a in arrays[2:]], -1)


def importance_bootstrap(
    sweep: pd.DataFrame,
    n_bootstrap: int,
    seed: int,
    core: list[int],
    doc_ids: np.ndarray | None = None,
) -> dict[str, tuple[float, float]]:
    """Bootstrap CIs (95%, percentile) of the skip sweep's summaries, resampling documents
    (``doc_ids`` (n_windows,); None: each window is its own unit), paired across layers:

    - log10_range: log10(max / min positive delta_pct) over the layers whose paired 95% CI
      excludes 0, as in the point estimate;
    - core_share: the fraction of the len(core) most important layers that lie in ``core``;
    - max_delta: the largest delta_pct over layers, recomputed in each resample (the peak is
      chosen anew each time, so the CI accounts for selecting the peak layer);
    - core_max: the largest delta_pct over the swept layers of ``core`` alone, the peak
      re-chosen among them in each resample (NaN when no core layer was swept).

    delta_pct of a resample = 100 (exp((sum_g S_lg - sum_g S_bg) / sum_g C_g) - 1) over the
    resampled documents g (S: NLL sums in nats, C: predicted tokens; equal per window)."""
    skip = skip_rows(sweep)
    sig = (skip["delta_ci_low"] > 0).to_numpy() if "delta_ci_low" in skip else True
    layers = skip["layer"].to_numpy()
    deltas = _resampled_delta_pct
    def log_range(*arrays: np.ndarray, axis: int = -1) -> np.ndarray:
        d = deltas(*arrays, axis=axis)
        pos = np.where((d > 0) & sig, d, np.nan)
        with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)  # no positive layer: NaN
            return np.log10(np.nanmax(pos, -1) / np.nanmin(pos, -1))

    def core_share(*arrays: np.ndarray, axis: int = -1) -> np.ndarray:
        d = deltas(*arrays, axis=axis)
        top = layers[np.argsort(-d, axis=-1)[..., : len(core)]]
        return np.isin(top, core).mean(-1)

    def max_delta(*arrays: np.ndarray, axis: int = -1) -> np.ndarray:
        return deltas(*arrays, axis=axis).max(-1)

    in_core = np.isin(layers, core)

    def core_max(*arrays: np.ndarray, axis: int = -1) -> np.ndarray:
        return deltas(*arrays, axis=axis)[..., in_core].max(-1)

    data = _document_sums(skip, doc_ids)
    nan2 = (float("nan"), float("nan"))
    return {
        "log10_range": paired_bootstrap_ci(data, log_range, n_bootstrap, seed, min_size=3),
        "core_share": paired_bootstrap_ci(data, core_share, n_bootstrap, seed + 1, min_size=3)
        if core
        else nan2,
        "max_delta": paired_bootstrap_ci(data, max_delta, n_bootstrap, seed + 2, min_size=3),
        "core_max": paired_bootstrap_ci(data, core_max, n_bootstrap, seed + 3, min_size=3)
        if in_core.any()
        else nan2,
    }


def document_differences(
    ablated: np.ndarray, clean: np.ndarray, doc_ids: np.ndarray | None
) -> np.ndarray:
    """(n_docs,) per-document mean NLL difference (nats per token), ablated - clean, from
    per-window means (equal-length windows); None: per window."""
    a, b = np.asarray(ablated, float), np.asarray(clean, float)
    groups = np.arange(len(a)) if doc_ids is None else np.asarray(doc_ids)[: len(a)]
    _, g = np.unique(groups, return_inverse=True)
    return np.bincount(g, a - b) / np.bincount(g)


def recovery_correlation(
    sweep: pd.DataFrame, recovery: pd.DataFrame, n_bootstrap: int, seed: int
) -> dict[str, float]:
    """Spearman rho and p (scipy) between skip importance and steps to recover (censored runs
    ranked last), per layer; NaN when the steps do not vary. 95% CI: ``spearman_ci``'s paired
    bootstrap, or where resamples with constant steps leave it undefined, Fisher's z with
    Bonett & Wright's (2000) variance (1 + rho^2 / 2) / (n - 3)."""
    imp = skip_rows(sweep).set_index("layer")["delta_pct"]
    steps = recovery.set_index("layer")["steps_ranked"]
    common = imp.index.intersection(steps.index)
    x, y = imp.loc[common].to_numpy(float), steps.loc[common].to_numpy(float)
    nan = float("nan")
    if len(common) < 4 or np.ptp(y) == 0:
        return {"rho": nan, "p": nan, "ci_low": nan, "ci_high": nan, "n": len(common)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant resamples: their rho is NaN
        out = spearman_ci(x, y, n_bootstrap=n_bootstrap, seed=seed)
    if not (np.isfinite(out["ci_low"]) and np.isfinite(out["ci_high"])):
        rho = float(np.clip(out["rho"], -0.9999, 0.9999))
        se = np.sqrt((1 + rho**2 / 2) / (len(common) - 3))
        z = stats.norm.ppf(0.975) * se
        out["ci_low"], out["ci_high"] = (
            float(np.tanh(np.arctanh(rho) - z)),
            float(np.tanh(np.arctanh(rho) + z)),
        )
    return out
