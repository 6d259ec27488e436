"""The weight-update-signature chapter's figures and tables as the notebook shows them, each
built from a run's :class:`~lamina.chapters.results.ExperimentResult`, so the notebook only
narrates (issue 24 item 4). The figure data come from :mod:`~.figures`; every caption describes
the encoding or what to look at, never a finding. A figure that needs a training history shows
:data:`NO_HISTORY` when the run has none (a real pair, a single real checkpoint).
"""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from lamina.book.charts import facet, grid, show_figure
from lamina.chapters.results import ExperimentResult
from lamina.chapters.weight_update_signature.config import SignatureConfig
from lamina.chapters.weight_update_signature.figures import (
    adaptation_gain,
    claims_table,
    enrichment_curves,
    finetune_summary,
    mechanism_summary,
    objective_signatures,
    pretraining_trajectory,
    sensitivity_baselines,
    sensitivity_course,
    sensitivity_verdicts,
    write_gradient_course,
)

__all__ = [
    "NO_HISTORY",
    "adaptation_figure",
    "adam_figure",
    "baselines_table",
    "claims_view",
    "edits_figure",
    "enrichment_figure",
    "finetune_table",
    "mechanism_table",
    "objective_table",
    "pretraining_figure",
    "read_gradient_figure",
    "sensitivity_figure",
    "sensitivity_table",
    "signature_config_of",
    "write_gradient_figure",
]

NO_HISTORY = (
    "*Not testable on a real pair or a single real checkpoint: it needs the training history.*"
)
_LOG2 = alt.Scale(type="log", base=2)


def signature_config_of(result: ExperimentResult) -> SignatureConfig:
    """The run's :class:`SignatureConfig`; TypeError for a result of another chapter."""
    if not isinstance(result.config, SignatureConfig):
        raise TypeError(f"not a weight-update-signature result: {type(result.config).__name__}")
    return result.config


def _no_history() -> None:
    from IPython.display import Markdown, display

    display(Markdown(NO_HISTORY))


def _per_model(
    chart: alt.Chart | alt.LayerChart,
    frame: pd.DataFrame,
    height: int,
    title: str,
    *,
    what: str,
    look_at: str,
    legend: bool = True,
) -> None:
    """``chart`` faceted by ``frame``'s ``model`` column (one panel per model, ``height`` px),
    shown with its caption. The chapter's captions do not repeat the measured values: each
    figure follows the verdict boxes that state them."""
    show_figure(
        facet(chart, "model", frame["model"], legend=legend, height=height, title=title),
        what=what,
        look_at=look_at,
    )


def enrichment_figure(result: ExperimentResult) -> None:
    """Enrichment of every stage and early→late ΔW against k (log2), one panel per matrix group
    (rows) × model (columns), over the random-subspace band and the random-matrix line."""
    curves = enrichment_curves(result.tables["deltas"], signature_config_of(result))
    band = (
        alt.Chart(curves)
        .mark_area(opacity=0.25, color="gray")
        .encode(x=alt.X("k:Q", scale=_LOG2), y="null_low:Q", y2="null_high:Q", detail="pair:N")
    )
    lines = (
        alt.Chart(curves)
        .mark_line(point=True)
        .encode(
            x=alt.X("k:Q", scale=_LOG2, title="subspace dimension k"),
            y=alt.Y("enrichment:Q", scale=alt.Scale(type="log"), title="enrichment RSF / (k/d)"),
            color=alt.Color("pair:N", title="ΔW"),
            tooltip=["model", "pair", "group", "k", alt.Tooltip("enrichment:Q", format=".2f")],
        )
    )
    rand = (
        alt.Chart(curves)
        .mark_line(strokeDash=[4, 3], color="black")
        .encode(x=alt.X("k:Q", scale=_LOG2), y="random_matrix:Q", detail="pair:N")
    )
    chart = grid(
        alt.LayerChart(layer=[band, rand, lines], data=curves), "group", "model", curves["group"],
        curves["model"], height=110,
        title="Enrichment of each weight change in its subspace, across k",
    )  # fmt: skip
    show_figure(
        chart,
        what="The enrichment of each weight change ΔW in the top-k subspace (its input principal "
        "subspace for read matrices, the prediction subspace for writes) against k, one row per "
        "matrix group and one column per model; grey: random subspaces, dashed: random matrices.",
        look_at="how far each line sits above 1 and above the grey band",
    )


