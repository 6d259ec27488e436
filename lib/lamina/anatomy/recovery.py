"""Recovery speed (paper 3): perturb one layer, fine-tune, count the steps until perplexity
returns within a tolerance of the clean model's."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypedDict

import numpy as np
import pandas as pd
import torch
from torch import nn

from lamina.anatomy.growth import next_token_step
from lamina.anatomy.layers import check_layer
from lamina.anatomy.perplexity import TokenIds, perplexity, require_lm
from lamina.anatomy.surgery import noise_layer
from lamina.evidence.stats import partial_spearman

__all__ = [
    "Recovery",
    "crossing_step",
    "measure_recovery",
    "recovery_steps",
    "restore_all",
    "speed_rank",
]


class Recovery(TypedDict):
    """What :func:`recovery_steps` returns (perplexities in e^nats per token, steps counted
    in optimiser steps; curve: [(step, eval perplexity)], step 0 = right after the noise)."""

    layer: int
    baseline_ppl: float
    perturbed_ppl: float
    steps_to_recover: int | None
    recovered: bool
    curve: list[tuple[int, float]]
    budget_steps: int
    rel_noise: float
    tolerance_pct: float


@contextmanager
def restore_all(model: nn.Module) -> Iterator[None]:
    """Snapshot every parameter/buffer, grad flag and the train mode; restore them on exit."""
    live = dict(model.named_parameters()) | dict(model.named_buffers())
    saved = {k: t.detach().clone() for k, t in live.items()}
    flags = {k: p.requires_grad for k, p in model.named_parameters()}
    was_training = model.training
    try:
        yield
    finally:
        with torch.no_grad():
            for k, t in live.items():
                t.copy_(saved[k])
        for k, p in model.named_parameters():
            p.requires_grad_(flags[k])
            p.grad = None
        model.train(was_training)


def _fine_tune_until(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    train: torch.Tensor,
    batch_size: int,
    seed: int,
    eval_ppl: Callable[[], float],
    target: float,
    eval_every: int,
    budget_steps: int,
    curve: list[tuple[int, float]],
) -> int | None:
    """Fine-tune every parameter on random rows of ``train`` (n, T) (seeded) until the eval
    perplexity, checked every ``eval_every`` steps and at the budget's end (each check appended
    to ``curve``), is <= ``target``; returns that step, or None after ``budget_steps``."""
    gen = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    params = list(model.parameters())
    for p in params:
        p.requires_grad_(True)
    for step in range(1, budget_steps + 1):
        model.train()
        rows = torch.randint(0, train.shape[0], (batch_size,), generator=gen)
        next_token_step(model, opt, params, train[rows].to(device), opt.defaults["lr"], None)
        if step % eval_every == 0 or step == budget_steps:
            curve.append((step, eval_ppl()))
            if curve[-1][1] <= target:
                return step
    return None


def recovery_steps(
    model: nn.Module,
    token_ids_train: torch.Tensor,
    token_ids_eval: TokenIds,
    layer: int,
    *,
    rel_noise: float = 0.5,
    budget_steps: int = 200,
    lr: float = 1e-4,
    batch_size: int = 8,
    tolerance_pct: float = 5.0,
    eval_every: int = 10,
    seed: int = 0,
    weight_decay: float = 0.0,
) -> Recovery:
    """Optimiser steps until perplexity returns within ``tolerance_pct`` % of the clean model's.

    Block ``layer`` gets :func:`noise_layer` noise (``rel_noise``, ``seed``); then all
    parameters are fine-tuned with AdamW (constant ``lr``) on random rows of
    ``token_ids_train`` (n, T), evaluating eval perplexity every ``eval_every`` steps up to
    ``budget_steps``. steps_to_recover is the first evaluated step with
    ppl <= (1 + tolerance_pct/100) ppl_clean (0 if the perturbation alone stays within it), or
    None if the budget runs out. The model is restored exactly afterwards.
    Returns layer, baseline_ppl, perturbed_ppl, steps_to_recover, recovered, curve [(step, ppl)].
    """
    layer = check_layer(model, layer)
    require_lm(model)
    if eval_every < 1 or budget_steps < 0:
        raise ValueError("eval_every must be >= 1 and budget_steps >= 0")

    def eval_ppl() -> float:
        return perplexity(model, token_ids_eval, batch_size=batch_size, n_bootstrap=0).ppl

    base = eval_ppl()
    target = base * (1 + tolerance_pct / 100)
    train = token_ids_train.long()
    with restore_all(model), noise_layer(model, layer, rel_noise, seed):
        ppl = eval_ppl()
        curve, found = [(0, ppl)], 0 if ppl <= target else None
        opt = torch.optim.AdamW(list(model.parameters()), lr=lr, weight_decay=weight_decay)
        if found is None:
            found = _fine_tune_until(
                model,
                opt,
                train,
                batch_size,
                seed,
                eval_ppl,
                target,
                eval_every,
                budget_steps,
                curve,
            )
    return {
        "layer": layer,
        "baseline_ppl": base,
        "perturbed_ppl": curve[0][1],
        "steps_to_recover": found,
        "recovered": found is not None,
        "curve": curve,
        "budget_steps": budget_steps,
        "rel_noise": rel_noise,
        "tolerance_pct": tolerance_pct,
    }


def crossing_step(curve: list[tuple[int, float]], target: float) -> float | None:
    """The (fractional) optimiser step at which perplexity first returns to ``target``: the
    first evaluation of ``curve`` [(step, ppl)] with ppl <= target, interpolated linearly in
    log ppl from the evaluation before it; 0.0 when the curve starts within it; None when it
    never gets there (censored)."""
    for i, (step, ppl) in enumerate(curve):
        if ppl <= target:
            if i == 0:
                return 0.0
            s0, p0 = curve[i - 1]
            a, b, t = math.log(p0), math.log(ppl), math.log(target)
            return float(s0 + (step - s0) * (a - t) / (a - b)) if a > b else float(step)
    return None


def speed_rank(
    curve: list[tuple[int, float]], baseline_ppl: float, target: float, budget_steps: int
) -> float:
    """A recovery time that orders every layer (larger = slower): :func:`crossing_step` when
    the run recovered; otherwise budget_steps + the share of the initial log-PPL excess still
    left at the last evaluation, so that censored layers rank after every recovered one and,
    among themselves, by how far they still are from baseline."""
    step = crossing_step(curve, target)
    if step is not None:
        return step
    first = math.log(curve[0][1] / baseline_ppl)
    last = math.log(curve[-1][1] / baseline_ppl)
    return float(budget_steps + (last / first if first > 0 else 1.0))


def measure_recovery(
    importance: pd.Series, recovery: pd.DataFrame, n_resamples: int, seed: int
) -> dict[str, object]:
    """Recovery speed against importance: the Spearman partial correlation of a layer's skip
    importance (``importance``: delta_pct by layer) with its recovery time (``recovery``:
    columns layer, steps_ranked (:func:`speed_rank`), perturbed_ppl, baseline_ppl, recovered),
    controlling for the initial damage (perturbed / baseline PPL: importance might only predict
    how much the noise hurts). Two-sided permutation p and 95% bootstrap CI over layers
    (:func:`lamina.evidence.stats.partial_spearman`); the plain Spearman rho is the effect size.
    Not testable with fewer than 5 layers, every layer censored, or no variation in time."""
    if recovery.empty:
        return {"untestable": "no recovery fine-tune in this model's budget"}
    r = recovery.set_index("layer")
    common = importance.index.intersection(r.index)
    r = r.loc[common]
    damage = (r["perturbed_ppl"] / r["baseline_ppl"]).to_numpy(float)
    values = "; ".join(
        f"layer {l}: {d:.3g}x, time {t:.3g}"
        for l, d, t in zip(common, damage, r["steps_ranked"], strict=True)
    )
    if len(common) < 5:
        return {"untestable": f"{len(common)} fine-tuned layers; a partial correlation needs 5"}
    if not r["recovered"].any():
        return {"untestable": f"every layer censored (perturbed / clean PPL, time: {values})"}
    y = r["steps_ranked"].to_numpy(float)
    if np.ptp(y) == 0:
        return {"untestable": f"every layer took the same time ({values})"}
    x = importance.loc[common].to_numpy(float)
    pc = partial_spearman(x, y, damage, n_resamples=n_resamples, seed=seed)
    plain = float(pd.Series(x).corr(pd.Series(y), method="spearman"))
    return {
        "estimate": pc["rho"],
        "ci_low": pc["ci_low"],
        "ci_high": pc["ci_high"],
        "sided": "two-sided",
        "p": pc["p"],
        "effect_size": plain,
        "effect_name": "plain Spearman rho",
        "n_units": len(common),
        "detail": f"{int(r['recovered'].sum())} of {len(common)} layers recovered",
    }
