"""The organisms appendix's figures, each drawn from a run (:class:`~.run.OrganismsResult`) and
displayed with its caption (``lamina.book.charts.show_figure``). Captions describe the encoding
and what to look at, never a finding. The notebook calls them through :mod:`~.views`.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import numpy as np

from lamina.book.charts import facet, grid, layer_axis, model_color, show_figure
from lamina.chapters.organisms.narrative import pick, shown_bpb
from lamina.chapters.organisms.run import OrganismsResult
from lamina.sources.organisms.tables import MEASURES, gates_long

__all__ = [
    "bpb_figure",
    "gates_figure",
    "homograph_figure",
    "homograph_layers_figure",
    "margin_curve_figure",
    "perplexity_figure",
    "pretraining_figure",
    "stages_figure",
]



def _layer(*charts: alt.Chart) -> alt.LayerChart:
    """``alt.layer(*charts)``, which is a LayerChart when no chart has a facet encoding (as
    here); TypeError otherwise."""
    layered = alt.layer(*charts)
    if not isinstance(layered, alt.LayerChart):
        raise TypeError("a layer of faceted charts cannot be faceted again")
    return layered


def _dashed(channel: str, field: str) -> alt.Chart:
    """The dashed gray reference line of the captions: a rule at the mean of column ``field``
    (one value per panel, in that column's units) across ``channel`` ("y": a horizontal line,
    "x": a vertical one)."""
    return alt.Chart().mark_rule(strokeDash=[4, 4], color="gray").encode(**{channel: f"mean({field}):Q"})


def _ci_bars(y: Any, **encode: Any) -> alt.Chart:
    """The 95% CI of each point: an error bar from column ``ci_low`` to ``ci_high`` along x at
    ``y`` (``encode``: further channels, e.g. yOffset, color). Layer it under the points."""
    return alt.Chart().mark_errorbar().encode(x=alt.X("ci_low:Q", title=""), x2="ci_high:Q", y=y, **encode)


def _per_organism(
    chart: alt.Chart | alt.LayerChart, table: Any, what: str, look_at: str, **kw: Any
) -> None:
    """``show_figure`` of ``chart`` faceted one panel per organism (``table["model"]``);
    ``kw`` goes to :func:`lamina.book.charts.facet` (data, height, legend, title)."""
    show_figure(facet(chart, "model", table["model"], **kw), what=what, look_at=look_at)


def _over_unigram(chart: alt.Chart, table: Any, baseline: str, **kw: Any) -> None:
    """:func:`_per_organism` of ``chart`` (no data of its own) over ``table``, layered over
    the unigram baseline: a dashed horizontal line at column ``baseline`` (same units as y);
    ``kw``: the caption (what, look_at) and :func:`lamina.book.charts.facet` arguments."""
    _per_organism(_layer(chart, _dashed("y", baseline)), table, data=table, **kw)


def _lines_per_organism(
    table: Any, x: alt.X, y: alt.Y, color: str, tooltip: list[Any], **kw: Any
) -> None:
    """:func:`_per_organism` of a line chart with points, 180 px high: ``y`` against ``x`` of
    ``table``, one line per value of column ``color`` (nominal, no legend title), ``tooltip``
    its fields; ``kw``: the caption (what, look_at) and the title."""
    chart = (
        alt.Chart(table)
        .mark_line(point=True)
        .encode(x=x, y=y, color=alt.Color(f"{color}:N", title=None), tooltip=tooltip)
    )
    _per_organism(chart, table, height=180, **kw)


def pretraining_figure(result: OrganismsResult) -> None:
    """Pretraining loss (nats per token) against training tokens, training and validation, one
    panel per organism, over the unigram baseline's loss (dashed)."""
    curves, quality = result.tables["curves"], result.tables["quality"]
    unigram_loss = np.log(pick(quality, checkpoint="final").set_index("model")["unigram_perplexity"])
    pre = curves[curves["phase"] == "pretrain"].assign(
        unigram_loss=lambda d: d["model"].map(unigram_loss)
    )
    lines = (
        alt.Chart()
        .mark_line()
        .encode(
            x=alt.X("amount:Q", title="training tokens"),
            y=alt.Y("loss:Q", title="loss (nats per token)"),
            color=alt.Color("split:N", title=None),
            tooltip=["step", "amount", "split", "loss"],
        )
    )
    _over_unigram(
        lines,
        pre,
        "unigram_loss",
        title="Pretraining loss against the unigram baseline",
        what="Training and validation loss (nats per token) against training tokens; the dashed "
        "line is the unigram baseline's loss.",
        look_at="how far below the dashed line each curve ends",
    )


