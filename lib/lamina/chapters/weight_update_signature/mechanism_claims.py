"""Verdict rows of paper 2's mechanism claims (gradient geometry, optimiser attenuation,
cancellation, write gradients across pretraining), from the mechanism measurements."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from lamina.chapters.results import verdict
from lamina.chapters.weight_update_signature.config import SignatureConfig
from lamina.chapters.weight_update_signature.units import Units
from lamina.chapters.weight_update_signature.verdicts import (
    claim_row,
    close_verdict,
    combine,
    keep_layers,
    summary,
)
from lamina.evidence.stats import paired_bootstrap_ci

__all__ = ["cancellation_summary", "mechanism_claims"]


def cancellation_summary(t, config: SignatureConfig) -> dict[str, Any]:
    """The scale half of the cancellation claim, against sign-randomised terms.

    Per map, r = c / median(c_s): the observed cancellation c = ‖Σ_t g_t‖_F / Σ_t ‖g_t‖_F over
    that of the same terms with random signs (:func:`lamina.weights.gradients.sign_null_cancellation`,
    ≈ 1/√T for any terms, so "c < 0.5" cannot fail). r ≈ 1: the terms cancel like unrelated
    ones, and cancellation sets the update's scale; r ≫ 1: they share a direction, whose
    coherent sum sets the scale. Verdict on the geo-mean of r over maps (95% CI over maps):
    reproduced when the CI's upper end is <= ``random_margin``, partially when the estimate
    is, else not reproduced. -> {geo, ci_low, ci_high, p_greater, verdict, note}; p_greater
    is the Wilcoxon p of log r > 0 (terms more aligned than unrelated ones)."""
    if "cancellation_null" not in t:
        return {"geo": float("nan"), "verdict": "not testable", "note": "no sign null"}
    s = summary(t["cancellation"] / t["cancellation_null"], config)
    m = config.random_margin
    if not np.isfinite(s["geo"]):
        word = "not testable"
    elif np.isfinite(s["ci_high"]) and s["ci_high"] <= m:
        word = "reproduced"
    else:
        word = "partially" if s["geo"] <= m else "not reproduced"
    share = float((t["cancellation_p_aligned"] < 0.05).mean())
    note = (
        f"median cancellation {float(t['cancellation'].median()):.3f} vs "
        f"{float(t['cancellation_null'].median()):.3f} for sign-randomised terms; "
        f"{share:.0%} of maps more aligned than the null (p < 0.05); scale: {word}"
    )
    return s | {"verdict": word, "note": note}


def _read_gradient_rows(model: str, read: pd.DataFrame, config: SignatureConfig) -> list[dict[str, Any]]:
    """read_grad_inherits: per objective, RSF(summed read gradient) / activation share (≈ 1:
    the gradient inherits the activation spectrum); across objectives, max/min summed
    read-gradient enrichment (Friedman p over matrices with >= 3 objectives)."""
    m = config.random_margin
    rows = []
    geo_by_obj = {}
    for obj, t in read.groupby("objective", sort=False):
        s = summary(t["rsf_summed"] / t["activation_share"], config)
        geo_by_obj[obj] = summary(t["enrichment_summed"], config)["geo"]
        rows.append(
            claim_row(
                "read_grad_inherits",
                model,
                f"{obj} objective @{config.base}",
                "≈ activation spectrum",
                s["geo"],
                s=s,
                p=s["p_two"],
                word=close_verdict(s, m),
                effect=geo_by_obj[obj],
                effect_name="summed read-gradient enrichment",
                unit="RSF(summed gradient) / activation share",
            )
        )
    if geo_by_obj:
        spread = max(geo_by_obj.values()) / min(geo_by_obj.values())
        piv = read.pivot_table(index="key", columns="objective", values="rsf_summed")
        p = (
            float(sps.friedmanchisquare(*[piv[c] for c in piv]).pvalue)
            if piv.shape[1] >= 3
            else None
        )
        rows.append(
            claim_row(
                "read_grad_inherits",
                model,
                "across objectives",
                "same under every objective",
                spread,
                p=p,
                word="reproduced"
                if spread <= m
                else "partially"
                if spread <= m * m
                else "not reproduced",
                note="max/min summed read-gradient enrichment",
                unit="max/min ratio",
            )
        )
    return rows


def _raw_read_row(model: str, read: pd.DataFrame, config: SignatureConfig) -> list[dict[str, Any]]:
    """raw_read_grad_follows: Spearman ρ(activation share, summed-gradient RSF) over the read
    matrices under the LM objective, bootstrap CI over matrices (no row under 3 matrices)."""
    rows = []
    lm = read[read["objective"] == "lm"]
    if len(lm) >= 3:
        x, y = lm["activation_share"].to_numpy(), lm["rsf_summed"].to_numpy()
        rho, p_rho = sps.spearmanr(x, y)
        lo, hi = paired_bootstrap_ci(
            (x, y),
            lambda a, b: sps.spearmanr(a, b)[0],
            min(config.n_bootstrap, 1000),
            config.seed,
            vectorized=False,
        )
        s = {"ci_low": lo, "ci_high": hi}
        enr = summary(lm["enrichment_summed"], config)
        rows.append(
            claim_row(
                "raw_read_grad_follows",
                model,
                f"lm objective @{config.base}",
                "follows",
                float(rho),
                s=s,
                p=float(p_rho),
                word=verdict(float(p_rho), bool(rho > 0 and enr["geo"] > 1))
                if rho > 0
                else "not reproduced",
                effect=enr["geo"],
                effect_name="summed read-gradient enrichment",
                unit="Spearman ρ(activation share, gradient RSF) over read matrices",
            )
        )
    return rows


def _adam_rows(model: str, parts: dict, config: SignatureConfig) -> list[dict[str, Any]]:
    """optimizer_attenuates: per Adam state, geo-mean enrichment(update) / enrichment(momentum)
    over read matrices (< 1: the optimiser attenuates the raw enrichment)."""
    rows = []
    a = keep_layers(parts["adam"], config)
    for state, t in a[a["kind"] == "read"].groupby("state", sort=False):
        s = summary(t["enrichment_update"] / t["enrichment_momentum"], config)
        word = "not reproduced" if s["geo"] >= 1 else verdict(s["p_less"], bool(s["ci_high"] < 1))
        rows.append(
            claim_row(
                "optimizer_attenuates", model, f"Adam state @{state}", "update < raw", s["geo"],
                s=s, p=s["p_less"], word=word, unit="enrichment(update) / enrichment(momentum)",
            )
        )
    return rows


def _cancellation_rows(model: str, g: pd.DataFrame, config: SignatureConfig) -> list[dict[str, Any]]:
    """cancellation_scale_not_direction: per objective, RSF(summed) / RSF(per-token, pooled)
    (≈ 1: direction kept) combined with :func:`cancellation_summary` (the scale)."""
    m = config.random_margin
    rows = []
    for obj, t in g.groupby("objective", sort=False):
        s = summary(t["rsf_summed"] / t["rsf_token_pooled"], config)
        scale = cancellation_summary(t, config)
        word = combine([scale["verdict"], close_verdict(s, m)])
        rows.append(
            claim_row(
                "cancellation_scale_not_direction", model, f"{obj} objective @{config.base}",
                "scale only", s["geo"], s=s, p=s["p_two"], word=word, effect=scale["geo"],
                effect_name="cancellation / sign-randomised cancellation", note=scale["note"],
                unit="RSF(summed) / RSF(per-token, pooled)",
            )
        )
    return rows


def _write_gradient_row(model: str, w: pd.DataFrame, config: SignatureConfig, ck: Units) -> dict[str, Any]:
    """write_grad_early_only: early / late geo-mean write-gradient enrichment across
    pretraining checkpoints (Mann-Whitney p of early > late on log enrichment)."""
    m = config.random_margin
    early_cut, late_cut = config.early_fraction * ck.total, config.late_fraction * ck.total
    e = summary(w[(w["step"] > 0) & (w["step"] <= early_cut)]["enrichment_summed"], config)
    lt = summary(w[w["step"] >= late_cut]["enrichment_summed"], config)
    if np.isfinite(e["geo"]) and np.isfinite(lt["geo"]):
        early_v = w[(w["step"] > 0) & (w["step"] <= early_cut)]["enrichment_summed"]
        p = float(
            sps.mannwhitneyu(
                np.log(early_v),
                np.log(w[w["step"] >= late_cut]["enrichment_summed"]),
                alternative="greater",
            ).pvalue
        )
        ok = e["geo"] > m and lt["geo"] <= m
        word = "not reproduced" if e["geo"] <= lt["geo"] else verdict(p, ok)
    else:
        p, word = None, "not testable"
    return claim_row(
        "write_grad_early_only",
        model,
        "pretraining",
        "early only",
        e["geo"] / lt["geo"],
        p=p,
        word=word,
        effect=lt["geo"],
        effect_name="late write-gradient enrichment",
        note=f"early enrichment {e['geo']:.2f}",
        unit="early / late write-gradient enrichment",
    )


def _write_weight_row(model: str, w: pd.DataFrame, config: SignatureConfig, ck: Units) -> dict[str, Any]:
    """write_weights_acquire_early: share of the final write-weight enrichment gain (geo-mean
    over matrices, from step 0) reached by the last early checkpoint (Wilcoxon p, paired)."""
    early_cut = config.early_fraction * ck.total
    by_step = w.groupby("step")["weight_enrichment"].apply(
        lambda v: float(np.exp(np.log(v).mean()))
    )
    early_steps = [s for s in by_step.index if 0 < s <= early_cut]
    if early_steps and 0 in by_step.index and by_step.index.max() > 0:
        e0, ee, ef = by_step[0], by_step[max(early_steps)], by_step[by_step.index.max()]
        frac = (ee - e0) / (ef - e0) if ef != e0 else float("nan")
        x0 = w[w["step"] == 0].set_index("key")["weight_enrichment"]
        xe = w[w["step"] == max(early_steps)].set_index("key")["weight_enrichment"]
        p = float(sps.wilcoxon(np.log(xe), np.log(x0.loc[xe.index]), alternative="greater").pvalue)
        word = "not reproduced" if not ef > e0 else verdict(p, bool(frac >= 0.5))
    else:
        frac, p, word, ef = float("nan"), None, "not testable", float("nan")
    return claim_row(
        "write_weights_acquire_early",
        model,
        "pretraining",
        "early",
        frac,
        p=p,
        word=word,
        effect=ef,
        effect_name="final write-weight enrichment",
        unit="share of the final write-weight enrichment gain reached early",
    )


def mechanism_claims(
    model: str, parts: dict, config: SignatureConfig, ck: Units
) -> list[dict[str, Any]]:
    """Verdict rows of the mechanism claims (see :data:`lamina.chapters.weight_update_signature.claims.CLAIMS`)."""
    g = keep_layers(parts["gradients"], config)
    read = g[g["kind"] == "read"]
    w = keep_layers(parts["write_gradients"], config)
    return [
        *_read_gradient_rows(model, read, config),
        *_raw_read_row(model, read, config),
        *_adam_rows(model, parts, config),
        *_cancellation_rows(model, g, config),
        _write_gradient_row(model, w, config, ck),
        _write_weight_row(model, w, config, ck),
    ]
