"""One training loop for every alignment run: a fixed budget of AdamW steps on any loss.

:class:`StageBudget` states a run's whole budget (steps, examples per step, the AdamW settings
and the learning-rate schedule of :func:`lamina.sources.organisms.train.lr_at`: linear warmup,
then cosine decay to ``min_lr_ratio`` of the peak); :func:`train_steps` spends it. The organisms'
stages (:func:`lamina.sources.organisms.stages.align`), the real models' SFT and DPO
(:func:`lamina.sources.organisms.pretrained.align_pretrained`) and the weight-update chapter's
applied objectives can all run through it, so two runs with equal budgets differ in their loss
only.

GPU-correct: the losses stay on the model's device (no ``loss.item()`` per step; they are read
once at the end, or at the steps where ``on_step`` asks for them), and the loss function is
expected to build its tensors on that device (:func:`lamina.sources.organisms.scoring.model_device`).
Batches: ``batch_size`` item indices per step, from seeded permutations of the items taken
epoch after epoch (every item once per epoch), optionally grouped by length so that a batch
padded to its longest item holds little padding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch

from lamina.sources.organisms.train import lr_at

__all__ = ["GROUP_BATCHES", "StageBudget", "TrainRun", "batch_indices", "length_grouped_batches", "make_adamw",
           "synchronize", "train_steps"]


@dataclass(frozen=True)
class StageBudget:
    """The budget of one training run: ``steps`` AdamW steps of ``batch_size`` examples, peak
    learning rate ``lr`` (``warmup_steps`` of linear warmup, then cosine decay to
    ``min_lr_ratio * lr``), weight decay on matrices only, gradient clipping at ``grad_clip``
    (global L2 norm), ``seed`` for the batch order."""

    steps: int
    batch_size: int
    lr: float
    warmup_steps: int = 0
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    grad_clip: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.steps < 0 or self.batch_size < 1:
            raise ValueError(f"a budget needs steps >= 0 and batch_size >= 1; got {self}")

    @property
    def examples(self) -> int:
        """Examples seen: steps * batch_size."""
        return self.steps * self.batch_size

    def epochs(self, n_items: int) -> float:
        """Passes over ``n_items`` training items that the budget makes."""
        return self.examples / n_items if n_items else float("nan")

    @staticmethod
    def steps_for(epochs: float, n_items: int, batch_size: int) -> int:
        """The fewest steps of ``batch_size`` that make at least ``epochs`` passes over
        ``n_items``: ceil(epochs * n_items / batch_size)."""
        return math.ceil(epochs * n_items / batch_size)


def make_adamw(model: torch.nn.Module, budget: StageBudget) -> torch.optim.AdamW:
    """AdamW over the parameters that require grad: weight decay on those of rank >= 2."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.ndim >= 2], "weight_decay": budget.weight_decay},
              {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]  # fmt: skip
    return torch.optim.AdamW(groups, lr=budget.lr, betas=budget.betas, eps=budget.eps)


def batch_indices(n_items: int, batch_size: int, gen: torch.Generator) -> Iterator[list[int]]:
    """Endless batches of item indices: seeded permutations of range(n_items), one after
    another (a batch may span two epochs)."""
    if n_items < 1:
        raise ValueError("a training run needs at least one item")
    order: list[int] = []
    while True:
        while len(order) < batch_size:
            order += torch.randperm(n_items, generator=gen).tolist()
        yield order[:batch_size]
        order = order[batch_size:]


GROUP_BATCHES = 50
"""Batches per length group of :func:`length_grouped_batches` (Hugging Face's ``group_by_length``
uses the same mega-batches of 50)."""


