# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Layer anatomy: are all layers equal?
#
# :::{admonition} The claims (paper 3, arXiv 2603.19348)
# "(1) Layer weights follow strong mathematical regularity (R2 = 0.91) with a universal
# oscillatory delta pattern (correlation ~= -0.50), yet predicted weights cause catastrophic
# failure due to nonlinear error accumulation. (2) Layer importance spans a 10^7 range, from a
# critical core (L8-11, up to +63,419% PPL degradation) to anti-layers (L14, L17) whose removal
# improves performance. (3) Recovery speed correlates with layer importance, indicating
# differential training requirements. (4) Only weight scaling (alpha = 0.9) preserves model
# quality among five tested manipulation strategies."
# :::
#
# Paper 3 studied SmolLM2-135M (30 layers); no code is public. We run its five diagnostics
# on a 12-layer organism by default (any causal LM by name where reachable). Layer positions
# are compared by relative depth l / (L - 1): the paper's core L8-11 is depth 0.28-0.38 and
# its anti-layers L14, L17 are depth 0.48 and 0.59 (reimplementation choice).

# %% tags=["parameters", "hide-input"]
model = "organism-llama"  # any spec lamina.load_model accepts (organism, hub name, folder)
corpus = None  # organism whose held-out text is used; None: the model's own (or organism-llama)
surgeries = ["skip", "interpolate", "scale", "noise", "reinit", "predicted"]  # to sweep
noise_scale = 0.5  # relative Gaussian noise (sd / weight RMS) of the "noise" surgery
recovery_noise = 2.0  # relative noise of the recovery perturbation (paper: 0.5, see below)
alpha = 0.9  # scaling factor of the "scale" surgery
recovery_budget = 24  # fine-tuning steps allowed for recovery after noise
n_tokens = 20480  # held-out tokens for perplexity and the skip/interpolate sweep
seed = 0  # seeds noise, re-initialisation, bootstraps and recovery batches
quick = False  # tiny budgets, for CI

# %% tags=["hide-input"]
import altair as alt
import numpy as np
import pandas as pd
from IPython.display import HTML, display

from lamina.book import glue, setup_altair
from lamina.book.chapter import fmt_value, glue_claim_strings
from lamina.book.charts import caption_html, facet, show_figure
from lamina.chapters.layer_anatomy import AnatomyConfig, run_anatomy
from lamina.chapters.layer_anatomy.measures import core_layers

setup_altair()
config = AnatomyConfig(
    model=model,
    corpus=corpus,
    surgeries=surgeries,
    noise_scale=noise_scale,
    recovery_noise=recovery_noise,
    alpha=alpha,
    recovery_budget=recovery_budget,
    n_tokens=n_tokens,
    seed=seed,
    quick=quick,
)
result = run_anatomy(config)
paths = result.write()
T = result.tables
claims = result.claims.set_index("claim_id")

glue_claim_strings("anat", claims, detail=True)
ppl = T["perplexity"].iloc[0]
glue("anat_ppl", f"{ppl['ppl']:.2f}")
glue("anat_ppl_ci", f"[{ppl['ci_low']:.2f}, {ppl['ci_high']:.2f}]")
glue("anat_tokens", f"{int(ppl['n_tokens']):,}")
n_layers = int(T["structure"]["layer"].max()) + 1
glue("anat_n_layers", str(n_layers))
glue("anat_core_layers", ", ".join(map(str, core_layers(n_layers))))
noise_rows = T["sweep"].query("surgery == 'noise'")
within = (noise_rows["delta_pct"] < config.tolerance_pct).mean() if len(noise_rows) else np.nan
glue("anat_noise_within", fmt_value(within, ".0%"))
print("\n".join(result.notes))

# %% [markdown]
# ## Method
# Perplexity is measured on held-out text ({glue:text}`anat_tokens` predicted tokens) with a
# 95% BCa bootstrap CI over sequences: the clean model scores {glue:text}`anat_ppl`
# {glue:text}`anat_ppl_ci` on its {glue:text}`anat_n_layers` layers. Each surgery
# (`lamina.anatomy`) edits one block inside a context manager that restores it bit-exactly;
# the sweep caches the residual stream entering each block, so ablating layer l reruns only
# the blocks after it. The skip and interpolate sweeps use all held-out tokens; the other
# strategies use a subset (`robustness_tokens`) to fit the time budget. An ablation's effect
# is Δ% = 100 (ppl_ablated / ppl_clean − 1) with a paired bootstrap CI.

# %% [markdown]
# ## (2) Importance: how unequal are the layers?

