"""Paper 1, claim 1: semantically related prompts converge in middle-to-late layers.

Glue: the chapter's config, its run over every model, its claims. The analysis of one source
is :mod:`lamina.trajectory.analyses.convergence`; the claims are declared in
:mod:`lamina.trajectory.claims`.
"""

from __future__ import annotations

from dataclasses import dataclass

from lamina.chapters.results import ExperimentResult
from lamina.chapters.trajectory import ChapterSpec, TrajectoryConfig, run_chapter
from lamina.trajectory.analyses import convergence as analysis
from lamina.trajectory.chapter_prompts import subsample
from lamina.trajectory.claims import CHAPTER_CLAIMS

__all__ = ["CLAIMS", "Config", "run"]

CLAIMS = CHAPTER_CLAIMS["convergence"]


@dataclass
class Config(TrajectoryConfig):
    """The convergence chapter's parameters (:class:`lamina.chapters.trajectory.TrajectoryConfig`)."""


SPEC = ChapterSpec(
    "convergence", required=("category",),
    tables=("profiles", "controls", "tests", "frames", "sensitivity"),
    quick=lambda prompts, seed: subsample(prompts, "category", 6, seed),
)  # fmt: skip


def run(config: Config) -> ExperimentResult:
    """The convergence index of the semantic prompts (topical sentences and neutral frames,
    labels = ``category``) on every model, with controls, the paper's own test, the two kinds
    of frame separately, and sensitivity to the convention."""
    return run_chapter(SPEC, config, analysis.analyse)
