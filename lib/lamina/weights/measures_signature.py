"""Measurements of paper 2's signature claims (where ΔW lies) from the deltas table of
:func:`lamina.weights.probes.organism_deltas`: one dict of
:class:`lamina.evidence.decide.Measurement` fields per claim of :mod:`lamina.weights.claims`.

The Q/K rows read, per matrix, RSF(ΔW) / max(RSF(W), k/d) (:func:`beyond_both`): above 1 only
when the update is more concentrated in the input principal subspace than both an isotropic
matrix and the matrix it updates. The write rows read the write enrichment against the
claimed range [1/m, m] with a TOST (:func:`tost_summary`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from lamina.evidence.stats import bootstrap_ci
from lamina.weights.settings import SignatureSettings
from lamina.weights.summaries import (
    QK,
    WRITE,
    closeness_summary,
    enrichments,
    ratio_summary,
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


def beyond_both(deltas: pd.DataFrame, s: SignatureSettings, **where: Any) -> np.ndarray:
    """Per Q/K matrix of ``where``: RSF(ΔW) / max(RSF(W), k/d) = min(enrichment, vs_weight),
    the update's concentration over the stronger of its two baselines (isotropy; the matrix it
    updates). Without a ``vs_weight`` column (W not measured): the enrichment alone.
    -> (n_matrices,)."""
    enr = enrichments(deltas, s, QK, **where)
    if "vs_weight" not in deltas:
        return enr
    return np.minimum(enr, enrichments(deltas, s, QK, column="vs_weight", **where))


def tost_summary(
    values: Any, margin: float, n_bootstrap: int, seed: int
) -> dict[str, Any]:
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
    deltas: pd.DataFrame, s: SignatureSettings, **where: Any
) -> dict[str, Any]:
    """The Q/K enrichment of the rows of ``where`` against both baselines
    (:func:`beyond_both`), summarised by :func:`~lamina.weights.summaries.ratio_summary`
    (one-sided, greater); effect_size: the paper's statistic, the geo-mean enrichment
    against k/d alone."""
    out = ratio_summary(beyond_both(deltas, s, **where), "greater", s.n_bootstrap, s.seed)
    iso = enrichments(deltas, s, QK, **where)
    geo = float(np.exp(np.log(iso).mean())) if len(iso) else float("nan")
    own = (enrichments(deltas, s, QK, column="vs_weight", **where)
           if "vs_weight" in deltas else np.array([]))  # fmt: skip
    detail = f"vs k/d alone {geo:.3g}" + (
        f"; RSF(ΔW)/RSF(W) {np.exp(np.log(own).mean()):.3g}" if len(own) else
        "; RSF of W itself not measured: judged against k/d only")  # fmt: skip
    return out | {"effect_size": geo, "effect_name": "Q/K enrichment vs k/d", "detail": detail}


def writes_measure(
    deltas: pd.DataFrame, s: SignatureSettings, margin: float, **where: Any
) -> dict[str, Any]:
    """The write enrichment of the rows of ``where``: :func:`tost_summary` against
    [1/margin, margin]."""
    return tost_summary(enrichments(deltas, s, WRITE, **where), margin, s.n_bootstrap, s.seed)


def late_pretraining(
    deltas: pd.DataFrame, s: SignatureSettings, margin: float
) -> dict[str, dict[str, Any]]:
    """{"qk": ..., "writes": ...} of every late consecutive pretraining ΔW (family
    "pretraining", phase "late"), pooled over pairs; each "not testable" without one."""
    where: dict[str, Any] = {"family": "pretraining", "phase": "late"}
    out = {"qk": qk_measure(deltas, s, **where), "writes": writes_measure(deltas, s, margin, **where)}
    if not len(enrichments(deltas, s, QK, **where)):
        why = "needs consecutive late-pretraining checkpoints"
        out = {k: {"untestable": why} for k in out}
    return out


def every_objective(
    deltas: pd.DataFrame, s: SignatureSettings, margin: float, pairs: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """{"qk": ..., "writes": ...} over the applied objectives (``pairs``: {objective: its
    ΔW pair label in ``deltas``}): each objective measured alone (:func:`qk_measure`,
    :func:`writes_measure`) and the row is the one with the weakest evidence (the largest p:
    the intersection-union test of "under every objective"); the detail lists every
    objective's estimate and p."""
    out = {}
    for part in ("qk", "writes"):
        parts = {}
        for obj, pair in pairs.items():
            kw: dict[str, Any] = {"family": "objective", "pair": pair}
            parts[obj] = (qk_measure(deltas, s, **kw) if part == "qk"
                          else writes_measure(deltas, s, margin, **kw))  # fmt: skip
        if not parts:
            out[part] = {"untestable": "no objective was applied to this checkpoint"}
            continue
        name, m = worst(parts)
        listed = "; ".join(f"{o} {v['estimate']:.3g} (p = {_p(v['p'])})" for o, v in parts.items())
        out[part] = m | {"detail": f"weakest: {name}; {listed}"}
    return out


def _p(p: float | None) -> str:
    return "n/a" if p is None or not np.isfinite(p) else f"{p:.3g}"


def stage_not_objective(deltas: pd.DataFrame, s: SignatureSettings) -> dict[str, Any]:
    """Early / late pretraining write enrichment: the ratio of geometric means over the write
    matrices of the early consecutive pairs and of the late ones (late pretraining and the
    alignment stages), its one-sided 90% percentile bootstrap CI (each sample resampled), and
    the one-sided Mann-Whitney p of early > late on log enrichment. Untestable without both."""
    early = enrichments(deltas, s, WRITE, family="pretraining", phase="early")
    late = enrichments(deltas, s, WRITE, family="pretraining", phase="late")
    early, late = np.log(early[early > 0]), np.log(late[late > 0])
    if len(early) < 2 or len(late) < 2:
        return {"untestable": "needs early and late pretraining ΔW"}

    def diff(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        return a.mean(axis) - b.mean(axis)

    b = bootstrap_ci((early, late), diff, n_resamples=s.n_bootstrap, seed=s.seed,
                     method="percentile", confidence=0.90).iloc[0]  # fmt: skip
    p = float(sps.mannwhitneyu(early, late, alternative="greater").pvalue)
    q = float(sps.mannwhitneyu(early, late, alternative="less").pvalue)
    return {
        "estimate": float(np.exp(early.mean() - late.mean())),
        "ci_low": float(np.exp(b["ci_low"])), "ci_high": float(np.exp(b["ci_high"])),
        "sided": "greater", "p": p, "p_opposite": q, "n_units": len(early) + len(late),
        "detail": f"early {np.exp(early.mean()):.3g}, late {np.exp(late.mean()):.3g}",
    }  # fmt: skip
