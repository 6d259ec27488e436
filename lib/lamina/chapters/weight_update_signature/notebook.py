"""The weight-update-signature notebook's glue: one run with its results written, and the
values the prose quotes (``ws_<name>``: one short sentence per model for each claim row)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from lamina.book.glue import glue
from lamina.chapters.results import ExperimentResult
from lamina.chapters.weight_update_signature.config import Config
from lamina.chapters.weight_update_signature.run import run
from lamina.weights.claims import CLAIMS
from lamina.weights.measure import PREFIX, margin

__all__ = ["config_of", "describe", "glue_signature", "run_signature"]


def config_of(result: ExperimentResult) -> Config:
    """The run's :class:`Config`; TypeError for a result of another chapter."""
    if not isinstance(result.config, Config):
        raise TypeError(f"not a weight-update-signature result: {type(result.config).__name__}")
    return result.config


def run_signature(config: Config) -> ExperimentResult:
    """The chapter's run (:func:`~.run.run`), its results written, :func:`glue_signature`."""
    result = run(config)
    result.write()
    glue_signature(result)
    return result


def _fmt(x: float) -> str:
    if x is None or not np.isfinite(x):
        return "n/a"
    return "0" if x == 0 else f"{x:.3g}" if abs(x) >= 1e-3 else f"{x:.1e}"


def _first_clause(text: str, limit: int = 60) -> str:
    """The reason's head: up to its first ":" or ";" (e.g. "gate sft failed"), at most
    ``limit`` characters (the whole reason is in the verdict table)."""
    first = str(text or "").split("; ", 1)[0].split(": ", 1)[0].strip()
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def describe(claims: pd.DataFrame, claim_id: str) -> str:
    """A verdict box's text for one claim: per model, "<verdict> <measured> [CI] p = …" (the CI
    of the row's sidedness), or "<verdict> (<why>)" for a row without a value; models joined
    by "; ". The whole rows (reasons, effect sizes) are in the chapter's verdict table."""
    rows = claims[claims["claim_id"] == claim_id]
    if rows.empty:
        return "no result (the model or its checkpoints were not available)."
    parts = []
    for r in rows.itertuples():
        if math.isfinite(r.measured) and r.verdict != "not testable":
            s = f"{r.model}: {r.verdict} {_fmt(r.measured)}"
            if math.isfinite(r.ci_low):
                s += f" [{_fmt(r.ci_low)}, {_fmt(r.ci_high)}]"
            if math.isfinite(r.p):
                s += f", p = {_fmt(r.p)}"
        else:
            s = f"{r.model}: {r.verdict} ({_first_clause(r.reason)})"
        parts.append(s)
    return "; ".join(parts) + "."


def glue_signature(result: ExperimentResult) -> None:
    """Glue ``ws_<name>`` (:func:`describe`) for every declared claim (name: the id without
    ``p2-signature-``, dashes as underscores), ``ws_models``, and the settings the prose
    quotes: ``ws_k``, ``ws_margin``, ``ws_n_tokens``, ``ws_early_fraction`` (percent),
    ``ws_edit_scale``, ``ws_objective_budget``, ``ws_seconds`` (the run's timings, s)."""
    config = config_of(result)
    for spec in CLAIMS:
        name = spec.id.removeprefix(PREFIX).replace("-", "_")
        glue(f"ws_{name}", describe(result.claims, spec.id))
    glue("ws_models", ", ".join(result.models) or "none")
    glue("ws_k", config.k)
    glue("ws_margin", margin())
    glue("ws_n_tokens", config.n_tokens)
    glue("ws_early_fraction", f"{config.early_fraction:.0%}")
    glue("ws_edit_scale", config.edit_scale)
    glue("ws_objective_budget", f"{config.objective_steps} AdamW steps of "
         f"{config.objective_batch} examples at peak lr {config.objective_lr:g}")
    glue("ws_seconds", round(sum(config.timings.values()), 1))


def gate_table(result: ExperimentResult) -> pd.DataFrame:
    """The gates of every model (model × gate: passed, values)."""
    g: Any = result.tables.get("gates", pd.DataFrame())
    return g
