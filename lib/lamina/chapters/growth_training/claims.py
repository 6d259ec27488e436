"""The Growth Training claims: each run against uniform training of its seed at equal steps,
FLOPs and wall time, the ordering controls, and one row per real-model importance order.

Every claim needs one precondition (:func:`learning_gate`): uniform training must have learned,
i.e. each seed's uniform run ends at a validation loss <= ``learn_gate`` (0.85) x the unigram
baseline's loss. Comparing schedules of a model that did not learn compares untrained models,
so then every row reads "not testable" with the values in its note (:func:`gated_claims`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from lamina.chapters.growth_training.config import CONTROLS, GrowthConfig
from lamina.chapters.results import claim_record
from lamina.evidence.stats import t_summary

__all__ = [
    "budget_comparison",
    "gated_claims",
    "growth_claims",
    "learning_gate",
    "order_claims",
    "source_claims",
]


def learning_gate(cmp: pd.DataFrame, unigram_loss: float, threshold: float) -> dict[str, Any]:
    """Did uniform training learn? The precondition of every growth claim.

    cmp: ``lamina.anatomy.growth.compare_runs`` rows (run, seed, final_val_loss in nats);
    unigram_loss: the unigram baseline's validation loss (nats); threshold: the largest
    allowed ratio (0.85). Per seed, ratio = uniform final val loss / unigram_loss; the gate
    passes when every seed's ratio is <= threshold (the worst seed decides).
    -> {"passed", "worst_loss", "mean_loss", "unigram_loss", "worst_ratio", "threshold",
    "n_seeds", "note"}: note is "" when it passes, else "not testable: the uniform baseline
    did not learn (loss X vs unigram Y; ...)". No uniform run, or a non-finite loss, fails."""
    losses = cmp.loc[cmp["run"] == "uniform", "final_val_loss"].to_numpy(float)
    ok_input = len(losses) > 0 and np.all(np.isfinite(losses)) and np.isfinite(unigram_loss)
    worst = float(losses.max()) if len(losses) else float("nan")
    ratio = worst / unigram_loss if ok_input and unigram_loss > 0 else float("nan")
    passed = bool(ok_input and ratio <= threshold)
    note = (
        ""
        if passed
        else f"not testable: the uniform baseline did not learn (loss {worst:.3f} vs unigram "
        f"{unigram_loss:.3f} nats, ratio {ratio:.3f}; the claims need <= {threshold:g} x "
        f"unigram = {threshold * unigram_loss:.3f} on every seed, worst of {len(losses)} shown)"
    )
    return {
        "passed": passed,
        "worst_loss": worst,
        "mean_loss": float(losses.mean()) if len(losses) else float("nan"),
        "unigram_loss": float(unigram_loss),
        "worst_ratio": ratio,
        "threshold": float(threshold),
        "n_seeds": int(len(losses)),
        "note": note,
    }


def gated_claims(claims: pd.DataFrame, gate: dict[str, Any]) -> pd.DataFrame:
    """``claims`` with a ``note`` column; when ``gate`` (:func:`learning_gate`) failed, every
    row's verdict is "not testable" and its note the gate's (measured values are kept)."""
    out = claims.copy()
    if "note" not in out:
        out["note"] = ""
    out["note"] = out["note"].fillna("")
    if not gate["passed"]:
        out["verdict"] = "not testable"
        out["note"] = gate["note"]
    return out


def budget_comparison(frame: pd.DataFrame, column: str, baseline: str = "uniform") -> pd.DataFrame:
    """Each run against the baseline of its seed at the SAME budget of ``column`` (step, flops
    or wall_s): budget = the smaller of the two final budgets; each loss is interpolated
    linearly between the evaluations around it; ratio = baseline loss / run loss (> 1: the run is better)."""
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


def order_claims(orders: pd.DataFrame) -> list[dict[str, Any]]:
    """G-order-<control>: growth against the same phases and budget in another layer order
    (equal steps): ratio = control val loss / growth val loss per seed (> 1: the importance
    order helps), geometric mean with a t CI over seeds and a one-sided p. Reproduced needs
    p < 0.05 and ratio > 1; a ratio <= 1 is not reproduced."""
    rows = []
    for control in CONTROLS:
        r = orders[(orders["control"] == control) & (orders["run"] == "growth")]
        ratios = r["loss_ratio"].to_numpy(float)
        m, lo, hi, p = t_summary(ratios, log=True) if len(ratios) else (np.nan,) * 4
        rows.append(
            claim_record(
                f"G-order-{control}",
                "The gain comes from allocating budget by layer importance: growth beats the "
                f"same phases and budget in {control} layer order (equal steps)",
                "implied (allocating budget by importance)",
                "",
                m,
                lo,
                hi,
                None if not np.isfinite(p) else p,
                bool(m > 1),
                verdict_word=None if len(ratios) else "not testable",
                direction_ok=bool(m > 1) if np.isfinite(m) else True,
                effect_size=float(len(ratios)),
                effect_name="seeds",
                convention=f"{control} / growth val loss (nats), geometric mean over seeds",
            )
        )
    return rows


def _saving(cmp: pd.DataFrame, runs: pd.DataFrame, column: str) -> np.ndarray:
    """(n,) 1 - run / uniform of ``column`` for each row of ``runs``, against the uniform run
    of the same seed in ``cmp`` (a fraction; > 0: the run used less)."""
    base = cmp[cmp["run"] == "uniform"].set_index("seed")[column].reindex(runs["seed"])
    return 1 - runs[column].to_numpy() / base.to_numpy()


