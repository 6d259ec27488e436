"""The tables one model's layer-anatomy run measures, from library calls: held-out perplexity,
the surgery sweep (with the joint predicted replacement), the weights' depth fit with its
nulls, the delta correlations, per-layer structure, and recovery after noise.

Units: NLL in nats per predicted token; delta_pct in percent; CIs resample the held-out
text's units (:mod:`lamina.anatomy.heldout`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

import numpy as np
import pandas as pd
import torch

from lamina.anatomy.ablation import ablation_sweep, predicted_joint_nll
from lamina.anatomy.heldout import document_ppl_ci, regroup_sweep
from lamina.anatomy.perplexity import perplexity
from lamina.anatomy.predictability import (
    RIDGE_ALPHA,
    depth_fit_terms,
    layer_structure,
    scaled_stacks,
    singular_spectra,
    summary_stacks,
)
from lamina.anatomy.recovery import recovery_steps, speed_rank
from lamina.anatomy.regularity import GATE, SCALED, delta_table, model_stacks, permuted_r2

__all__ = [
    "SweepPlan",
    "perplexity_table",
    "recovery_table",
    "spectra_table",
    "WeightTables",
    "stack_tables",
    "sweep_model",
    "weight_tables",
]


@dataclass
class SweepPlan:
    """Which surgeries edit which layers on which windows.

    full: surgeries swept over ``layers`` (None: all) on every window (skip, optionally
    interpolate); predicted: swept over ``robust_layers`` on every window, then all of them
    replaced at once (the accumulation claim); rest: the other surgeries, over
    ``robust_layers`` on the first ``n_robust`` windows. options: each surgery's keyword
    arguments (lamina.anatomy.surgery). ridge_alpha, ridge_degree: the depth fit."""

    full: list[str]
    predicted: bool
    rest: list[str]
    layers: list[int] | None
    robust_layers: list[int]
    n_robust: int
    options: dict[str, dict[str, object]] = field(default_factory=dict)
    ridge_alpha: float = RIDGE_ALPHA
    ridge_degree: int = 2


def perplexity_table(
    model: torch.nn.Module, windows: torch.Tensor, doc_ids: np.ndarray, n_bootstrap: int, seed: int
) -> pd.DataFrame:
    """One row: the intact model's held-out ppl with its 95% CI over units
    (:func:`lamina.anatomy.heldout.document_ppl_ci`), nll, tokens, windows, units, and the
    paper's baseline ppl (22.6). windows: (n, seq_len) token ids."""
    base = perplexity(model, windows, batch_size=16, n_bootstrap=0)
    p, lo, hi = document_ppl_ci(base.nll_per_seq, base.tokens_per_seq, doc_ids, n_bootstrap, seed)
    return pd.DataFrame(
        [
            {
                "ppl": p,
                "ci_low": lo,
                "ci_high": hi,
                "nll": base.nll,
                "n_tokens": base.n_tokens,
                "n_sequences": len(base.nll_per_seq),
                "n_documents": len(np.unique(doc_ids)),
                "paper_ppl": 22.6,
            }
        ]
    )


def _one_sweep(
    model: torch.nn.Module,
    ids: torch.Tensor,
    names: list[str],
    layers: list[int] | None,
    plan: SweepPlan,
    n_bootstrap: int,
    seed: int,
) -> pd.DataFrame:
    df = ablation_sweep(
        model,
        ids,
        names,
        layers,
        batch_size=16,
        n_bootstrap=0,
        seed=seed,
        **cast("dict[str, Any]", {k: v for k, v in plan.options.items() if k in names}),
    )
    df["n_tokens"] = int(ids.numel())
    df["base_nll_per_seq"] = [np.asarray(df.attrs["baseline_nll_per_seq"])] * len(df)
    df["sweep_seconds"] = df.attrs["seconds"]
    return df


def sweep_model(
    model: torch.nn.Module,
    windows: torch.Tensor,
    doc_ids: np.ndarray,
    plan: SweepPlan,
    n_bootstrap: int,
    seed: int,
) -> tuple[pd.DataFrame, np.ndarray | None]:
    """(sweep, joint_nll): every (surgery, layer) of ``plan`` with per-window NLLs and the
    delta_pct CI over units (:func:`lamina.anatomy.heldout.regroup_sweep`), and the per-window
    NLL (n_windows,) with every ``robust_layers`` layer's weights predicted at once (None when
    ``plan.predicted`` is False)."""
    frames = [_one_sweep(model, windows, plan.full, plan.layers, plan, n_bootstrap, seed)]
    joint = None
    if plan.predicted:
        frames.append(
            _one_sweep(model, windows, ["predicted"], plan.robust_layers, plan, n_bootstrap, seed)
        )
        _, joint = predicted_joint_nll(
            model,
            windows,
            plan.robust_layers,
            alpha=plan.ridge_alpha,
            degree=plan.ridge_degree,
            batch_size=16,
        )
    if plan.rest:
        frames.append(
            _one_sweep(
                model,
                windows[: plan.n_robust],
                plan.rest,
                plan.robust_layers,
                plan,
                n_bootstrap,
                seed,
            )
        )
    sweep = pd.concat(frames, ignore_index=True)
    seq_len = windows.shape[1]
    return regroup_sweep(sweep, doc_ids, seq_len, n_bootstrap, seed), joint


