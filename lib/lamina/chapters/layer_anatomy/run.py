"""Paper 3's five layer diagnostics on one causal LM, with the claims table of its abstract.

:func:`run_anatomy` takes one :class:`AnatomyConfig` and returns an ``ExperimentResult``
(tables, claims, notes) whose ``.write()`` saves them with ``lamina.states.io.write_results``.
All metrics come from :mod:`lamina.anatomy`; this module chooses data, runs them and turns
the numbers into verdicts. Mapping the paper's 30-layer positions (critical core L8-11,
anti-layers L14/L17) onto another depth by relative position is a reimplementation choice.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, cast

import numpy as np
import pandas as pd
import torch
from scipy import stats

import lamina.anatomy as anatomy
from lamina.anatomy.predictability import (
    matrix_types,
    stacked_weights,
    summary_stacks,
)
from lamina.chapters.layer_anatomy.claims import anatomy_claims, mapped_layers
from lamina.chapters.layer_anatomy.claims_weights import GATE, delta_claims
from lamina.chapters.layer_anatomy.config import (
    CHAPTER,
    DEFAULT_ORGANISMS,
    IMPORTANCE_SURGERIES,
    PRETRAINED,
    AnatomyConfig,
    budget_row,
)
from lamina.chapters.layer_anatomy.documents import (
    organism_heldout,
    regroup_sweep,
)
from lamina.chapters.layer_anatomy.nulls import (
    PAPER_ANTI,
    PAPER_CORE,
    PAPER_L,
    delta_null,
    loo_hat_matrix,
    permuted_r2,
)
from lamina.chapters.layer_anatomy.steps import (
    checked_layers,
    heldout_note,
    perplexity_table,
    predictability_tables,
    spectra_table,
    timing_note,
    without_predicted,
)
from lamina.chapters.results import ExperimentResult, concat_tables
from lamina.chapters.runtime import corpus_windows, threads
from lamina.sources import organisms
from lamina.sources.gguf_models import installed_offline
from lamina.sources.models import get_adapter, load_model
from lamina.sources.organisms import ORGANISMS
from lamina.sources.quantize import quantize_model
from lamina.states.quant_control import not_run_control, run_quant_control

__all__ = [
    "PRETRAINED",
    "corpus_windows",
    "delta_null",
    "expand_anatomy_models",
    "loo_hat_matrix",
    "permuted_r2",
    "recovery_layer_list",
    "robustness_layer_list",
    "run_anatomy",
    "threads",
]



def expand_anatomy_models(model: str) -> tuple[list[str], list[str]]:
    """(models, notes): "default" -> the installed :data:`PRETRAINED` models, then the built
    :data:`DEFAULT_ORGANISMS` (a missing one is skipped with a note); else [model]."""
    if model != "default":
        return [model], []
    models, notes = installed_offline(PRETRAINED)
    for name in DEFAULT_ORGANISMS:
        try:
            organisms.resolve(name)
            models.append(name)
        except Exception as exc:  # not built yet: skip with a visible note
            notes.append(f"{name} skipped: {exc}")
    if not models:
        raise ValueError("model='default' found no model: " + "; ".join(notes))
    return models, notes


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
    """The layers the robustness surgeries (all but ``importance_surgeries``) edit: those of
    :func:`recovery_layer_list` for ``robustness_layers``; when that is a count n (a budget's
    evenly spaced subset), also the layers that paper 3's claims name, so that no subset
    sweep misses them: the mapped core (L8-11) and anti-layers (L14, L17)
    (:func:`lamina.chapters.layer_anatomy.claims.mapped_layers`; none with
    depth_mapping="none" off 30 layers) and, when "predicted" is swept, layers 0..k_max-1,
    which the joint replacement of P3-accumulation needs single-layer rows for. A list is
    used as given; None: ``layers`` or all. Sorted layer indices in [0, n_layers)."""
    base = recovery_layer_list(config, n_layers, "robustness_layers")
    if not isinstance(config.robustness_layers, int):
        return base
    named = set(mapped_layers(PAPER_CORE + PAPER_ANTI, n_layers, config.depth_mapping) or [])
    if "predicted" in config.surgeries:
        named |= set(range(min(config.k_max or n_layers, n_layers)))
    return sorted(set(base) | named)


def _permuted_r2(
    model: torch.nn.Module, structure: pd.DataFrame, config: AnatomyConfig
) -> dict[str, np.ndarray]:
    """{target: permutation null of the mean R²}: "raw entries" (the weights), :data:`GATE`
    (gate_proj's weights alone; empty without one) and "layer summaries"
    (:func:`lamina.anatomy.predictability.summary_stacks`), each its own null."""
    raw = {r: stacked_weights(model, r) for r in matrix_types(model)}
    targets = {
        "raw entries": list(raw.values()),
        GATE: [raw[GATE]] if GATE in raw else [],
        "layer summaries": list(summary_stacks(structure).values()),
    }
    return {
        name: permuted_r2(
            stacks, config.ridge_alpha, config.ridge_degree, config.n_permutations, config.seed
        )
        if stacks
        else np.array([])
        for name, stacks in targets.items()
    }


def _sweep(model: torch.nn.Module, windows: torch.Tensor, config: AnatomyConfig) -> pd.DataFrame:
    """The importance surgeries (skip, by default interpolate) on all windows and ``layers``,
    the other surgeries on the robustness subset (robustness_tokens x robustness_layers)."""
    opts: dict[str, Any] = {
        "scale": {"alpha": config.alpha},
        "noise": {"rel_scale": config.noise_scale, "seed": config.seed},
        "reinit": {"seed": config.seed},
        "predicted": {"alpha": config.ridge_alpha, "degree": config.ridge_degree},
    }
    frames = []
    full = config.importance_surgeries or list(IMPORTANCE_SURGERIES)
    main = [s for s in config.surgeries if s in full]
    rest = [s for s in config.surgeries if s not in full]
    if config.robustness_tokens is None:  # filled per model kind before the sweep runs
        raise ValueError("robustness_tokens is unset: fill the budget (config.BUDGETS) first")
    n_rob = min(windows.shape[0], -(-config.robustness_tokens // windows.shape[1]))
    n_layers = get_adapter(model).n_layers(model)
    rob_layers = robustness_layer_list(config, n_layers)
    for names, ids, layers in ((main, windows, config.layers), (rest, windows[:n_rob], rob_layers)):
        if not names:
            continue
        df = anatomy.ablation_sweep(
            model,
            ids,
            names,
            layers,
            batch_size=16,
            n_bootstrap=config.n_bootstrap,
            seed=config.seed,
            **{k: v for k, v in opts.items() if k in names},
        )
        df["n_tokens"] = int(ids.numel())
        df["base_nll_per_seq"] = [np.asarray(df.attrs["baseline_nll_per_seq"])] * len(df)
        df["sweep_seconds"] = df.attrs["seconds"]
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def _recovery(
    model: torch.nn.Module, train: torch.Tensor, evals: torch.Tensor, config: AnatomyConfig
) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    budget, every = int(config.recovery_budget or 1), int(config.recovery_eval_every or 1)
    for l in recovery_layer_list(config, get_adapter(model).n_layers(model)):
        r = anatomy.recovery_steps(
            model,
            train,
            evals,
            l,
            rel_noise=config.recovery_noise,
            budget_steps=budget,
            lr=config.recovery_lr,
            batch_size=int(config.recovery_batch or 1),
            tolerance_pct=config.tolerance_pct,
            eval_every=every,
            seed=config.seed,
        )
        rows.append(
            {
                "layer": l,
                "baseline_ppl": r["baseline_ppl"],
                "perturbed_ppl": r["perturbed_ppl"],
                "steps_to_recover": r["steps_to_recover"],
                "recovered": r["recovered"],
                "final_ppl": r["curve"][-1][1],
                "budget_steps": budget,
                # censored runs rank after every recovered one
                "steps_ranked": r["steps_to_recover"] if r["recovered"] else budget + every,
                "curve_steps": [int(s) for s, _ in r["curve"]],
                "curve_ppl": [float(p) for _, p in r["curve"]],
            }
        )
    columns = ["layer", "baseline_ppl", "perturbed_ppl", "steps_to_recover", "recovered"]
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=columns)


def _plan_notes(config: AnatomyConfig, n_layers: int) -> list[str]:
    """Notes that say which budget row applies, how paper 3's 30-layer positions are read
    on this depth, and which parts the budget leaves out."""
    m = config.model
    full = config.importance_surgeries or list(IMPORTANCE_SURGERIES)
    rob = robustness_layer_list(config, n_layers)
    added = sorted(set(rob) - set(recovery_layer_list(config, n_layers, "robustness_layers")))
    notes = [
        f"{m}: budget row {budget_row(m)!r} (config.BUDGETS): {', '.join(full)} on "
        f"{'all' if config.layers is None else len(config.layers)} layers and "
        f"{config.n_tokens:,} tokens; the other surgeries on layers "
        f"{', '.join(map(str, rob))} and {config.robustness_tokens:,} tokens"
        + (
            f" (layers {', '.join(map(str, added))} added to the evenly spaced "
            f"{config.robustness_layers}: the paper's mapped core and anti-layers and the "
            "layers replaced jointly by predicted weights)."
            if added
            else "."
        )
    ]
    core = mapped_layers(PAPER_CORE, n_layers, config.depth_mapping)
    anti = [mapped_layers([p], n_layers, config.depth_mapping) for p in PAPER_ANTI]
    if n_layers == PAPER_L:
        notes.append(f"{m}: {n_layers} layers, as in paper 3: its layer numbers are tested as "
                     "stated.")  # fmt: skip
    elif core is None:
        notes.append(f"{m}: {n_layers} layers, not paper 3's {PAPER_L}, and "
                     "depth_mapping='none': the core and anti-layer positions are not "
                     "testable.")  # fmt: skip
    else:
        at = "; ".join(f"L{p} -> {', '.join(map(str, a or []))}"
                       for p, a in zip(PAPER_ANTI, anti, strict=True))  # fmt: skip
        notes.append(
            f"{m}: {n_layers} layers, not paper 3's {PAPER_L}: its layer numbers map by "
            f"depth span (depth_mapping={config.depth_mapping!r}): core L8-11 -> layers "
            f"{', '.join(map(str, core))}; anti-layers {at}."
        )
    if not recovery_layer_list(config, n_layers):
        notes.append(f"{m}: no recovery fine-tune in this budget (recovery_layers empty): "
                     "P3-recovery is not testable here.")  # fmt: skip
    return notes


def _corpus_name(config: AnatomyConfig) -> str:
    if config.corpus:
        return config.corpus
    name = config.model.partition("@")[0]
    return name if name in ORGANISMS else "organism-llama"


def run_anatomy(config: AnatomyConfig) -> ExperimentResult:
    """The five diagnostics of paper 3 on each model of ``config.model`` ("default": see
    :func:`expand_anatomy_models`), each with its own budget (:meth:`AnatomyConfig.for_model`).

    Tables (each with a ``model`` column, models concatenated): perplexity, sweep (surgery x
    layer), predictability, delta (with its independence null), replacement (predicted
    weights for layers 0..k-1), recovery, structure, spectra. Claims: one row per claim of
    paper 3's abstract (1)-(4) per model, the first model first.
    """
    models, notes = expand_anatomy_models(config.model)
    results = [_run_one(config.for_model(m)) for m in models]
    names = dict.fromkeys(k for r in results for k in r.tables)
    tables = {k: concat_tables([r.tables[k] for r in results if k in r.tables]) for k in names}
    claims = pd.concat([r.claims for r in results], ignore_index=True)
    notes += [n for r in results for n in r.notes]
    return ExperimentResult(CHAPTER, config, claims, tables, notes, models)


def _recovery_table(
    model: torch.nn.Module, tok: Any, windows: torch.Tensor, corpus: str, config: AnatomyConfig,
    seq_len: int, n_layers: int,
) -> pd.DataFrame:
    """The recovery table (:func:`_recovery`): fine-tuning windows from the corpus's train
    split (none when no layer is to recover), evaluated on the first held-out windows."""
    budget, batch = int(config.recovery_budget or 1), int(config.recovery_batch or 1)
    n_train = max(4 * budget * batch, 1) * seq_len
    train = (
        corpus_windows(corpus, tok, "train", n_train, seq_len)
        if recovery_layer_list(config, n_layers)
        else torch.zeros(0, seq_len, dtype=torch.long)
    )
    evals = windows[: max(1, -(-int(config.recovery_tokens or 0) // seq_len))]
    return _recovery(model, train, evals, config)


def _run_one(config: AnatomyConfig) -> ExperimentResult:
    """:func:`run_anatomy` on the one model ``config.model`` (budget fields filled)."""
    t0, cpu0 = time.perf_counter(), time.process_time()
    notes: list[str] = []
    n_tokens = int(cast(int, config.n_tokens))
    with threads(config.threads), warnings.catch_warnings():
        # BCa intervals of degenerate resamples (e.g. an ablation that changes nothing) are
        # reported as NaN; scipy's warnings about them would only clutter the chapter
        warnings.simplefilter("ignore", category=stats.DegenerateDataWarning)
        warnings.simplefilter("ignore", category=stats.ConstantInputWarning)
        model, tok = load_model(config.model, dtype=torch.float32)
        n_layers = get_adapter(model).n_layers(model)
        config = checked_layers(config, model)
        max_pos = getattr(model.config, "max_position_embeddings", None) or getattr(
            model.config, "n_positions", config.seq_len
        )
        seq_len = min(config.seq_len, int(cast(int, max_pos)))
        corpus = _corpus_name(config)
        held = organism_heldout(corpus, tok, n_tokens, seq_len, config.seed)
        windows, doc_ids = held.windows, held.doc_ids
        info = held.summary()
        notes.append(heldout_note(config, corpus, info, seq_len))
        notes += _plan_notes(config, n_layers)
        config, few, dropped = without_predicted(config, n_layers)
        notes += dropped
        ppl = perplexity_table(model, windows, doc_ids, info["n_documents"], config)
        lap = {"setup": time.perf_counter() - t0}
        sweep = regroup_sweep(
            _sweep(model, windows, config), doc_ids, seq_len, config.n_bootstrap, config.seed
        )
        lap["sweep"] = time.perf_counter() - t0 - sum(lap.values())
        tables: dict[str, pd.DataFrame] = {"perplexity": ppl}
        structure = anatomy.layer_structure(model)
        r2_null: dict[str, np.ndarray] = {}
        if not few:
            tables |= predictability_tables(model, windows, structure, config, seq_len)
            r2_null = _permuted_r2(model, structure, config)
            lap["predictability"] = time.perf_counter() - t0 - sum(lap.values())
        tables["recovery"] = _recovery_table(model, tok, windows, corpus, config, seq_len, n_layers)
        lap["recovery"] = time.perf_counter() - t0 - sum(lap.values())
        tables["structure"] = structure
        tables["spectra"] = spectra_table(model)
    tables["sweep"] = sweep.drop(columns=["nll_per_seq", "base_nll_per_seq"]).assign(
        depth=lambda d: d["layer"] / max(n_layers - 1, 1)
    )
    claims = anatomy_claims(config, sweep, tables, r2_null, n_layers, doc_ids=doc_ids)
    lap["structure+claims"] = time.perf_counter() - t0 - sum(lap.values())
    notes.append(timing_note(config, t0, cpu0, lap))
    for t in tables.values():
        t.insert(0, "model", config.model)
    claims["model"] = config.model
    if config.quant_control:
        claims, tables["quantisation"] = _quant_control(model, config, claims, notes)
    return ExperimentResult(CHAPTER, config, claims, tables, notes, [config.model])


# the claims the quantisation control re-measures on re-quantised weights: the weight-delta
# correlations (weights only: seconds); the others need the depth regressions, the layer
# sweeps or the recovery fine-tunes rerun, beyond the book's budget
QUANT_CONTROL_CLAIMS = ("P3-delta", "P3-delta-structure")
QUANT_COST = (
    "cost: it needs the ridge depth fits, the layer sweeps or the recovery fine-tunes rerun "
    "on the re-quantised weights, beyond the book's budget"
)


def _quant_control(
    model: torch.nn.Module, config: AnatomyConfig, claims: pd.DataFrame, notes: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The quantisation control (:mod:`lamina.states.quant_control`) of a model whose weights
    come from a quantised GGUF: :data:`QUANT_CONTROL_CLAIMS` re-measured on its weights
    re-quantised; the other claims read "not run: cost". Unquantised models: unchanged
    (``quant_shift`` ""). -> (claims with ``quant_shift``, flip table)."""
    quantization = {config.model: (getattr(model, "lamina_source", None) or {}).get("quantization")}

    def run_claims(name: str) -> pd.DataFrame:
        requantised = quantize_model(model, name.rpartition("+")[2])
        delta = anatomy.delta_correlation(requantised).merge(
            delta_null(requantised), on=["matrix", "layer"]
        )
        return pd.DataFrame(delta_claims(config, delta)).assign(model=name)

    out, flips = run_quant_control([config.model], claims, quantization, run_claims, notes=notes)
    rest = ~out["claim_id"].isin(QUANT_CONTROL_CLAIMS)
    out.loc[rest, "quant_shift"] = not_run_control(out[rest], quantization, QUANT_COST)["quant_shift"]
    return out, flips
