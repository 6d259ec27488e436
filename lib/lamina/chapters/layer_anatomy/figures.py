"""The layer-anatomy chapter's figures, glue and tables, built from a run's results, so the
notebook only narrates (issue 15 item 4). Every title and caption is computed from the
results or neutral; each function takes one model's slice of the tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from lamina.book.chapter import fmt_value, glue_claim_strings
from lamina.book.charts import facet
from lamina.book.glue import glue
from lamina.chapters.layer_anatomy.claims import mapped_layers
from lamina.chapters.layer_anatomy.nulls import PAPER_CORE
from lamina.chapters.results import ExperimentResult

__all__ = [
    "PAPER_PPL",
    "Figure",
    "delta_figure",
    "glue_anatomy",
    "importance_figure",
    "model_slice",
    "perplexity_sentence",
    "predictability_figure",
    "recovery_figure",
    "replacement_figure",
    "robustness_figure",
    "structure_figure",
    "verdict_matrix",
]

PAPER_PPL = 22.6  # paper 3's clean SmolLM2-135M perplexity (its evaluation text, not ours)


@dataclass
class Figure:
    """A chart and its caption parts (``lamina.book.charts.show_figure`` arguments)."""

    chart: Any
    what: str
    look_at: str
    claim_id: str | None = None


def model_slice(
    result: ExperimentResult, model: str
) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """(tables, claims indexed by claim_id) of one model of a (possibly multi-model) run."""
    tables = {k: t[t["model"] == model] for k, t in result.tables.items() if "model" in t}
    claims = result.claims[result.claims["model"] == model].set_index("claim_id")
    return tables, claims


def perplexity_sentence(ppl: pd.Series, model: str) -> str:
    """A neutral sentence that puts our clean perplexity beside the paper's (different text)."""
    ratio = ppl["ppl"] / PAPER_PPL
    return (
        f"{model}: clean perplexity {ppl['ppl']:.2f} (95% CI over documents "
        f"[{fmt_value(ppl['ci_low'], '.2f')}, {fmt_value(ppl['ci_high'], '.2f')}]) on "
        f"{int(ppl['n_tokens']):,} tokens from {int(ppl['n_documents'])} held-out documents; "
        f"paper 3 reports about {PAPER_PPL} for SmolLM2-135M on its own evaluation text, and "
        f"ours is {ratio:.2f} times that."
    )


def glue_anatomy(result: ExperimentResult, prefix: str = "anat") -> str:
    """Glue the lead (first) model's claims (``lamina.book.chapter.glue_claim_strings``) and
    numbers for the prose: <prefix>_model, _ppl, _ppl_ci, _tokens, _n_layers, _core_layers,
    _noise_within, _ppl_sentence. Returns the lead model's name."""
    lead = result.models[0]
    tables, claims = model_slice(result, lead)
    glue_claim_strings(prefix, claims, detail=True)
    ppl = tables["perplexity"].iloc[0]
    n_layers = int(tables["structure"]["layer"].max()) + 1
    core = mapped_layers(PAPER_CORE, n_layers, result.config.depth_mapping)  # type: ignore[attr-defined]
    noise = tables["sweep"].query("surgery == 'noise'")
    tol = result.config.tolerance_pct  # type: ignore[attr-defined]
    within = (noise["delta_pct"] < tol).mean() if len(noise) else np.nan
    glue(f"{prefix}_model", lead)
    glue(f"{prefix}_ppl", f"{ppl['ppl']:.2f}")
    glue(
        f"{prefix}_ppl_ci",
        f"[{fmt_value(ppl['ci_low'], '.2f')}, {fmt_value(ppl['ci_high'], '.2f')}]",
    )
    glue(f"{prefix}_tokens", f"{int(ppl['n_tokens']):,}")
    glue(f"{prefix}_n_layers", str(n_layers))
    glue(f"{prefix}_core_layers", "not testable" if core is None else ", ".join(map(str, core)))
    glue(f"{prefix}_noise_within", fmt_value(within, ".0%"))
    glue(f"{prefix}_ppl_sentence", perplexity_sentence(ppl, lead))
    return lead


