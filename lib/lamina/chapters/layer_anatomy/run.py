"""Paper 3's five layer diagnostics on each model of a run: the tables of
:mod:`lamina.anatomy.model_tables`, measured (:mod:`lamina.anatomy.measurements`) and judged
(:mod:`lamina.anatomy.claims`) per model. Glue only: which model, which text, which budget.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd
import torch
from scipy import stats

from lamina.anatomy import check_layer
from lamina.anatomy.claims import judge_anatomy, judge_delta
from lamina.anatomy.coverage import range_coverage
from lamina.anatomy.heldout import HeldoutSummary, heldout_text
from lamina.anatomy.importance import skip_rows, unit_sums
from lamina.anatomy.measurements import AnatomyTables, MeasureOptions, measure_anatomy
from lamina.anatomy.model_tables import (
    SweepPlan,
    perplexity_table,
    recovery_table,
    spectra_table,
    sweep_model,
    weight_tables,
)
from lamina.anatomy.paper import PAPER_ANTI, PAPER_CORE, PAPER_L, mapped_layers
from lamina.anatomy.regularity import delta_table, model_stacks
from lamina.chapters.layer_anatomy.config import (
    CHAPTER,
    IMPORTANCE_SURGERIES,
    AnatomyConfig,
    budget_row,
)
from lamina.chapters.models import chapter_models
from lamina.chapters.results import ExperimentResult, concat_tables
from lamina.chapters.runtime import corpus_windows
from lamina.core.threads import threads
from lamina.evidence.claims import claims_frame
from lamina.sources.models import get_adapter, load_model
from lamina.sources.organisms import ORGANISMS
from lamina.sources.quantize import quantize_model
from lamina.states.quant_control import not_run_control, run_quant_control

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["recovery_layer_list", "robustness_layer_list", "run_anatomy"]


def recovery_layer_list(
    config: AnatomyConfig, n_layers: int, field: str = "recovery_layers"
) -> list[int]:
    """The layers of ``field`` (recovery_layers or robustness_layers): a list as given; an int
    n: n evenly spaced layers from first to last (all when n >= L); None: ``layers`` or all."""
    rl = getattr(config, field)
    if isinstance(rl, int):
        return sorted({int(round(x)) for x in np.linspace(0, n_layers - 1, min(rl, n_layers))})
    if rl is not None:
        return list(rl)
    return list(range(n_layers)) if config.layers is None else list(config.layers)


def robustness_layer_list(config: AnatomyConfig, n_layers: int) -> list[int]:
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


def _plan(config: AnatomyConfig, n_layers: int, n_windows: int, seq_len: int) -> SweepPlan:
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


def _notes(
    config: AnatomyConfig, n_layers: int, info: HeldoutSummary, plan: SweepPlan
) -> list[str]:
    """The budget row, the held-out text, and how the paper's layer numbers map here."""
    m = config.model
    by = ", ".join(f"{v} {k}" for k, v in info["documents_by_source"].items())
    notes = [
        f"{m}: budget row {budget_row(m)!r}: {', '.join(plan.full)} on "
        f"{'all' if config.layers is None else len(config.layers)} layers and "
        f"{info['n_tokens']:,} tokens ({info['n_windows']} windows of {config.seq_len} from "
        f"{info['n_documents']} units: {by}; plays: {config.plays}); predicted weights and the "
        f"other edits on layers {', '.join(map(str, plan.robust_layers))}, the other edits on "
        f"{plan.n_robust} windows; every CI resamples units.",
    ]
    core = mapped_layers(PAPER_CORE, n_layers, config.depth_mapping)
    if n_layers == PAPER_L:
        notes.append(
            f"{m}: {n_layers} layers, as in paper 3: its layer numbers are tested as stated."
        )
    elif core is None:
        notes.append(
            f"{m}: {n_layers} layers and depth_mapping='none': the core and anti-layer "
            "positions are not testable."
        )
    else:
        anti = "; ".join(
            f"L{p} -> {', '.join(map(str, mapped_layers([p], n_layers, 'span') or []))}"
            for p in PAPER_ANTI
        )
        notes.append(
            f"{m}: {n_layers} layers, not paper 3's {PAPER_L}: core L8-11 -> layers "
            f"{', '.join(map(str, core))}; anti-layers {anti} (depth span)."
        )
    if not recovery_layer_list(config, n_layers):
        notes.append(
            f"{m}: no recovery fine-tune in this budget: P3-recovery is not testable here."
        )
    return notes


