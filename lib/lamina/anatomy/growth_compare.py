"""Growth Training's runs compared with uniform training of the same seed: at equal steps,
FLOPs and wall time (:func:`compare_runs`, :func:`budget_comparison`), and the precondition of
every growth claim, that uniform training learned at all (:func:`learning_gate`).

Runs of one seed start from the same weights and see the same batches, so each comparison is
paired by seed. A loss ratio is baseline loss / run loss (> 1: the run is better).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import torch

from lamina.evidence.decide import GateResult
from lamina.sources.organisms.evaluate import unigram_perplexity

__all__ = ["LEARNED_GATE", "budget_comparison", "compare_runs", "learning_gate", "unigram_loss"]

LEARNED_GATE = "p3-growth-learned"


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
    frame = _runs(runs)
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


def budget_comparison(frame: pd.DataFrame, column: str, baseline: str = "uniform") -> pd.DataFrame:
    """Each run against the baseline of its seed at the SAME budget of ``column`` (step, flops
    or wall_s): budget = the smaller of the two final budgets; each loss is interpolated
    linearly between the evaluations around it; loss_ratio = baseline loss / run loss (> 1:
    the run is better). Columns run, seed, budget, budget_value, val_loss, baseline_val_loss,
    loss_ratio."""
    ev = frame.dropna(subset=["val_loss"]).sort_values("step")
    rows = []
    for (run, seed), g in ev.groupby(["run", "seed"], sort=False):
        if run == baseline:
            continue
        b = ev[(ev["run"] == baseline) & (ev["seed"] == seed)]
        budget = float(min(g[column].iloc[-1], b[column].iloc[-1]))
        loss = float(np.interp(budget, g[column], g["val_loss"]))
        base = float(np.interp(budget, b[column], b["val_loss"]))
        rows.append(
            {
                "run": run,
                "seed": seed,
                "budget": column,
                "budget_value": budget,
                "val_loss": loss,
                "baseline_val_loss": base,
                "loss_ratio": base / loss,
            }
        )
    return pd.DataFrame(rows)


def unigram_loss(train: torch.Tensor, val: torch.Tensor, vocab_size: int) -> float:
    """The unigram baseline's validation loss (nats): log of
    ``lamina.sources.organisms.evaluate.unigram_perplexity`` (add-one unigram of the (n, T)
    training windows, scored on the (m, T) validation windows' targets val[:, 1:])."""
    return float(np.log(unigram_perplexity(train.reshape(-1), val, vocab_size)))


def learning_gate(cmp: pd.DataFrame, unigram: float, threshold: float) -> GateResult:
    """Did uniform training learn? The precondition of every growth claim: every seed's
    uniform run ends at a validation loss <= ``threshold`` x the unigram baseline's
    ``unigram`` (nats; the worst seed decides). cmp: :func:`compare_runs` rows. No uniform
    run, or a non-finite loss, fails. The values name the losses either way."""
    losses = cmp.loc[cmp["run"] == "uniform", "final_val_loss"].to_numpy(float)
    ok = len(losses) > 0 and bool(np.all(np.isfinite(losses))) and np.isfinite(unigram)
    worst = float(losses.max()) if len(losses) else float("nan")
    ratio = worst / unigram if ok and unigram > 0 else float("nan")
    return GateResult(
        bool(ok and ratio <= threshold),
        f"uniform loss {worst:.3f} vs unigram {unigram:.3f} nats, ratio {ratio:.3f} (needs <= "
        f"{threshold:g} on every seed; worst of {len(losses)} shown)",
    )


def _runs(runs: Mapping[str, pd.DataFrame] | pd.DataFrame) -> pd.DataFrame:
    if isinstance(runs, pd.DataFrame):
        return runs.copy()
    return pd.concat([df.assign(run=name) for name, df in runs.items()], ignore_index=True)
