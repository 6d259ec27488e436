"""Seeded pretraining with log-spaced checkpoints, and the optimiser pieces the stages share.

Optimiser: AdamW (weight decay on matrices only), gradient clipping, learning rate
lr(t) = peak * t / warmup for t < warmup, then
lr(t) = peak * (r + (1 - r) * 0.5 * (1 + cos(pi * (t - warmup) / (total - warmup)))), r = min_lr_ratio.

Pretraining samples random ``context``-token windows from the training token stream with a
seeded ``torch.Generator``; validation uses fixed, evenly spaced windows of the validation
stream. The alignment stages (``lm``, ``sft``, ``dpo``) live in :mod:`lamina.sources.organisms.stages`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerBase

from lamina.core.progress import bar as progress_bar
from lamina.sources.organisms.checkpoints import save_checkpoint, write_curve
from lamina.sources.organisms.configs import OrganismConfig, hf_config
from lamina.sources.organisms.objectives import lm_loss

STAGES = ("lm", "sft", "dpo")


def lr_at(step: int, total: int, peak: float, warmup: int, min_ratio: float) -> float:
    """Learning rate of the optimiser update taken at ``step`` (0-based); see module docstring."""
    if step < warmup:
        return peak * (step + 1) / warmup
    frac = (step - warmup) / max(1, total - warmup)
    return peak * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))


def checkpoint_steps(total: int, n: int) -> list[int]:
    """Step 0 plus at least ``n`` log-spaced steps in [1, total], ending at ``total``.

    Dense early, sparse late, e.g. total=500, n=10 -> [0, 1, 2, 4, 8, 16, 31, 63, 125, 250, 500].
    """
    k = n
    while True:
        steps = sorted({int(round(x)) for x in np.geomspace(1, total, k)})
        if len(steps) >= min(n, total) or k > 10 * n:
            return [0, *steps]
        k += 1


def make_model(cfg: OrganismConfig, tokenizer: PreTrainedTokenizerBase) -> PreTrainedModel:
    """Freshly initialised HF model for ``cfg`` (seeded by ``cfg.seed``), float32, CPU."""
    torch.manual_seed(cfg.seed)
    conf = hf_config(cfg, len(tokenizer), tokenizer.eos_token_id)
    return AutoModelForCausalLM.from_config(conf, dtype=torch.float32)


def make_optimizer(model: torch.nn.Module, cfg: OrganismConfig, lr: float) -> torch.optim.AdamW:
    """AdamW with weight decay on parameters of rank >= 2 only (not on norms and biases)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    rest = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": rest, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=cfg.betas, eps=1e-8)


def random_windows(
    stream: torch.Tensor, batch: int, length: int, gen: torch.Generator
) -> torch.Tensor:
    """``batch`` random windows of ``length`` tokens from a 1-D stream: (batch, length) int64."""
    starts = torch.randint(0, len(stream) - length, (batch,), generator=gen)
    return torch.stack([stream[s : s + length] for s in starts.tolist()])


def fixed_windows(stream: torch.Tensor, n: int, length: int) -> torch.Tensor:
    """``n`` evenly spaced windows of ``length`` tokens (the validation set): (n, length)."""
    starts = torch.linspace(0, len(stream) - length - 1, n).long()
    return torch.stack([stream[s : s + length] for s in starts.tolist()])


@torch.no_grad()
def eval_lm(model: PreTrainedModel, windows: torch.Tensor, batch: int = 32) -> float:
    """Mean next-token loss over ``windows`` (n, T), nats per token (windows moved to the
    model's device; one sync at the end)."""
    model.eval()
    dev = next(model.parameters()).device
    total, count = torch.zeros((), dtype=torch.float64, device=dev), 0
    for i in range(0, len(windows), batch):
        x = windows[i : i + batch].to(dev)
        loss = lm_loss(model(input_ids=x).logits, x)
        n = x.numel() - len(x)
        total, count = total + loss.double() * n, count + n
    model.train()
    return float(total) / max(count, 1)


def _step(
    model: PreTrainedModel, opt: torch.optim.Optimizer, loss: torch.Tensor, lr: float, clip: float
) -> torch.Tensor:
    """One clipped AdamW step at learning rate ``lr`` on ``loss``; returns the detached loss
    (on the model's device: reading it is a sync)."""
    for g in opt.param_groups:
        g["lr"] = lr
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    return loss.detach()


def optimizer_step(
    model: PreTrainedModel, opt: torch.optim.Optimizer, loss: torch.Tensor, lr: float, clip: float
) -> float:
    """One clipped AdamW step at learning rate ``lr`` on ``loss``; returns the loss (float: a
    device sync; loops use :func:`lamina.sources.organisms.loop.train_steps` instead)."""
    return float(_step(model, opt, loss, lr, clip))


def pretrain(
    cfg: OrganismConfig,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    train_stream: torch.Tensor,
    val_windows: torch.Tensor,
    out: Path,
    progress: bool = True,
    steps: int | None = None,
) -> list[dict[str, Any]]:
    """Pretrain ``model`` in place for ``steps`` (default ``cfg.steps``) steps.

    Saves ``out/checkpoints/step-N`` at :func:`checkpoint_steps` (when ``out`` is not None) and
    returns the curve: one row per step (train loss, lr, tokens), val loss at eval steps.
    Batches go to the model's device; the step losses are read at evaluation steps and at the
    end (no per-step sync).
    """
    total = cfg.steps if steps is None else steps
    gen = torch.Generator().manual_seed(cfg.seed)
    opt = make_optimizer(model, cfg, cfg.lr)
    ckpts = set(checkpoint_steps(cfg.steps, cfg.n_checkpoints))
    rows: list[dict[str, Any]] = []
    losses: list[torch.Tensor] = []
    dev = next(model.parameters()).device
    model.train()

    def maybe_save(step: int, row: dict[str, Any]) -> None:
        if step % cfg.eval_every == 0 or step in ckpts or step == total:
            row["val_loss"] = eval_lm(model, val_windows)
        if out is not None and step in ckpts:
            info = {"organism": cfg.name, "stage": "pretrain", "step": step, **row}
            save_checkpoint(out / "checkpoints" / f"step-{step}", model, tokenizer, opt, info)

    row0: dict[str, Any] = {"step": 0, "tokens": 0}
    maybe_save(0, row0)
    rows.append(row0)
    bar = progress_bar(range(total), desc=f"{cfg.name} pretrain", disable=not progress)
    for i in bar:
        x = random_windows(train_stream, cfg.batch_size, cfg.context, gen).to(dev)
        lr = lr_at(i, cfg.steps, cfg.lr, cfg.warmup_steps, cfg.min_lr_ratio)
        losses.append(_step(model, opt, lm_loss(model(input_ids=x).logits, x), lr, cfg.grad_clip))
        row = {"step": i + 1, "tokens": (i + 1) * x.numel(), "lr": lr}
        maybe_save(i + 1, row)
        rows.append(row)
        if "val_loss" in row:
            bar.set_postfix(loss=f"{float(losses[-1]):.3f}", val=f"{row['val_loss']:.3f}")
    for row, loss in zip(rows[1:], torch.stack(losses).cpu().tolist() if losses else [], strict=True):
        row["train_loss"] = loss
    if out is not None:
        write_curve(out / "curves", "pretrain", rows)
    return rows
