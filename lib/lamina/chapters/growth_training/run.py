"""Paper 3's Growth Training proof of concept: phased, importance-ordered training against
uniform training of the same architecture, at equal steps, equal FLOPs and equal wall time.

:func:`run_growth` takes one :class:`GrowthConfig` and returns an ``ExperimentResult``.
Schedules come from :mod:`lamina.anatomy.growth` (``growth_schedule``, ``uniform_schedule``); the
training loop, FLOP count and per-seed comparison too. Runs of one seed start from the same
initial weights and see the same batches, so schedules are compared paired, per seed. Extra
growth runs take their layer order from real pretrained models
(:mod:`lamina.chapters.growth_training.importance`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import torch

from lamina.anatomy.growth import (
    Phase,
    growth_schedule,
    train_with_schedule,
    uniform_schedule,
    warmup_cosine,
)
from lamina.anatomy.growth_claims import CONTROLS, compare_growth, judge_growth, measure_growth
from lamina.anatomy.growth_compare import (
    LEARNED_GATE,
    unigram_loss,
)
from lamina.anatomy.growth_orders import (
    depth_map,
    random_order,
    rank_correlations,
    real_importance,
    real_label,
)
from lamina.anatomy.growth_text import clean_val_windows
from lamina.anatomy.growth_timing import time_phases
from lamina.chapters.growth_training.config import CHAPTER, PAPER_SCALE, GrowthConfig
from lamina.chapters.growth_training.importance import (
    build_model,
    layer_importance,
    resolve_real_models,
)
from lamina.chapters.results import ExperimentResult
from lamina.chapters.runtime import corpus_windows
from lamina.core.threads import threads
from lamina.evidence.claims import claims_frame
from lamina.evidence.decide import GateResult
from lamina.sources import organisms
from lamina.sources.organisms import ORGANISMS
from lamina.sources.organisms.corpus import load_corpus
from lamina.sources.organisms.tokenizer import train_tokenizer

__all__ = ["run_growth", "schedules_for", "source_run"]

TIMING_REPEATS, TIMING_STEPS = 5, 3  # interleaved timing: repeats x steps per kind of step


def source_run(label: str) -> str:
    """The schedule name of the growth run ordered by ``label``'s importance."""
    return f"growth ({label} order)"


def schedules_for(
    config: GrowthConfig,
    importance: np.ndarray,
    extra_orders: Mapping[str, np.ndarray] | None = None,
    seed: int | None = None,
) -> dict[str, list[Phase]]:
    """The schedules named in ``config.schedules``, all of ``config.total_steps`` steps, then
    one growth schedule per ``extra_orders`` entry (name -> (L,) importance), same phases.
    The random-order control's order is :func:`random_order` of ``seed`` (None: the first of
    ``config.seeds``), so each training seed draws its own."""
    seed = config.seeds[0] if seed is None else seed
    growth_steps = round(config.total_steps * (1 - config.final_fraction))
    per_phase = growth_steps // config.n_groups
    final = config.total_steps - per_phase * config.n_groups
    orders: dict[str, np.ndarray] = {}
    out: dict[str, list[Phase]] = {}
    for name in config.schedules:
        if name == "uniform":
            out[name] = uniform_schedule(config.total_steps)
        else:
            orders[name] = {
                "growth": importance,
                "reverse": -importance,
                "random": random_order(len(importance), seed),
            }[name]
    for name, order in (extra_orders or {}).items():
        if len(order) != config.n_layers:
            raise ValueError(f"order {name!r} has {len(order)} layers, not {config.n_layers}")
        orders[name] = np.asarray(order, float)
    for name, order in orders.items():
        out[name] = growth_schedule(
            order,
            config.n_groups,
            per_phase,
            final,
            train_embeddings=config.train_embeddings,
            cumulative=config.cumulative,
        )
    return out


def _real_orders(
    config: GrowthConfig, reference: np.ndarray, reference_name: str
) -> tuple[dict[str, np.ndarray], pd.DataFrame, pd.DataFrame, list[str]]:
    """({label: (L,) mapped importance}, native profiles table, rank correlations, notes)."""
    models, notes = resolve_real_models(config)
    mapped: dict[str, np.ndarray] = {}
    native = [
        pd.DataFrame(
            {
                "source": reference_name,
                "layer": np.arange(config.n_layers),
                "n_layers": config.n_layers,
                "delta_pct": reference,
            }
        )
    ]
    for name in models:
        label = real_label(name)
        delta, info = real_importance(
            name, config.model, config.real_tokens, config.real_seq_len
        )
        mapped[label] = depth_map(delta, config.n_layers)
        native.append(
            pd.DataFrame(
                {
                    "source": label,
                    "layer": np.arange(len(delta)),
                    "n_layers": len(delta),
                    "delta_pct": delta,
                }
            )
        )
        notes.append(
            f"Importance of {label}: skip ablation of its {info['n_layers']} layers on "
            f"{info['n_tokens']:,} held-out tokens of the {config.model} corpus "
            f"({info['n_windows']} windows from {info['n_documents']} documents; clean "
            f"perplexity {info['baseline_ppl']:.1f}), mapped onto {config.n_layers} layers by "
            f"relative depth (each trained layer: the overlap-weighted mean delta_pct of the "
            f"{info['n_layers'] / config.n_layers:.2f} real layers in its depth span); load "
            f"{info['load_s']:.0f} s, sweep {info['sweep_s']:.0f} s."
        )
    profiles = pd.concat(native, ignore_index=True)
    profiles["depth"] = (profiles["layer"] + 0.5) / profiles["n_layers"]
    corr = rank_correlations({reference_name: reference, **mapped})
    return mapped, profiles, corr, notes


