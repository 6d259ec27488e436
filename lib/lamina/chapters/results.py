"""What every chapter returns: claim rows with their verdicts, and the experiment result that
``.write()`` saves (tables, claims, notes, config) with ``lamina.states.io.write_results``.

A claims row is the scorecard's unit (see :func:`claim_record`). Verdict words are
"reproduced", "partially", "not reproduced" and "not testable".
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

__all__ = [
    "ALL_SOURCES",
    "ExperimentResult",
    "claim_record",
    "concat_tables",
    "range_claim",
    "range_verdict",
    "tested_verdict",
    "verdict",
]


def verdict(p_value: float | None, effect_ok: bool | None, *, alpha: float = 0.05) -> str:
    """A verdict word from a test's p-value and whether the effect has the claimed sign and
    size: ``reproduced`` (significant and as claimed), ``partially`` (significant but smaller
    than claimed, or as claimed but not significant), ``not reproduced`` or ``not testable``."""
    if p_value is None or effect_ok is None or p_value != p_value:
        return "not testable"
    significant = p_value < alpha
    if significant and effect_ok:
        return "reproduced"
    if significant or effect_ok:
        return "partially"
    return "not reproduced"


def range_verdict(
    ci_low: float, ci_high: float, lo: float, hi: float, estimate: float | None = None
) -> str:
    """Verdict for a claimed range [lo, hi] from a 95% CI [ci_low, ci_high] and the point
    estimate: "reproduced" when the estimate lies in the range (and so the CI overlaps it),
    "partially" when only the CI overlaps it (a wide CI is not a reproduction),
    "not reproduced" when the CI misses it, "not testable" when the CI is undefined.
    Without ``estimate``, the CI's midpoint stands in for it."""
    if not (np.isfinite(ci_low) and np.isfinite(ci_high)):
        return "not testable"
    if not (ci_low <= hi and ci_high >= lo):
        return "not reproduced"
    point = (ci_low + ci_high) / 2 if estimate is None or not np.isfinite(estimate) else estimate
    return "reproduced" if lo <= point <= hi else "partially"


def claim_record(
    claim_id: str,
    claim: str,
    paper_value: str,
    model: str,
    measured: float,
    ci_low: float = float("nan"),
    ci_high: float = float("nan"),
    p: float | None = None,
    effect_ok: bool | None = None,
    *,
    verdict_word: str | None = None,
    effect_size: float = float("nan"),
    effect_name: str = "",
    convention: str = "",
    direction_ok: bool = True,
    short: str = "",
) -> dict[str, Any]:
    """One row of a chapter's claims table (the scorecard's unit): verdict from ``p`` and
    ``effect_ok`` via :func:`verdict` unless ``verdict_word`` is given; an effect of the
    opposite sign to the claim (``direction_ok=False``) is "not reproduced" however significant.
    ``short``: the claim's label in the book's verdict picture ("" lets the book build it from
    ``claim_id``: ``lamina.book.matrix.short_label``)."""
    if verdict_word is None and not direction_ok:
        verdict_word = "not reproduced"
    row = {
        "claim_id": claim_id,
        "claim": claim,
        "paper_value": paper_value,
        "model": model,
        "measured": float(measured),
        "ci_low": float(ci_low),
        "ci_high": float(ci_high),
        "p": float("nan") if p is None else float(p),
        "effect_size": float(effect_size),
        "effect_name": effect_name,
        "verdict": verdict_word or verdict(p, effect_ok),
        "convention": convention,
    }
    return row | ({"short": short} if short else {})


def tested_verdict(p: float | None, effect_ok: bool | None, *, direction_ok: bool = True) -> str:
    """The verdict word that :func:`claim_record` gives a tested claim (no ``verdict_word``):
    ``verdict(p, effect_ok)``, or "not reproduced" for an effect of the wrong sign.
    Used for the sensitivity tables, whose rows are verdicts without a claims row."""
    return "not reproduced" if not direction_ok else verdict(p, effect_ok)


def range_claim(
    claim_id: str,
    claim: str,
    paper_value: str,
    model: str,
    estimate: float,
    ci_low: float,
    ci_high: float,
    claimed: tuple[float, float],
    *,
    convention: str = "",
) -> dict[str, Any]:
    """Claims row for "the quantity lies in the range ``claimed`` = (lo, hi)": the point
    ``estimate`` with its 95% CI [``ci_low``, ``ci_high``] (units of the quantity), judged by
    :func:`range_verdict`."""
    return claim_record(
        claim_id,
        claim,
        paper_value,
        model,
        estimate,
        ci_low,
        ci_high,
        verdict_word=range_verdict(ci_low, ci_high, *claimed, estimate),
        convention=convention,
    )


def concat_tables(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Stack per-model tables into one (fresh index); an empty frame when there are none."""
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


@dataclass
class ExperimentResult:
    """What an experiment returns: tidy tables (each with a ``model`` column), the claims table
    (see :func:`claim_record`), notes on skipped models or traps, and the config."""

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
