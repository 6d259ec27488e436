"""Paper 1, claim 4: layerwise similarity has three phases (encoding, elaboration, output),
consistent across architectures.

Glue: the chapter's config, its run over every model, its claims. The analysis of one source
is :mod:`lamina.trajectory.analyses.three_phase`; "consistent across architectures" is its own
row over the sources run (:func:`lamina.evidence.decide.decide_across`); the claims are
declared in :mod:`lamina.trajectory.claims`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from lamina.chapters.results import ExperimentResult
from lamina.chapters.trajectory import ChapterSpec, TrajectoryConfig, run_chapter
from lamina.evidence.claims import Claim, claims_frame
from lamina.evidence.decide import decide_across
from lamina.trajectory.analyses import three_phase as analysis
from lamina.trajectory.chapter_prompts import subsample
from lamina.trajectory.claims import BANDS, CHAPTER_CLAIMS, UNIVERSAL

__all__ = ["CLAIMS", "Config", "run"]

CLAIMS = CHAPTER_CLAIMS["three_phase"]


@dataclass
class Config(TrajectoryConfig):
    """The three-phase chapter's parameters (:class:`lamina.chapters.trajectory.TrajectoryConfig`)."""


SPEC = ChapterSpec(
    "three_phase", required=("family",),
    tables=("profiles", "bands", "controls", "stability", "sensitivity"),
    quick=lambda prompts, seed: subsample(prompts, "family", 8, seed),
    prepare=analysis.with_perturbations,
)  # fmt: skip


def run(config: Config) -> ExperimentResult:
    """SIM profiles of the semantic, analogy, reasoning and lexical families on every model:
    the paper's fixed bands (tested paired), GPT-2's band values (GPT-2 models only),
    data-driven change points (is it three?), controls, stability on the perturbation pairs,
    sensitivity to the convention; then the row over every source run."""
    result = run_chapter(SPEC, config, analysis.analyse)
    c = result.claims
    if len(c) and "claim_id" in c:
        main = c[(c["claim_id"] == BANDS.id) & ~c["model"].str.contains(r"\+Q")]
        fields = [f for f in main.columns if f in Claim.__dataclass_fields__]
        rows = [Claim(**{k: r[k] for k in fields}) for _, r in main.iterrows()]
        across = decide_across(UNIVERSAL, rows, convention=rows[0].convention if rows else "")
        result.claims = pd.concat([c, claims_frame([across])], ignore_index=True)
    return result
