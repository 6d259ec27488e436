"""What paper 3's five diagnostics run on one model, given a budget: the layers each edit
touches (:func:`recovery_layer_list`, :func:`robustness_layer_list`), the sweep plan
(:func:`sweep_plan`, for :func:`lamina.anatomy.model_tables.sweep_model`), the recovery
fine-tunes on the corpus (:func:`recovery_run`) and the simulated coverage of the importance
range's CI on the model's own units (:func:`coverage_note`). The layer-anatomy chapter
(:mod:`lamina.chapters.layer_anatomy`) runs them with its config, any object with the fields
of :class:`AnatomySetup`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd
import torch

from lamina.anatomy.coverage import range_coverage
from lamina.anatomy.importance import skip_rows, unit_sums
from lamina.anatomy.model_tables import SweepPlan, recovery_table
from lamina.anatomy.paper import PAPER_ANTI, PAPER_CORE, mapped_layers
from lamina.anatomy.windows import corpus_windows
from lamina.sources.organisms import ORGANISMS

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["IMPORTANCE_SURGERIES", "AnatomySetup", "corpus_name", "coverage_note",
           "recovery_layer_list", "recovery_run", "robustness_layer_list", "sweep_plan"]  # fmt: skip

IMPORTANCE_SURGERIES = ("skip", "interpolate")  # the paper's ablation: removal / neighbour mean


class AnatomySetup(Protocol):
    """The parameters these functions read (the fields of the chapter's ``AnatomyConfig``,
    which documents them), a model's budget filled in."""

    model: str
    corpus: str | None
    surgeries: list[str]
    layers: list[int] | None
    alpha: float
    noise_scale: float
    robustness_tokens: int | None
    recovery_noise: float
    recovery_budget: int | None
    recovery_lr: float
    recovery_batch: int | None
    recovery_eval_every: int | None
    recovery_tokens: int | None
    recovery_layers: list[int] | int | None
    robustness_layers: list[int] | int | None
    importance_surgeries: list[str] | None
    depth_mapping: str
    tolerance_pct: float
    ridge_alpha: float
    ridge_degree: int
    k_max: int | None
    seed: int


def recovery_layer_list(
    config: AnatomySetup, n_layers: int, field: str = "recovery_layers"
) -> list[int]:
    """The layers of ``field`` (recovery_layers or robustness_layers): a list as given; an int
    n: n evenly spaced layers from first to last (all when n >= L); None: ``layers`` or all."""
    rl = getattr(config, field)
    if isinstance(rl, int):
        return sorted({int(round(x)) for x in np.linspace(0, n_layers - 1, min(rl, n_layers))})
    if rl is not None:
        return list(rl)
    return list(range(n_layers)) if config.layers is None else list(config.layers)


def robustness_layer_list(config: AnatomySetup, n_layers: int) -> list[int]:
    """The layers the robustness surgeries and predicted weights edit: those of
    :func:`recovery_layer_list` for ``robustness_layers``; when that is a count (a budget's
    evenly spaced subset), also the layers paper 3's claims name: the mapped core (L8-11) and
    anti-layers (L14, L17) and, with "predicted" swept, layers 0..k_max-1 (the replacement
    curve). A list is used as given; None: ``layers`` or all."""
    base = recovery_layer_list(config, n_layers, "robustness_layers")
    if not isinstance(config.robustness_layers, int):
        return base
    named = set(mapped_layers(PAPER_CORE + PAPER_ANTI, n_layers, config.depth_mapping) or [])
    if "predicted" in config.surgeries:
        named |= set(range(min(config.k_max or n_layers, n_layers)))
    return sorted(set(base) | named)


