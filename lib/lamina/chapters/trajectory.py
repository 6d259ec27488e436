"""What paper 1's chapters share: their config and their run over every model.

A chapter module (:mod:`~lamina.chapters.convergence`, :mod:`~lamina.chapters.curvature`,
:mod:`~lamina.chapters.bifurcation`, :mod:`~lamina.chapters.three_phase`) declares a
:class:`ChapterSpec` and calls :func:`run_chapter` with its analysis of one source
(:mod:`lamina.trajectory.analyses`): the prompts are read (:class:`ChapterSpec` names the
families and columns; :mod:`lamina.trajectory.chapter_prompts`), subsampled in quick mode, and the analysis runs on the states of every
model of ``config.model`` (:func:`lamina.chapters.models.chapter_models`; states from
:func:`lamina.trajectory.model_states.load_model_states`); the per-model tables are stacked
into one :class:`~lamina.chapters.results.ExperimentResult`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import ClassVar, Literal

import pandas as pd

from lamina.book.tables import show_details
from lamina.chapters.config import ChapterConfig
from lamina.chapters.models import chapter_models
from lamina.chapters.results import ExperimentResult, concat_tables
from lamina.core.bounds import Bound, check_bounds
from lamina.sources.peer import is_peer
from lamina.states.quant_control import (
    CONTROL_QTYPES,
    FOLLOWUP_QTYPES,
    control_models,
    run_quant_control,
)
from lamina.trajectory.analyses.shared import Analysis, Options
from lamina.trajectory.chapter_prompts import load_chapter_prompts
from lamina.trajectory.model_states import ModelStates, load_model_states
from lamina.trajectory.sizes import CHAPTER_BOUNDS, CHAPTER_FAMILIES

__all__ = ["ChapterSpec", "TrajectoryConfig", "each_model", "run_chapter", "show_quant_control"]


@dataclass
class TrajectoryConfig(ChapterConfig):
    """Parameters of one trajectory-geometry chapter (serialised next to its results).

    model: "default" (the chapter's registry record: the offline pretrained LMs, paper 1's
        released states, MiniLM, then the organisms; :func:`lamina.chapters.models.chapter_models`),
        or model names (comma-separated) accepted by ``lamina.load_model``, ``peer-<folder>``
        or ``synthetic-<kind>``.
    pooling: the main convention's pooling, "mean" or "last".
    prompts: None for the chapter's default families, else a prompt file path or family name
        (comma-separated for several) read with ``lamina.sources.prompts.load_prompts``.
    n_bootstrap: bootstrap resamples for 95% CIs (the paper used 10,000).
    n_permutations: permutations for null distributions (the convergence claim needs at least
        9,999 for a decision at p < 0.001 that rests on >= 10 exceedances; fewer make it "not
        testable").
    seed: seeds every random draw (controls, bootstraps, random-init model).
    quick: few prompts and resamples, for CI (``lamina.chapters.config.RESAMPLING_QUICK``).
    exclude_single_token: drop prompts that tokenise to one token from the main analysis
        (their last token is also their first, which in GPT-2 carries a massive activation).
    peer_root: folder of paper 1's released data; None for ``../shared/peer/latent-trajectories``.
    sensitivity: also run the main test under every representation convention.
    quant_control: also run every quantised real model of the set with its dequantised
        weights rounded once more through GGUF Q4_0 (and Q8_0 where a verdict flips), and show
        next to each verdict whether it flips (``lamina.states.quant_control``).
    """

    model: str = "default"
    pooling: Literal["mean", "last"] = "mean"
    prompts: str | None = None
    n_bootstrap: int = 10_000
    n_permutations: int = 10_000
    seed: int = 0
    exclude_single_token: bool = True
    peer_root: str | None = None
    sensitivity: bool = True
    quant_control: bool = True

    BOUNDS: ClassVar[dict[str, Bound]] = CHAPTER_BOUNDS  # lamina.trajectory.sizes

    def __post_init__(self) -> None:
        if self.pooling not in ("mean", "last"):
            raise ValueError(f"pooling must be 'mean' or 'last'; got {self.pooling!r}")
        check_bounds(self, self.BOUNDS)
        self.apply_quick()


@dataclass(frozen=True)
class ChapterSpec:
    """What a trajectory chapter runs on: ``name`` (the chapter and notebook), ``required``
    prompt columns, the ``tables`` its analysis returns (besides "claims"), ``quick``:
    ``(prompts, seed) -> prompts`` for quick mode, ``prepare``: ``prompts -> prompts`` after
    loading, ``peer``: whether paper 1's released states have these prompts, ``families``
    (empty: the chapter's row of :data:`lamina.trajectory.sizes.CHAPTER_FAMILIES`)."""

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


def each_model(spec: ChapterSpec, config: TrajectoryConfig, prompts: pd.DataFrame,
               notes: list[str]) -> Iterator[ModelStates]:  # fmt: skip
    """The states of every model of ``config.model``; models skipped (not built, no released
    data, released states for a chapter without them) are recorded in ``notes``."""
    models, skipped = chapter_models(spec.name, config.model, peer_root=config.peer_root)
    notes.extend(skipped)
    for name in models:
        if is_peer(name) and not spec.peer:
            notes.append(f"{name} skipped: paper 1 released no states for these prompts.")
            continue
        states = load_model_states(name, prompts, seed=config.seed, peer_root=config.peer_root)
        notes.extend(states.notes)
        yield states


def run_chapter(spec: ChapterSpec, config: TrajectoryConfig, analyse: Analysis) -> ExperimentResult:
    """Run a trajectory chapter: prompts, ``analyse`` on every model, tables stacked.

    -> ExperimentResult(spec.name, config, claims, {table: stacked over models}, notes,
    models). With ``config.quant_control`` every quantised real model of the run is also
    analysed as ``<model>+Q4_0`` (and ``+Q8_0`` where a verdict flips): its dequantised
    weights rounded once more, claims only, with the controls of the model as loaded
    (:func:`lamina.states.quant_control.run_quant_control`: tables "quantisation" and
    "quantised_models", column ``quant_shift``)."""
    prompts = load_chapter_prompts(config.prompts, list(spec.families), list(spec.required))
    if config.quick:
        prompts = spec.quick(prompts, config.seed)
    if spec.prepare is not None:
        prompts = spec.prepare(prompts)
    notes: list[str] = []
    models: list[str] = []
    frames: dict[str, list[pd.DataFrame]] = {name: [] for name in ("claims", *spec.tables)}
    quantization: dict[str, str | None] = {}
    controls: dict[str, ModelStates] = {}  # quantised model -> its controls
    opt = Options.of(config)
    for ms in each_model(spec, config, prompts, notes):
        models.append(ms.name)
        quantization[ms.name] = ms.diagnostics.get("quantization")
        if control_models([ms.name], quantization):
            controls[ms.name] = ModelStates(ms.name, {}, ms.control, random_input=ms.random_input)
        for name, table in analyse(ms, prompts, opt).items():
            if name not in frames:
                raise KeyError(f"{spec.name}: analysis returned an undeclared table {name!r}")
            if len(table):
                frames[name].append(table)
    claims = concat_tables(frames.pop("claims"))
    tables = {name: concat_tables(parts) for name, parts in frames.items()}
    if config.quant_control:
        quick = dataclasses.replace(opt, sensitivity=False)

        def run_claims(name: str) -> pd.DataFrame:
            ms = load_model_states(name, prompts, seed=config.seed, random_init=False,
                                   random_input=False)  # fmt: skip
            base = controls.get(name.rpartition("+")[0])
            if base is not None:
                ms.control, ms.random_input = base.control, base.random_input
            return analyse(ms, prompts, quick)["claims"]

        claims, tables["quantisation"] = run_quant_control(models, claims, quantization,
                                                           run_claims, notes=notes)  # fmt: skip
        tables["quantised_models"] = pd.DataFrame(
            [{"model": m, "quantization": quantization[m],
              "control_qtypes": ", ".join((*CONTROL_QTYPES, *FOLLOWUP_QTYPES))}
             for m in control_models(models, quantization)],
            columns=["model", "quantization", "control_qtypes"])  # fmt: skip
    return ExperimentResult(spec.name, config, claims, tables, notes, models)


def show_quant_control(result: ExperimentResult) -> None:
    """The quantisation control of a chapter run (``lamina.states.quant_control``): which models
    are quantised (from provenance) and re-quantised, how many verdicts flip, then the flip
    table. Every sentence is computed from the tables, or neutral."""
    from IPython.display import Markdown, display

    qm = result.tables.get("quantised_models", pd.DataFrame())
    shifts = result.tables.get("quantisation", pd.DataFrame())
    lines = [
        f"- `{r.model}`: weights stored as `{r.quantization}`; its dequantised weights are "
        f"rounded once more through {r.control_qtypes} and the claims rerun."
        for r in qm.itertuples()
    ]
    if not lines:
        lines.append("- No model of this run has quantised weights in its provenance.")
    if shifts.empty:
        lines.append("- No re-quantised run reported claims, so no flip was measured.")
    else:
        for q, part in shifts.groupby("qtype", sort=False):
            flips = int(part["flipped"].astype(bool).sum())
            lines.append(f"- {q}: {flips} of {len(part)} verdicts (claim x model) flip.")
    display(Markdown("\n".join(lines)))
    if not shifts.empty:
        show_details(shifts.round(4), "Shifts under quantisation, per claim and organism")