def pretraining_figure(result: ExperimentResult) -> None:
    """Enrichment at k of each consecutive pretraining ΔW against its end step, per matrix
    group, one panel per model; :data:`NO_HISTORY` without pretraining checkpoints."""
    config = signature_config_of(result)
    traj = pretraining_trajectory(result.tables["deltas"], config)
    if not len(traj):
        return _no_history()
    line = (
        alt.Chart(traj)
        .mark_line(point=True)
        .encode(
            x=alt.X(
                "step_end:Q", scale=alt.Scale(type="symlog"), title="pretraining step (end of ΔW)"
            ),
            y=alt.Y(
                "enrichment:Q", scale=alt.Scale(type="log"), title=f"enrichment at k = {config.k}"
            ),
            color=alt.Color("group:N", title="matrices"),
            tooltip=["pair", "phase", "group", alt.Tooltip("enrichment:Q", format=".2f")],
        )
    )
    _per_model(
        line, traj, 150, "Enrichment of consecutive pretraining updates across training time",
        what="The enrichment of each consecutive pretraining update, by matrix group, against "
        "the step at which it ends, one panel per model.",
        look_at="whether the late updates keep the alignment stages' pattern",
    )


def _read_figure(
    table: pd.DataFrame,
    x: alt.X,
    y: alt.Y,
    color: alt.Color,
    title: str,
    *,
    what: str,
    look_at: str,
    **encode: Any,
) -> None:
    """One filled point per read matrix (the rows of ``table`` whose ``kind`` is "read") at
    (``x``, ``y``), coloured by ``color`` (``encode``: further channels, e.g. shape, tooltip),
    one 160-px panel per model, shown with its caption (:func:`_per_model`)."""
    read = table[table["kind"] == "read"]
    points = alt.Chart(read).mark_point(filled=True, opacity=0.6).encode(x=x, y=y, color=color, **encode)
    _per_model(points, read, 160, title, what=what, look_at=look_at)


def read_gradient_figure(result: ExperimentResult) -> None:
    """Per read matrix and objective: the activation energy share in the top-k directions (x)
    against the RSF of the summed gradient (y), one panel per model."""
    _read_figure(
        result.tables["gradients"],
        alt.X("activation_share:Q", title="activation energy in the top-k directions"),
        alt.Y("rsf_summed:Q", title="RSF of the summed read gradient"),
        alt.Color("objective:N"),
        "Summed read gradients against the activation energy they inherit",
        shape=alt.Shape("role:N"),
        tooltip=["key", "objective", alt.Tooltip("rsf_summed:Q", format=".3f")],
        what="Each point is a read matrix under one objective: the share of its input activation "
        "energy in the top-k directions against the fraction of its summed gradient there.",
        look_at="whether the points follow the diagonal under every objective",
    )


def adam_figure(result: ExperimentResult) -> None:
    """Per read matrix and optimiser state: enrichment of Adam's first moment (x) against that
    of its update (y), one panel per model; :data:`NO_HISTORY` without saved Adam states."""
    adam = result.tables["adam"]
    if not len(adam):
        return _no_history()
    log = alt.Scale(type="log")
    _read_figure(
        adam,
        alt.X("enrichment_momentum:Q", scale=log, title="enrichment of Adam's m"),
        alt.Y("enrichment_update:Q", scale=log, title="enrichment of Adam's update"),
        alt.Color("state:N", title="optimiser state"),
        "Adam's update against the momentum it normalises, per read matrix",
        tooltip=["key", "state", alt.Tooltip("enrichment_update:Q", format=".2f")],
        what="Each point is a read matrix: the enrichment of Adam's first moment m against that "
        "of the update it makes.",
        look_at="whether the points fall below the diagonal (the update less concentrated than m)",
    )


def write_gradient_figure(result: ExperimentResult) -> None:
    """Median enrichment in the prediction subspace of the write matrices' LM gradient and of
    the weights themselves across pretraining, one panel per model; :data:`NO_HISTORY`
    without pretraining checkpoints."""
    wg = result.tables["write_gradients"]
    if not len(wg):
        return _no_history()
    course = write_gradient_course(wg)
    line = (
        alt.Chart(course)
        .mark_line(point=True)
        .encode(
            x=alt.X("step:Q", scale=alt.Scale(type="symlog"), title="pretraining step"),
            y=alt.Y(
                "median(value):Q", scale=alt.Scale(type="log"), title="enrichment (median over W)"
            ),
            color=alt.Color("quantity:N"),
        )
    )
    _per_model(
        line, course, 150, "Write matrices against the prediction subspace across pretraining",
        what="The enrichment in the prediction subspace of the write matrices' LM gradient and of "
        "the weights themselves, across pretraining, one panel per model.",
        look_at="when the gradient's enrichment falls, and when the weights' rises",
    )


