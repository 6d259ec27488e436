"""Paper 1, claim 3: an ambiguous word's two senses separate across layers; controls do not.

Glue: the chapter's config, its run over every model, its claims. The analysis of one source
is :mod:`lamina.trajectory.analyses.bifurcation`; the claims are declared in
:mod:`lamina.trajectory.claims`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from lamina.chapters.results import ExperimentResult
from lamina.chapters.trajectory import ChapterSpec, TrajectoryConfig, run_chapter
from lamina.sources.prompts import bifurcation_prompts
from lamina.trajectory.analyses import bifurcation as analysis
from lamina.trajectory.claims import CHAPTER_CLAIMS

__all__ = ["CLAIMS", "Config", "run"]

CLAIMS = CHAPTER_CLAIMS["bifurcation"]


@dataclass
class Config(TrajectoryConfig):
    """The bifurcation chapter's parameters (:class:`lamina.chapters.trajectory.TrajectoryConfig`);
    its main convention pools the last token (the homograph is the last word of the
    ``word_last`` pairs)."""

    pooling: Literal["mean", "last"] = "last"


SPEC = ChapterSpec(
    "bifurcation", required=("pair_id", "sense", "control_prompt"),
    tables=("profiles", "controls", "sensitivity"),
    quick=lambda t, seed: t[t["pair_id"].isin(t["pair_id"].unique()[:8])],
    prepare=lambda t: bifurcation_prompts(t).assign(_row=lambda x: np.arange(len(x))),
    peer=False,
)  # fmt: skip


def run(config: Config) -> ExperimentResult:
    """Bifurcation of the homograph pairs against their matched control pairs on every model
    (paper 1 released no ambiguous states, so peer-gpt2 is skipped), paired over pairs."""
    return run_chapter(SPEC, config, analysis.analyse)


_ = pd  # the prepared table is a DataFrame
