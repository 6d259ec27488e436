"""The trajectory tour (the book's first chapter): layerwise similarity SIM(l) of a handful of
prompts on each model of the chapter's default set (the pretrained causal LMs installed
offline, then the pretrained encoder).

Glue: the chapter's config, its run, its claims (none: the tour shows, it judges nothing).
The measurement is :mod:`lamina.trajectory.analyses.tour`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pandas as pd

from lamina.chapters.config import ChapterConfig
from lamina.chapters.models import chapter_models
from lamina.chapters.results import ExperimentResult
from lamina.core.bounds import SEED, check_bounds
from lamina.evidence.declare import ClaimSpec
from lamina.trajectory.analyses.tour import TOUR_PROMPTS, tour_similarity, tour_summary

__all__ = ["CLAIMS", "Config", "run", "tour_sentences"]

CLAIMS: tuple[ClaimSpec, ...] = ()


@dataclass
class Config(ChapterConfig):
    """The tour's parameters. model: "default" (the registry's set) or model names (a name, a
    comma-separated string or a list); pooling: "mean" over tokens or the "last" token;
    seed: unused (every chapter takes one); quick: the first three prompts only."""

    model: str | list[str] = "default"
    pooling: Literal["mean", "last"] = "mean"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.pooling not in ("mean", "last"):
            raise ValueError(f"pooling must be 'mean' or 'last'; got {self.pooling!r}")
        check_bounds(self, {"seed": SEED})
        self.apply_quick()


def run(config: Config) -> ExperimentResult:
    """SIM(l) of :data:`~lamina.trajectory.analyses.tour.TOUR_PROMPTS` on every model: tables
    "similarity" (one row per model, prompt and transition) and "summary" (per model)."""
    models, notes = chapter_models("trajectory_tour", config.model)
    prompts = list(TOUR_PROMPTS[:3] if config.quick else TOUR_PROMPTS)
    frame = tour_similarity(models, prompts, config.pooling)
    return ExperimentResult("trajectory_tour", config, pd.DataFrame(),
                            {"similarity": frame, "summary": tour_summary(frame)}, notes, models)


def tour_sentences(summary: pd.DataFrame) -> str:
    """One Markdown bullet per model of :func:`tour_summary`: its blocks, the transition with
    the lowest prompt-mean SIM (and its relative depth) and the mean over all transitions."""
    return "\n".join(
        f"- **{r.model}** ({r.n_blocks} blocks): the lowest mean SIM is at the transition "
        f"{r.lowest_transition} (depth {r.lowest_depth:.2f}), where it is {r.min_mean_SIM:.3f}; "
        f"the mean over all transitions is {r.mean_SIM:.3f}."
        for r in summary.itertuples()
    )
