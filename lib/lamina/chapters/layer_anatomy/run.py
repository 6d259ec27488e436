"""Paper 3's five layer diagnostics on each model of a run: the tables of
:mod:`lamina.anatomy.model_tables`, measured (:mod:`lamina.anatomy.measurements`) and judged
(:mod:`lamina.anatomy.claims`) per model, on the layers, plan and recovery fine-tunes of
:mod:`lamina.anatomy.run_plan`. Glue only: which model, which text, which budget.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import TYPE_CHECKING, Any, cast

import pandas as pd
import torch
from scipy import stats

from lamina.anatomy import check_layer
from lamina.anatomy.claims import judge_anatomy
from lamina.anatomy.heldout import HeldoutSummary, heldout_text
from lamina.anatomy.measurements import AnatomyTables, MeasureOptions, measure_anatomy
from lamina.anatomy.model_tables import (
    SweepPlan,
    perplexity_table,
    spectra_table,
    sweep_model,
    weight_tables,
)
from lamina.anatomy.paper import PAPER_ANTI, PAPER_CORE, PAPER_L, mapped_layers
from lamina.anatomy.quant_claims import anatomy_quant_control
from lamina.anatomy.run_plan import (
    corpus_name,
    coverage_note,
    recovery_layer_list,
    recovery_run,
    sweep_plan,
)
from lamina.chapters.layer_anatomy.config import CHAPTER, AnatomyConfig, budget_row
from lamina.chapters.models import chapter_models
from lamina.chapters.results import ExperimentResult, concat_tables
from lamina.core.threads import threads
from lamina.evidence.claims import claims_frame
from lamina.sources.models import get_adapter, load_model

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["run_anatomy"]


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
            corpus_name(config),
            cast("PreTrainedTokenizerBase", tok),
            int(cast(int, config.n_tokens)),
            config.seq_len,
            config.seed,
            plays=config.plays or "heldout",
        )
        plan = sweep_plan(config, n_layers, held.windows.shape[0], config.seq_len)
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
        recovery = recovery_run(model, cast("PreTrainedTokenizerBase", tok), config, held.windows,
                                held.sources, held.doc_ids, n_layers)  # fmt: skip
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
    notes.append(coverage_note(config, sweep, held.doc_ids))
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
        claims, out["quantisation"] = anatomy_quant_control(
            model, config.model, claims, notes, config.n_bootstrap, config.seed
        )
    return ExperimentResult(CHAPTER, config, claims, out, notes, [config.model])


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
