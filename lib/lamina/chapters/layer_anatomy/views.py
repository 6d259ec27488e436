"""The layer-anatomy chapter's figures as the notebook shows them: one call per figure cell,
each drawing every model of a run (:func:`~.figures.model_slice`) with its caption and the
claim it bears on, so the notebook only narrates (issue 24 item 4). The headline model's
figures sit in the flow; the other models' are folded below them (issue 25). The charts and captions
come from :mod:`~.figures`; a model whose run has no table for a figure (no predictability
fit, no recovery fine-tune: its notes say why) is skipped.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from lamina.book.charts import figure_html, show_figure
from lamina.book.tables import details_html
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


def _per_model(
    result: ExperimentResult,
    figures_of: Callable[[str, dict[str, pd.DataFrame], pd.DataFrame], list[F.Figure]],
    summary: str,
) -> None:
    """``figures_of(model, tables, claims)`` for each model of ``result``: the first model
    with figures (the headline model the prose quotes) shown in the flow, every other model's
    folded in one ``<details>`` block headed ``summary`` and the number of models."""
    from IPython.display import HTML, display

    folded: list[str] = []
    shown = 0
    for m in result.models:
        tables, claims = F.model_slice(result, m)
        figs = figures_of(m, tables, claims)
        for fig in figs:
            if not shown:
                show(fig, claims)
            else:
                folded.append(figure_html(fig.chart, what=fig.what, look_at=fig.look_at,
                                          claims=claims, claim_id=fig.claim_id))  # fmt: skip
        shown += bool(figs)
    if folded:
        display(HTML(details_html("".join(folded), f"{summary} ({shown - 1} more)")))


def importance_figures(result: ExperimentResult) -> None:
    """The importance sweep (:func:`~.figures.importance_figure`) per model (:func:`_per_model`)."""
    _per_model(result, lambda m, t, c: [F.importance_figure(t["sweep"], m)],
               "The importance sweep of the other models")  # fmt: skip


def robustness_figures(result: ExperimentResult) -> None:
    """The other surgeries (:func:`~.figures.robustness_figure`), in the order of the run's
    ``surgeries``, per model (:func:`_per_model`)."""
    surgeries = _config(result).surgeries
    _per_model(result, lambda m, t, c: [F.robustness_figure(t["sweep"], m, surgeries)],
               "The surgeries of the other models")  # fmt: skip


def _predictability(
    m: str, tables: dict[str, pd.DataFrame], claims: pd.DataFrame
) -> list[F.Figure]:
    if tables.get("predictability") is None or tables["predictability"].empty:
        return []
    gap_ci = claims.loc["P3-delta-structure", ["ci_low", "ci_high"]].astype(float)
    return [
        F.predictability_figure(tables["predictability"], m),
        F.delta_figure(tables["delta"], m, (gap_ci.iloc[0], gap_ci.iloc[1])),
        F.replacement_figure(tables["replacement"], m),
    ]


def predictability_figures(result: ExperimentResult) -> None:
    """Per model with a predictability table (:func:`_per_model`): its fit
    (:func:`~.figures.predictability_figure`), the delta structure against the 95% CI of
    ``P3-delta-structure``'s gap (:func:`~.figures.delta_figure`) and the predicted-weight
    replacement (:func:`~.figures.replacement_figure`)."""
    _per_model(result, _predictability, "Predictability of the other models")


def recovery_figures(result: ExperimentResult) -> None:
    """Per model whose budget ran a recovery fine-tune (:func:`_per_model`):
    :func:`~.figures.recovery_figure`."""
    _per_model(
        result,
        lambda m, t, c: (
            [] if t["recovery"].empty else [F.recovery_figure(t["recovery"], t["sweep"], m)]
        ),
        "Recovery of the other models",
    )


def structure_figures(result: ExperimentResult) -> None:
    """The weight structure by layer (:func:`~.figures.structure_figure`) per model
    (:func:`_per_model`)."""
    _per_model(result, lambda m, t, c: [F.structure_figure(t["structure"], m)],
               "Weight structure of the other models")  # fmt: skip
