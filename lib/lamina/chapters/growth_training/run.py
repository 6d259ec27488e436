"""Paper 3's Growth Training proof of concept: phased, importance-ordered training against
uniform training of the same architecture, at equal steps, equal FLOPs and equal wall time.

:func:`run_growth` takes one :class:`GrowthConfig` and returns an ``ExperimentResult``.
Schedules come from :mod:`lamina.anatomy.growth` (``growth_schedule``, ``uniform_schedule``); the
training loop, FLOP count and per-seed comparison too. Runs of one seed start from the same
initial weights and see the same batches, so schedules are compared paired, per seed. Extra
growth runs take their layer order from real pretrained models
(:func:`lamina.anatomy.growth_runs.real_orders`). The runs themselves are
:mod:`lamina.anatomy.growth_runs`; this module chooses the models and keeps the tables.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import pandas as pd
import torch

from lamina.anatomy.growth import Phase
from lamina.anatomy.growth_claims import CONTROLS, compare_growth, judge_growth, measure_growth
from lamina.anatomy.growth_compare import LEARNED_GATE, unigram_loss
from lamina.anatomy.growth_orders import real_label
from lamina.anatomy.growth_runs import (
    build_model,
    importance_table,
    layer_importance,
    real_orders,
    schedule_table,
    schedules_for,
    train_runs,
    training_tokenizer,
)
from lamina.anatomy.growth_text import clean_val_windows
from lamina.anatomy.growth_timing import time_phases
from lamina.anatomy.windows import corpus_windows
from lamina.chapters.growth_training.config import CHAPTER, PAPER_SCALE, GrowthConfig
from lamina.chapters.models import chapter_models
from lamina.chapters.results import ExperimentResult
from lamina.core.threads import threads
from lamina.evidence.claims import claims_frame
from lamina.evidence.decide import GateResult

__all__ = ["resolve_real_models", "run_growth", "source_run"]

TIMING_REPEATS, TIMING_STEPS = 5, 3  # interleaved timing: repeats x steps per kind of step


def source_run(label: str) -> str:
    """The schedule name of the growth run ordered by ``label``'s importance."""
    return f"growth ({label} order)"


def resolve_real_models(config: GrowthConfig) -> tuple[list[str], list[str]]:
    """(models, notes): ``config.real_models`` as given; None -> the installed
    the registry record's default models (a missing wheel is skipped with a note), or none in quick mode."""
    if config.real_models is not None:
        labels = [real_label(m) for m in config.real_models]
        if len(set(labels)) != len(labels):
            raise ValueError(f"real_models have clashing labels {labels}; rename the folders")
        return list(config.real_models), []
    if config.quick:
        return [], ["Real-model importance orders: none in quick mode (set real_models)."]
    return chapter_models(CHAPTER, "default")


def _claims(
    config: GrowthConfig,
    label: str,
    curves: pd.DataFrame,
    plans: Mapping[int, Mapping[str, list[Phase]]],
    sources: dict[str, str],
    unigram: float,
    timing: pd.DataFrame,
) -> tuple[pd.DataFrame, dict[str, pd.DataFrame], GateResult]:
    """(claims judged by :mod:`lamina.anatomy.growth_claims`, the comparison tables of
    :func:`lamina.anatomy.growth_claims.compare_growth`, the learning gate)."""
    controls = tuple(c for c in CONTROLS if c in config.schedules)
    machine = f"{next(iter(timing['device']), 'cpu')}, {torch.get_num_threads()} thread(s)"
    t, gate, tables = compare_growth(
        curves, plans, sources, unigram, timing, controls, config.learn_gate, machine
    )
    rows = judge_growth(label, measure_growth(t), {LEARNED_GATE: gate}, tuple(sources))
    return claims_frame(rows), tables, gate


def _notes(
    config: GrowthConfig,
    gate: GateResult,
    n_params: int,
    n_train: int,
    n_val: int,
    val_info: Mapping[str, int],
) -> list[str]:
    """The scale, optimiser, validation text and learning-gate notes."""
    val = (
        f"{n_val:,} tokens of val-split passages in a seeded order (seed "
        f"{config.val_shuffle_seed}) that share no word 8-gram with the train split: "
        f"{val_info['kept']:,} of {val_info['passages']:,} passages kept, "
        f"{val_info['dropped']:,} dropped (mostly templated curriculum documents that "
        "repeat training text)"
    )
    verdict = "passed" if gate.passed else "failed: every growth claim reads not testable"
    return [
        f"Scale: {config.arch}, {config.n_layers} layers, d {config.d_model}, "
        f"{n_params:,} parameters, {config.total_steps} steps of {config.batch_size} x "
        f"{config.context} tokens, {len(config.seeds)} paired seed(s) (paper: {PAPER_SCALE}); "
        f"corpus of {config.model}, "
        + (
            "its own tokenizer; "
            if config.vocab_size is None
            else f"a {config.vocab_size:,}-entry BPE trained on its train split; "
        )
        + f"{n_train:,} training tokens.",
        f"Validation: {val}.",
        f"Learning gate: {gate.values}: {verdict}.",
        "Optimiser: "
        + (
            "one AdamW whose state carries across phases"
            if config.carry_optimizer
            else "a fresh AdamW per phase"
        )
        + f"; peak lr {config.lr:g}, linear warmup over {config.warmup_fraction:g} of the "
        f"steps, cosine decay to {config.min_lr_ratio:g} x peak at the last step, the same "
        "rate at the same step in every schedule.",
        "Timing: the arms train one after another, so the wall-time claims use interleaved "
        "timing instead (lamina.anatomy.growth_timing): every kind of step the schedules take, "
        f"{TIMING_STEPS} steps each in {TIMING_REPEATS} repeats in a seeded order, on one "
        "model; the curves' wall_s is the clock modelled from it (wall_measured_s: the clock "
        "while each arm trained, load_avg: the load when it started). Wall time depends on "
        "the machine.",
    ]


