"""Paper 3's importance claims measured on a skip sweep: the 10^7 range, the critical core and
its size, and the anti-layers.

Importance of layer l is the skip ablation's perplexity change over the held-out windows,

    delta_pct(l) = 100 (exp((sum_g S_lg - sum_g S_bg) / sum_g C_g) - 1)        (percent)

with S_lg / S_bg the NLL sums (nats) of unit g (:mod:`lamina.anatomy.heldout`) with layer l
skipped / intact, and C_g its predicted tokens. Every CI resamples units (a cluster bootstrap,
expanded percentile intervals: :func:`lamina.anatomy.heldout.cluster_ci`), all layers together,
so that a statistic over layers (a maximum, a ranking) is recomputed in each resample.

Each ``measure_*`` returns the keyword arguments of a
:class:`lamina.evidence.decide.Measurement` for its claim (:mod:`lamina.anatomy.claims`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from lamina.anatomy.heldout import cluster_draws, expanded_level
from lamina.anatomy.paper import PAPER_ANTI, PAPER_CORE, mapped_layers
from lamina.evidence.stats import fdr_bh

__all__ = [
    "UnitSums",
    "anti_layers",
    "core_share_p",
    "log_range",
    "measure_anti",
    "measure_anti_at",
    "measure_core",
    "measure_core_max",
    "measure_range",
    "range_floor",
    "skip_rows",
    "unit_sums",
]


def skip_rows(sweep: pd.DataFrame) -> pd.DataFrame:
    """The skip-ablation rows of a sweep, by layer."""
    return sweep[sweep["surgery"] == "skip"].sort_values("layer")


@dataclass
class UnitSums:
    """Per-unit NLL sums of a skip sweep: ``counts`` (G,) windows per unit (equal-length
    windows, so proportional to C_g), ``base`` (G,) the intact model's and ``layers`` (G, L)
    each skipped layer's NLL sums (nats per token, summed over the unit's windows);
    ``layer_ids`` (L,) the layers."""

    counts: np.ndarray
    base: np.ndarray
    layers: np.ndarray
    layer_ids: np.ndarray

    @property
    def n_units(self) -> int:
        return len(self.counts)

    def delta_pct(self, idx: np.ndarray | None = None) -> np.ndarray:
        """(L,) delta_pct of each layer, or (B, L) over the resamples ``idx`` (B, G) of units."""
        if idx is None:
            c, b, a = self.counts.sum(), self.base.sum(), self.layers.sum(axis=0)
            return 100 * np.expm1((a - b) / c)
        c, b = self.counts[idx].sum(1), self.base[idx].sum(1)
        a = self.layers[idx].sum(1)  # (B, L)
        return 100 * np.expm1((a - b[:, None]) / c[:, None])

    def differences(self) -> np.ndarray:
        """(G, L) per-unit mean NLL difference (nats per token), skipped - intact."""
        return (self.layers - self.base[:, None]) / self.counts[:, None]


def unit_sums(skip: pd.DataFrame, doc_ids: np.ndarray | None) -> UnitSums:
    """:class:`UnitSums` of the skip rows (columns layer, nll_per_seq, base_nll_per_seq:
    per-window mean NLL arrays); ``doc_ids`` (n_windows,) the unit of each window (None: each
    window its own unit)."""
    per = np.stack(skip["nll_per_seq"].to_list())  # (L, n_windows)
    base = np.asarray(skip["base_nll_per_seq"].iloc[0], float)
    groups = np.arange(per.shape[1]) if doc_ids is None else np.asarray(doc_ids)[: per.shape[1]]
    _, g = np.unique(groups, return_inverse=True)
    layers = np.stack([np.bincount(g, row) for row in per], axis=1)  # (G, L)
    return UnitSums(
        np.bincount(g).astype(float), np.bincount(g, base), layers, skip["layer"].to_numpy()
    )


def _quantiles(draws: np.ndarray, level: float, n_units: int) -> tuple[float, float]:
    """Expanded percentile interval (two-sided coverage ``level``) of bootstrap draws."""
    draws = draws[np.isfinite(draws)]
    if draws.size < 10:
        return float("nan"), float("nan")
    a = 1 - expanded_level(level, n_units)
    lo, hi = np.quantile(draws, [a / 2, 1 - a / 2])
    return float(lo), float(hi)


def log_range(d: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """log10(max / min) over the positive entries of ``d`` (..., L) where ``keep`` (L,)."""
    pos = np.where((d > 0) & keep, d, np.nan)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # no positive layer: NaN
        return np.log10(np.nanmax(pos, -1) / np.nanmin(pos, -1))


def range_floor(skip: pd.DataFrame, n_units: int, need_log10: float) -> str | None:
    """Why the range rule cannot read a range of at least 10^need_log10 at this design (None:
    it can). A layer enters the range only when its CI excludes 0 (delta > its lower half-width
    w_l = delta_l - delta_ci_low_l), so the smallest change this design tells from 0 is about
    floor = min_l w_l (percent) and the widest range it can show is about
    log10(max_l delta_ci_high_l / floor). Below ``need_log10`` the row is undecidable; the
    design that would decide: n (floor / f)^2 units, f = max_l delta_l / 10^need_log10 (half-
    widths shrink as 1 / sqrt(units))."""
    d = skip["delta_pct"].to_numpy(float)
    w = d - skip["delta_ci_low"].to_numpy(float)
    top = float(np.nanmax(skip["delta_ci_high"].to_numpy(float)))
    w = w[np.isfinite(w) & (w > 0)]
    if not w.size or not np.isfinite(top) or top <= 0:
        return None
    floor = float(w.min())
    widest = float(np.log10(top / floor))
    if widest >= need_log10:
        return None
    f = float(np.nanmax(d)) / 10**need_log10
    need = n_units * (floor / f) ** 2 if f > 0 else float("inf")
    return (f"about {need:.2g} units, not {n_units}, would decide it: at {n_units} the "
            f"smallest change told from 0 is about {floor:.3g}% and the largest layer's upper "
            f"bound {top:,.4g}%, so the widest range it can show is about 10^{widest:.2g}, short "
            f"of 10^{need_log10:g}; 10^{need_log10:g} below the largest layer is {f:.2g}%")  # fmt: skip


def measure_range(
    skip: pd.DataFrame, us: UnitSums, n_bootstrap: int, seed: int, need_log10: float | None = None
) -> dict[str, object]:
    """The importance range: log10(max / min delta_pct) over the layers whose paired 95% CI
    excludes 0 (``delta_ci_low > 0``; a change indistinguishable from 0 cannot be the divisor),
    with its 95% expanded percentile CI over units (the same layers in every resample).
    ``need_log10``: the smallest range the claim needs; a design that cannot show one that wide
    makes the row undecidable (:func:`range_floor`)."""
    sig = (skip["delta_ci_low"] > 0).to_numpy()
    est = float(log_range(us.delta_pct(), sig))
    draws = log_range(us.delta_pct(cluster_draws(us.n_units, n_bootstrap, seed)), sig)
    lo, hi = _quantiles(draws, 0.95, us.n_units)
    d = skip.set_index("layer")["delta_pct"][sig]
    where = (
        (
            f"max layer {int(d.idxmax())} ({d.max():+,.4g}%), min layer {int(d.idxmin())} "
            f"({d.min():+,.4g}%)"
        )
        if len(d)
        else "no layer's CI excludes 0"
    )
    out: dict[str, object] = {
        "estimate": est,
        "ci_low": lo,
        "ci_high": hi,
        "sided": "two-sided",
        "effect_size": float(sig.sum()),
        "effect_name": "layers whose CI excludes 0",
        "n_units": us.n_units,
        "detail": where,
        "untestable": None if np.isfinite(est) else "fewer than 2 layers raise PPL significantly",
    }
    why = None if need_log10 is None else range_floor(skip, us.n_units, need_log10)
    return out | ({"undecidable": why} if why else {})


def core_share_p(n_layers: int, n_core: int, n_top: int, hits: int) -> float:
    """P(at least ``hits`` of the ``n_top`` most important layers lie in a core of ``n_core``
    layers) when the layer order is random: the exact permutation null of the core share,
    hypergeometric(N = n_layers, K = n_core, n = n_top). 1.0 when hits <= 0."""
    if hits <= 0:
        return 1.0
    return float(stats.hypergeom.sf(hits - 1, n_layers, n_core, n_top))


def measure_core(
    us: UnitSums, core: list[int] | None, n_bootstrap: int, seed: int, why: str = ""
) -> dict[str, object]:
    """The critical core: the share of the len(core) most important layers that lie in
    ``core`` (paper L8-11 mapped by depth), its one-sided p under a random layer order (exact,
    :func:`core_share_p`) and the p of the opposite (fewer core layers on top than a random
    order gives), and the CI whose ends are one-sided 95% bounds (the central 90% interval,
    expanded percentile over units, the top layers re-chosen in each resample). ``why``: the
    reason when ``core`` is None (no depth mapping)."""
    if core is None:
        return {"untestable": why}
    missing = sorted(set(core) - set(us.layer_ids.tolist()))
    if missing:
        return {"untestable": f"core layers {', '.join(map(str, missing))} were not swept"}
    k, n_layers = len(core), len(us.layer_ids)
    d = us.delta_pct()
    top = us.layer_ids[np.argsort(-d, kind="stable")[:k]]
    hits = int(np.isin(top, core).sum())
    draws = us.delta_pct(cluster_draws(us.n_units, n_bootstrap, seed + 1))
    tops = us.layer_ids[np.argsort(-draws, axis=1, kind="stable")[:, :k]]
    lo, hi = _quantiles(np.isin(tops, core).mean(1), 0.90, us.n_units)
    return {
        "estimate": hits / k,
        "ci_low": lo,
        "ci_high": hi,
        "sided": "greater",
        "p": core_share_p(n_layers, k, k, hits),
        "p_opposite": float(stats.hypergeom.cdf(hits, n_layers, k, k)),
        "effect_size": float(top[0]),
        "effect_name": "most important layer",
        "n_units": us.n_units,
        "detail": f"top {k}: layers {', '.join(map(str, sorted(top)))}; core "
        f"{', '.join(map(str, core))} of {n_layers}",
    }


def measure_core_max(
    us: UnitSums, core: list[int] | None, n_bootstrap: int, seed: int, why: str = ""
) -> dict[str, object]:
    """The size of the core: log10 of the largest skip delta_pct among the core layers, with
    its 95% expanded percentile CI over units (the peak re-chosen among the core layers in each
    resample). Layer 0 and the overall peak are named in the detail; they do not decide it."""
    if core is None:
        return {"untestable": why}
    ids = us.layer_ids.tolist()
    missing = sorted(set(core) - set(ids))
    if missing:
        return {"untestable": f"core layers {', '.join(map(str, missing))} were not swept"}
    in_core = np.isin(us.layer_ids, core)
    d = us.delta_pct()
    peak = float(d[in_core].max())
    if peak <= 0:
        return {"untestable": f"no core layer raises PPL (largest core delta_pct {peak:+.3g}%)"}
    draws = us.delta_pct(cluster_draws(us.n_units, n_bootstrap, seed + 3))[:, in_core].max(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lo, hi = _quantiles(np.log10(np.where(draws > 0, draws, np.nan)), 0.95, us.n_units)
    at0 = f"{d[ids.index(0)]:+,.0f}%" if 0 in ids else "not swept"
    top = int(us.layer_ids[np.argmax(d)])
    return {
        "estimate": float(np.log10(peak)),
        "ci_low": lo,
        "ci_high": hi,
        "sided": "two-sided",
        "effect_size": float(us.layer_ids[in_core][np.argmax(d[in_core])]),
        "effect_name": "core layer with the largest skip delta_pct",
        "n_units": us.n_units,
        "detail": f"core peak {peak:+,.0f}%; outside the core, not deciding it: layer 0 "
        f"{at0}, largest layer {top} ({d.max():+,.0f}%)",
    }


def anti_layers(
    us: UnitSums, skip: pd.DataFrame, alpha: float = 0.05
) -> tuple[np.ndarray, np.ndarray]:
    """(anti-layers, BH q-values (L,)): the layers whose skip lowers the NLL, by a one-sided
    Wilcoxon signed-rank test over units per layer, Benjamini-Hochberg q < ``alpha`` over the
    layers, with the paired 95% CI of delta_pct (``skip["delta_ci_high"]``) below 0."""
    diff = us.differences()  # (G, L)
    ps = [
        float(stats.wilcoxon(col, alternative="less").pvalue) if np.any(col != 0) else 1.0
        for col in diff.T
    ]
    q = fdr_bh(ps)["q_value"].to_numpy()
    ci_high = skip.set_index("layer")["delta_ci_high"].reindex(us.layer_ids).to_numpy()
    return us.layer_ids[(q < alpha) & (ci_high < 0)], q


def measure_anti(anti: np.ndarray, q: np.ndarray, n_units: int) -> dict[str, object]:
    """The number of anti-layers (:func:`anti_layers`); a count row, no CI (the BH rule
    controls the chance of any false one at 5% when no layer is an anti-layer)."""
    names = ", ".join(map(str, anti)) or "none"
    return {
        "estimate": float(len(anti)),
        "effect_size": float(np.nanmin(q)) if len(q) else np.nan,
        "effect_name": "smallest BH q over layers",
        "n_units": n_units,
        "detail": f"anti-layers: {names}",
    }


def measure_anti_at(
    anti: np.ndarray, n_layers: int, mapping: str, why: str = ""
) -> dict[str, object]:
    """How many of the paper's anti-layer positions (L14, L17, mapped by depth: each its own
    set of layers) hold an anti-layer (:func:`anti_layers`); a count row."""
    at = [mapped_layers([p], n_layers, mapping) for p in PAPER_ANTI]
    if any(a is None for a in at):
        return {"untestable": why}
    found = [any(x in (a or []) for x in anti) for a in at]
    mapped = "; ".join(
        f"L{p} -> {', '.join(map(str, a or []))}" for p, a in zip(PAPER_ANTI, at, strict=True)
    )
    return {
        "estimate": float(sum(found)),
        "detail": f"{mapped}; anti-layers anywhere: {', '.join(map(str, anti)) or 'none'}",
    }


def core_layers(n_layers: int) -> list[int]:
    """The layers of an L-layer model that stand for paper 3's critical core L8-11 (span)."""
    return mapped_layers(PAPER_CORE, n_layers, "span") or []
