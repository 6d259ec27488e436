"""The skeleton of a paper-1 (trajectory) chapter, and the helpers its analyses share.

:func:`run_chapter` is every trajectory chapter's run: it reads the chapter's prompts (a
:class:`ChapterSpec` names the families and columns), subsamples them in quick mode, runs the
chapter's per-model analysis on the states of every model of ``config.model`` and stacks the
per-model tables into one :class:`~lamina.chapters.results.ExperimentResult`. A chapter module
supplies only its statistics and its analysis of one model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from lamina.chapters.results import ExperimentResult, concat_tables
from lamina.chapters.states import ModelStates, PooledStates, load_model_states
from lamina.chapters.trajectory import (
    CONVENTIONS,
    Convention,
    TrajectoryConfig,
    expand_models,
    load_chapter_prompts,
)
from lamina.sources.peer import is_peer
from lamina.states.controls import shuffle_layers
from lamina.states.quant_control import (
    CONTROL_QTYPES,
    FOLLOWUP_QTYPES,
    control_models,
    run_quant_control,
)
from lamina.trajectory.sizes import CHAPTER_FAMILIES
from lamina.trajectory.stat_tests import paper1_test

__all__ = [
    "ChapterSpec",
    "ModelAnalysis",
    "each_model",
    "main_pool",
    "run_chapter",
    "control_effects",
    "control_states",
    "sensitivity_rows",
]



# one model's analysis: (its states, the chapter's prompts, the config) -> {table name: table},
# with the claims rows under "claims"
ModelAnalysis = Callable[[ModelStates, pd.DataFrame, TrajectoryConfig], dict[str, pd.DataFrame]]


@dataclass(frozen=True)
class ChapterSpec:
    """What a trajectory chapter runs on.

    name: the chapter (and notebook) name; required: the prompt columns it needs; tables: the
    names of the tables its analysis returns (besides "claims"); quick: ``(prompts, seed) ->
    prompts`` for quick mode; prepare: ``prompts -> prompts`` applied after loading (e.g. to
    add rows); peer: whether paper 1's released states (peer-gpt2) have these prompts;
    families: its default prompt families (left empty: the chapter's row of
    :data:`lamina.trajectory.sizes.CHAPTER_FAMILIES`, where calibration reads them too).
    """

    name: str
    required: tuple[str, ...]
    tables: tuple[str, ...]
    quick: Callable[[pd.DataFrame, int], pd.DataFrame]
    prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    peer: bool = True
    families: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.families:
            object.__setattr__(self, "families", CHAPTER_FAMILIES[self.name])


def run_chapter(
    spec: ChapterSpec, config: TrajectoryConfig, analyse: ModelAnalysis
) -> ExperimentResult:
    """Run a trajectory chapter: prompts, ``analyse`` on every model, tables stacked.

    -> ExperimentResult(spec.name, config, claims, {table: stacked over models}, notes, models);
    a table a model leaves empty contributes no rows. Notes record the models skipped.

    With ``config.quant_control`` every quantised real model of the run (its provenance names
    a quantised GGUF type) is also analysed as ``<model>+Q4_0`` (and ``+Q8_0`` where a verdict
    flips under Q4_0): its dequantised weights rounded once more (claims only, no sensitivity
    tables; the controls are those of the model as loaded).
    :func:`lamina.states.quant_control.run_quant_control` adds the tables "quantisation" (the
    flip table, one row per claim x model x quantisation) and "quantised_models", and the
    column ``quant_shift`` ("same" / "flips to X" / "not run: why" per quantisation).
    """
    prompts = load_chapter_prompts(config, list(spec.families), list(spec.required))
    if config.quick:
        prompts = spec.quick(prompts, config.seed)
    if spec.prepare is not None:
        prompts = spec.prepare(prompts)
    notes: list[str] = []
    models: list[str] = []
    frames: dict[str, list[pd.DataFrame]] = {name: [] for name in ("claims", *spec.tables)}
    quantization: dict[str, str | None] = {}
    controls: dict[str, ModelStates] = {}  # quantised model -> its controls (no real states)
    for ms in each_model(config, prompts, notes, peer=spec.peer):
        models.append(ms.name)
        quantization[ms.name] = ms.diagnostics.get("quantization")
        if control_models([ms.name], quantization):
            controls[ms.name] = ModelStates(ms.name, {}, ms.control, random_input=ms.random_input)
        for name, table in analyse(ms, prompts, config).items():
            if name not in frames:
                raise KeyError(f"{spec.name}: analysis returned an undeclared table {name!r}")
            if len(table):
                frames[name].append(table)
    claims = concat_tables(frames.pop("claims"))
    tables = {name: concat_tables(parts) for name, parts in frames.items()}
    if config.quant_control:
        claims, tables["quantisation"], tables["quantised_models"] = _quant_control(
            config, prompts, analyse, claims, models, quantization, notes, controls
        )
    return ExperimentResult(spec.name, config, claims, tables, notes, models)


def _quant_control(
    config: TrajectoryConfig,
    prompts: pd.DataFrame,
    analyse: ModelAnalysis,
    claims: pd.DataFrame,
    models: list[str],
    quantization: dict[str, str | None],
    notes: list[str],
    controls: dict[str, ModelStates],
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``run_quant_control`` for a trajectory chapter: each re-quantised model's claims from
    ``analyse`` on its states (sensitivity off). Only the real states are re-extracted: the
    controls (random-init model, random input embeddings) are those of the model as loaded
    (``controls``), so that a flip measures what re-quantisation does to the real states.
    -> (claims, flip table, quantised models)."""
    quick = dataclasses.replace(config, sensitivity=False, quant_control=False)

    def run_claims(name: str) -> pd.DataFrame:
        ms = load_model_states(name, prompts, quick, random_init=False, random_input=False)
        base = controls.get(name.rpartition("+")[0])
        if base is not None:
            ms.control, ms.random_input = base.control, base.random_input
        return analyse(ms, prompts, quick)["claims"]

    claims, shifts = run_quant_control(models, claims, quantization, run_claims, notes=notes)
    rows = [
        {"model": m, "quantization": quantization[m],
         "control_qtypes": ", ".join((*CONTROL_QTYPES, *FOLLOWUP_QTYPES))}
        for m in control_models(models, quantization)
    ]
    qm = pd.DataFrame(rows, columns=["model", "quantization", "control_qtypes"])
    return claims, shifts, qm


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
        if is_peer(name) and not peer:
            notes.append(f"{name} skipped: paper 1 released no states for these prompts.")
            continue
        states = load_model_states(name, prompts, config)
        notes.extend(states.notes)
        yield states