def _corpus_name(config: AnatomyConfig) -> str:
    if config.corpus:
        return config.corpus
    name = config.model.partition("@")[0]
    return name if name in ORGANISMS else "organism-llama"


def _recovery(
    model: torch.nn.Module,
    tok: Any,
    config: AnatomyConfig,
    windows: torch.Tensor,
    sources: list[str],
    doc_ids: np.ndarray,
    n_layers: int,
) -> pd.DataFrame:
    """Fine-tuning windows from the corpus's train split; evaluation on held-out curriculum
    windows (the held-out split; a play window may be a train-split play with plays="all")."""
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
    train = corpus_windows(
        _corpus_name(config), tok, "train", 4 * budget * batch * seq_len, seq_len
    )
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


def _run_one(config: AnatomyConfig) -> ExperimentResult:
    """:func:`run_anatomy` on the one model ``config.model`` (budget fields filled)."""
    t0, cpu0 = time.perf_counter(), time.process_time()
    lap: dict[str, float] = {}

    def mark(name: str) -> None:
        lap[name] = time.perf_counter() - t0 - sum(lap.values())

    with threads(config.threads), warnings.catch_warnings():
        warnings.simplefilter("ignore", category=stats.ConstantInputWarning)
        model, tok = load_model(config.model, dtype=torch.float32)
        n_layers = get_adapter(model).n_layers(model)
        for name in ("layers", "recovery_layers", "robustness_layers"):
            if isinstance(getattr(config, name), list):
                checked: dict[str, Any] = {
                    name: [check_layer(model, l) for l in getattr(config, name)]
                }
                config = dataclasses.replace(config, **checked)
        max_pos = getattr(model.config, "max_position_embeddings", None) or config.seq_len
        config = dataclasses.replace(config, seq_len=min(config.seq_len, int(cast(int, max_pos))))
        held = heldout_text(
            _corpus_name(config),
            cast("PreTrainedTokenizerBase", tok),
            int(cast(int, config.n_tokens)),
            config.seq_len,
            config.seed,
            plays=config.plays or "heldout",
        )
        plan = _plan(config, n_layers, held.windows.shape[0], config.seq_len)
        notes = _notes(config, n_layers, held.summary(), plan)
        ppl = perplexity_table(model, held.windows, held.doc_ids, config.n_bootstrap, config.seed)
        mark("setup")
        sweep, joint = sweep_model(
            model, held.windows, held.doc_ids, plan, config.n_bootstrap, config.seed
        )
        mark("sweep")
        weights = (
            weight_tables(
                model, config.ridge_alpha, config.ridge_degree, config.n_permutations, config.seed
            )
            if plan.predicted
            else {}
        )
        mark("weights")
        recovery = _recovery(model, tok, config, held.windows, held.sources, held.doc_ids, n_layers)
        mark("recovery")
        spectra = spectra_table(model)
    tables = AnatomyTables(
        sweep,
        held.doc_ids,
        n_layers,
        weights.get("terms", {}),
        weights.get("r2_null", {}),
        weights.get("delta"),
        joint,
        recovery,
    )
    opts = MeasureOptions(
        config.depth_mapping,
        config.catastrophic_pct,
        config.preserve_pct,
        config.n_bootstrap,
        config.n_permutations,
        config.seed,
    )
    measured, gates = measure_anatomy(tables, opts)
    claims = claims_frame(judge_anatomy(config.model, measured, gates))
    notes.append(_coverage_note(config, sweep, held.doc_ids))
    mark("claims")
    notes.append(
        f"{config.model}: elapsed {time.perf_counter() - t0:.0f} s wall, "
        f"{time.process_time() - cpu0:.0f} s CPU ("
        + ", ".join(f"{k} {v:.0f} s" for k, v in lap.items())
        + f"; {config.threads or torch.get_num_threads()} thread(s))."
    )
    out = {
        "perplexity": ppl,
        "recovery": recovery,
        "spectra": spectra,
        "sweep": sweep.drop(columns=["nll_per_seq", "base_nll_per_seq"]).assign(
            depth=lambda d: d["layer"] / max(n_layers - 1, 1)
        ),
    }
    if "predictability" in weights:  # the weight tables, when the chapter measured them
        out["predictability"] = weights["predictability"]
    if "delta" in weights:
        out["delta"] = weights["delta"]
    if "structure" in weights:
        out["structure"] = weights["structure"]
    for t in out.values():
        t.insert(0, "model", config.model)
    if config.quant_control:
        claims, out["quantisation"] = _quant_control(model, config, claims, notes)
    return ExperimentResult(CHAPTER, config, claims, out, notes, [config.model])


