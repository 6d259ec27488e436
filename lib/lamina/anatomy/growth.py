"""Growth Training (paper 3): phased schedules that train layer groups in order of importance.

A schedule is data: a list of :class:`Phase`. Each phase trains some blocks (and optionally
the non-block parameters: embeddings, final norm, unembedding) and freezes everything else
(``requires_grad=False``; the optimiser only holds the trainable parameters, so frozen ones
get neither a gradient nor an update, weight decay included). One AdamW carries its state
across the phases (``carry_optimizer``); the learning rate may follow one warmup + cosine
schedule over all phases' steps (:func:`warmup_cosine`).

Open choices of the paper, as named options (reimplementation choices): whether the
embeddings train in every growth phase (``train_embeddings``), whether earlier groups stay
trainable (``cumulative``), the number of groups, and the per-phase step budget.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from lamina.anatomy.perplexity import perplexity
from lamina.sources.models import get_adapter

__all__ = [
    "Phase",
    "enter_phase",
    "growth_schedule",
    "next_token_step",
    "step_flops",
    "synced_clock",
    "train_with_schedule",
    "uniform_schedule",
    "warmup_cosine",
]


@dataclass
class Phase:
    """One phase: train blocks ``layers`` (None = all blocks) for ``steps`` optimiser steps.
    ``train_embeddings`` also trains the non-block parameters (token/position embeddings,
    final norm, unembedding; tied embeddings count once)."""

    layers: list[int] | None
    steps: int
    train_embeddings: bool = False
    name: str = ""


def growth_schedule(
    importance: Sequence[float] | np.ndarray,
    n_groups: int,
    steps_per_phase: int,
    final_steps: int,
    *,
    train_embeddings: bool = True,
    cumulative: bool = False,
) -> list[Phase]:
    """Phases over layer groups, most important group first, then a full fine-tune.

    importance: (L,) per-layer importance (e.g. the ``skip`` ablation's delta_pct); layers are
    sorted by it, descending, and split into ``n_groups`` groups of near-equal size. With
    ``cumulative`` a phase trains its group and all earlier ones.
    """
    imp = np.asarray(importance, dtype=float)
    if imp.ndim != 1 or len(imp) == 0:
        raise ValueError("importance must be a non-empty 1-D sequence (one value per layer)")
    if not 1 <= n_groups <= len(imp):
        raise ValueError(f"n_groups must be in 1..{len(imp)}, got {n_groups}")
    order = np.argsort(-imp, kind="stable")
    phases, seen = [], []
    for i, group in enumerate(np.array_split(order, n_groups)):
        seen += sorted(int(l) for l in group)
        layers = sorted(seen) if cumulative else sorted(int(l) for l in group)
        phases.append(Phase(layers, steps_per_phase, train_embeddings, f"group {i + 1}"))
    phases.append(Phase(None, final_steps, True, "full"))
    return phases


def uniform_schedule(total_steps: int) -> list[Phase]:
    """The baseline: every parameter trains for ``total_steps`` steps."""
    return [Phase(None, total_steps, True, "uniform")]


def warmup_cosine(
    total_steps: int, warmup_steps: int, min_ratio: float = 0.1
) -> Callable[[int], float]:
    """The learning-rate multiplier of optimiser step ``s`` (0-based, global across phases):

        m(s) = (s + 1) / W                                                 for s < W
        m(s) = r + (1 - r) (1 + cos(pi min(1, (s - W) / max(1, S - W)))) / 2    otherwise

    with S = ``total_steps``, W = ``warmup_steps`` and r = ``min_ratio`` (dimensionless, in
    [0, 1]): linear warmup to 1, then a cosine decay to r at step S."""
    if total_steps < 1 or not 0 <= warmup_steps <= total_steps:
        raise ValueError(
            "need total_steps >= 1 and 0 <= warmup_steps <= total_steps, got "
            f"{total_steps}, {warmup_steps}"
        )
    if not 0 <= min_ratio <= 1:
        raise ValueError(f"min_ratio must be in [0, 1], got {min_ratio}")

    def scale(s: int) -> float:
        if s < warmup_steps:
            return (s + 1) / warmup_steps
        frac = min(1.0, (s - warmup_steps) / max(1, total_steps - warmup_steps))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * frac))

    return scale


def _groups(model: nn.Module) -> tuple[list[list[nn.Parameter]], list[nn.Parameter]]:
    """Parameters of each block, and the rest (embeddings, final norm, unembedding)."""
    blocks = get_adapter(model).block_list(model)
    per_block = [list(b.parameters()) for b in blocks]
    in_blocks = {id(p) for ps in per_block for p in ps}
    rest = [p for p in model.parameters() if id(p) not in in_blocks]
    return per_block, rest


def _trainable(model: nn.Module, phase: Phase) -> list[nn.Parameter]:
    per_block, rest = _groups(model)
    n = len(per_block)
    layers = list(range(n)) if phase.layers is None else list(phase.layers)
    bad = [l for l in layers if not (isinstance(l, (int, np.integer)) and 0 <= l < n)]
    if bad:
        raise ValueError(
            f"phase {phase.name!r}: layers {bad} out of range for {n} layers (valid: 0..{n - 1})"
        )
    params = [p for l in layers for p in per_block[l]] + (rest if phase.train_embeddings else [])
    if not params:
        raise ValueError(f"phase {phase.name!r} trains no parameters")
    return params


def step_flops(model: nn.Module, phase: Phase, batch_size: int, seq_len: int) -> float:
    """FLOPs of one training step of ``phase`` on ``batch_size`` x ``seq_len`` tokens.

    With tok = batch_size * seq_len, N_l the parameters of block l, N_h those of the final
    norm + unembedding (embedding lookups cost nothing), A = 2 seq_len d per block and token
    (attention scores and mixing, Kaplan et al. 2020):

        forward      = tok [2 (sum_l N_l + N_h) + L A]
        weight grads = tok 2 (sum_{l trainable} N_l + N_h [if embeddings train])
        act. grads   = tok [2 (sum_{l >= l0} N_l + N_h) + 2 (L - l0) A]

    l0 is the shallowest trainable block (0 when the embeddings train): frozen blocks below
    it need no backward pass at all. Counting block l0's own input gradient makes the
    activation term a slight over-estimate.
    """
    adapter = get_adapter(model)
    per_block, _ = _groups(model)
    n = len(per_block)
    n_block = [sum(p.numel() for p in ps) for ps in per_block]
    head = adapter.unembedding_module(model)
    norm = adapter.final_norm_module(model)
    n_head = sum(p.numel() for m in (head, norm) if m is not None for p in m.parameters())
    attn = 2 * seq_len * adapter.d_model(model)
    tok = batch_size * seq_len
    layers = list(range(n)) if phase.layers is None else list(phase.layers)
    forward = tok * (2 * (sum(n_block) + n_head) + n * attn)
    weight = tok * 2 * (sum(n_block[l] for l in layers) + (n_head if phase.train_embeddings else 0))
    l0 = 0 if phase.train_embeddings else min(layers)
    act = tok * (2 * (sum(n_block[l0:]) + n_head) + 2 * (n - l0) * attn)
    return float(forward + weight + act)


def _val_loss(model: nn.Module, val_ids: torch.Tensor, batch_size: int) -> float:
    return perplexity(model, val_ids, batch_size=batch_size, n_bootstrap=0).nll


def enter_phase(model: nn.Module, phase: Phase) -> list[nn.Parameter]:
    """Make exactly ``phase``'s parameters trainable (gradients cleared); returns them."""
    params = _trainable(model, phase)
    keep = {id(p) for p in params}
    for p in model.parameters():
        p.requires_grad_(id(p) in keep)
        p.grad = None
    return params


def next_token_step(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    params: list[nn.Parameter],
    ids: torch.Tensor,
    lr: float,
    grad_clip: float | None,
) -> torch.Tensor:
    """One optimiser step on ``ids`` (batch, T) at learning rate ``lr``: mean next-token NLL
    (nats), gradients clipped to norm ``grad_clip`` over ``params``; returns the loss."""
    logits = model(input_ids=ids, use_cache=False).logits
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    for group in opt.param_groups:
        group["lr"] = lr
    if grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(params, grad_clip)
    opt.step()
    return loss


@dataclass
class _Run:
    """The state of one :func:`train_with_schedule` call: its data and settings, the
    cumulative counters (optimiser steps, training seconds, FLOPs) and the log rows."""

    model: nn.Module
    train_ids: torch.Tensor  # (n, T) long
    val_ids: torch.Tensor  # (n_val, T) long
    gen: torch.Generator
    batch_size: int
    lr: float
    lr_scale: Callable[[int], float] | None
    grad_clip: float | None
    eval_every: int
    on_step: Callable[[int, nn.Module], None] | None
    step: int = 0
    wall: float = 0.0
    flops: float = 0.0
    rows: list[dict[str, object]] = field(default_factory=list)

    def log(self, k: int, name: str, train_loss: float | torch.Tensor, evaluate: bool) -> None:
        """Append the row of the current step (validation loss only when ``evaluate``)."""
        val = _val_loss(self.model, self.val_ids, self.batch_size) if evaluate else np.nan
        self.rows.append(
            {
                "step": self.step,
                "phase": k,
                "phase_name": name,
                "train_loss": train_loss,
                "val_loss": val,
                "wall_s": self.wall,
                "flops": self.flops,
            }
        )

    def settle(self, pending: list[dict[str, object]], seconds: float) -> None:
        """Give the rows of one stretch of steps between two synchronisations their training
        losses (one transfer) and their wall clock (the stretch's ``seconds`` spread evenly)."""
        losses = torch.stack([r["train_loss"] for r in pending]).tolist()  # type: ignore[misc]
        for j, (row, loss) in enumerate(zip(pending, losses, strict=True)):
            row["train_loss"] = float(loss)
            row["wall_s"] = self.wall + seconds * (j + 1) / len(pending)
        self.wall += seconds

    def phase(
        self, k: int, phase: Phase, opt: torch.optim.Optimizer, params: list[nn.Parameter]
    ) -> None:
        """Run phase ``k``'s steps, logging each. The device is synchronised only at the
        evaluations: the wall clock of the steps between two of them is their stretch's
        training time (evaluation excluded) spread evenly, and their losses stay on the device
        until then."""
        device = next(self.model.parameters()).device
        cost = step_flops(self.model, phase, self.batch_size, self.train_ids.shape[1])
        n = self.train_ids.shape[0]
        pending: list[dict[str, object]] = []
        t0 = synced_clock(device)
        for i in range(phase.steps):
            self.model.train()
            pick = torch.randint(0, n, (self.batch_size,), generator=self.gen)
            lr = self.lr if self.lr_scale is None else self.lr * self.lr_scale(self.step)
            ids = self.train_ids[pick].to(device)
            loss = next_token_step(self.model, opt, params, ids, lr, self.grad_clip)
            self.step, self.flops = self.step + 1, self.flops + cost
            if self.on_step is not None:
                self.on_step(self.step, self.model)
            self.log(k, phase.name, loss.detach(), evaluate=False)
            pending.append(self.rows[-1])
            if self.step % self.eval_every == 0 or i == phase.steps - 1:
                self.settle(pending, synced_clock(device) - t0)
                self.rows[-1]["val_loss"] = _val_loss(self.model, self.val_ids, self.batch_size)
                pending = []
                t0 = synced_clock(device)


def synced_clock(device: torch.device) -> float:
    """time.perf_counter() after the device's queued work is done (CUDA: synchronised)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def train_with_schedule(
    model: nn.Module,
    schedule: Sequence[Phase],
    train_ids: torch.Tensor,
    val_ids: torch.Tensor,
    *,
    lr: float = 1e-3,
    batch_size: int = 16,
    seed: int = 0,
    eval_every: int = 50,
    weight_decay: float = 0.0,
    grad_clip: float | None = 1.0,
    on_step: Callable[[int, nn.Module], None] | None = None,
    carry_optimizer: bool = True,
    lr_scale: Callable[[int], float] | None = None,
) -> pd.DataFrame:
    """Train ``model`` in place through the phases of ``schedule``.

    train_ids / val_ids: LongTensor (n, T); each step takes ``batch_size`` random rows of
    train_ids (seeded). Loss: mean next-token NLL, nats. Validation loss every ``eval_every``
    steps, at each phase's end and at step 0. ``on_step(step, model)`` runs after every
    optimiser step (tests use it to inspect gradients).
    carry_optimizer: one AdamW over every parameter for the whole schedule, so a parameter's
    moments carry across phases (a frozen parameter has no gradient and is not updated, not
    even by weight decay); False: a fresh AdamW per phase (no warmup, the handicap issue 12
    names at lr 3e-3).
    lr_scale: step s (0-based, counted across phases) runs at ``lr * lr_scale(s)``
    (:func:`warmup_cosine`); None: constant ``lr``.
    Returns one row per step (plus step 0): step, phase, phase_name, train_loss, val_loss (NaN
    when not evaluated), wall_s (cumulative training time, evaluation excluded), flops
    (cumulative, :func:`step_flops`). ``requires_grad`` flags and the train/eval mode are
    restored afterwards.
    """
    if not schedule:
        raise ValueError("schedule is empty")
    gen = torch.Generator().manual_seed(seed)
    run = _Run(
        model,
        train_ids.long(),
        val_ids.long(),
        gen,
        batch_size,
        lr,
        lr_scale,
        grad_clip,
        eval_every,
        on_step,
    )
    flags = {k: p.requires_grad for k, p in model.named_parameters()}
    was_training = model.training
    run.log(-1, "init", np.nan, evaluate=True)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for k, phase in enumerate(schedule):
                params = enter_phase(model, phase)
                if not carry_optimizer or k == 0:
                    opt = torch.optim.AdamW(
                        list(model.parameters()) if carry_optimizer else params,
                        lr=lr,
                        weight_decay=weight_decay,
                    )
                run.phase(k, phase, opt, params)
    finally:
        for pname, p in model.named_parameters():
            p.requires_grad_(flags[pname])
            p.grad = None
        model.train(was_training)
    return pd.DataFrame(run.rows)