# %% tags=["hide-input"]
sweep = T["sweep"]
imp = sweep[sweep["surgery"].isin(["skip", "interpolate"])].copy()
imp["sign"] = np.where(imp["delta_pct"] > 0, "ppl rises", "ppl falls (anti-layer candidate)")
imp["size"] = imp["delta_pct"].abs().clip(lower=1e-3)  # log scale: |change|, sign by colour
imp["floor"] = 10 ** np.floor(np.log10(imp["size"].min()))  # bars rise from here, not from 0
skip = imp[imp["surgery"] == "skip"]
top = skip.loc[skip["delta_pct"].idxmax()]
share = top["delta_pct"] / skip["delta_pct"].clip(lower=0).sum()
title = f"Skipping layer {int(top['layer'])} costs most: {share:.0%} of all layers' summed damage"
bars = (
    alt.Chart(imp)
    .mark_bar()
    .encode(
        x=alt.X("layer:O", title="layer"),
        y=alt.Y(
            "size:Q",
            title="|PPL change| when ablated (%, log scale)",
            scale=alt.Scale(type="log"),
        ),
        y2="floor:Q",
        color=alt.Color("sign:N", title=None, scale=alt.Scale(range=["#4c78a8", "#e45756"])),
        tooltip=[
            "surgery",
            "layer",
            alt.Tooltip("delta_pct:Q", format=".3g"),
            alt.Tooltip("delta_ci_low:Q", format=".3g"),
            alt.Tooltip("delta_ci_high:Q", format=".3g"),
        ],
    )
)
show_figure(
    facet(bars, "surgery", imp["surgery"], height=220, title=title),
    what="The change in perplexity when each layer is skipped or interpolated, on a log scale; "
    "colour gives its sign (a fall marks an anti-layer candidate).",
    look_at="how many decades separate the tallest and the shortest bars, and where the tallest "
    "sit in depth",
    claims=claims,
    claim_id="P3-range",
)

# %% [markdown]
# :::{admonition} Verdicts: importance
# - **10^7 range**: log10(max/min Δ%) over the {glue:text}`anat_P3_range_effect` layers whose
#   95% CI excludes 0 = {glue:text}`anat_P3_range_measured`, 95% CI
#   {glue:text}`anat_P3_range_ci`: **{glue:text}`anat_P3_range_verdict`** (reproduced = within
#   one decade of 7; a layer whose change is indistinguishable from 0 cannot be the divisor).
# - **Critical core** (L8-11 of 30, mapped by depth span to layers
#   {glue:text}`anat_core_layers`; the anti-layers use the same mapping): a share
#   {glue:text}`anat_P3_core_measured` {glue:text}`anat_P3_core_ci` of the equally many most
#   important layers lies in it (most important layer: {glue:text}`anat_P3_core_effect`;
#   p = {glue:text}`anat_P3_core_p` that a random layer order does as well, exact permutation
#   null): **{glue:text}`anat_P3_core_verdict`**.
# - **Up to +63,419%**: the largest Δ% is {glue:text}`anat_P3_core_max_measured`%
#   {glue:text}`anat_P3_core_max_ci`: **{glue:text}`anat_P3_core_max_verdict`**.
# - **Anti-layers**: {glue:text}`anat_P3_anti_measured` layers whose removal lowers PPL
#   significantly ({glue:text}`anat_P3_anti_detail`; smallest BH q {glue:text}`anat_P3_anti_p`):
#   **{glue:text}`anat_P3_anti_verdict`**.
# :::
#
# The range statistic divides by the smallest positive Δ%, so it is governed by the least
# important layer's near-zero change; its bootstrap CI shows how unstable that is.

# %% [markdown]
# ## (4) Manipulation robustness: which edits does a layer survive?

# %% tags=["hide-input"]
heat = sweep.assign(
    log_ppl_ratio=np.log10(1 + sweep["delta_pct"] / 100),
    label=[f"{v:.0f}" if abs(v) >= 10 else f"{v:.1f}" for v in sweep["delta_pct"]],
)
median = heat.groupby("surgery")["delta_pct"].median().sort_values()
title = f"'{median.index[0]}' is the gentlest edit, '{median.index[-1]}' the most damaging"
base = alt.Chart(heat, title=title).encode(
    x=alt.X("layer:O", title="layer"),
    y=alt.Y("surgery:N", title="strategy", sort=config.surgeries),
)
show_figure(
    (
        base.mark_rect().encode(
            color=alt.Color(
                "log_ppl_ratio:Q",
                title="log10(ppl / clean ppl)",
                scale=alt.Scale(scheme="redblue", reverse=True, domainMid=0),
            ),
            tooltip=["surgery", "layer", alt.Tooltip("delta_pct:Q", format=".3g")],
        )
        + base.mark_text(fontSize=8).encode(text="label:N")
    ).properties(width=480, height=200),
    what="The perplexity change (%, printed in each cell) when one layer is edited by each "
    "strategy; red marks damage, blue improvement.",
    look_at="which rows stay near zero across every layer",
    claims=claims,
    claim_id="P3-scaling",
)