def stages_figure(result: OrganismsResult) -> None:
    """Training and held-out loss (nats) of each alignment stage against its step: stages in
    rows, organisms in columns, independent y scales."""
    curves = result.tables["curves"]
    stages = curves[curves["phase"] != "pretrain"]
    stage_lines = alt.Chart(stages).mark_line().encode(
        x=alt.X("step:Q", title="alignment step"),
        y=alt.Y("loss:Q", title="loss (nats)", scale=alt.Scale(zero=False)),
        color=alt.Color("split:N", title=None),
        tooltip=["step", "split", "loss"],
    )
    show_figure(
        grid(
            stage_lines,
            "phase",
            "model",
            ["lm", "sft", "dpo"],
            stages["model"],
            height=130,
            title="Alignment stages: training and held-out losses",
        ).resolve_scale(y="independent"),
        what="Training and held-out loss of each alignment stage (rows) on its own objective, per "
        "organism (columns); for DPO, ln 2 ≈ 0.693 is no preference.",
        look_at="whether the held-out curves fall along with the training curves",
    )


def perplexity_figure(result: OrganismsResult) -> None:
    """Validation perplexity (log scale) of each checkpoint, one panel per organism, over the
    unigram baseline's (dashed)."""
    quality = result.tables["quality"]
    bars = (
        alt.Chart()
        .mark_point(filled=True, size=90)
        .encode(
            x=alt.X("checkpoint:N", sort=["final", "lm", "sft", "dpo"], title=None),
            y=alt.Y("val_perplexity:Q", title="validation perplexity (log scale)").scale(type="log"),
            color=alt.Color("checkpoint:N", legend=None),
            tooltip=["model", "checkpoint", alt.Tooltip("val_perplexity:Q", format=".1f")],
        )
    )
    _over_unigram(
        bars,
        quality,
        "unigram_perplexity",
        legend=False,
        title="Validation perplexity of each checkpoint against the unigram baseline",
        what="Validation perplexity (log scale) at the end of pretraining and after each alignment "
        "stage; the dashed line is the unigram baseline.",
        look_at="each checkpoint's distance below the dashed line",
    )


def bpb_figure(result: OrganismsResult) -> None:
    """Bits per byte with 95% CIs of each organism (end of pretraining) and reference model,
    one panel per source (plays, curriculum)."""
    shown = shown_bpb(result)
    sources = [x for x in ("plays", "curriculum") if x in set(shown["source"])]
    order = list(dict.fromkeys(shown["model"]))
    points = (
        alt.Chart()
        .mark_point(filled=True, size=70)
        .encode(
            x=alt.X("bits_per_byte:Q", title="bits per byte (95% CI)", scale=alt.Scale(zero=False)),
            y=alt.Y("model:N", title=None, sort=order),
            color=model_color(shown, title=None, legend=False),
            tooltip=["model", "checkpoint", "source", alt.Tooltip("bits_per_byte:Q", format=".3f"),
                     "documents", "bytes", "tokens"],
        )
    )  # fmt: skip
    show_figure(
        facet(
            _layer(_ci_bars(alt.Y("model:N", sort=order)), points),
            "source",
            sources,
            data=shown[shown["source"].isin(sources)],
            legend=False,
            height=30 + 22 * shown["model"].nunique(),
            title="Bits per byte on the organisms' validation text",
        ),
        what="Bits per byte (lower is better) of each organism at the end of pretraining and of "
        "each pretrained reference model, on the same validation passages, per source; bars are "
        "95% CIs over documents. The table below also pools both sources (\"all\"), a number "
        "that depends on this sample's mix of plays and curriculum.",
        look_at="the gap between the organisms and the pretrained models in each panel",
    )


