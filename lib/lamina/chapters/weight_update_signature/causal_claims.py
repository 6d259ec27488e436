"""Verdict rows of paper 2's causal claims (write-direction edit, single-group adaptation),
from the causal measurements."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats as sps

from lamina.chapters.results import verdict
from lamina.chapters.weight_update_signature.config import SignatureConfig
from lamina.chapters.weight_update_signature.verdicts import claim_row
from lamina.evidence.stats import bootstrap_ci

__all__ = ["causal_claims"]


def causal_claims(
    model: str,
    parts: dict,
    config: SignatureConfig,
    aligned_base: bool = False,
    *,
    applied: bool = False,
) -> list[dict[str, Any]]:
    """Verdict rows of the causal claims (see :data:`lamina.chapters.weight_update_signature.claims.CLAIMS`).

    The write edit is tested after each alignment target (effect_size: its mean effect over
    the base's) and, when ``aligned_base`` (a released instruction-tuned checkpoint), on the
    base itself (no ratio: its own pre-alignment model is not available). ``applied``: the
    targets are our short runs on one real checkpoint (:class:`~.single.SingleCheckpoint`),
    which the stage label says ("@sft (our 4-step run)"): for a base checkpoint, "after
    alignment" can only mean after them."""

    rows = []
    e = parts["edits"]
    unemb = e[e["direction"] == "unembedding"].set_index(["stage", "token"])["delta_logp"]
    stages = [t for t in config.targets if t != "lm"] or list(config.targets)
    for t in ([config.base] if aligned_base else []) + stages:
        u = e[(e["stage"] == t) & (e["direction"] == "unembedding")]["delta_logp"].to_numpy()
        r = e[(e["stage"] == t) & (e["direction"] == "random")]["delta_logp"].to_numpy()
        if len(u) < 2 or len(r) < 1:
            continue
        p = float(sps.mannwhitneyu(u, r, alternative="greater").pvalue)
        b = bootstrap_ci(
            u, n_resamples=config.n_bootstrap, seed=config.seed, method="percentile"
        ).iloc[0]
        if t == config.base:
            ratio, ok = float("nan"), bool(u.mean() > r.mean())
        else:
            ratio = float(unemb.loc[t].mean() / unemb.loc[config.base].mean())
            ok = bool(ratio >= config.still_fraction and u.mean() > r.mean())
        rows.append(
            claim_row(
                "write_edit_after_alignment",
                model,
                f"@{t}"
                + (" (released, aligned)" if t == config.base else "")
                + (f" (our {config.real_steps}-step run)" if applied and t != config.base else ""),
                "changes predictions",
                float(u.mean()),
                {"ci_low": b["ci_low"], "ci_high": b["ci_high"]},
                p,
                verdict(p, ok),
                ratio,
                "aligned / base effect",
                note=f"random directions: mean Δlog p {r.mean():.3g} nats",
                unit="Δ log p(target), nats",
            )
        )
    a = parts["adaptation"]
    full = a[a["group"] == "all"].sort_values("item")
    red_all = (full["loss_before"] - full["loss_after"]).to_numpy()
    for group, rows_g in a[a["group"] != "all"].groupby("group", sort=False):
        rows_g = rows_g.sort_values("item")
        red = (rows_g["loss_before"] - rows_g["loss_after"]).to_numpy()
        if red_all.mean() <= 0 or len(red) < 2:
            rows.append(
                claim_row(
                    "single_group_effective",
                    model,
                    group,
                    "effective",
                    float("nan"),
                    note="full fine-tuning did not reduce the eval loss: no reference",
                )
            )
            continue
        frac = float(red.mean() / red_all.mean())
        b = bootstrap_ci(
            (red, red_all),
            lambda x, y, axis=-1: x.mean(axis) / y.mean(axis),
            n_resamples=config.n_bootstrap,
            seed=config.seed,
            method="percentile",
            paired=True,
        ).iloc[0]
        p_group = float(sps.wilcoxon(red, alternative="greater").pvalue) if np.ptp(red) > 0 else None
        acc = float(rows_g["acc_after"].iloc[0] - rows_g["acc_before"].iloc[0])
        rows.append(
            claim_row(
                "single_group_effective",
                model,
                group,
                "effective",
                frac,
                {"ci_low": b["ci_low"], "ci_high": b["ci_high"]},
                p_group,
                verdict(p_group, frac >= config.effective_fraction),
                acc,
                "SFT accuracy change",
                unit="eval-loss reduction / full fine-tuning's",
            )
        )
    return rows