# %% tags=["hide-input"]
table = sweep.pivot_table(index="surgery", columns="layer", values="delta_pct")
table.round(2)

# %% [markdown]
# :::{admonition} Verdict: only scaling preserves quality
# The worst-layer Δ% under scaling is {glue:text}`anat_P3_scaling_measured`%;
# {glue:text}`anat_P3_scaling_detail`: **{glue:text}`anat_P3_scaling_verdict`**.
# "Preserves" means a PPL increase below 5% at every layer (our threshold).
# :::

# %% [markdown]
# ## (1) Weight predictability across depth

# %% tags=["hide-input"]
pred = T.get("predictability")
if pred is not None:
    display(
        alt.Chart(pred, title="How well a layer's weights follow from its depth, two targets")
        .mark_bar()
        .encode(
            x=alt.X("matrix:N", title="matrix type"),
            xOffset=alt.XOffset("target:N"),
            y=alt.Y("r2:Q", title="leave-one-layer-out R²"),
            color=alt.Color("target:N", title="target"),
            tooltip=["matrix", "target", alt.Tooltip("r2:Q", format=".3f")],
        )
    )
    display(
        HTML(
            caption_html(
                "The leave-one-layer-out R² of a ridge fit of each weight matrix type on depth.",
                "the bars against the paper's R² = 0.91",
                claims=claims,
                claim_id="P3-R2",
            )
        )
    )
    delta = T["delta"]
    gap = claims.loc["P3-delta-structure", "measured"]
    title = (
        "Delta correlations sit on what independent layers would give"
        if abs(gap) < 0.05
        else "Delta correlations depart from what independent layers would give"
    )
    display(
        alt.Chart(delta, title=title)
        .mark_circle(size=40)
        .encode(
            x=alt.X(
                "corr_null:Q", title="expected for independent layers", scale=alt.Scale(zero=False)
            ),
            y=alt.Y(
                "corr:Q", title="corr(W(l+1) − W(l), W(l+2) − W(l+1))", scale=alt.Scale(zero=False)
            ),
            color=alt.Color("matrix:N"),
            tooltip=["matrix", "layer", alt.Tooltip("corr:Q", format=".3f")],
        )
        + alt.Chart(pd.DataFrame({"x": [-0.6, -0.4]}))
        .mark_line(strokeDash=[4, 4], color="gray")
        .encode(x="x:Q", y="x:Q")
    )
    display(
        HTML(
            caption_html(
                "Each point is one layer pair's delta correlation against the value independent "
                "layers would give; the dashed line is equality.",
                "how far the points sit from the dashed line",
                claims=claims,
                claim_id="P3-delta-structure",
            )
        )
    )
    rep = T["replacement"]
    display(
        alt.Chart(rep, title="Substituting predicted weights for more layers")
        .mark_line(point=True)
        .encode(
            x=alt.X("k:Q", title="layers 0..k−1 replaced by ridge predictions"),
            y=alt.Y("ppl:Q", title="perplexity (log scale)", scale=alt.Scale(type="log")),
        )
    )
    display(
        HTML(
            caption_html(
                "Perplexity when layers 0..k-1 are all replaced by their ridge predictions.",
                "how fast the curve rises with k",
                claims=claims,
                claim_id="P3-accumulation",
            )
        )
    )

# %% [markdown]
# Under independence, corr(W(l+1) − W(l), W(l+2) − W(l+1)) is −s²(l+1) / √((s²(l) + s²(l+1))
# (s²(l+1) + s²(l+2))), which is exactly −0.5 when the layers have equal variance: a value of
# −0.5 is the no-structure expectation, not evidence of oscillation. The second row tests the
# measured correlations against that null, pair by pair.
#
# :::{admonition} Verdicts: predictability
# - **R² = 0.91**, two readings side by side (the paper's target is not public). Raw weight
#   entries: mean leave-one-layer-out R² {glue:text}`anat_P3_R2_measured`
#   {glue:text}`anat_P3_R2_ci` (permutation p {glue:text}`anat_P3_R2_p`; median under the
#   null {glue:text}`anat_P3_R2_effect`): **{glue:text}`anat_P3_R2_verdict`**. Per-layer
#   summaries (log norms and spectra, z-scored): {glue:text}`anat_P3_R2_summary_measured`
#   {glue:text}`anat_P3_R2_summary_ci` (permutation p {glue:text}`anat_P3_R2_summary_p`;
#   null median {glue:text}`anat_P3_R2_summary_effect`):
#   **{glue:text}`anat_P3_R2_summary_verdict`**.
# - **Delta correlation ≈ −0.50**: {glue:text}`anat_P3_delta_measured`
#   {glue:text}`anat_P3_delta_ci`: **{glue:text}`anat_P3_delta_verdict`** (−0.5 is what
#   independent layers give, so the value counts only when the structure test below passes).
# - **…as oscillatory structure**: measured − null = {glue:text}`anat_P3_delta_structure_measured`
#   {glue:text}`anat_P3_delta_structure_ci` (Wilcoxon p {glue:text}`anat_P3_delta_structure_p`):
#   **{glue:text}`anat_P3_delta_structure_verdict`**.
# - **Predicted weights are catastrophic**: median single-layer Δ%
#   {glue:text}`anat_P3_predicted_measured` {glue:text}`anat_P3_predicted_ci` (one-sided
#   Wilcoxon p over layers that the PPL rise exceeds the catastrophic threshold:
#   {glue:text}`anat_P3_predicted_p`):
#   **{glue:text}`anat_P3_predicted_verdict`**.
# - **Nonlinear accumulation**: joint / summed single-layer log-PPL increase
#   {glue:text}`anat_P3_accumulation_measured`: **{glue:text}`anat_P3_accumulation_verdict`**.
# :::

