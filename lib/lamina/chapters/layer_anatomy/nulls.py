"""Nulls and controls behind paper 3's verdicts (issue 11 item 7, issue 12 item 4): the
permutation null of the critical-core share, the partial correlation of recovery with
importance given the initial damage, and one depth convention for the paper's layer names."""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = [
    "PAPER_ANTI",
    "PAPER_CORE",
    "PAPER_L",
    "core_share_p",
    "paper_layers",
    "partial_spearman",
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