def sweep_plan(config: AnatomySetup, n_layers: int, n_windows: int, seq_len: int) -> SweepPlan:
    """The sweep of one model of ``n_layers`` layers over ``n_windows`` held-out windows of
    ``seq_len`` tokens: the importance surgeries on every window, predicted weights where the
    model has at least ridge_degree + 2 layers, the other edits on the robustness layers and
    the windows that ``robustness_tokens`` covers (all without it)."""
    full_names = config.importance_surgeries or list(IMPORTANCE_SURGERIES)
    opts: dict[str, dict[str, Any]] = {
        "scale": {"alpha": config.alpha},
        "noise": {"rel_scale": config.noise_scale, "seed": config.seed},
        "reinit": {"seed": config.seed},
        "predicted": {"alpha": config.ridge_alpha, "degree": config.ridge_degree},
    }
    return SweepPlan(
        full=[s for s in config.surgeries if s in full_names],
        predicted="predicted" in config.surgeries and n_layers >= config.ridge_degree + 2,
        rest=[s for s in config.surgeries if s not in full_names and s != "predicted"],
        layers=config.layers,
        robust_layers=robustness_layer_list(config, n_layers),
        n_robust=min(n_windows, -(-int(config.robustness_tokens or seq_len) // seq_len)),
        options=opts,
        ridge_alpha=config.ridge_alpha,
        ridge_degree=config.ridge_degree,
    )


def corpus_name(config: AnatomySetup) -> str:
    """The registered organism whose corpus supplies the text: ``config.corpus``, else the
    model's own when it is an organism, else organism-llama's."""
    if config.corpus:
        return config.corpus
    name = config.model.partition("@")[0]
    return name if name in ORGANISMS else "organism-llama"


def recovery_run(
    model: torch.nn.Module,
    tok: PreTrainedTokenizerBase,
    config: AnatomySetup,
    windows: torch.Tensor,
    sources: list[str],
    doc_ids: np.ndarray,
    n_layers: int,
) -> pd.DataFrame:
    """The recovery table (:func:`lamina.anatomy.model_tables.recovery_table`) of the layers of
    :func:`recovery_layer_list`: fine-tuning windows from the corpus's train split; evaluation
    on held-out curriculum windows (``windows`` (n, seq_len) of documents ``doc_ids`` whose
    source is ``sources[doc]``; a play window may be a train-split play with plays="all").
    With no layer, an empty table."""
    layers = recovery_layer_list(config, n_layers)
    if not layers:
        return recovery_table(
            model,
            windows[:0],
            windows[:0],
            [],
            noise=0,
            budget=0,
            lr=0,
            batch=1,
            tolerance_pct=0,
            eval_every=1,
            seed=0,
        )
    budget, batch = int(config.recovery_budget or 1), int(config.recovery_batch or 1)
    seq_len = windows.shape[1]
    train = corpus_windows(corpus_name(config), tok, "train", 4 * budget * batch * seq_len, seq_len)
    held = np.array([sources[d] == "curriculum" for d in doc_ids])
    n_eval = max(1, -(-int(config.recovery_tokens or seq_len) // seq_len))
    evals = windows[torch.from_numpy(np.flatnonzero(held)[:n_eval])]
    return recovery_table(
        model,
        train,
        evals,
        layers,
        noise=config.recovery_noise,
        budget=budget,
        lr=config.recovery_lr,
        batch=batch,
        tolerance_pct=config.tolerance_pct,
        eval_every=int(config.recovery_eval_every or 1),
        seed=config.seed,
    )


def coverage_note(config: AnatomySetup, sweep: pd.DataFrame, doc_ids: np.ndarray) -> str:
    """The importance range's CI coverage, simulated on this model's own units
    (:func:`lamina.anatomy.coverage.range_coverage`, 200 samples), as a note."""
    skip = skip_rows(sweep)
    keep = (skip["delta_ci_low"] > 0).to_numpy()
    if keep.sum() < 2:
        return f"{config.model}: range coverage not simulated (fewer than 2 layers raise PPL)."
    c = range_coverage(
        unit_sums(skip, doc_ids), keep, n_sims=200, n_bootstrap=500, seed=config.seed
    )
    return (
        f"{config.model}: the range CI's coverage, simulated by resampling this model's "
        f"{c['n_units']} units (200 samples): {c['expanded']:.0%} for the expanded "
        f"percentile interval the claim uses, {c['percentile']:.0%} for a plain one."
    )