def control_states(
    x: np.ndarray, ms: ModelStates, conv: Convention, seed: int, keep: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Control versions of the states ``x`` (n, layers, d) of convention ``conv``, for the
    rows ``keep`` of the model's prompt table (None: all):

    * "shuffled layers": each trajectory's layers in a random order (paper 1's control);
    * "random embeddings": random input embeddings fed through the model
      (``lamina.states.controls.random_input_states``; paper 1's control), absent without a model;
    * "random-init model": the same architecture freshly initialised, absent without a model.
    """
    rows = slice(None) if keep is None else keep
    out = {"shuffled layers": shuffle_layers(x, seed=seed)}
    for name, pools in (("random embeddings", ms.random_input), ("random-init model", ms.control)):
        if pools is not None and conv.pool in pools:
            out[name] = pools[conv.pool].states(conv)[0][rows]
    return out


def control_effects(
    test: str,
    real: dict[str, Any],
    x: np.ndarray,
    ms: ModelStates,
    conv: Convention,
    table: pd.DataFrame,
    layers: list[int],
    config: TrajectoryConfig,
    keep: np.ndarray | None = None,
) -> dict[str, dict[str, Any]]:
    """The chapter's test (``lamina.trajectory.stat_tests.paper1_test``) on every control of
    :func:`control_states` (fewer resamples: 100 bootstrap, 200 permutations), each result
    with ``fraction`` = its headline effect / the real one and ``p`` = its effect's p."""
    out = {}
    for name, xc in control_states(x, ms, conv, config.seed, keep).items():
        sc = paper1_test(test, xc, table, layers, n_bootstrap=100, n_permutations=200,
                         seed=config.seed)
        eff = real["effect"]
        sc["fraction"] = float(sc["effect"] / eff) if eff and np.isfinite(eff) else float("nan")
        sc["p"] = sc["effect_p"]
        sc["states"] = xc
        out[name] = sc
    return out


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