class WeightTables(TypedDict, total=False):
    """What :func:`stack_tables` returns (every key; a chapter that skips the weights uses
    ``{}``): terms and r2_null by target, predictability, delta, structure."""

    terms: dict[str, pd.DataFrame]
    r2_null: dict[str, np.ndarray]
    predictability: pd.DataFrame
    delta: pd.DataFrame
    structure: pd.DataFrame


def weight_tables(
    model: torch.nn.Module, alpha: float, degree: int, n_permutations: int, seed: int
) -> WeightTables:
    """:func:`stack_tables` of ``model``'s weights."""
    return stack_tables(
        model_stacks(model), layer_structure(model), alpha, degree, n_permutations, seed
    )


def stack_tables(
    stacks: dict[str, np.ndarray],
    structure: pd.DataFrame,
    alpha: float,
    degree: int,
    n_permutations: int,
    seed: int,
) -> WeightTables:
    """The depth fit and the weights' structure, from ``stacks`` (type -> (L, P) weights over
    depth) and their ``structure`` (:func:`lamina.anatomy.predictability.matrix_structure`):
    ``terms`` by target ("raw entries": the fit that predicted weights substitute, read by the
    depth-fit gate; :data:`~lamina.anatomy.regularity.SCALED`: every layer at unit RMS,
    :func:`lamina.anatomy.predictability.scaled_stacks`, the R^2 claims' target;
    :data:`~lamina.anatomy.regularity.GATE` alone, scaled; "layer summaries";
    :func:`lamina.anatomy.predictability.depth_fit_terms`) and ``r2_null`` for each target but
    the raw one (:func:`lamina.anatomy.regularity.permuted_r2`), ``predictability`` (one row per
    target but GATE and matrix type: r2), ``delta``
    (:func:`lamina.anatomy.regularity.delta_table`, of the raw weights), ``structure``."""
    scaled = scaled_stacks(stacks)
    targets = {
        "raw entries": stacks,
        SCALED: scaled,
        GATE: {k: v for k, v in scaled.items() if k == GATE},
        "layer summaries": summary_stacks(structure),
    }
    terms, nulls, rows = {}, {}, []
    for name, st in targets.items():
        if not st:
            continue
        terms[name] = depth_fit_terms(st, alpha=alpha, degree=degree)
        if name != "raw entries":  # the raw fit is the predicted weights' gate, not a test
            nulls[name] = permuted_r2(list(st.values()), alpha, degree, n_permutations, seed)
        if name != GATE:
            g = terms[name].groupby("matrix", sort=False)[["sse", "sst"]].sum()
            rows += [
                {
                    "target": name,
                    "matrix": m,
                    "r2": 1 - r["sse"] / r["sst"],
                    "n_layers": next(iter(st.values())).shape[0],
                    "alpha": alpha,
                    "degree": degree,
                }
                for m, r in g.iterrows()
            ]
    return {
        "terms": terms,
        "r2_null": nulls,
        "predictability": pd.DataFrame(rows),
        "delta": delta_table(stacks),
        "structure": structure,
    }


def spectra_table(model: torch.nn.Module) -> pd.DataFrame:
    """Singular values of every weight matrix: columns matrix, layer, index, singular_value."""
    return pd.DataFrame(
        [
            {"matrix": m, "layer": l, "index": i, "singular_value": float(v)}
            for m, s in singular_spectra(model).items()
            for l, row in enumerate(s)
            for i, v in enumerate(row)
        ]
    )


def recovery_table(
    model: torch.nn.Module,
    train: torch.Tensor,
    evals: torch.Tensor,
    layers: list[int],
    *,
    noise: float,
    budget: int,
    lr: float,
    batch: int,
    tolerance_pct: float,
    eval_every: int,
    seed: int,
) -> pd.DataFrame:
    """One row per layer of ``layers``: noise the layer (relative ``noise``), fine-tune every
    parameter on ``train`` windows (AdamW, ``budget`` steps of ``batch`` windows at ``lr``),
    evaluate on ``evals`` every ``eval_every`` steps (:func:`lamina.anatomy.recovery_steps`);
    steps_ranked is the layer's recovery time (:func:`lamina.anatomy.recovery.speed_rank`)."""
    rows = []
    for l in layers:
        r = recovery_steps(
            model,
            train,
            evals,
            l,
            rel_noise=noise,
            budget_steps=budget,
            lr=lr,
            batch_size=batch,
            tolerance_pct=tolerance_pct,
            eval_every=eval_every,
            seed=seed,
        )
        target = r["baseline_ppl"] * (1 + tolerance_pct / 100)
        rows.append(
            {
                "layer": l,
                "baseline_ppl": r["baseline_ppl"],
                "perturbed_ppl": r["perturbed_ppl"],
                "steps_to_recover": r["steps_to_recover"],
                "recovered": r["recovered"],
                "final_ppl": r["curve"][-1][1],
                "budget_steps": budget,
                "steps_ranked": speed_rank(r["curve"], r["baseline_ppl"], target, budget),
                "curve_steps": [int(s) for s, _ in r["curve"]],
                "curve_ppl": [float(p) for _, p in r["curve"]],
            }
        )
    cols = [
        "layer",
        "baseline_ppl",
        "perturbed_ppl",
        "steps_to_recover",
        "recovered",
        "steps_ranked",
    ]
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=cols)