def training_tokenizer(config: GrowthConfig) -> Any:
    """The trained model's tokenizer: a byte-level BPE of ``config.vocab_size`` entries trained
    on the organism corpus's train split, or (None) the built organism's own tokenizer."""
    if config.vocab_size is None:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(organisms.resolve(config.model)))
    name = config.model.partition("@")[0]
    if name not in ORGANISMS:
        raise ValueError(f"corpus {config.model!r} is not a registered organism")
    return train_tokenizer(load_corpus(ORGANISMS[name]).train, config.vocab_size)


def _train_runs(
    config: GrowthConfig,
    tok: Any,
    plans: Mapping[int, Mapping[str, list[Phase]]],
    train: torch.Tensor,
    val: torch.Tensor,
) -> tuple[pd.DataFrame, int, dict[tuple[str, int], str], dict[str, float]]:
    """Every plan of every seed -> (curves, n_params, reused {(run, seed): twin}, seconds per
    run).
    Runs of one seed start from the same weights and see the same batches; a plan whose
    phases equal an earlier one's of the same seed reuses its rows."""
    lr_scale = warmup_cosine(
        config.total_steps, round(config.warmup_fraction * config.total_steps), config.min_lr_ratio
    )
    frames: list[pd.DataFrame] = []
    n_params = 0
    reused: dict[tuple[str, int], str] = {}
    t_train: dict[str, float] = {}
    for seed, seed_plans in plans.items():
        done: dict[tuple, pd.DataFrame] = {}
        names: dict[tuple, str] = {}
        for name, phases in seed_plans.items():
            key = tuple((p.steps, tuple(p.layers or ()), p.train_embeddings) for p in phases)
            if key in done:  # same phases, same seed: the same run
                reused[name, seed] = names[key]
                frames.append(done[key].assign(run=name))
                continue
            t1 = time.perf_counter()
            model = build_model(config, tok, seed)
            n_params = sum(p.numel() for p in model.parameters())
            df = train_with_schedule(
                model,
                phases,
                train,
                val,
                lr=config.lr,
                batch_size=config.batch_size,
                seed=seed,
                eval_every=config.eval_every,
                carry_optimizer=config.carry_optimizer,
                lr_scale=lr_scale,
            )
            t_train[name] = t_train.get(name, 0.0) + time.perf_counter() - t1
            # arms run one after another in this process; the load average says what
            # else shared the CPUs while each was timed
            done[key] = df.assign(run=name, seed=seed, load_avg=os.getloadavg()[0])
            names[key] = name
            frames.append(done[key])
    return pd.concat(frames, ignore_index=True), n_params, reused, t_train


def _schedule_table(config: GrowthConfig, plans: Mapping[int, Mapping[str, list[Phase]]]):
    """One row per (seed, schedule, phase): name, steps, layers, train_embeddings."""
    return pd.DataFrame(
        [
            {
                "seed": seed,
                "schedule": n,
                "phase": i,
                "name": p.name,
                "steps": p.steps,
                "layers": list(range(config.n_layers)) if p.layers is None else p.layers,
                "train_embeddings": p.train_embeddings,
            }
            for seed, by_name in plans.items()
            for n, ps in by_name.items()
            for i, p in enumerate(ps)
        ]
    )


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


def _importance_table(
    n_layers: int, ref_name: str, importance: np.ndarray, mapped: Mapping[str, np.ndarray]
) -> pd.DataFrame:
    """The ``importance`` table: per trained layer and order source, delta_pct (the
    reference's own, then each real model's mapped onto the trained depth)."""
    return pd.concat(
        [
            pd.DataFrame(
                {"source": s, "layer": range(n_layers), "delta_pct": v, "mapped": s != ref_name}
            )
            for s, v in {ref_name: importance, **mapped}.items()
        ],
        ignore_index=True,
    )


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
        mapped, profiles, corr, real_notes = _real_orders(config, importance, ref_name)
        t_real = time.perf_counter() - t_real
        sources = {lab: source_run(lab) for lab in mapped}
        extra = {sources[k]: v for k, v in mapped.items()}
        plans = {s: schedules_for(config, importance, extra, seed=s) for s in config.seeds}
        curves, n_params, reused, t_train = _train_runs(config, tok, plans, train, val)
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
    imp = _importance_table(config.n_layers, ref_name, importance, mapped)
    tables = {
        **parts,
        "timing": timing,
        "schedule": _schedule_table(config, plans),
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
