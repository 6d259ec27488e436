"""Measurements of paper 2's signature claims (where ΔW lies) from the deltas table of
:func:`lamina.weights.probes.organism_deltas`: one dict of
:class:`lamina.evidence.decide.Measurement` fields per claim of :mod:`lamina.weights.claims`.

The Q/K rows read, per matrix, ρ̂(ΔW) / max(ρ̂(W), k/d) (:func:`beyond_both`): above 1 only
when the update is more concentrated in the input principal subspace than both an isotropic
matrix and the matrix it updates, each RSF read back into the true P_A through the leakage of
its estimate (:mod:`lamina.weights.qk_null`). The write rows read the write enrichment against
the claimed range [1/m, m] with a TOST (:func:`tost_summary`).
"""

from __future__ import annotations

import numbers
from typing import Unpack

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import stats as sps

from lamina.weights.settings import SignatureSettings
from lamina.weights.summaries import (
    QK,
    WRITE,
    RowSelection,
    closeness_summary,
    enrichments,
    per_block,
    per_matrix,
    ratio_summary,
    selected_rows,
    worst,
)

__all__ = [
    "beyond_both",
    "every_objective",
    "late_pretraining",
    "qk_measure",
    "stage_not_objective",
    "tost_summary",
    "writes_measure",
]


def beyond_both(
    deltas: pd.DataFrame, s: SignatureSettings, **where: Unpack[RowSelection]
) -> np.ndarray:
    """Per block (layer) of ``where``: RSF(ΔW) / max(RSF(W), k/d) = min(enrichment, vs_weight)
    of its Q and K maps, the update's concentration over the stronger of its two baselines
    (isotropy; the matrix it updates), geo-averaged over the pairs of ``where`` a matrix appears
    in, then over the block's matrices (:func:`~lamina.weights.summaries.per_block`): Q and K
    read one input moment, so one estimated P̂ and its error, and the block is the independent
    unit. Without a ``vs_weight`` column (W not measured): the enrichment alone.

    With P_A estimated from n tokens (:func:`lamina.weights.qk_null.add_null_centres`), the
    ratio is read in the true P_A: ``vs_weight_true`` = ρ̂(ΔW) / max(ρ̂(W), k/d), each RSF
    mapped back through the estimate's leakage (:func:`lamina.weights.qk_null.true_rsf`), which
    removes both the bias a gradient-shaped ΔW gains at equal concentration and the attenuation
    of a real excess; its floor k/d is the isotropic baseline, so the measured enrichment is not
    taken again. A row without it keeps min(enrichment, vs_weight / c), c the ``null_centre``
    (1 where not finite). -> (n_blocks,)."""
    t = selected_rows(deltas, s, QK, **where)
    value = t["enrichment"]
    if "vs_weight" in t:
        own = t["vs_weight"]
        if "null_centre" in t:
            own = own / t["null_centre"].where(np.isfinite(t["null_centre"]), 1.0)
        value = np.minimum(value, own)
        if "vs_weight_true" in t:  # both baselines in the true P_A
            value = t["vs_weight_true"].where(np.isfinite(t["vs_weight_true"]), value)
    return per_block(value, t["key"], t["layer"])


def _matrix_values(
    deltas: pd.DataFrame, s: SignatureSettings, roles: tuple[str, ...], column: str = "enrichment",
    **where: Unpack[RowSelection],
) -> np.ndarray:
    """``column`` per matrix of ``roles``, geo-averaged over the pairs of ``where``."""
    t = selected_rows(deltas, s, roles, **where)
    return per_matrix(t[column], t["key"])


def tost_summary(
    values: ArrayLike, margin: float, n_bootstrap: int, seed: int
) -> dict[str, object]:
    """A "close to 1" claim on per-matrix ratios: geometric mean, its two-sided 95% bootstrap
    CI, and the TOST p that the log ratios lie within ±log ``margin``: the larger of the
    one-sided Wilcoxon p of log r > -log m and of log r < log m (small only when both bounds
    are rejected). -> Measurement fields (``p_opposite`` None: "reversed" does not apply)."""
    out = closeness_summary(values, n_bootstrap, seed)
    x = np.log(np.asarray(values, dtype=np.float64))
    x = x[np.isfinite(x)]
    if len(x) >= 2:
        lm = np.log(margin)
        p_lo = float(sps.wilcoxon(x + lm, alternative="greater").pvalue)
        p_hi = float(sps.wilcoxon(x - lm, alternative="less").pvalue)
        out["p"] = max(p_lo, p_hi)
    return out


