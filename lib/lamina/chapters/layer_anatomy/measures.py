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
from lamina.stats import paired_bootstrap_ci, spearman_ci

__all__ = [
    "core_layers",
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


def importance_bootstrap(
    sweep: pd.DataFrame, n_bootstrap: int, seed: int, core: list[int]
) -> dict[str, tuple[float, float]]:
    """Bootstrap over sequences (paired) of the skip sweep's summaries: log10 importance range
    (max / min positive delta_pct over the layers whose paired 95% CI excludes 0, as in the
    point estimate) and the core share: the fraction of the len(core) most important layers
    that lie in ``core``."""
    skip = skip_rows(sweep)
    sig = (skip["delta_ci_low"] > 0).to_numpy() if "delta_ci_low" in skip else True
    layers = skip["layer"].to_numpy()
    per = np.stack(skip["nll_per_seq"].to_list())  # (L, n_seq) nats per token
    base = np.asarray(skip["base_nll_per_seq"].iloc[0])

    def deltas(*arrays: np.ndarray, axis: int = -1) -> np.ndarray:
        b = arrays[0].mean(axis=axis)
        return np.stack([100 * np.expm1(a.mean(axis=axis) - b) for a in arrays[1:]], -1)

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

    data = (base, *per)
    return {
        "log10_range": paired_bootstrap_ci(data, log_range, n_bootstrap, seed, min_size=3),
        "core_share": paired_bootstrap_ci(data, core_share, n_bootstrap, seed + 1, min_size=3),
    }


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
