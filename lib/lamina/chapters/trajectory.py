"""Shared machinery of the trajectory-geometry experiments (paper 1): the experiment config,
the default model set, representation conventions and the chapters' prompt tables.

A *convention* says how a prompt's trajectory is built from a forward pass:

* ``pool``: "mean" over the prompt's non-padding tokens (paper text) or the "last" non-special
  token (released code; for an encoder it skips the trailing ``[SEP]``);
* ``layer0``: keep the embedding output h(0) (paper text) or drop it (released code);
* ``final``: the last state raw (the residual stream after block L, lamina's convention) or
  "post_norm" (after the model's final norm, as in Hugging Face's ``hidden_states[-1]``, which
  the released code uses);
* ``normalize``: L2-normalise every state before any metric.

All metrics live in :mod:`lamina.trajectory`; :mod:`lamina.chapters.states` builds the state
arrays and :mod:`lamina.chapters.skeleton` runs a chapter over every model.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from lamina.book import setup_altair
from lamina.book.tables import show_details
from lamina.chapters.config import ChapterConfig
from lamina.chapters.results import ExperimentResult
from lamina.sources import organisms
from lamina.sources.gguf_models import OFFLINE_GGUF, installed_offline
from lamina.sources.peer import default_peer_root, is_peer, peer_models
from lamina.sources.prompts import load_prompt_files, prompt_sources

__all__ = [
    "CONVENTIONS",
    "PEER_MODEL",
    "Convention",
    "TrajectoryConfig",
    "default_peer_root",
    "run_trajectory_chapter",
    "show_quant_control",
    "expand_models",
    "model_group",
    "load_chapter_prompts",
    "peer_root",
    "subsample",
]

DEFAULT_MODELS = ("minilm", "organism-gpt2", "organism-llama")  # after the pretrained LMs and peers
PEER_MODEL = "peer-gpt2"


@dataclass
class TrajectoryConfig(ChapterConfig):
    """Parameters of one trajectory-geometry experiment (serialised next to its results).

    model: "default" (the offline pretrained LMs, paper 1's released states, MiniLM, then the
        organisms: see ``expand_models``) or one model name/path accepted by ``lamina.load_model``.
    pooling: the main convention's pooling, "mean" or "last".
    prompts: None for the chapter's default families, else a prompt file path or family name
        (comma-separated for several) read with ``lamina.sources.prompts.load_prompts``.
    n_bootstrap: bootstrap resamples for 95% CIs (the paper used 10,000).
    n_permutations: label permutations for null distributions (the convergence claim needs
        at least 9,999 for a decision at p < 0.001 that rests on >= 10 exceedances; fewer make
        it "not testable": ``lamina.trajectory.verdicts.MIN_EXCEEDANCES``).
    seed: seeds every random draw (controls, bootstraps, random-init model).
    quick: few prompts and resamples, for CI (the shared resampling caps,
        ``lamina.chapters.config.RESAMPLING_QUICK``).
    exclude_single_token: drop prompts that tokenise to one token from the main analysis
        (their last token is also their first, which in GPT-2 carries a massive activation).
    peer_root: folder of paper 1's released data; None for ``../shared/peer/latent-trajectories``.
    sensitivity: also run the main test under every representation convention (the
        sensitivity tables); False skips them (faster).
    quant_control: also run every quantised real model of the set with its dequantised weights
        rounded once more through GGUF Q4_0 (and Q8_0 where a verdict flips), and show next to each verdict
        whether it flips (column ``quant_shift``; ``lamina.states.quant_control``).
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

    def __post_init__(self) -> None:
        if self.pooling not in ("mean", "last"):
            raise ValueError(f"pooling must be 'mean' or 'last'; got {self.pooling!r}")
        if self.n_bootstrap < 10 or self.n_permutations < 1:
            raise ValueError("n_bootstrap must be >= 10 and n_permutations >= 1")
        self.apply_quick()


@dataclass(frozen=True)
class Convention:
    """How a trajectory is built (see the module docstring)."""

    pool: Literal["mean", "last"]
    layer0: bool = True
    final: Literal["raw", "post_norm"] = "raw"
    normalize: bool = False

    @property
    def label(self) -> str:
        parts = [f"{self.pool} token" if self.pool == "last" else "mean pool"]
        parts.append("with layer 0" if self.layer0 else "without layer 0")
        parts.append("post-norm final" if self.final == "post_norm" else "raw final")
        if self.normalize:
            parts.append("normalised")
        return ", ".join(parts)


