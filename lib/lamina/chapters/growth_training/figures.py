"""The Growth Training chapter's importance-profile figure and its computed sentences: every
title and sentence that states a finding is built from the results and names the model."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from lamina.book.chapter import fmt_value

__all__ = ["correlation_title", "importance_profiles_figure", "source_verdicts"]


def correlation_title(corr: pd.DataFrame, reference: str) -> str:
    """ "Skip-ablation importance by relative depth", plus the Spearman rho of each other
    source's mapped order with ``reference``'s (as measured; none when there is no pair)."""
    base = "Skip-ablation importance by relative depth"
    rows = corr[corr["a"] == reference] if len(corr) else corr
    if not len(rows):
        return base
    parts = [f"{r.b} {fmt_value(r.rho, '.2f')}" for r in rows.itertuples()]
    n = int(rows["n_layers"].iloc[0])
    return f"{base}; Spearman ρ with {reference} over {n} layers: " + ", ".join(parts)


def importance_profiles_figure(
    profiles: pd.DataFrame, corr: pd.DataFrame, reference: str
) -> alt.Chart:
    """delta_pct (symlog axis) against relative depth (layer + 0.5) / n_layers, one line per
    source at its own depth resolution; the title carries the rank correlations."""
    data = profiles.assign(
        label=lambda d: d["source"] + " (" + d["n_layers"].astype(str) + " layers)"
    )
    return (
        alt.Chart(data, title=correlation_title(corr, reference))
        .mark_line(point=True)
        .encode(
            x=alt.X(
                "depth:Q",
                title="relative depth (layer + 0.5) / layers",
                scale=alt.Scale(domain=[0, 1]),
            ),
            y=alt.Y(
                "delta_pct:Q",
                title="perplexity change when skipped (%, symlog)",
                scale=alt.Scale(type="symlog"),
            ),
            color=alt.Color("label:N", title="importance of"),
            tooltip=["source", "layer", "n_layers", alt.Tooltip("delta_pct:Q", format=".3g")],
        )
        .properties(width=480, height=260)
    )


def source_verdicts(claims: pd.DataFrame, corr: pd.DataFrame, reference: str) -> str:
    """Markdown list, one item per real-model order (claim ids ``G-loss-<label>``): the
    uniform / growth loss ratio at equal steps with its 95% CI, p and verdict, and the rank
    correlation of that model's mapped importance with ``reference``'s. "" when none ran."""
    rows = claims[claims["claim_id"].str.startswith("G-loss-") & (claims["stage"] != "")]
    lines = []
    for r in rows.itertuples():
        label = str(r.stage).removeprefix("importance from ")
        match = corr[(corr["a"] == reference) & (corr["b"] == label)] if len(corr) else corr
        rho = f"; its order's Spearman ρ with {reference}: " + fmt_value(
            float(match["rho"].iloc[0]) if len(match) else np.nan, ".2f"
        )
        lines.append(
            f"- importance from **{label}**: uniform / growth ({label} order) loss "
            f"{fmt_value(r.measured)}× [{fmt_value(r.ci_low)}, {fmt_value(r.ci_high)}] "
            f"(p {fmt_value(r.p, '.2g')}, {int(r.effect_size)} seeds): **{r.verdict}**{rho}."
        )
    return "\n".join(lines)