def gates_figure(result: OrganismsResult) -> None:
    """Each stage's held-out SFT accuracy, content probe and preference accuracy (95% CIs over
    entity pairs), one panel per organism, with the reference each is gated against (gray
    diamonds)."""
    long = gates_long(result.tables["gates"])
    order = ["base", "sft", "dpo"]
    y = alt.Y("measure:N", sort=list(MEASURES.values()), title=None)
    color = alt.Color("stage:N", sort=order, title=None)
    offset = alt.YOffset("stage:N", sort=order)
    stage = alt.datum.kind == "stage"
    points = alt.Chart().transform_filter(stage).mark_point(filled=True, size=60).encode(
        x=alt.X("value:Q", title="held-out accuracy (95% CI over entity pairs)",
                scale=alt.Scale(domain=[0, 1])),
        y=y, color=color, yOffset=offset,
        tooltip=["stage", "measure", alt.Tooltip("value:Q", format=".3f")])  # fmt: skip
    errs = alt.Chart().transform_filter(stage).mark_errorbar().encode(
        x=alt.X("ci_low:Q", title=""), x2="ci_high:Q", y=y, color=color, yOffset=offset)  # fmt: skip
    ref = alt.Chart().transform_filter(alt.datum.kind == "reference").mark_point(
        shape="diamond", size=90, color="gray", filled=True).encode(
        x="value:Q", y=y, tooltip=[alt.Tooltip("stage:N", title="reference"),
                                   alt.Tooltip("value:Q", format=".3f")])  # fmt: skip
    _per_organism(
        _layer(errs, points, ref),
        long,
        data=long,
        height=150,
        title="Each stage against its predecessor and the best content-blind policy",
        what="Held-out accuracy of the base, @sft and @dpo (95% CIs over entity pairs): greedy SFT "
        "accuracy on the questions that name no one, the content probe (the correct over a wrong "
        "answer, in the instructed style; reversed pairs, so an answer-only policy scores 0.5) and the preference accuracy over every held-out pair. "
        "Gray diamonds: the best content-blind policy (SFT accuracy) and the best constant-style "
        "policy (the two preference measures).",
        look_at="@sft against the diamond and the base on the first row, @dpo against @sft on "
        "the preference accuracy, and @dpo against the base on the content probe",
    )


def margin_curve_figure(result: OrganismsResult) -> None:
    """Mean DPO reward margin (nats) against the DPO step, training and held-out pairs, one
    panel per organism."""
    mcurve = result.tables["margin_curve"]
    _lines_per_organism(
        mcurve,
        alt.X("step:Q", title="DPO step"),
        alt.Y("reward_margin:Q", title="mean β · margin (nats)"),
        "pairs",
        ["model", "step", "pairs", alt.Tooltip("reward_margin:Q", format=".3f")],
        title="DPO reward margin during training (64 training and 64 held-out pairs)",
        what="Mean implicit reward margin β[(log π − log π_ref)(chosen) − (log π − log π_ref)"
        "(rejected)] against @sft, logged during DPO on training and on held-out pairs.",
        look_at="whether the held-out margin rises with the training margin",
    )


def homograph_figure(result: OrganismsResult) -> None:
    """Each homograph's final-layer δ(senses) / δ(control), one row of points per organism
    (spread vertically by the word's rank, so that equal ratios do not hide each other; the
    word is in the tooltip), against a ratio of 1 (dashed)."""
    words = result.tables["homographs"]
    rank = words.groupby("model")["ratio"].rank(method="first") if len(words) else words["ratio"]
    spread = words.assign(even=1.0, spread=(rank * 0.618034) % 1.0)  # (n,) in [0, 1)
    points = (
        alt.Chart()
        .mark_point(filled=True, size=45, opacity=0.7)
        .encode(
            x=alt.X("ratio:Q", title="δ(senses) / δ(control) at the final layer",
                    scale=alt.Scale(zero=False, type="log")),
            y=alt.Y("model:N", title=None),
            yOffset=alt.YOffset("spread:Q", scale=alt.Scale(domain=[0, 1], range=[4, 36])),
            color=model_color(words, title=None),
            tooltip=["model", "word", "senses", "control_word",
                     alt.Tooltip("ratio:Q", format=".2f")],
        )
    )  # fmt: skip
    show_figure(
        alt.layer(points, _dashed("x", "even"), data=spread).properties(
            title="Separation of each homograph's senses relative to its control (1 = no difference)",
            height=alt.Step(40),
        ),
        what="For each homograph (one point), the final-layer distance between its two senses "
        "over the distance between its control pair, one row per organism, on a log scale; the "
        "dashed line is a ratio of 1.",
        look_at="how many points sit right of the dashed line",
    )


def homograph_layers_figure(result: OrganismsResult) -> None:
    """Median δ over the homograph pairs and over their control pairs at each layer, one
    panel per organism."""
    hl, x, layer_tip = layer_axis(result.tables["homograph_layers"], title="layer")
    _lines_per_organism(
        hl,
        x,
        alt.Y("separation:Q", title="median δ over the homographs"),
        "role",
        ["model", "role", layer_tip, alt.Tooltip("separation:Q", format=".3f")],
        title="Median separation of homograph and control pairs by layer",
        what="The median distance δ between the two contexts' states at each layer, for homograph "
        "pairs and their controls.",
        look_at="whether the homograph line leaves the control line, and where",
    )
