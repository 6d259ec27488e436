"""Recovery speed (paper 3): perturb one layer, fine-tune, count the steps until perplexity
returns within a tolerance of the clean model's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypedDict

import torch
from torch import nn

from lamina.anatomy.growth import next_token_step
from lamina.anatomy.layers import check_layer
from lamina.anatomy.perplexity import TokenIds, perplexity, require_lm
from lamina.anatomy.surgery import noise_layer

__all__ = ["Recovery", "recovery_steps", "restore_all"]


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
                model, opt, train, batch_size, seed, eval_ppl, target, eval_every, budget_steps,
                curve,
            )  # fmt: skip
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
