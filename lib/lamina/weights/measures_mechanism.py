"""Measurements of paper 2's mechanism claims (gradient geometry, the optimiser, cancellation,
write gradients across pretraining) from the tables of :mod:`lamina.weights.mechanism`: dicts
of :class:`lamina.evidence.decide.Measurement` fields."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from lamina.evidence.stats import bootstrap_ci, spearman_permutation
from lamina.weights.measures_signature import tost_summary
from lamina.weights.settings import SignatureSettings
from lamina.weights.summaries import ratio_summary, worst

__all__ = [
    "cancellation_direction",
    "cancellation_scale",
    "optimizer_attenuates",
    "raw_read_follows",
    "read_grad_inherits",
    "write_grad_early_only",
    "write_weights_early",
]


def _p(p: object) -> str:
    return "n/a" if not isinstance(p, numbers.Real) or not np.isfinite(float(p)) else f"{p:.3g}"


def _per_objective(
    g: pd.DataFrame, ratio: Any, margin: float, s: SignatureSettings, what: str
) -> dict[str, object]:
    """:func:`~lamina.weights.measures_signature.tost_summary` of ``ratio(rows)`` per objective of
    the gradients table ``g`` (column ``objective``); the row is the objective with the weakest
    evidence (largest TOST p), the detail lists each."""
    parts = {str(o): tost_summary(ratio(t), margin, s.n_bootstrap, s.seed)
             for o, t in g.groupby("objective", sort=False)}  # fmt: skip
    if not parts:
        return {"untestable": f"no {what} measured"}
    name, m = worst(parts)
    listed = "; ".join(f"{o} {v['estimate']:.3g} (TOST p = {_p(v['p'])})" for o, v in parts.items())
    return m | {"detail": f"weakest: {name}; {listed}"}


def read_grad_inherits(read: pd.DataFrame, margin: float, s: SignatureSettings) -> dict[str, object]:
    """Per objective, RSF(summed read gradient) / activation share over the read matrices, close
    to 1 within [1/margin, margin] (TOST): the gradient inherits the activation spectrum; the
    row is the objective with the weakest evidence (:func:`_per_objective`)."""
    return _per_objective(read, lambda t: t["rsf_summed"] / t["activation_share"], margin, s,
                          "read gradient")  # fmt: skip


def raw_read_follows(read: pd.DataFrame, s: SignatureSettings) -> dict[str, object]:
    """Spearman ρ(activation share, summed-gradient RSF) over the read matrices under the LM
    objective, with its one-sided 90% percentile bootstrap CI over matrices and the one-sided
    (greater) permutation p (:func:`lamina.evidence.stats.spearman_permutation`: scipy's t
    approximation rejects 5.2% of exact nulls at 20 matrices); effect_size: the geo-mean
    summed read-gradient enrichment. Untestable under 3 matrices."""
    lm = read[read["objective"] == "lm"]
    if len(lm) < 3:
        return {"untestable": f"{len(lm)} read matrices under the LM objective (needs 3)"}
    x, y = lm["activation_share"].to_numpy(), lm["rsf_summed"].to_numpy()
    rho, p = spearman_permutation(x, y, alternative="greater", seed=s.seed)
    p_opposite = spearman_permutation(x, y, alternative="less", seed=s.seed)[1]
    res = sps.bootstrap((x, y), lambda a, b: sps.spearmanr(a, b)[0], paired=True,
                        vectorized=False, n_resamples=min(s.n_bootstrap, 1000),
                        confidence_level=0.90, method="percentile",
                        rng=np.random.default_rng(s.seed))  # fmt: skip
    enr = lm["enrichment_summed"].to_numpy()
    return {
        "estimate": rho, "ci_low": float(res.confidence_interval.low),
        "ci_high": float(res.confidence_interval.high), "sided": "greater",
        "p": p, "p_opposite": p_opposite, "n_units": len(lm),
        "effect_size": float(np.exp(np.log(enr).mean())),
        "effect_name": "summed read-gradient enrichment",
    }  # fmt: skip


def optimizer_attenuates(adam: pd.DataFrame, state: str, s: SignatureSettings) -> dict[str, object]:
    """Adam's update against elementwise normalisation, from the saved state ``state``: per read
    matrix, enrichment(u) / enrichment(sign(m)), u = m̂/(√v̂+ε) (one-sided Wilcoxon, less;
    :func:`~lamina.weights.summaries.ratio_summary`). Below 1 only when v̂ carries more than
    m̂²'s elementwise scale in the concentrated directions; in Adam's first step u = sign(g)
    and the ratio is 1 by construction. effect_size: the paper's statistic,
    enrichment(u) / enrichment(m). Untestable without that state."""
    t = adam[(adam["state"] == state) & (adam["kind"] == "read")]
    if not len(t):
        states = sorted(set(adam["state"])) if len(adam) else []
        return {"untestable": f"no Adam state of {state} (saved: {states or 'none'})"}
    out = ratio_summary(t["enrichment_update"] / t["enrichment_sign"], "less", s.n_bootstrap,
                        s.seed)  # fmt: skip
    raw = t["enrichment_update"] / t["enrichment_momentum"]
    return out | {
        "effect_size": float(np.exp(np.log(raw).mean())),
        "effect_name": "enrichment(update) / enrichment(momentum)",
        "detail": f"state after {int(t['step'].max())} steps",
    }


def cancellation_scale(g: pd.DataFrame, margin: float, s: SignatureSettings) -> dict[str, object]:
    """Per objective, cancellation c = ‖Σ_t g_t‖ / Σ_t ‖g_t‖ over the median of the same terms
    with random signs (≈ 1: the terms cancel like unrelated ones, so cancellation sets the
    update's scale), TOST within [1/margin, margin]; the objective with the weakest evidence."""
    if "cancellation_null" not in g:
        return {"untestable": "no sign-randomised null"}
    return _per_objective(g, lambda t: t["cancellation"] / t["cancellation_null"], margin, s,
                          "cancellation")  # fmt: skip


def cancellation_direction(g: pd.DataFrame, margin: float, s: SignatureSettings) -> dict[str, object]:
    """Per objective, RSF(summed gradient) / RSF(per-token terms, energy-pooled) (≈ 1: the sum
    keeps its terms' direction), TOST within [1/margin, margin]; the objective with the
    weakest evidence."""
    return _per_objective(g, lambda t: t["rsf_summed"] / t["rsf_token_pooled"], margin, s,
                          "gradient")  # fmt: skip


def _cuts(steps: pd.Series, s: SignatureSettings, total: int) -> tuple[pd.Series, pd.Series]:
    early = (steps > 0) & (steps <= s.early_fraction * total)
    return early, steps >= s.late_fraction * total


def write_grad_early_only(w: pd.DataFrame, s: SignatureSettings, total: int) -> dict[str, object]:
    """Early / late write-gradient enrichment across pretraining checkpoints (``total``: the
    last step), matrix by matrix: per write matrix, the geo-mean of its summed-gradient
    enrichment over the early checkpoints over that over the late ones; summarised over
    matrices by :func:`~lamina.weights.summaries.ratio_summary` (one-sided, greater: the
    Wilcoxon signed-rank p of log early - log late > 0; the checkpoints of one matrix are not
    independent, so the matrix is the unit)."""
    if not len(w):
        return {"untestable": "needs pretraining checkpoints"}
    early_m, late_m = _cuts(w["step"], s, total)
    live = w["enrichment_summed"] > 0

    def mean_log(mask: pd.Series) -> pd.Series:
        t = w[mask & live]
        return np.log(t["enrichment_summed"]).groupby(t["key"]).mean()

    e, lt = mean_log(early_m), mean_log(late_m)
    keys = e.index.intersection(lt.index)
    if len(keys) < 2:
        return {"untestable": "needs early and late pretraining checkpoints"}
    out = ratio_summary(np.exp(e[keys] - lt[keys]), "greater", s.n_bootstrap, s.seed)
    return out | {
        "effect_size": float(np.exp(lt[keys].mean())),
        "effect_name": "late write-gradient enrichment",
        "detail": f"early {np.exp(e[keys].mean()):.3g}, late {np.exp(lt[keys].mean()):.3g}",
    }


def write_weights_early(w: pd.DataFrame, s: SignatureSettings, total: int) -> dict[str, object]:
    """Share of the final gain of log write-weight enrichment reached by the last early
    checkpoint: per matrix g_e = log E(early) - log E(0), g_f = log E(final) - log E(0);
    estimate mean(g_e) / mean(g_f), its one-sided 90% paired bootstrap CI over matrices, the
    one-sided Wilcoxon p of g_e - g_f / 2 > 0 (more than half the gain early). Untestable
    without step 0, an early checkpoint and a final gain."""
    if not len(w):
        return {"untestable": "needs pretraining checkpoints"}
    steps = sorted(set(w["step"]))
    early = [t for t in steps if 0 < t <= s.early_fraction * total]
    if 0 not in steps or not early or steps[-1] <= early[-1]:
        return {"untestable": "needs the initialisation, an early and a later checkpoint"}

    def at(step: int) -> pd.Series:
        return np.log(w[w["step"] == step].set_index("key")["weight_enrichment"])

    e0, ee, ef = at(0), at(early[-1]), at(steps[-1])
    keys = e0.index.intersection(ee.index).intersection(ef.index)
    ge, gf = (ee[keys] - e0[keys]).to_numpy(), (ef[keys] - e0[keys]).to_numpy()
    if len(keys) < 2 or gf.mean() <= 0:
        return {"untestable": "the write weights gained no enrichment over pretraining",
                "detail": f"final gain {gf.mean():.3g}"}  # fmt: skip

    def share(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        return a.mean(axis) / b.mean(axis)

    ci = bootstrap_ci((ge, gf), share, n_resamples=s.n_bootstrap, seed=s.seed,
                      method="percentile", paired=True, confidence=0.90).iloc[0]  # fmt: skip
    diff = ge - gf / 2
    return {
        "estimate": float(ge.mean() / gf.mean()), "ci_low": float(ci["ci_low"]),
        "ci_high": float(ci["ci_high"]), "sided": "greater",
        "p": float(sps.wilcoxon(diff, alternative="greater").pvalue),
        "p_opposite": float(sps.wilcoxon(diff, alternative="less").pvalue),
        "n_units": len(keys), "effect_size": float(np.exp(ef.mean())),
        "effect_name": "final write-weight enrichment",
    }  # fmt: skip