def importance_figure(sweep: pd.DataFrame, model: str) -> Figure:
    """Log-scale |delta_pct| per layer for skip and interpolate, coloured by sign."""
    imp = sweep[sweep["surgery"].isin(["skip", "interpolate"])].copy()
    imp["sign"] = np.where(imp["delta_pct"] > 0, "ppl rises", "ppl falls (anti-layer candidate)")
    imp["size"] = imp["delta_pct"].abs().clip(lower=1e-3)  # log scale: |change|, sign by colour
    imp["floor"] = 10 ** np.floor(np.log10(imp["size"].min()))  # bars rise from here, not 0
    skip = imp[imp["surgery"] == "skip"]
    top = skip.loc[skip["delta_pct"].idxmax()]
    share = top["delta_pct"] / skip["delta_pct"].clip(lower=0).sum()
    title = (
        f"{model}: skipping layer {int(top['layer'])} costs most, "
        f"{share:.0%} of all layers' summed damage"
    )
    bars = (
        alt.Chart(imp)
        .mark_bar()
        .encode(
            x=alt.X("layer:O", title="layer"),
            y=alt.Y(
                "size:Q", title="|PPL change| when ablated (%, log)", scale=alt.Scale(type="log")
            ),
            y2="floor:Q",
            color=alt.Color("sign:N", title=None, scale=alt.Scale(range=["#4c78a8", "#e45756"])),
            tooltip=[
                "surgery",
                "layer",
                alt.Tooltip("delta_pct:Q", format=".3g"),
                alt.Tooltip("delta_ci_low:Q", format=".3g"),
                alt.Tooltip("delta_ci_high:Q", format=".3g"),
            ],  # fmt: skip
        )
    )
    return Figure(
        facet(bars, "surgery", imp["surgery"], height=220, title=title),
        f"{model}: the change in perplexity when each layer is skipped or interpolated, on a "
        "log scale; colour gives its sign (a fall marks an anti-layer candidate).",
        "how many decades separate the tallest and the shortest bars, and where the tallest "
        "sit in depth",
        "P3-range",
    )


def robustness_figure(sweep: pd.DataFrame, model: str, order: list[str]) -> Figure:
    """Heatmap of delta_pct by surgery and layer (log10 ppl ratio as colour)."""
    heat = sweep.assign(
        log_ppl_ratio=np.log10(1 + sweep["delta_pct"] / 100),
        label=[f"{v:.0f}" if abs(v) >= 10 else f"{v:.1f}" for v in sweep["delta_pct"]],
    )
    median = heat.groupby("surgery")["delta_pct"].median().sort_values()
    title = (
        f"{model}: '{median.index[0]}' is the gentlest edit, '{median.index[-1]}' the most "
        "damaging (median over layers)"
    )
    base = alt.Chart(heat, title=title).encode(
        x=alt.X("layer:O", title="layer"), y=alt.Y("surgery:N", title="strategy", sort=order)
    )
    color = alt.Color("log_ppl_ratio:Q", title="log10(ppl / clean)",
                      scale=alt.Scale(scheme="redblue", reverse=True, domainMid=0))  # fmt: skip
    chart = (
        base.mark_rect().encode(color=color, tooltip=["surgery", "layer", "delta_pct"])
        + base.mark_text(fontSize=7).encode(text="label:N")
    ).properties(width=560, height=200)
    return Figure(
        chart,
        f"{model}: the perplexity change (%, printed in each cell) when one layer is edited by "
        "each strategy; red marks damage, blue improvement.",
        "which rows stay near zero across every layer",
        "P3-scaling",
    )


def predictability_figure(pred: pd.DataFrame, model: str) -> Figure:
    """Leave-one-layer-out R^2 per matrix type, raw entries and layer summaries side by side."""
    chart = (
        alt.Chart(pred, title=f"{model}: how well a layer's weights follow from its depth")
        .mark_bar()
        .encode(
            x=alt.X("matrix:N", title="matrix type"),
            xOffset=alt.XOffset("target:N"),
            y=alt.Y("r2:Q", title="leave-one-layer-out R²"),
            color=alt.Color("target:N", title="target"),
            tooltip=["matrix", "target", alt.Tooltip("r2:Q", format=".3f")],
        )
    )
    return Figure(
        chart,
        f"{model}: the leave-one-layer-out R² of a ridge fit on depth of each matrix type's raw "
        "entries and of its per-layer summaries (norms, spectra).",
        "the two targets' bars against the paper's R² = 0.91",
        "P3-R2",
    )


