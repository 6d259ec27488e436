"""The layer-anatomy chapter's figures as the notebook shows them: one call per figure cell,
each drawing every model of a run (:func:`~.figures.model_slice`) with its caption and the
claim it bears on, so the notebook only narrates (issue 24 item 4). The charts and captions
come from :mod:`~.figures`; a model whose run has no table for a figure (no predictability
fit, no recovery fine-tune: its notes say why) is skipped.
"""

from __future__ import annotations

import pandas as pd

from lamina.book.charts import show_figure
from lamina.chapters.layer_anatomy import figures as F
from lamina.chapters.layer_anatomy.config import AnatomyConfig
from lamina.chapters.results import ExperimentResult

__all__ = [
    "importance_figures",
    "predictability_figures",
    "recovery_figures",
    "robustness_figures",
    "show",
    "structure_figures",
]


def show(fig: F.Figure, claims: pd.DataFrame) -> None:
    """Display ``fig`` with its caption (``lamina.book.charts.show_figure``); ``claims`` is one
    model's claims table indexed by claim_id, from which the caption quotes ``fig.claim_id``."""
    show_figure(fig.chart, what=fig.what, look_at=fig.look_at, claims=claims,
                claim_id=fig.claim_id)  # fmt: skip


def _config(result: ExperimentResult) -> AnatomyConfig:
    """The run's :class:`AnatomyConfig`; TypeError for a result of another chapter."""
    if not isinstance(result.config, AnatomyConfig):
        raise TypeError(f"not a layer-anatomy result: {type(result.config).__name__}")
    return result.config


def importance_figures(result: ExperimentResult) -> None:
    """Per model: the importance sweep (:func:`~.figures.importance_figure`)."""
    for m in result.models:
        tables, claims = F.model_slice(result, m)
        show(F.importance_figure(tables["sweep"], m), claims)


def robustness_figures(result: ExperimentResult) -> None:
    """Per model: the other surgeries (:func:`~.figures.robustness_figure`), in the order of
    the run's ``surgeries``."""
    surgeries = _config(result).surgeries
    for m in result.models:
        tables, claims = F.model_slice(result, m)
        show(F.robustness_figure(tables["sweep"], m, surgeries), claims)


def predictability_figures(result: ExperimentResult) -> None:
    """Per model with a predictability table: its fit (:func:`~.figures.predictability_figure`),
    the delta structure against the 95% CI of ``P3-delta-structure``'s gap
    (:func:`~.figures.delta_figure`) and the predicted-weight replacement
    (:func:`~.figures.replacement_figure`)."""
    for m in result.models:
        tables, claims = F.model_slice(result, m)
        if tables.get("predictability") is None or tables["predictability"].empty:
            continue
        show(F.predictability_figure(tables["predictability"], m), claims)
        gap_ci = claims.loc["P3-delta-structure", ["ci_low", "ci_high"]].astype(float)
        show(F.delta_figure(tables["delta"], m, (gap_ci.iloc[0], gap_ci.iloc[1])), claims)
        show(F.replacement_figure(tables["replacement"], m), claims)


def recovery_figures(result: ExperimentResult) -> None:
    """Per model whose budget ran a recovery fine-tune: :func:`~.figures.recovery_figure`."""
    for m in result.models:
        tables, claims = F.model_slice(result, m)
        if tables["recovery"].empty:
            continue
        show(F.recovery_figure(tables["recovery"], tables["sweep"], m), claims)


def structure_figures(result: ExperimentResult) -> None:
    """Per model: the weight structure by layer (:func:`~.figures.structure_figure`)."""
    for m in result.models:
        tables, claims = F.model_slice(result, m)
        show(F.structure_figure(tables["structure"], m), claims)
