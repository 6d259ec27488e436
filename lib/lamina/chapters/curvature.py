"""Paper 1, claim 2: reasoning prompts turn more sharply than lexical variations.

Glue: the chapter's config, its run over every model, its claims. The analysis of one source
is :mod:`lamina.trajectory.analyses.curvature`; the claims are declared in
:mod:`lamina.trajectory.claims`.
"""

from __future__ import annotations

from dataclasses import dataclass

from lamina.chapters.results import ExperimentResult
from lamina.chapters.trajectory import ChapterSpec, TrajectoryConfig, run_chapter
from lamina.trajectory.analyses import curvature as analysis
from lamina.trajectory.chapter_prompts import subsample
from lamina.trajectory.claims import CHAPTER_CLAIMS

__all__ = ["CLAIMS", "Config", "run"]

CLAIMS = CHAPTER_CLAIMS["curvature"]


@dataclass
class Config(TrajectoryConfig):
    """The curvature chapter's parameters (:class:`lamina.chapters.trajectory.TrajectoryConfig`)."""


SPEC = ChapterSpec(
    "curvature", required=("family",),
    tables=("profiles", "per_prompt", "length", "controls", "sensitivity"),
    quick=lambda prompts, seed: subsample(prompts, "family", 12, seed),
)  # fmt: skip


def run(config: Config) -> ExperimentResult:
    """Mean curvature of the reasoning and lexical families on every model, at equal length
    and at all lengths, with trajectory length, controls, the per-layer angle profile, and
    sensitivity to the convention and to single-token prompts."""
    return run_chapter(SPEC, config, analysis.analyse)
