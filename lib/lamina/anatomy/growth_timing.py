"""Wall time of Growth Training's schedules, measured side by side.

The arms of the experiment train one after another, so timing each arm as it trains lets the
machine's load at that moment decide the comparison (a shared CPU changes a step's time by
2x). Instead, every distinct kind of step the schedules take (:func:`phase_key`: which blocks
train, and whether the embeddings do) is timed in interleaved blocks (:func:`time_phases`): in
each of R repeats, every kind runs ``steps`` optimiser steps in a seeded random order, after
one untimed warm-up step, on one model, the device synchronised around each block. A
schedule's wall time is then

    T(schedule, r) = sum over its phases of steps x t_r(kind),   t_r = repeat r's seconds per step

(:func:`schedule_seconds`); the runs' curves get this modelled clock (:func:`modelled_wall`),
so that the equal-wall-time comparison and the wall-time saving share one measurement. The
result still depends on the machine (CPU or GPU, threads): the claims say so.

The clock (:func:`step_clock`): on a GPU, wall time after synchronising the device; on a CPU,
the process's CPU time (every thread's), which is the wall time of an idle machine and does not
count the time another process holds the cores. Interleaving alone did not protect the wall
clock at 3 steps a block: on the 2-core reference machine, with a test suite sharing the cores,
the growth saving read -0.7% [-6.6%, +5.2%] where the quiet build read +6.4% [+5.4%, +7.4%].
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from lamina.anatomy.growth import Phase, enter_phase, next_token_step, synced_clock

__all__ = ["CLOCKS", "modelled_wall", "phase_key", "schedule_seconds", "step_clock", "time_phases"]

CLOCKS = {"cuda": "wall, device synchronised", "cpu": "process CPU time"}
"""The clock :func:`step_clock` reads on each device type (any other: wall time)."""


def step_clock(device: torch.device) -> float:
    """Seconds of the clock that times a block of steps on ``device`` (:data:`CLOCKS`): CUDA,
    time.perf_counter() after synchronising; CPU, time.process_time() (the CPU seconds of all
    the process's threads: a step's cost whatever else runs on the machine)."""
    if device.type == "cuda":
        return synced_clock(device)
    if device.type == "cpu":
        return time.process_time()
    return time.perf_counter()


def phase_key(phase: Phase) -> str:
    """The kind of step a phase takes: its trainable blocks ("all" or "l1,l2,...") and
    "+emb" when the embeddings train."""
    layers = "all" if phase.layers is None else ",".join(map(str, sorted(phase.layers)))
    return layers + ("+emb" if phase.train_embeddings else "")


def time_phases(
    build: Callable[[], nn.Module],
    phases: Sequence[Phase],
    train_ids: torch.Tensor,
    batch_size: int,
    lr: float,
    *,
    repeats: int = 5,
    steps: int = 3,
    seed: int = 0,
) -> pd.DataFrame:
    """Seconds per optimiser step of every distinct :func:`phase_key` among ``phases``,
    measured in interleaved blocks (module docstring) on one model from ``build()`` with one
    AdamW over every parameter (as ``carry_optimizer``), batches of ``batch_size`` rows of
    ``train_ids`` (n, T). -> columns repeat, key, device, clock (:data:`CLOCKS`), seconds (per
    step, of that clock)."""
    if repeats < 2 or steps < 1:
        raise ValueError(f"need repeats >= 2 and steps >= 1, got {repeats}, {steps}")
    kinds = {phase_key(p): p for p in phases}
    model = build()
    device = next(model.parameters()).device
    opt = torch.optim.AdamW(list(model.parameters()), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    order_rng = np.random.default_rng(seed)
    rows = []
    for r in range(repeats):
        for key in order_rng.permutation(sorted(kinds)):
            params = enter_phase(model, kinds[key])
            model.train()
            batch = [
                train_ids[torch.randint(0, train_ids.shape[0], (batch_size,), generator=gen)].to(
                    device
                )
                for _ in range(steps + 1)
            ]
            next_token_step(model, opt, params, batch[0], lr, 1.0)  # warm-up, untimed
            t0 = step_clock(device)
            for ids in batch[1:]:
                next_token_step(model, opt, params, ids, lr, 1.0)
            rows.append(
                {
                    "repeat": r,
                    "key": str(key),
                    "device": device.type,
                    "clock": CLOCKS.get(device.type, "wall"),
                    "seconds": (step_clock(device) - t0) / steps,
                }
            )
    for p in model.parameters():
        p.requires_grad_(True)
    return pd.DataFrame(rows)


def schedule_seconds(phases: Sequence[Phase], timing: pd.DataFrame) -> np.ndarray:
    """(R,) each repeat's modelled wall time (s) of a schedule: sum of steps x seconds per
    step of its phases' kinds (``timing``: :func:`time_phases`)."""
    per = timing.pivot(index="repeat", columns="key", values="seconds")
    return np.sum([p.steps * per[phase_key(p)].to_numpy() for p in phases], axis=0)


def modelled_wall(
    curves: pd.DataFrame, plans: Mapping[int, Mapping[str, list[Phase]]], timing: pd.DataFrame
) -> pd.Series:
    """The modelled cumulative training time (s) of every row of ``curves`` (columns run, seed,
    step, phase: the index of the step's phase, -1 before any step): the sum, over the steps
    up to the row's, of the median seconds per step of their kinds (``timing``). ``plans``:
    {seed: {run: phases}}."""
    median = timing.groupby("key")["seconds"].median()
    out = pd.Series(np.nan, index=curves.index, dtype=float)
    for (run, seed), g in curves.groupby(["run", "seed"], sort=False):
        phases = plans[int(seed)][str(run)]
        g = g.sort_values("step")
        per_step = [0.0 if k < 0 else float(median[phase_key(phases[int(k)])]) for k in g["phase"]]
        # a row's step count since the previous row (1 for a training step, 0 for step 0)
        steps = np.diff(np.r_[0, g["step"].to_numpy()])
        out.loc[g.index] = np.cumsum(np.asarray(per_step) * steps)
    return out