def _reuse_notes(reused: Mapping[tuple[str, int], str]) -> list[str]:
    """One note per (schedule, seed) whose run is an identical schedule's."""
    return [
        f"{n}, seed {s}: the same phases as {twin} (the layer groups coincide), so its run "
        f"is {twin}'s."
        for (n, s), twin in reused.items()
    ]


def _elapsed_note(
    config: GrowthConfig, t0: float, t_real: float, t_train: Mapping[str, float]
) -> str:
    """The run's seconds: in all since ``t0`` (perf_counter), the real-model importance, and
    each schedule's training per seed."""
    per_run = {k: v / len(config.seeds) for k, v in t_train.items()}
    return (
        f"Elapsed {time.perf_counter() - t0:.0f} s (real-model importance {t_real:.0f} s; "
        "training per run and seed: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in per_run.items())
        + ")."
    )


def run_growth(config: GrowthConfig) -> ExperimentResult:
    """Train every schedule for every seed, compare, and score paper 3's growth claims.

    Tables (each with a ``model`` column): curves (train_with_schedule rows, run, seed),
    comparison (``lamina.anatomy.growth.compare_runs``), budgets (:func:`budget_comparison` at
    equal steps, FLOPs and wall time), orders (against the ordering controls), baseline (each
    run's final loss against the unigram baseline's; learn_gate and gate_passed, the
    learning gate's result, the same on every row), schedule (phases per
    seed: the random control's order is drawn per seed), importance (per trained layer and
    order source: delta_pct, mapped for real models), profiles (each source's own layers,
    ``depth`` = (layer + 0.5) / n_layers), correlations (Spearman between the sources'
    mapped orders). A real-model order whose phases equal an already trained schedule's
    reuses that schedule's runs (noted). Every claim is "not testable" unless uniform
    training learned (:func:`learning_gate`).
    """
    t0 = time.perf_counter()
    tok = training_tokenizer(config)
    label = f"growth-{config.arch}-{config.n_layers}x{config.d_model}"
    ref_name = (
        config.model
        if config.importance == "organism"
        else f"{label} after {config.importance_steps} steps"
    )
    with threads(config.threads):
        train = corpus_windows(config.model, tok, "train", None, config.context)
        val, val_info = clean_val_windows(
            config.model, tok, config.val_tokens, config.context, config.val_shuffle_seed
        )
        unigram = unigram_loss(train, val, len(tok))
        importance, where = layer_importance(config, tok, train, val)
        t_real = time.perf_counter()
        models, real_notes = resolve_real_models(config)
        mapped, profiles, corr, notes = real_orders(config, models, importance, ref_name)
        real_notes += notes
        t_real = time.perf_counter() - t_real
        sources = {lab: source_run(lab) for lab in mapped}
        extra = {sources[k]: v for k, v in mapped.items()}
        plans = {s: schedules_for(config, importance, extra, seed=s) for s in config.seeds}
        curves, n_params, reused, t_train = train_runs(config, tok, plans, train, val)
        phases = [p for by_run in plans.values() for ps in by_run.values() for p in ps]
        timing = time_phases(
            lambda: build_model(config, tok, 0),
            phases,
            train,
            config.batch_size,
            config.lr,
            repeats=TIMING_REPEATS,
            steps=TIMING_STEPS,
            seed=0,
        )
    claims, parts, gate = _claims(config, label, curves, plans, sources, unigram, timing)
    imp = importance_table(config.n_layers, ref_name, importance, mapped)
    tables = {
        **parts,
        "timing": timing,
        "schedule": schedule_table(config.n_layers, plans),
        "importance": imp,
        "profiles": profiles,
        "correlations": corr,
    }
    for t in tables.values():
        t.insert(0, "model", label)
    notes = [
        f"Importance: {where}.",
        *real_notes,
        *_reuse_notes(reused),
        *_notes(config, gate, n_params, train.numel(), val.numel(), val_info),
        _elapsed_note(config, t0, t_real, t_train),
    ]
    return ExperimentResult(CHAPTER, config, claims, tables, notes, [label])
