"""What every chapter returns: the experiment result that ``.write()`` saves (tables, the
claims table, notes, config) with ``lamina.states.io.write_results``.

A claims row is the scorecard's unit: :class:`lamina.evidence.claims.Claim`, its verdict given
by the one engine (:func:`lamina.evidence.decide.decide`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lamina.chapters.config import ChapterConfig
from lamina.states.io import write_results

ALL_SOURCES = "all sources"  # the model of a row judged over several sources

__all__ = ["ALL_SOURCES", "ExperimentResult", "concat_tables"]


def concat_tables(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Stack per-model tables into one (fresh index); an empty frame when there are none."""
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


@dataclass
class ExperimentResult:
    """What an experiment returns: tidy tables (each with a ``model`` column), the claims table
    (:class:`lamina.evidence.claims.Claim` rows), notes on skipped models or traps, and the config."""

    chapter: str
    config: ChapterConfig
    claims: pd.DataFrame
    tables: dict[str, pd.DataFrame]
    notes: list[str]
    models: list[str]

    def summary(self, model: str) -> dict[str, Any]:
        rows = self.claims[self.claims["model"] == model]
        return {
            "claims": rows.replace({np.nan: None}).to_dict(orient="records"),
            "notes": self.notes,
        }

    def write(self, root: str | os.PathLike | None = None) -> list[Path]:
        """``lamina.states.io.write_results`` once per model (tables filtered to that model),
        and once for the rows judged over several sources (model :data:`ALL_SOURCES`: an
        across claim such as "consistent across architectures"), so that they reach the
        scorecard like any row."""
        paths = []
        across = (
            [ALL_SOURCES]
            if "model" in self.claims.columns and (self.claims["model"] == ALL_SOURCES).any()
            else []
        )
        for model in [*self.models, *across]:
            tables = {
                k: v[v["model"] == model].reset_index(drop=True)
                for k, v in self.tables.items()
                if "model" in v.columns
            }
            paths.append(
                write_results(
                    self.chapter,
                    model,
                    summary=self.summary(model),
                    config=self.config.to_dict(),
                    tables=tables,
                    root=root,
                )
            )
        return paths
