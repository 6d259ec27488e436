"""The skeleton of a paper-1 (trajectory) chapter, and the helpers its analyses share.

:func:`run_chapter` is every trajectory chapter's run: it reads the chapter's prompts (a
:class:`ChapterSpec` names the families and columns), subsamples them in quick mode, runs the
chapter's per-model analysis on the states of every model of ``config.model`` and stacks the
per-model tables into one :class:`~lamina.chapters.results.ExperimentResult`. A chapter module
supplies only its statistics and its analysis of one model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from lamina.chapters.results import ExperimentResult, claim_record, concat_tables
from lamina.chapters.states import ModelStates, PooledStates, load_model_states
from lamina.chapters.trajectory import (
    CONVENTIONS,
    Convention,
    TrajectoryConfig,
    expand_models,
    load_chapter_prompts,
)
from lamina.controls import random_embeddings, shuffle_layers

__all__ = [
    "ChapterSpec",
    "ModelAnalysis",
    "each_model",
    "main_pool",
    "run_chapter",
    "sensitivity_rows",
    "state_controls",
    "vanish_claim",
    "vanish_verdict",
]

# the two controls under which paper 1 says its effects vanish
VANISH_CONTROLS = ("shuffled layers", "random embeddings")


# one model's analysis: (its states, the chapter's prompts, the config) -> {table name: table},
# with the claims rows under "claims"
ModelAnalysis = Callable[[ModelStates, pd.DataFrame, TrajectoryConfig], dict[str, pd.DataFrame]]


@dataclass(frozen=True)
class ChapterSpec:
    """What a trajectory chapter runs on.

    name: the chapter (and notebook) name; families: its default prompt families; required:
    the prompt columns it needs; tables: the names of the tables its analysis returns (besides
    "claims"); quick: ``(prompts, seed) -> prompts`` for quick mode; prepare: ``prompts ->
    prompts`` applied after loading (e.g. to add rows); peer: whether paper 1's released
    states (peer-gpt2) have these prompts.
    """

    name: str
    families: tuple[str, ...]
    required: tuple[str, ...]
    tables: tuple[str, ...]
    quick: Callable[[pd.DataFrame, int], pd.DataFrame]
    prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    peer: bool = True


def run_chapter(
    spec: ChapterSpec, config: TrajectoryConfig, analyse: ModelAnalysis
) -> ExperimentResult:
    """Run a trajectory chapter: prompts, ``analyse`` on every model, tables stacked.

    -> ExperimentResult(spec.name, config, claims, {table: stacked over models}, notes, models);
    a table a model leaves empty contributes no rows. Notes record the models skipped.
    """
    prompts = load_chapter_prompts(config, list(spec.families), list(spec.required))
    if config.quick:
        prompts = spec.quick(prompts, config.seed)
    if spec.prepare is not None:
        prompts = spec.prepare(prompts)
    notes: list[str] = []
    models: list[str] = []
    frames: dict[str, list[pd.DataFrame]] = {name: [] for name in ("claims", *spec.tables)}
    for ms in each_model(config, prompts, notes, peer=spec.peer):
        models.append(ms.name)
        for name, table in analyse(ms, prompts, config).items():
            if name not in frames:
                raise KeyError(f"{spec.name}: analysis returned an undeclared table {name!r}")
            if len(table):
                frames[name].append(table)
    claims = concat_tables(frames.pop("claims"))
    tables = {name: concat_tables(parts) for name, parts in frames.items()}
    return ExperimentResult(spec.name, config, claims, tables, notes, models)


def main_pool(ms: ModelStates, pooling: str) -> tuple[str, Convention, PooledStates]:
    """The pooling a chapter's main analysis uses: ``pooling`` when the model has it, else the
    model's first (released states have one). -> (pool, its default Convention, its states)."""
    pool = pooling if pooling in ms.pools else next(iter(ms.pools))
    return pool, Convention(pool), ms.pools[pool]  # type: ignore[arg-type]


def each_model(
    config: TrajectoryConfig, prompts: pd.DataFrame, notes: list[str], *, peer: bool = True
) -> Iterator[ModelStates]:
    """Yield the states of every model of ``config.model`` (see ``expand_models``); models
    skipped (not built, no released data, or ``peer=False``) are recorded in ``notes``."""
    models, skipped = expand_models(config)
    notes.extend(skipped)
    for name in models:
        if name == "peer-gpt2" and not peer:
            notes.append("peer-gpt2 skipped: paper 1 released no states for these prompts.")
            continue
        states = load_model_states(name, prompts, config)
        notes.extend(states.notes)
        yield states


def state_controls(
    x: np.ndarray, ms: ModelStates, conv: Convention, seed: int
) -> dict[str, np.ndarray | None]:
    """Control versions of the states ``x`` (n, layers, d) of convention ``conv``: shuffled
    layers, moment-matched Gaussian states, and the random-init model (None when absent)."""
    init = None
    if ms.control is not None and conv.pool in ms.control:
        init = ms.control[conv.pool].states(conv)[0]
    return {
        "shuffled layers": shuffle_layers(x, seed=seed),
        "random embeddings": random_embeddings(x, seed=seed),
        "random-init model": init,
    }


def sensitivity_rows(
    ms: ModelStates,
    measure: Callable[[np.ndarray, PooledStates, list[int], Convention], dict[str, Any]],
    *,
    pools: tuple[str, ...] = ("mean", "last"),
) -> list[dict[str, Any]]:
    """``measure(states, pooled, layers, convention)`` under every convention of
    ``CONVENTIONS`` that the model's states allow, one row each."""
    rows = []
    for name, conv in CONVENTIONS.items():
        if conv.pool not in ms.pools or conv.pool not in pools:
            continue
        pooled = ms.pools[conv.pool]
        x, layers = pooled.states(conv)
        row = {"model": ms.name, "convention": name, "definition": conv.label}
        row.update(measure(x, pooled, layers, conv))
        rows.append(row)
    return rows


def vanish_verdict(fractions: list[float]) -> str:
    """Verdict on "the effect vanishes under the controls", from the fraction of the effect
    that remains under each control: reproduced if every fraction is below 0.5, partially if
    some are, not reproduced if none; not testable without a finite fraction."""
    f = np.array([v for v in fractions if v is not None and np.isfinite(v)])
    if f.size == 0:
        return "not testable"
    small = np.abs(f) < 0.5
    return "reproduced" if small.all() else "partially" if small.any() else "not reproduced"


def vanish_claim(
    claim_id: str,
    claim: str,
    model: str,
    controls: pd.DataFrame,
    *,
    effect_name: str,
    convention: str,
    p_rule: Literal["min p", "max q"] = "min p",
) -> dict[str, Any]:
    """Claims row for "the effect vanishes under shuffled-layer and random-embedding
    controls", from one model's controls table (columns ``control``, ``fraction_remaining``,
    ``p`` and, for ``p_rule="max q"``, ``q``). Measured: the largest |fraction of the effect
    remaining| over the two controls; p: their smallest ``p`` ("min p") or largest
    Benjamini-Hochberg ``q`` ("max q"); verdict: :func:`vanish_verdict`."""
    named = controls[controls["control"].isin(VANISH_CONTROLS)]
    p = named["p"].min() if p_rule == "min p" else named["q"].max()
    return claim_record(
        claim_id,
        claim,
        "effect absent under controls",
        model,
        float(named["fraction_remaining"].abs().max()),
        p=float(p),
        verdict_word=vanish_verdict(named["fraction_remaining"].tolist()),
        effect_name=effect_name,
        convention=convention,
    )