def _loss_claims(budgets: pd.DataFrame, n_params: int) -> list[dict]:
    """G-loss (equal steps), G-loss-flops and G-loss-wall: the uniform / growth validation
    loss ratio over seeds at each budget (geometric mean, one-sided t-test on the logs)."""
    rows = []
    g = budgets[budgets["run"] == "growth"]
    for col, cid in (("step", "G-loss"), ("flops", "G-loss-flops"), ("wall_s", "G-loss-wall")):
        ratios = g[g["budget"] == col]["loss_ratio"].to_numpy()
        m, lo, hi, p = t_summary(ratios, log=True)
        where = {"step": "equal steps", "flops": "equal FLOPs", "wall_s": "equal wall time"}[col]
        rows.append(
            claim_record(
                cid,
                f"Growth Training reaches 4.7x lower validation loss than uniform training "
                f"at identical parameter count ({where})",
                "4.7x (0.599 / 0.127, equal steps)"
                if col == "step"
                else "4.7x (claimed at equal steps)",
                "",
                m,
                lo,
                hi,
                None if not np.isfinite(p) else p,
                m >= np.sqrt(4.7),
                effect_size=float(len(ratios)),
                effect_name="seeds",
                convention=f"uniform / growth val loss (nats), geometric mean; {n_params:,} params",
            )
        )
    return rows


def _faster_claim(cmp: pd.DataFrame, c: pd.DataFrame) -> dict:
    """G-faster: the wall-time saving of growth at equal steps (``c``: growth's rows of
    ``cmp``), with the FLOP saving as its effect size."""
    wall, flops = _saving(cmp, c, "total_wall_s"), _saving(cmp, c, "total_flops")
    m, lo, hi, p = t_summary(wall)
    return claim_record(
        "G-faster",
        "Growth Training is 13% faster than uniform training",
        "13%",
        "",
        m,
        lo,
        hi,
        None if not np.isfinite(p) else p,
        m >= 0.13 / 2,
        effect_size=float(flops.mean()),
        effect_name="FLOP saving at equal steps",
        convention="1 - growth / uniform training wall time at equal steps",
    )


def _cost_claim(c: pd.DataFrame) -> dict:
    """G-cost: the FLOP saving of growth reaching uniform's final loss (``c``: growth's
    comparison rows); not reproduced when a seed never reaches it."""
    saving = c["flops_saving"].to_numpy(float)
    reached = int(np.isfinite(saving).sum())
    m, lo, hi, p = t_summary(saving) if reached == len(saving) else (np.nan,) * 4
    word = None if reached == len(saving) else "not reproduced"
    return claim_record(
        "G-cost",
        "Growth Training achieves ~54% cost reduction (an extrapolation in the paper)",
        "~54%",
        "",
        m,
        lo,
        hi,
        None if not np.isfinite(p) else p,
        m >= 0.54 / 2,
        verdict_word=word,
        effect_size=float(reached),
        effect_name=f"seeds reaching uniform's final loss (of {len(saving)})",
        convention="1 - FLOPs for growth to reach uniform's final val loss / uniform's FLOPs",
    )


def growth_claims(
    config: GrowthConfig,
    cmp: pd.DataFrame,
    budgets: pd.DataFrame,
    n_params: int,
    orders: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Claim rows G-loss (equal steps; -flops, -wall: other budgets), G-faster, G-cost.
    p: one-sided t-test over seeds. "As claimed" = at least half the claimed effect (on the
    log scale for loss ratios: >= sqrt(4.7)); verdicts via ``lamina.chapters.results.verdict``."""
    c = cmp[cmp["run"] == "growth"]
    rows = [*_loss_claims(budgets, n_params), _faster_claim(cmp, c), _cost_claim(c)]
    if orders is not None:
        rows += order_claims(orders)
    return pd.DataFrame(rows)


def source_claims(budgets: pd.DataFrame, sources: dict[str, str], n_params: int) -> pd.DataFrame:
    """One claim row per real-model importance order, scored exactly as G-loss: for the run
    ``sources[label]`` ("growth (<label> order)"), uniform / run val loss per seed at equal
    steps (:func:`budget_comparison`), geometric mean with a 95% t CI over seeds, one-sided p;
    "as claimed" at >= sqrt(4.7). claim_id ``G-loss-<label>``; ``stage`` names the model whose
    importance ordered the phases."""
    rows = []
    for label, run in sources.items():
        r = budgets[(budgets["run"] == run) & (budgets["budget"] == "step")]
        ratios = r["loss_ratio"].to_numpy(float)
        m, lo, hi, p = t_summary(ratios, log=True) if len(ratios) else (np.nan,) * 4
        row = claim_record(
            f"G-loss-{label}",
            f"Growth Training with layer importance measured on {label} (mapped by relative "
            "depth) reaches 4.7x lower validation loss than uniform training at identical "
            "parameter count (equal steps)",
            "4.7x (importance from SmolLM2-135M, equal steps)",
            "",
            m,
            lo,
            hi,
            None if not np.isfinite(p) else p,
            bool(m >= np.sqrt(4.7)),
            verdict_word=None if len(ratios) else "not testable",
            effect_size=float(len(ratios)),
            effect_name="seeds",
            convention=f"uniform / growth ({label} order) val loss (nats), geometric mean; "
            f"{n_params:,} params",
        )
        row["stage"] = f"importance from {label}"
        rows.append(row)
    return pd.DataFrame(rows)