CONVENTIONS: dict[str, Convention] = {
    "paper text": Convention("mean", True, "raw", False),
    "released code": Convention("last", False, "post_norm", False),
    "mean, post-norm final": Convention("mean", True, "post_norm", False),
    "last, with layer 0": Convention("last", True, "raw", False),
    "paper text, normalised": Convention("mean", True, "raw", True),
    "released code, normalised": Convention("last", False, "post_norm", True),
}




def peer_root(config: TrajectoryConfig) -> Path:
    return Path(config.peer_root) if config.peer_root else default_peer_root()


def model_group(name: str) -> str:
    """The label a chapter shows for the kind of model ``name`` is."""
    if name in OFFLINE_GGUF:
        return "pretrained causal LM (4-bit GGUF, dequantised to fp32)"
    if is_peer(name):
        return "paper 1's released states"
    if name == "minilm":
        return "pretrained encoder"
    if name.startswith("organism-"):
        return "model with a full training history"
    return "user model"


def expand_models(config: TrajectoryConfig) -> tuple[list[str], list[str]]:
    """The models to run and notes on those skipped.

    "default" -> in this order: the pretrained causal LMs installed offline
    (``smollm2-135m-instruct``, ``gemma-3-270m``), ``peer-<folder>`` for every model folder
    released under ``peer_root`` (``lamina.sources.peer``), "minilm", then the built organisms among
    ``DEFAULT_MODELS`` (the models with a full training history); any other value ->
    [that value]. See :func:`model_group` for each one's label.
    """
    if config.model != "default":
        return [config.model], []
    models, notes = installed_offline()
    peer = peer_root(config)
    released = peer_models(peer)  # peer-<folder> for every released model folder
    models.extend(released)
    if not released:
        notes.append(f"{PEER_MODEL} skipped: released data not found under {peer}")
    for name in DEFAULT_MODELS:
        if name.startswith("organism-"):
            try:
                organisms.resolve(name)
            except Exception as exc:  # not built yet: skip with a visible note
                notes.append(f"{name} skipped: {exc}")
                continue
        models.append(name)
    return models, notes


# ----------------------------------------------------------------------------- prompts
def load_chapter_prompts(
    config: TrajectoryConfig, families: list[str], required: list[str]
) -> pd.DataFrame:
    """The chapter's prompt table: ``config.prompts`` (file paths or family names, comma
    separated) or the default ``families``, concatenated. Raises ValueError naming a missing
    required column, and ``lamina.sources.prompts.PromptFileError`` for a malformed file."""

    sources = prompt_sources(config.prompts) if config.prompts else families
    for src in sources:
        if config.prompts and not Path(src).expanduser().is_file() and os.sep in src:
            raise FileNotFoundError(f"prompt file {src!r} does not exist")
    table = load_prompt_files(sources)  # an id in two files is refused
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise ValueError(
            f"prompts {sources} lack the column(s) {missing} this chapter needs; "
            f"columns present: {list(table.columns)}"
        )
    return table


def subsample(table: pd.DataFrame, by: str, per_group: int, seed: int) -> pd.DataFrame:
    """At most ``per_group`` rows of each value of ``by`` (for quick mode), order kept."""
    rng = np.random.default_rng(seed)
    keep = []
    for _, idx in table.groupby(by, sort=False).indices.items():
        keep.extend(sorted(rng.choice(idx, size=min(per_group, len(idx)), replace=False)))
    return table.iloc[sorted(keep)].reset_index(drop=True)

def run_trajectory_chapter(
    runner: Callable[[TrajectoryConfig], ExperimentResult], params: Mapping[str, Any]
) -> ExperimentResult:
    """A trajectory chapter's first cell: static Altair charts, a ``TrajectoryConfig`` from
    the fields of it that ``params`` names (a chapter passes ``globals()``, i.e. its papermill
    parameters cell; fields it does not name keep their defaults), ``runner(config)`` (e.g.
    ``run_convergence``), results written under ``params["results_root"]`` (absent or None:
    ``lamina.states.io.results_dir()``). The run's notes are not shown here: the chapter
    shows them, folded, after its results (``lamina.book.chapter.show_notes``)."""

    setup_altair()
    names = {f.name for f in dataclasses.fields(TrajectoryConfig)}
    result = runner(TrajectoryConfig(**{k: v for k, v in params.items() if k in names}))
    result.write(params.get("results_root"))
    return result

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
