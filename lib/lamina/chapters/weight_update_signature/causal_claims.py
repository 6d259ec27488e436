"""Verdict rows of paper 2's causal claims (write-direction edit, single-group adaptation),
from the causal measurements.

The write edit's null has the random *direction* as its unit: each random direction gives one
value (its mean effect over the target tokens), so n directions bound p below by 1/(1 + n);
scoring a direction on many tokens adds no independent units (it was counted as such before:
a p of 0.002 could rest on 2 random directions)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from lamina.chapters.results import verdict
from lamina.chapters.weight_update_signature.config import SignatureConfig
from lamina.chapters.weight_update_signature.gate import GateArg, gate_for, gate_rows
from lamina.chapters.weight_update_signature.verdicts import claim_row
from lamina.evidence.stats import bootstrap_ci
from lamina.sources.organisms.pretrained import PretrainedAlignConfig

__all__ = ["causal_claims", "direction_null", "direction_p_value"]


def direction_p_value(observed: float, null: np.ndarray) -> float:
    """Monte Carlo p-value of ``observed`` against one null value per random direction:
    p = (1 + #{null >= observed}) / (1 + n), n = len(null). Its smallest value is 1/(1 + n):
    0.01 needs n >= 99 directions. -> p in (0, 1]; NaN for an empty null."""
    null = np.asarray(null, dtype=float)
    if not len(null):
        return float("nan")
    return float((1 + np.sum(null >= observed)) / (1 + len(null)))


def direction_null(e: pd.DataFrame, stage: str) -> tuple[np.ndarray, np.ndarray]:
    """The write edit's units at one stage, from :func:`~.causal.write_edit_effects`' table:
    (u, null). u (T,): Δlog p(t) of each target token t under the edit along its own
    unembedding row (nats). null (n,): for each random direction, the mean over the same
    target tokens of Δlog p(t) under the edit along that direction (nats): one value per
    direction, the direction being the random unit (its T token values share one edit)."""
    at = e[e["stage"] == stage]
    u_rows = at[at["direction"] == "unembedding"]
    r_rows = at[(at["direction"] == "random") & at["token"].isin(u_rows["token"])]
    null = r_rows.groupby("direction_id", sort=True)["delta_logp"].mean().to_numpy()
    return u_rows["delta_logp"].to_numpy(dtype=float), null


def _write_edit_row(
    model: str,
    e: pd.DataFrame,
    config: SignatureConfig,
    t: str,
    label: str,
    base_effect: float | None,
) -> dict[str, Any]:
    """One write-edit row at stage ``t``: observed = mean over target tokens of the
    unembedding edit's Δlog p(t), against one mean per random direction
    (:func:`direction_null`, :func:`direction_p_value`). ``base_effect``: the base model's
    observed value (the aligned / base ratio must reach ``config.still_fraction``); None for a
    released aligned checkpoint (its pre-alignment model is not available). Fewer random
    directions than a p below 0.05 needs (19) is "not testable", with the p floor."""
    u, null = direction_null(e, t)
    n = len(null)
    obs = float(u.mean())
    b = bootstrap_ci(
        u, n_resamples=config.n_bootstrap, seed=config.seed, method="percentile"
    ).iloc[0]
    p = direction_p_value(obs, null)
    ratio = float("nan") if base_effect is None else obs / base_effect
    ok = bool(n and obs > null.mean()) and (base_effect is None or ratio >= config.still_fraction)
    word = verdict(p, ok)
    note = (
        f"{n} random directions (the unit): mean Δlog p {null.mean():.3g} nats, 95th "
        f"percentile {np.quantile(null, 0.95):.3g}; p = (1 + #null >= observed)/(1 + {n})"
        if n
        else "no random direction scored at this stage"
    )
    if 1 / (1 + n) >= 0.05:
        word = "not testable"
        note = f"not testable: only {n} random directions, smallest attainable p {1 / (1 + n):.3g}; {note}"
    return claim_row(
        "write_edit_after_alignment", model, label, "changes predictions", obs,
        s={"ci_low": b["ci_low"], "ci_high": b["ci_high"]}, p=p, word=word, effect=ratio,
        effect_name="aligned / base effect", note=note, unit="Δ log p(target), nats",
    )  # fmt: skip


def causal_claims(
    model: str,
    parts: dict,
    config: SignatureConfig,
    aligned_base: bool = False,
    *,
    applied: bool = False,
    gate: GateArg = None,
) -> list[dict[str, Any]]:
    """Verdict rows of the causal claims (see :data:`lamina.chapters.weight_update_signature.claims.CLAIMS`).

    The write edit is tested after each alignment target (effect_size: its mean effect over
    the base's) and, when ``aligned_base`` (a released instruction-tuned checkpoint), on the
    base itself (no ratio: its own pre-alignment model is not available), each against one
    value per random direction (:func:`_write_edit_row`). ``applied``: the
    targets are our short runs on one real checkpoint (:class:`~.single.SingleCheckpoint`),
    which the stage label says ("@sft (our 120 steps of 8)"): for a base checkpoint, "after
    alignment" can only mean after them. gate: the aligned checkpoints' behavioural gate
    (:mod:`~.gate`; the released base's is looked up under ``config.base``): each write-edit
    row is "not testable" unless its checkpoint passed."""

    return [
        *_write_edit_rows(model, parts["edits"], config, aligned_base, applied, gate),
        *_single_group_rows(model, parts["adaptation"], config),
    ]


def _run_label(config: SignatureConfig, target: str) -> str:
    """The budget of our run of ``target`` on a real checkpoint: SFT and DPO come from the
    aligned build (:class:`~lamina.sources.organisms.pretrained.PretrainedAlignConfig` with
    ``config.real_align``), the continued-LM target from ``config.real_steps``."""
    if target in ("sft", "dpo"):
        a = PretrainedAlignConfig(**config.real_align)
        steps = a.sft_steps if target == "sft" else a.dpo_steps
        return f" (our {steps} steps of {a.batch_size})"
    return f" (our {config.real_steps}-step run)"


def _write_edit_rows(
    model: str, e: pd.DataFrame, config: SignatureConfig, aligned_base: bool, applied: bool,
    gate: GateArg,
) -> list[dict[str, Any]]:
    """write_edit rows (:func:`_write_edit_row`), one per alignment target with at least 2
    edits (and the base itself when ``aligned_base``), each gated on its checkpoint."""
    rows: list[dict[str, Any]] = []
    unemb = e[e["direction"] == "unembedding"]
    stages = [t for t in config.targets if t != "lm"] or list(config.targets)
    base_u = unemb[unemb["stage"] == config.base]["delta_logp"]
    for t in ([config.base] if aligned_base else []) + stages:
        u, null = direction_null(e, t)
        if len(u) < 2 or (t != config.base and not len(base_u)):
            continue
        label = (
            f"@{t}"
            + (" (released, aligned)" if t == config.base else "")
            + (_run_label(config, t) if applied and t != config.base else "")
        )
        base_effect = None if t == config.base else float(base_u.mean())
        row = _write_edit_row(model, e, config, t, label, base_effect)
        rows += gate_rows([row], gate_for(gate, t))
    return rows


def _single_group_rows(model: str, a: pd.DataFrame, config: SignatureConfig) -> list[dict[str, Any]]:
    """single_group_effective rows: per parameter group, the eval-loss reduction of adapting
    that group alone over full fine-tuning's (paired percentile bootstrap CI over items,
    Wilcoxon p of a reduction > 0); no reference (NaN, with a note) when full fine-tuning did
    not reduce the loss or the group has fewer than 2 items."""
    rows: list[dict[str, Any]] = []
    full = a[a["group"] == "all"].sort_values("item")
    red_all = (full["loss_before"] - full["loss_after"]).to_numpy()
    for group, rows_g in a[a["group"] != "all"].groupby("group", sort=False):
        rows_g = rows_g.sort_values("item")
        red = (rows_g["loss_before"] - rows_g["loss_after"]).to_numpy()
        measured = float("nan")
        kw: dict[str, Any] = {"note": "full fine-tuning did not reduce the eval loss: no reference"}
        if not (red_all.mean() <= 0 or len(red) < 2):
            measured = float(red.mean() / red_all.mean())
            b = bootstrap_ci(
                (red, red_all),
                lambda x, y, axis=-1: x.mean(axis) / y.mean(axis),
                n_resamples=config.n_bootstrap,
                seed=config.seed,
                method="percentile",
                paired=True,
            ).iloc[0]
            p = float(sps.wilcoxon(red, alternative="greater").pvalue) if np.ptp(red) > 0 else None
            kw = {
                "s": {"ci_low": b["ci_low"], "ci_high": b["ci_high"]},
                "p": p,
                "word": verdict(p, measured >= config.effective_fraction),
                "effect": float(rows_g["acc_after"].iloc[0] - rows_g["acc_before"].iloc[0]),
                "effect_name": "SFT accuracy change",
                "unit": "eval-loss reduction / full fine-tuning's",
            }
        rows.append(claim_row("single_group_effective", model, str(group), "effective", measured, **kw))
    return rows
