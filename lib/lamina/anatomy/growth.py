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
from collections.abc import Callable, Mapping, Sequence
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
    "compare_runs",
    "growth_schedule",
    "next_token_step",
    "step_flops",
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


def _enter_phase(model: nn.Module, phase: Phase) -> list[nn.Parameter]:
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

    def log(self, k: int, name: str, train_loss: float, evaluate: bool) -> None:
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

    def phase(
        self, k: int, phase: Phase, opt: torch.optim.Optimizer, params: list[nn.Parameter]
    ) -> None:
        """Run phase ``k``'s steps, logging each."""
        device = next(self.model.parameters()).device
        cost = step_flops(self.model, phase, self.batch_size, self.train_ids.shape[1])
        n = self.train_ids.shape[0]
        for i in range(phase.steps):
            self.model.train()
            t0 = time.perf_counter()
            pick = torch.randint(0, n, (self.batch_size,), generator=self.gen)
            lr = self.lr if self.lr_scale is None else self.lr * self.lr_scale(self.step)
            ids = self.train_ids[pick].to(device)
            loss = next_token_step(self.model, opt, params, ids, lr, self.grad_clip)
            self.wall += time.perf_counter() - t0
            self.step, self.flops = self.step + 1, self.flops + cost
            if self.on_step is not None:
                self.on_step(self.step, self.model)
            evaluate = self.step % self.eval_every == 0 or i == phase.steps - 1
            self.log(k, phase.name, loss.item(), evaluate)


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
    run = _Run(model, train_ids.long(), val_ids.long(), gen, batch_size, lr, lr_scale,
               grad_clip, eval_every, on_step)  # fmt: skip
    flags = {k: p.requires_grad for k, p in model.named_parameters()}
    was_training = model.training
    run.log(-1, "init", np.nan, evaluate=True)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for k, phase in enumerate(schedule):
                params = _enter_phase(model, phase)
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


def _at(evals: pd.DataFrame, column: str, budget: float) -> float:
    """Validation loss at the last evaluation with ``column`` <= budget."""
    ok = evals[evals[column] <= budget * (1 + 1e-9)]
    return float(ok["val_loss"].iloc[-1]) if len(ok) else float("nan")


def compare_runs(
    runs: Mapping[str, pd.DataFrame] | pd.DataFrame, baseline: str = "uniform"
) -> pd.DataFrame:
    """Compare training runs with the baseline run of the same seed.

    runs: {name: train_with_schedule frame}, or one frame with columns ``run`` (and ``seed``).
    Per (run, seed): final validation loss; the validation loss at the baseline's final step,
    FLOPs and wall time (the last evaluation within each budget); loss_ratio_* =
    baseline final loss / run loss (> 1: the run is better, paper 3 claims 4.7 at equal steps);
    and the steps, FLOPs and wall time at which the run first reaches the baseline's final
    loss, with flops_saving = 1 - flops_to_target / baseline FLOPs (paper 3: 0.54).
    """
    if isinstance(runs, pd.DataFrame):
        frame = runs.copy()
    else:
        frame = pd.concat([df.assign(run=name) for name, df in runs.items()], ignore_index=True)
    if "seed" not in frame:
        frame["seed"] = 0
    if baseline not in set(frame["run"]):
        raise ValueError(f"baseline run {baseline!r} not among {sorted(set(frame['run']))}")
    evals = frame.dropna(subset=["val_loss"]).sort_values("step")
    rows = []
    for (run, seed), ev in evals.groupby(["run", "seed"], sort=False):
        base = evals[(evals["run"] == baseline) & (evals["seed"] == seed)]
        if base.empty:
            raise ValueError(f"no baseline run {baseline!r} for seed {seed}")
        b_last = base.iloc[-1]
        target = float(b_last["val_loss"])
        reached = ev[ev["val_loss"] <= target]
        hit = reached.iloc[0] if len(reached) else None
        row = {
            "run": run,
            "seed": seed,
            "final_step": int(ev["step"].iloc[-1]),
            "final_val_loss": float(ev["val_loss"].iloc[-1]),
            "total_flops": float(ev["flops"].iloc[-1]),
            "total_wall_s": float(ev["wall_s"].iloc[-1]),
        }
        for name, col in (("steps", "step"), ("flops", "flops"), ("wall", "wall_s")):
            loss = _at(ev, col, float(b_last[col]))
            row[f"val_loss_equal_{name}"] = loss
            row[f"loss_ratio_equal_{name}"] = target / loss
        row.update(
            steps_to_target=np.nan if hit is None else int(hit["step"]),
            flops_to_target=np.nan if hit is None else float(hit["flops"]),
            wall_to_target=np.nan if hit is None else float(hit["wall_s"]),
        )
        row["flops_saving"] = 1 - row["flops_to_target"] / float(b_last["flops"])
        row["wall_saving"] = 1 - row["wall_to_target"] / float(b_last["wall_s"])
        rows.append(row)
    return pd.DataFrame(rows)