def qk_measure(
    deltas: pd.DataFrame, s: SignatureSettings, **where: Unpack[RowSelection]
) -> dict[str, object]:
    """The Q/K enrichment of the rows of ``where`` against both baselines
    (:func:`beyond_both`), one value per block, summarised by
    :func:`~lamina.weights.summaries.ratio_summary` (one-sided, greater) with a t interval
    over the blocks (8 on the chapters' models and the calibration's source; a percentile
    bootstrap over the 16 matrices counted Q and K of one block as independent); undecidable
    with 4 blocks or fewer (the Wilcoxon cannot reach 0.05); effect_size: the paper's
    statistic, the geo-mean enrichment against k/d alone."""
    out = ratio_summary(beyond_both(deltas, s, **where), "greater", s.n_bootstrap, s.seed,
                        interval="t")  # fmt: skip
    iso = _matrix_values(deltas, s, QK, **where)
    geo = float(np.exp(np.log(iso).mean())) if len(iso) else float("nan")
    own = (_matrix_values(deltas, s, QK, column="vs_weight", **where)
           if "vs_weight" in deltas else np.array([]))  # fmt: skip
    detail = f"vs k/d alone {geo:.3g}" + (
        f"; RSF(ΔW)/RSF(W) {np.exp(np.log(own).mean()):.3g}" if len(own) else
        "; RSF of W itself not measured: judged against k/d only")  # fmt: skip
    extra: dict[str, object] = {}
    if "null_centre" in deltas:
        c = _matrix_values(deltas, s, QK, column="null_centre", **where)
        c = c[np.isfinite(c)]
        if len(c):
            t = selected_rows(deltas, s, QK, **where)
            centre = float(np.exp(np.log(c).mean()))
            extra = {"null_centre": centre, "null_tokens": float(t["null_tokens"].median()),
                     "null_tail": float(t["null_tail"].median())}  # fmt: skip
            detail += (f"; P_A from {extra['null_tokens']:.0f} tokens (tails E s⁴ "
                       f"{extra['null_tail']:.2g}): judged in the true P_A, ρ̂(ΔW) / ρ̂(W) (the "
                       f"null centre of the measured ratio {centre:.3g})")  # fmt: skip
    return out | {"effect_size": geo, "effect_name": "Q/K enrichment vs k/d", "detail": detail} | extra


def writes_measure(
    deltas: pd.DataFrame, s: SignatureSettings, margin: float, **where: Unpack[RowSelection]
) -> dict[str, object]:
    """The write enrichment of the rows of ``where``: :func:`tost_summary` against
    [1/margin, margin]."""
    return tost_summary(_matrix_values(deltas, s, WRITE, **where), margin, s.n_bootstrap, s.seed)


def late_pretraining(
    deltas: pd.DataFrame, s: SignatureSettings, margin: float
) -> dict[str, dict[str, object]]:
    """{"qk": ..., "writes": ...} of every late consecutive pretraining ΔW (family
    "pretraining", phase "late"), each matrix's ratios geo-averaged over the pairs (its pairs
    share W and its basis), the Q/K rows' then over each block (:func:`beyond_both`: the unit
    is the block; the writes rows' is the matrix); each "not testable" without one."""
    where: RowSelection = {"family": "pretraining", "phase": "late"}
    out = {"qk": qk_measure(deltas, s, **where), "writes": writes_measure(deltas, s, margin, **where)}
    if not len(enrichments(deltas, s, QK, **where)):
        why = "needs consecutive late-pretraining checkpoints"
        out = {k: {"untestable": why} for k in out}
    return out


def every_objective(
    deltas: pd.DataFrame, s: SignatureSettings, margin: float, pairs: dict[str, str]
) -> dict[str, dict[str, object]]:
    """{"qk": ..., "writes": ...} over the applied objectives (``pairs``: {objective: its
    ΔW pair label in ``deltas``}): each objective measured alone (:func:`qk_measure`,
    :func:`writes_measure`) and the row is the one with the weakest evidence (the largest p:
    the intersection-union test of "under every objective"); the detail lists every
    objective's estimate and p."""
    out: dict[str, dict[str, object]] = {}
    for part in ("qk", "writes"):
        parts = {}
        for obj, pair in pairs.items():
            kw: RowSelection = {"family": "objective", "pair": pair}
            parts[obj] = (qk_measure(deltas, s, **kw) if part == "qk"
                          else writes_measure(deltas, s, margin, **kw))  # fmt: skip
        if not parts:
            out[part] = {"untestable": "no objective was applied to this checkpoint"}
            continue
        name, m = worst(parts)
        listed = "; ".join(f"{o} {v['estimate']:.3g} (p = {_p(v['p'])})" for o, v in parts.items())
        out[part] = m | {"detail": f"weakest: {name}; {listed}"}
    return out


def _p(p: object) -> str:
    return "n/a" if not isinstance(p, numbers.Real) or not np.isfinite(float(p)) else f"{p:.3g}"


def stage_not_objective(deltas: pd.DataFrame, s: SignatureSettings) -> dict[str, object]:
    """Early / late pretraining write enrichment, matrix by matrix: per write matrix, the
    geo-mean of its enrichment over the early consecutive pairs over that over the late ones;
    estimate the geometric mean of that ratio over matrices, its one-sided 90% percentile
    bootstrap CI over matrices and the one-sided Wilcoxon signed-rank p of log early - log late
    > 0 (:func:`~lamina.weights.summaries.ratio_summary`: the pairs of one matrix share W, so
    the matrix is the unit). Untestable without both phases on at least 2 matrices."""
    def phase(name: str) -> pd.Series:
        t = selected_rows(deltas, s, WRITE, family="pretraining", phase=name)
        t = t[t["enrichment"] > 0]
        return np.log(t["enrichment"]).groupby(t["key"]).mean()

    early, late = phase("early"), phase("late")
    keys = early.index.intersection(late.index)
    if len(keys) < 2:
        return {"untestable": "needs early and late pretraining ΔW of the same matrices"}
    out = ratio_summary(np.exp(early[keys] - late[keys]), "greater", s.n_bootstrap, s.seed)
    return out | {"detail": f"early {np.exp(early[keys].mean()):.3g}, "
                            f"late {np.exp(late[keys].mean()):.3g}"}  # fmt: skip
