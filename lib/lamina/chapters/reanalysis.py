"""Reanalysis of paper 1's released GPT-2 states: which conventions give the released numbers
and which the paper's text.

Glue: the chapter's config, its run, its claims. The analysis is
:mod:`lamina.trajectory.analyses.reanalysis` (and :mod:`~lamina.trajectory.analyses.reanalysis_models`
for the released prompts run through other models); the claims are declared in
:mod:`lamina.trajectory.claims`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pandas as pd

from lamina.chapters.results import ExperimentResult
from lamina.chapters.trajectory import TrajectoryConfig
from lamina.evidence.claims import claims_frame
from lamina.sources.peer import default_peer_root
from lamina.trajectory.analyses import reanalysis as analysis
from lamina.trajectory.analyses.reanalysis_models import (
    extract_released_prompts,
    real_model_table,
    real_models,
    released_range,
)
from lamina.trajectory.claims import CHAPTER_CLAIMS
from lamina.trajectory.model_states import peer_states

__all__ = ["CLAIMS", "Config", "peer_available", "run"]

CLAIMS = CHAPTER_CLAIMS["reanalysis"]


@dataclass
class Config(TrajectoryConfig):
    """The reanalysis' parameters (:class:`lamina.chapters.trajectory.TrajectoryConfig`) and
    ``real_models``: other models to run the released prompts through ("default": the
    offline pretrained causal LMs; a name or a list of names; [] or None for none)."""

    model: str = "peer-gpt2"
    pooling: Literal["mean", "last"] = "last"
    n_bootstrap: int = 1_000
    real_models: str | list[str] | None = "default"


def _root(config: TrajectoryConfig) -> Path:
    return Path(config.peer_root) if config.peer_root else default_peer_root()


def peer_available(config: TrajectoryConfig) -> bool:
    """Whether the released trajectories are under ``config.peer_root``."""
    return (_root(config) / "data" / "trajectories" / "gpt2").is_dir()


def run(config: Config) -> ExperimentResult:
    """lamina's metrics on the released last-token (170 prompts) and mean-pooled (50 prompts)
    GPT-2 states under every convention, beside the released tables; the released prompts
    also run through ``config.real_models`` (see
    :func:`~lamina.trajectory.analyses.reanalysis_models.real_models`), whose values per
    convention sit in the table "real_models". FileNotFoundError when the release is absent."""
    if not peer_available(config):
        raise FileNotFoundError(f"paper 1's released states are not under {_root(config)}")
    root = _root(config)
    ms = peer_states(root)
    names, notes = real_models(config.real_models or None)
    others = [extract_released_prompts(n, ms.pools["last"].prompts) for n in names]
    real = real_model_table(ms, others, min(config.n_bootstrap, 1000), config.seed,
                            released=released_range(root))  # fmt: skip
    notes += [n for o in others for n in o.notes]
    if names:
        notes.append(f"The released prompts were also run through {', '.join(names)} "
                     "(lamina's extraction, fp32).")
    curv, ci_rows, sens, parts = analysis.convention_rows(ms, config.n_bootstrap,
                                                          config.n_permutations, config.seed)
    per_prompt = analysis.released(root, analysis.PER_PROMPT)
    rel_ci = analysis.released(root, "convergence_metrics.csv")
    claims, source, match, ci_rows = analysis.self_checks(ms, root, per_prompt, rel_ci, ci_rows)
    parts_t, sens_t = pd.DataFrame(parts), pd.DataFrame(sens)
    claims += analysis.headline_rows(sens_t, parts_t)
    return ExperimentResult(
        "reanalysis", config, claims_frame(claims),
        {"curvature": pd.DataFrame(curv), "curvature_parts": parts_t.drop(columns="_s"),
         "bootstrap_source": source, "per_prompt_match": match,
         "convergence": pd.DataFrame(ci_rows), "sensitivity": sens_t.drop(columns="_s"),
         "real_models": real},
        ms.notes + notes, ["peer-gpt2", *names],
    )  # fmt: skip