def length_grouped_batches(lengths: Sequence[int], batch_size: int, gen: torch.Generator,
                           group: int = GROUP_BATCHES) -> Iterator[list[int]]:  # fmt: skip
    """Endless batches of item indices whose items have similar ``lengths`` (tokens), so that
    a batch padded to its longest item holds little padding.

    Each epoch: a seeded permutation of range(n_items), cut into groups of ``group *
    batch_size`` items; each group sorted by length (ties in the permutation's order) and cut
    into batches; the epoch's full batches in a seeded random order, then its remainder
    (n_items mod batch_size items), which the next epoch's first items fill up. Every item is
    drawn once per epoch, as in :func:`batch_indices`; only which items share a batch changes.
    """
    n_items = len(lengths)
    if n_items < 1:
        raise ValueError("a training run needs at least one item")
    size = group * batch_size
    carry: list[int] = []  # the last epoch's remainder, fewer than batch_size items
    while True:
        order = torch.randperm(n_items, generator=gen).tolist()
        batches: list[list[int]] = []
        if carry:  # completed by this epoch's first drawn items
            take = batch_size - len(carry)
            if take > len(order):  # fewer items than a batch: epochs fill it together
                carry += order
                continue
            batches.append(carry + order[:take])
            order = order[take:]
        keep = len(order) - len(order) % batch_size
        order, carry = order[:keep], order[keep:]
        grouped: list[list[int]] = []
        for k in range(0, len(order), size):
            chunk = sorted(order[k : k + size], key=lambda i: lengths[i])
            grouped += [chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size)]
        batches += [grouped[k] for k in torch.randperm(len(grouped), generator=gen).tolist()]
        yield from batches


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA); a no-op on the CPU. Call before reading a clock."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _reader(value: torch.Tensor) -> Callable[[], float]:
    """A function that reads ``value`` (a device sync) when called."""
    return lambda: float(value.detach())


@dataclass
class TrainRun:
    """What :func:`train_steps` leaves: the optimiser (its moments are the run's Adam state),
    the learning rate of every step and its loss (nats; ``loss_values`` (steps,) stays on the
    device, :attr:`losses` reads it: the run's one sync)."""

    optimizer: torch.optim.AdamW
    lrs: list[float]
    loss_values: torch.Tensor

    @property
    def losses(self) -> list[float]:
        """The step losses as floats (copies them from the device)."""
        return self.loss_values.float().cpu().tolist()


def train_steps(
    model: torch.nn.Module,
    loss: Callable[[list[int], int], torch.Tensor],
    n_items: int,
    budget: StageBudget,
    gen: torch.Generator | None = None,
    on_step: Callable[[int, Callable[[], float]], None] | None = None,
    lengths: Sequence[int] | None = None,
) -> TrainRun:
    """Spend ``budget`` on ``model`` in place: at step i (0-based), ``loss(indices, i)`` of the
    next ``batch_size`` item indices -> scalar, then one clipped AdamW step at lr_at(i).

    gen: the batch order's generator (default: seeded with ``budget.seed``); the loss may draw
    from it too (e.g. replay windows). on_step(i + 1, loss_of_step): called after each step;
    ``loss_of_step()`` reads that step's loss (a device sync: call it only where needed).
    lengths: (n_items,) each item's length in tokens (a sort key): batches of similar lengths
    (:func:`length_grouped_batches`); None: unsorted batches (:func:`batch_indices`).
    The model is left in train mode.
    """
    gen = gen if gen is not None else torch.Generator().manual_seed(budget.seed)
    opt = make_adamw(model, budget)
    params = [p for g in opt.param_groups for p in g["params"]]
    if lengths is not None and len(lengths) != n_items:
        raise ValueError(f"lengths has {len(lengths)} entries for {n_items} items")
    batches = (batch_indices(n_items, budget.batch_size, gen) if lengths is None
               else length_grouped_batches(lengths, budget.batch_size, gen))  # fmt: skip
    lrs: list[float] = []
    losses: list[torch.Tensor] = []
    model.train()
    for i in range(budget.steps):
        lr = lr_at(i, budget.steps, budget.lr, budget.warmup_steps, budget.min_lr_ratio)
        for g in opt.param_groups:
            g["lr"] = lr
        value = loss(next(batches), i)
        opt.zero_grad(set_to_none=True)
        value.backward()
        torch.nn.utils.clip_grad_norm_(params, budget.grad_clip)
        opt.step()
        lrs.append(lr)
        losses.append(value.detach())
        if on_step is not None:
            on_step(i + 1, _reader(value))
    return TrainRun(opt, lrs, torch.stack(losses) if losses else torch.zeros(0))