def delta_figure(delta: pd.DataFrame, model: str, gap_ci: tuple[float, float]) -> Figure:
    """Measured delta correlation per layer pair against the independence null. ``gap_ci``:
    the 95% CI of the mean gap (measured - null, P3-delta-structure); the title says the points
    depart from the null only when that CI excludes 0 (an undefined CI reads "sit on")."""
    lo_ci, hi_ci = gap_ci
    word = "depart from" if (lo_ci > 0 or hi_ci < 0) else "sit on"
    lo = float(min(delta["corr"].min(), delta["corr_null"].min()))
    hi = float(max(delta["corr"].max(), delta["corr_null"].max()))
    chart = alt.Chart(
        delta, title=f"{model}: delta correlations {word} what independent layers give"
    ).mark_circle(size=40).encode(
        x=alt.X(
            "corr_null:Q", title="expected for independent layers", scale=alt.Scale(zero=False)
        ),
        y=alt.Y("corr:Q", title="corr(ΔW(l), ΔW(l+1))", scale=alt.Scale(zero=False)),
        color=alt.Color("matrix:N"),
        tooltip=["matrix", "layer", alt.Tooltip("corr:Q", format=".3f")],
    ) + alt.Chart(pd.DataFrame({"x": [lo, hi]})).mark_line(strokeDash=[4, 4], color="gray").encode(
        x="x:Q", y="x:Q"
    )
    return Figure(
        chart,
        f"{model}: each point is one layer pair's delta correlation against the value "
        "independent layers would give; the dashed line is equality.",
        "how far the points sit from the dashed line",
        "P3-delta-structure",
    )


def replacement_figure(rep: pd.DataFrame, model: str) -> Figure:
    """Perplexity with layers 0..k-1 replaced by their ridge predictions."""
    chart = (
        alt.Chart(rep, title=f"{model}: substituting predicted weights for more layers")
        .mark_line(point=True)
        .encode(
            x=alt.X("k:Q", title="layers 0..k−1 replaced by ridge predictions"),
            y=alt.Y("ppl:Q", title="perplexity (log scale)", scale=alt.Scale(type="log")),
        )
    )
    return Figure(
        chart,
        f"{model}: perplexity when layers 0..k-1 are all replaced by their ridge predictions.",
        "how fast the curve rises with k",
        "P3-accumulation",
    )


def recovery_figure(recovery: pd.DataFrame, sweep: pd.DataFrame, model: str) -> Figure:
    """Steps to recover against skip importance, one point per fine-tuned layer."""
    skip = sweep[sweep["surgery"] == "skip"][["layer", "delta_pct"]]
    rec = recovery.merge(skip, on="layer")
    rec["status"] = np.where(rec["recovered"], "recovered", "not within budget")
    rec["size"] = rec["delta_pct"].abs().clip(lower=1e-3)
    chart = (
        alt.Chart(rec, title=f"{model}: recovery steps against layer importance")
        .mark_circle(size=70)
        .encode(
            x=alt.X(
                "size:Q",
                title="importance: |PPL change| when skipped (%, log)",
                scale=alt.Scale(type="log"),
            ),  # fmt: skip
            y=alt.Y("steps_ranked:Q", title="fine-tuning steps to recover"),
            color=alt.Color("status:N", title=None),
            tooltip=["layer", "perturbed_ppl", "final_ppl", "steps_to_recover"],
        )
    )
    return Figure(
        chart,
        f"{model}: each point is a layer ({len(rec)} fine-tuned): its importance (skip "
        "ablation) against the fine-tuning steps it took to recover from noise.",
        "whether the points rise from left to right",
        "P3-recovery",
    )


def structure_figure(structure: pd.DataFrame, model: str) -> Figure:
    """Frobenius norm, stable rank and effective rank of each matrix type by depth."""
    long = structure.melt(
        id_vars=["model", "layer", "matrix"],
        value_vars=["frobenius", "stable_rank", "effective_rank"],
    )
    lines = alt.Chart(long).mark_line(point=True).encode(
        x=alt.X("layer:O"), y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=False)),
        color="matrix:N",
    )  # fmt: skip
    return Figure(
        facet(
            lines,
            "variable",
            long["variable"],
            height=160,
            title=f"{model}: weight norms and ranks by depth",
        ).resolve_scale(y="independent"),  # fmt: skip
        f"{model}: the Frobenius norm, stable rank and effective rank of each weight matrix "
        "type at each layer.",
        "any trend or break with depth",
    )


def verdict_matrix(claims: pd.DataFrame) -> pd.DataFrame:
    """claim_id x model table of "verdict (measured)" strings, claims in table order."""
    cell = claims["verdict"] + " (" + claims["measured"].map(fmt_value) + ")"
    out = claims.assign(cell=cell).pivot_table(
        index="claim_id", columns="model", values="cell", aggfunc="first", sort=False
    )
    return out[list(dict.fromkeys(claims["model"]))]