# %% [markdown]
# ## (3) Recovery speed

# %% tags=["hide-input"]
rec = T["recovery"].merge(sweep[sweep["surgery"] == "skip"][["layer", "delta_pct"]], on="layer")
rec["status"] = np.where(rec["recovered"], "recovered", "not within budget")
rec["size"] = rec["delta_pct"].abs().clip(lower=1e-3)
show_figure(
    alt.Chart(rec, title="Recovery steps against layer importance")
    .mark_circle(size=70)
    .encode(
        x=alt.X(
            "size:Q",
            title="importance: |PPL change| when skipped (%, log scale)",
            scale=alt.Scale(type="log"),
        ),
        y=alt.Y("steps_ranked:Q", title="fine-tuning steps to recover"),
        color=alt.Color("status:N", title=None),
        tooltip=["layer", "perturbed_ppl", "final_ppl", "steps_to_recover"],
    ),
    what="Each point is a layer: its importance (skip ablation) against the fine-tuning steps "
    "it took to recover from noise.",
    look_at="whether the points rise from left to right",
    claims=claims,
    claim_id="P3-recovery",
)

# %% [markdown]
# :::{admonition} Verdict: recovery correlates with importance
# Partial Spearman ρ (importance vs steps to recover, controlling for the perturbed / clean
# PPL ratio) = {glue:text}`anat_P3_recovery_measured`, 95% CI {glue:text}`anat_P3_recovery_ci`,
# p = {glue:text}`anat_P3_recovery_p`: **{glue:text}`anat_P3_recovery_verdict`** (a negative ρ
# is never a partial reproduction). Layers that do not recover within the budget are ranked
# after all that do.
# :::
#
# Why partial: importance also predicts how much the same noise hurts before any fine-tuning,
# and a layer the noise leaves within tolerance needs 0 steps, so part of a plain correlation
# is the perturbation's size, not the speed of learning. The plain ρ is
# {glue:text}`anat_P3_recovery_effect`.
#
# The paper perturbs with 50% relative noise. At that scale {glue:text}`anat_noise_within` of
# this model's layers stay within the 5% tolerance already (the "noise" row of the heatmap):
# there is nothing to recover from, so recovery uses `recovery_noise` (reimplementation choice).

# %% [markdown]
# ## Structure

# %% tags=["hide-input"]
struct = T["structure"].melt(
    id_vars=["model", "layer", "matrix"], value_vars=["frobenius", "stable_rank", "effective_rank"]
)
lines = (
    alt.Chart(struct)
    .mark_line(point=True)
    .encode(
        x=alt.X("layer:O"),
        y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=False)),
        color="matrix:N",
    )
)
show_figure(
    facet(
        lines, "variable", struct["variable"], height=160, title="Weight norms and ranks by depth"
    ).resolve_scale(y="independent"),
    what="The Frobenius norm, stable rank and effective rank of each weight matrix type at each "
    "layer.",
    look_at="any trend or break with depth",
)

# %% [markdown]
# ## Scorecard

# %% tags=["hide-input"]
result.claims[
    [
        "claim_id",
        "claim",
        "paper_value",
        "measured",
        "ci_low",
        "ci_high",
        "p",
        "verdict",
        "effect_name",
    ]
]

# %% [markdown]
# ## Caveats
# - The default model is a 12-layer, d = 128 organism trained briefly on a small corpus, not
#   SmolLM2-135M; the paper's layer numbers are compared by relative depth only.
# - Thresholds ("catastrophic" = PPL +100%, "preserves" = below +5% at every layer, R² within
#   0.1, orders of magnitude within one decade) are ours; the paper states none.
# - Recovery uses a small fine-tuning budget; censored layers limit the correlation's power.
# - Which tensors a surgery touches (matrices only, or also norms) is a reimplementation choice
#   (`lamina.anatomy.surgery`).