def _coverage_note(config: AnatomyConfig, sweep: pd.DataFrame, doc_ids: np.ndarray) -> str:
    """The importance range's CI coverage, simulated on this model's own units
    (:func:`lamina.anatomy.coverage.range_coverage`, 200 samples)."""
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


def run_anatomy(config: AnatomyConfig) -> ExperimentResult:
    """The five diagnostics of paper 3 on each model of ``config.model`` ("default": see
    :func:`lamina.chapters.models.chapter_models`), each with its own budget (:meth:`AnatomyConfig.for_model`).
    Tables (each with a ``model`` column): perplexity, sweep (surgery x layer), predictability,
    delta, structure, spectra, recovery; claims: every claim of :mod:`lamina.anatomy.claims`
    per model, the first model first."""
    models, notes = chapter_models(CHAPTER, config.model)
    results = [_run_one(config.for_model(m)) for m in models]
    names = dict.fromkeys(k for r in results for k in r.tables)
    tables = {k: concat_tables([r.tables[k] for r in results if k in r.tables]) for k in names}
    claims = pd.concat([r.claims for r in results], ignore_index=True)
    notes += [n for r in results for n in r.notes]
    return ExperimentResult(CHAPTER, config, claims, tables, notes, models)


# the claims the quantisation control re-measures on re-quantised weights: the weight-delta
# correlations (seconds); the others need the sweeps or fine-tunes rerun, beyond the budget
QUANT_CONTROL_CLAIMS = ("p3-anatomy-delta-structure", "p3-anatomy-delta")
QUANT_COST = (
    "cost: it needs the ridge depth fits, the layer sweeps or the recovery fine-tunes "
    "rerun on the re-quantised weights, beyond the book's budget"
)


def _quant_control(
    model: torch.nn.Module, config: AnatomyConfig, claims: pd.DataFrame, notes: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The quantisation control (:mod:`lamina.states.quant_control`) of a model from a quantised
    GGUF: :data:`QUANT_CONTROL_CLAIMS` re-measured on its weights re-quantised; the others read
    "not run: cost". -> (claims with ``quant_shift``, flip table)."""
    quantization = {config.model: (getattr(model, "lamina_source", None) or {}).get("quantization")}

    def run_claims(name: str) -> pd.DataFrame:
        delta = delta_table(model_stacks(quantize_model(model, name.rpartition("+")[2])))
        return claims_frame(judge_delta(name, delta, config.n_bootstrap, config.seed)).assign(
            model=name
        )

    out, flips = run_quant_control([config.model], claims, quantization, run_claims, notes=notes)
    rest = ~out["claim_id"].isin(QUANT_CONTROL_CLAIMS)
    out.loc[rest, "quant_shift"] = not_run_control(out[rest], quantization, QUANT_COST)[
        "quant_shift"
    ]
    return out, flips
