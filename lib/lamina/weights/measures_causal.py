"""Measurements of paper 2's causal claims (the write edit, single-group adaptation) from the
tables of :func:`lamina.weights.edit_effects.write_edit_effects` and
:func:`lamina.weights.adaptation.single_group_adaptation`: dicts of
:class:`lamina.evidence.decide.Measurement` fields."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as sps

from lamina.evidence.stats import bootstrap_ci
from lamina.weights.edit_null import beyond_scrambled
from lamina.weights.settings import SignatureSettings
from lamina.weights.summaries import worst

__all__ = ["adaptation_gate", "edit_units", "kept_measure", "single_group", "write_edit"]


def edit_units(e: pd.DataFrame, stage: str) -> dict[str, np.ndarray]:
    """The write edit's units at one stage: {"observed": (T,) Δlog p(t) of each target token
    under the edit along its own unembedding row on the model (nats), "null": (n,) per
    scrambled copy the mean over the same tokens, "random": (r,) per random direction the
    mean over the same tokens (a control)}."""
    at = e[e["stage"] == stage]
    u = at[at["direction"] == "unembedding"].sort_values("token")
    tokens = set(u["token"])

    def per_unit(direction: str) -> np.ndarray:
        rows = at[(at["direction"] == direction) & at["token"].isin(tokens)]
        return rows.groupby("direction_id", sort=True)["delta_logp"].mean().to_numpy()

    return {"observed": u["delta_logp"].to_numpy(dtype=np.float64),
            "null": per_unit("scrambled"), "random": per_unit("random")}  # fmt: skip


def write_edit(e: pd.DataFrame, stage: str, s: SignatureSettings) -> dict[str, object]:
    """The write edit at ``stage`` beyond construction
    (:func:`lamina.weights.edit_null.beyond_scrambled`); the detail adds the random-direction
    control (their mean effect and the Monte Carlo p of the model's against them)."""
    units = edit_units(e, stage)
    if not len(units["observed"]):
        return {"untestable": f"no write edit scored at {stage}"}
    if not len(units["null"]):
        return {"untestable": f"no scrambled copy scored at {stage}"}
    out = beyond_scrambled(units["observed"], units["null"])
    r = units["random"]
    if len(r) and "detail" in out:
        p_rand = (1 + np.sum(r >= units["observed"].mean())) / (1 + len(r))
        out["detail"] = (f"{out['detail']}; control: {len(r)} random directions, mean {r.mean():.3g} nats "
                          f"(Monte Carlo p = {p_rand:.3g}; by construction)")  # fmt: skip
    return out


def kept_measure(e: pd.DataFrame, stage: str, base: str, s: SignatureSettings) -> dict[str, object]:
    """Aligned / base effect of the unembedding edit beyond construction: (mean Δlog p over the
    target tokens - the mean over the stage's scrambled copies) at ``stage`` over the same at
    ``base`` (:func:`edit_units`), with the one-sided 90% percentile bootstrap CI (tokens
    resampled paired, each stage's copies resampled on their own; a resample whose base effect
    is not positive has no ratio and is left out); no test. The raw ratio of Δlog p would be
    mostly the edit's by-construction part, which any model has: on the planted edit model
    with its feedback block removed (no effect beyond construction) it read 0.77-0.80."""
    a, b = edit_units(e, stage), edit_units(e, base)
    ta = e[(e["stage"] == stage) & (e["direction"] == "unembedding")].set_index("token")
    tb = e[(e["stage"] == base) & (e["direction"] == "unembedding")].set_index("token")
    common = ta.index.intersection(tb.index)
    x, y = ta.loc[common, "delta_logp"].to_numpy(float), tb.loc[common, "delta_logp"].to_numpy(float)
    na, nb = a["null"], b["null"]  # (copies,) each copy's mean over the stage's tokens
    if len(x) < 2 or len(na) < 3 or len(nb) < 3:
        return {"untestable": f"{len(x)} common target tokens, {len(na)} and {len(nb)} scrambled "
                "copies: the ratio needs at least 2 and 3"}  # fmt: skip
    den = y.mean() - nb.mean()
    if den <= 0:
        return {"untestable": "the base's edit is not beyond its scrambled copies"}
    rng = np.random.default_rng(s.seed)
    boot = np.full(s.n_bootstrap, np.nan)
    for i in range(s.n_bootstrap):
        t = rng.integers(0, len(x), len(x))
        d = y[t].mean() - nb[rng.integers(0, len(nb), len(nb))].mean()
        n = x[t].mean() - na[rng.integers(0, len(na), len(na))].mean()
        boot[i] = n / d if d > 0 else np.nan
    lo, hi = np.nanpercentile(boot, [5, 95]) if np.isfinite(boot).any() else (np.nan, np.nan)
    num = x.mean() - na.mean()
    return {"estimate": float(num / den), "ci_low": float(lo), "ci_high": float(hi),
            "sided": "greater", "n_units": len(x),
            "detail": f"{num:.3g} nats beyond construction after, {den:.3g} before (raw "
                      f"{x.mean():.3g} and {y.mean():.3g})"}  # fmt: skip


def _reductions(a: pd.DataFrame, group: str) -> np.ndarray:
    g = a[a["group"] == group].sort_values("item")
    return (g["loss_before"] - g["loss_after"]).to_numpy(dtype=np.float64)


def adaptation_gate(a: pd.DataFrame, n_bootstrap: int, seed: int) -> tuple[bool, str]:
    """The single-group rows' gate: full fine-tuning (group "all") lowered the held-out SFT
    loss, the one-sided 95% bootstrap bound of its mean reduction over items above 0.
    -> (passed, its values as text)."""
    red = _reductions(a, "all")
    if len(red) < 2:
        return False, f"{len(red)} held-out items scored"
    lo = float(bootstrap_ci(red, n_resamples=n_bootstrap, seed=seed, method="percentile",
                            confidence=0.90).iloc[0]["ci_low"])  # fmt: skip
    return lo > 0, f"full fine-tuning's mean reduction {red.mean():.3g} nats, 95% bound {lo:.3g}"


def single_group(a: pd.DataFrame, s: SignatureSettings) -> dict[str, object]:
    """"Any single group remains effective": per group, ratio = mean reduction of the held-out
    SFT loss when training that group alone / mean reduction under full fine-tuning (over the
    same items), its one-sided 90% paired percentile bootstrap CI over items, and the one-sided
    Wilcoxon p of red_group - f × red_all > 0 per item (f = ``s.effective_fraction``: the
    ratio exceeds f). The row is the group with the weakest evidence (largest p); the detail
    lists every group."""
    full = _reductions(a, "all")
    f = s.effective_fraction
    parts: dict[str, dict[str, object]] = {}
    for group in [g for g in a["group"].unique() if g != "all"]:
        red = _reductions(a, group)
        if len(red) < 2 or len(red) != len(full) or full.mean() <= 0:
            parts[group] = {"untestable": "full fine-tuning did not lower the held-out loss",
                            "p": float("nan")}  # fmt: skip
            continue

        def ratio(u: np.ndarray, v: np.ndarray, axis: int = -1) -> np.ndarray:
            return u.mean(axis) / v.mean(axis)

        ci = bootstrap_ci((red, full), ratio, n_resamples=s.n_bootstrap, seed=s.seed,
                          method="percentile", paired=True, confidence=0.90).iloc[0]  # fmt: skip
        diff = red - f * full
        p, q = (float(sps.wilcoxon(diff, alternative=alt).pvalue) if np.ptp(diff) > 0 or
                np.any(diff != 0) else 1.0 for alt in ("greater", "less"))  # fmt: skip
        acc = a[a["group"] == group][["acc_before", "acc_after"]].iloc[0]
        parts[group] = {
            "estimate": float(red.mean() / full.mean()), "ci_low": float(ci["ci_low"]),
            "ci_high": float(ci["ci_high"]), "sided": "greater", "p": p, "p_opposite": q,
            "n_units": len(red), "effect_size": float(acc["acc_after"] - acc["acc_before"]),
            "effect_name": "SFT accuracy change",
        }  # fmt: skip
    if not parts:
        return {"untestable": "no single group was adapted"}
    name, m = worst(parts)
    listed = "; ".join(f"{g} {v.get('estimate', float('nan')):.3g}" for g, v in parts.items())
    return m | {"detail": f"weakest: {name}; ratios {listed}"}