def edits_figure(result: ExperimentResult) -> None:
    """One tick per rank-1 write edit: the change of its target token's log-probability (nats)
    per direction (unembedding row or random), one panel per stage (rows) × model (columns)."""
    edits = result.tables["edits"]
    ticks = (
        alt.Chart(edits)
        .mark_tick(thickness=2)
        .encode(
            x=alt.X("delta_logp:Q", title="Δ log p(target token), nats"),
            y=alt.Y("direction:N", title=None),
            color=alt.Color("direction:N", legend=None),
        )
    )
    chart = grid(
        ticks, "stage", "model", edits["stage"], edits["model"], legend=False, height=50,
        title="Change in the target token's log-probability after a rank-1 write edit",
    )  # fmt: skip
    show_figure(
        chart,
        what="Each tick is one edit: the change in its target token's log-probability, for writes "
        "along the token's unembedding row and along random directions of the same norm, one row "
        "per stage.",
        look_at="the gap between the unembedding ticks and the random ones after alignment",
    )


def adaptation_figure(result: ExperimentResult) -> None:
    """Mean SFT eval-loss reduction (nats) per trained group of matrices and full fine-tuning,
    one panel per model."""
    gain = adaptation_gain(result.tables["adaptation"])
    bars = (
        alt.Chart(gain)
        .mark_bar()
        .encode(
            x=alt.X("reduction:Q", title="mean SFT eval-loss reduction, nats"),
            y=alt.Y(
                "group:N", title="trained group", sort=["qk", "vo", "mlp_in", "mlp_out", "all"]
            ),
            tooltip=["group", "n_params", alt.Tooltip("reduction:Q", format=".3f")],
        )
    )
    _per_model(
        bars, gain, 120, "SFT loss reduction when training a single group of matrices",
        what="The mean reduction of the SFT evaluation loss when only one group of matrices is "
        "trained, against full fine-tuning (all), with one budget.",
        look_at="each group's bar against the bar of full fine-tuning",
        legend=False,
    )


def sensitivity_figure(result: ExperimentResult) -> None:
    """Geometric-mean enrichment of Q, K and of the writes per stage against k, raw (solid) and
    centred (dashed) subspaces, one panel per model (rows) × matrices (columns)."""
    course = sensitivity_course(result.tables["sensitivity"])
    lines = (
        alt.Chart(course)
        .mark_line(point=True)
        .encode(
            x=alt.X("k:Q", scale=_LOG2),
            y=alt.Y("value:Q", scale=alt.Scale(type="log"), title="enrichment (geo-mean)"),
            color=alt.Color("stage:N"),
            strokeDash=alt.StrokeDash("moment:N"),
        )
    )
    show_figure(
        grid(
            lines,
            "model",
            "matrices",
            course["model"],
            course["matrices"],
            height=110,
            title="Stage signatures with raw (solid) and centred (dashed) subspaces",
        ),  # fmt: skip
        what="The geometric-mean enrichment of Q, K and of the write matrices for each stage, "
        "across k, with raw and centred subspaces, one row per model.",
        look_at="whether the order of the stages changes with k or with centring",
    )


def objective_table(result: ExperimentResult) -> pd.DataFrame:
    """:func:`~.figures.objective_signatures` of the run, rounded to 3 decimals."""
    return objective_signatures(result.tables["deltas"], signature_config_of(result)).round(3)


def finetune_table(result: ExperimentResult) -> pd.DataFrame:
    """:func:`~.figures.finetune_summary` of the run's short objective runs."""
    return finetune_summary(result.tables["finetune"])


def mechanism_table(result: ExperimentResult) -> pd.DataFrame:
    """:func:`~.figures.mechanism_summary` of the run, rounded to 3 decimals."""
    t = result.tables
    return mechanism_summary(t["gradients"], t["adam"], signature_config_of(result)).round(3)


def sensitivity_table(result: ExperimentResult) -> pd.DataFrame:
    """:func:`~.figures.sensitivity_verdicts` of the run (model × stage × moment by k)."""
    return sensitivity_verdicts(result.tables["sensitivity"])


def baselines_table(result: ExperimentResult) -> pd.DataFrame:
    """:func:`~.figures.sensitivity_baselines` of the run at its ``k``."""
    return sensitivity_baselines(result.tables["sensitivity"], signature_config_of(result).k)


def claims_view(result: ExperimentResult) -> pd.DataFrame:
    """:func:`~.figures.claims_table` of the run (one row per claim and model or stage)."""
    return claims_table(result.claims)
