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
# Paper 3 studied SmolLM2-135M (30 layers); no code is public. By default we run its five
# diagnostics on `smollm2-135m-instruct`, the paper's own 30-layer architecture (the
# instruction-tuned release, 4-bit GGUF weights dequantised to fp32), then on the 18-layer
# base `gemma-3-270m` (4-bit GGUF as well), then on the 12-layer `organism-llama`, a model
# with a full training history; any causal LM by name where a hub is reachable. On 30 layers
# the paper's layer numbers are tested as stated; on another depth they map to the layers
# whose depth span [l/L, (l+1)/L) overlaps theirs (`depth_mapping="span"`; the notes above
# the figures give each model's mapped layers), or are not testable (`depth_mapping="none"`).
# Each model has its own budget (the notes say which): Gemma's 262,144-token unembedding makes
# each token about five times as costly as on SmolLM2, so it runs no recovery fine-tune.

# %% tags=["parameters", "hide-input"]
model = "default"  # "default": smollm2-135m-instruct, gemma-3-270m, organism-llama; or one spec
corpus = None  # organism whose text is used; None: the model's own (or organism-llama)
plays = (
    None  # "all" plays or the "heldout" ones; None: the budget's (all for a model we did not train)
)
surgeries = ["skip", "interpolate", "scale", "noise", "reinit", "predicted"]  # to sweep
noise_scale = 0.5  # relative Gaussian noise (sd / weight RMS) of the "noise" surgery
recovery_noise = 0.5  # relative noise of the recovery perturbation (paper: 0.5)
alpha = 0.9  # scaling factor of the "scale" surgery
# budgets; None: per model (lamina.chapters.layer_anatomy.config.BUDGETS); values given as
# (pretrained e.g. SmolLM2; gemma-3-270m; organism)
n_tokens = None  # held-out tokens: perplexity and the skip sweep (6,144; 6,144; 20,480)
importance_surgeries = None  # swept on all layers and n_tokens (skip; skip; skip and interpolate)
robustness_tokens = None  # tokens for the other surgeries (6,144; 6,144; 6,144)
recovery_budget = None  # fine-tuning steps allowed for recovery after noise (12; 12; 24)
recovery_layers = None  # layers fine-tuned: a list, a count evenly spaced, or all (30; []; all)
robustness_layers = None  # layers the other surgeries edit: as above (6; 2; all), a count
# adding the layers the claims name (mapped core, anti-layers, layers 0..k_max-1)
k_max = None  # the replacement curve replaces layers 0..k-1, k up to k_max (4; 2; all)
depth_mapping = "span"  # paper layer numbers on another depth: "span" or "none" (not testable)
seed = 0  # seeds the text, noise, re-initialisation, bootstraps and recovery batches
quick = False  # tiny budgets, for CI

# %% tags=["hide-input"]
import altair as alt
import numpy as np

from lamina.book import glue, setup_altair
from lamina.book.chapter import claims_view, glue_claim_strings, show_notes
from lamina.book.charts import facet, show_figure
from lamina.book.tables import show_verdicts
from lamina.chapters.layer_anatomy import AnatomyConfig, run_anatomy

setup_altair()
config = AnatomyConfig.from_globals(globals())
result = run_anatomy(config)
paths = result.write()
claims, T, lead = result.claims, result.tables, result.models[0]
head = claims[claims["model"] == lead]
glue_claim_strings(
    "anat", head.set_index(head["claim_id"].str.removeprefix("p3-anatomy-")), detail=True
)
ppl = T["perplexity"].query("model == @lead").iloc[0]
glue("anat_model", lead)
glue(
    "anat_ppl",
    f"{ppl['ppl']:.2f} [{ppl['ci_low']:.2f}, {ppl['ci_high']:.2f}] on "
    f"{int(ppl['n_tokens']):,} tokens from {int(ppl['n_documents'])} units",
)

# %% [markdown]
# ## Method
# Perplexity is measured on held-out text cut into windows of 128 tokens
# (`lamina.anatomy.heldout.heldout_text`): windows of Shakespeare plays and of held-out
# curriculum documents in turn. On a model lamina did not train every play is unseen text, and
# each window is its own unit of resampling; an organism reads only its corpus's 3 held-out plays,
# whose windows cluster by play. Every 95% CI resamples units, an expanded percentile interval
# that stays honest with few of them (`lamina.anatomy.coverage` checks its coverage by
# simulation). The clean perplexity of {glue:text}`anat_model` is {glue:text}`anat_ppl`
# (paper 3: 22.6 for SmolLM2-135M on its own text).
#
# Each surgery (`lamina.anatomy.surgery`) edits one block inside a context manager that restores
# it exactly; a sweep caches the stream entering each block, so ablating layer l reruns only the
# blocks after it. Skip runs on every layer and every window; predicted weights on the robustness
# layers and every window, then all of them at once; the other edits on the robustness layers
# and the first windows (the notes list both). An ablation's effect is
# Δ% = 100 (ppl_ablated / ppl_clean − 1). The claims are declared in `lamina.anatomy.claims`,
# measured by `lamina.anatomy.measurements` and judged by `lamina.evidence.decide`.

# %% [markdown]
# ## (2) Importance: how unequal are the layers?

# %% tags=["hide-input"]
imp = (
    T["sweep"]
    .query("surgery == 'skip'")
    .assign(
        sign=lambda d: np.where(d["delta_pct"] > 0, "PPL rises", "PPL falls"),
        size=lambda d: d["delta_pct"].abs().clip(lower=1e-3),
    )
)
show_figure(
    facet(
        alt.Chart(imp)
        .mark_bar()
        .encode(
            x=alt.X("layer:O", title="layer"),
            y=alt.Y(
                "size:Q", title="|PPL change| when skipped (%, log)", scale=alt.Scale(type="log")
            ),
            color=alt.Color("sign:N", title=None, scale=alt.Scale(range=["#4c78a8", "#e45756"])),
            tooltip=[
                "layer",
                alt.Tooltip("delta_pct:Q", format=".3g"),
                alt.Tooltip("delta_ci_low:Q", format=".3g"),
                alt.Tooltip("delta_ci_high:Q", format=".3g"),
            ],
        ),
        "model",
        imp["model"],
        height=180,
        title="Perplexity change when each layer is skipped",
    ).resolve_scale(x="independent"),
    what="The change in perplexity when each layer is skipped, on a log scale, one panel per "
    "model; colour gives its sign (a fall marks an anti-layer candidate).",
    look_at="how many decades separate the tallest and the shortest bars, and where the tallest "
    "sit in depth",
    claims=claims,
    claim_id="p3-anatomy-range",
)

# %% [markdown]
# :::{admonition} Verdicts on {glue:text}`anat_model`: importance
# - **10^7 range**: log10(max/min Δ%) over the {glue:text}`anat_range_effect` layers whose
#   95% CI excludes 0 = {glue:text}`anat_range_measured`, 95% CI {glue:text}`anat_range_ci`:
#   **{glue:text}`anat_range_verdict`** ({glue:text}`anat_range_reason`).
# - **Critical core** (L8-11 of 30, mapped by depth): a share {glue:text}`anat_core_measured`
#   {glue:text}`anat_core_ci` of the equally many most important layers lies in it (most
#   important layer: {glue:text}`anat_core_effect`; p = {glue:text}`anat_core_p` that a random
#   layer order does as well): **{glue:text}`anat_core_verdict`** ({glue:text}`anat_core_reason`).
# - **Up to +63,419% in the core**: log10 of the largest core Δ% = {glue:text}`anat_core_max_measured`
#   {glue:text}`anat_core_max_ci` (layer {glue:text}`anat_core_max_effect`):
#   **{glue:text}`anat_core_max_verdict`** ({glue:text}`anat_core_max_reason`).
# - **Anti-layers exist**: {glue:text}`anat_anti_measured` layers whose removal lowers PPL
#   (BH q < 0.05 and CI below 0): **{glue:text}`anat_anti_verdict`** ({glue:text}`anat_anti_reason`).
# - **…at L14 and L17**: {glue:text}`anat_anti_at_measured` of the 2 positions:
#   **{glue:text}`anat_anti_at_verdict`** ({glue:text}`anat_anti_at_reason`).
# :::

# %% [markdown]
# ## (4) Manipulation robustness: which edits does a layer survive?

# %% tags=["hide-input"]
heat = T["sweep"].query("surgery != 'skip'")  # the five strategies
heat = heat.assign(log_ratio=np.log10(1 + heat["delta_pct"] / 100))
base = alt.Chart(heat).encode(
    x=alt.X("layer:O", title="layer"), y=alt.Y("surgery:N", title="strategy", sort=config.surgeries)
)
show_figure(
    facet(
        base.mark_rect().encode(
            color=alt.Color(
                "log_ratio:Q",
                title="log10(ppl / clean)",
                scale=alt.Scale(scheme="redblue", reverse=True, domainMid=0),
            ),
            tooltip=["surgery", "layer", alt.Tooltip("delta_pct:Q", format=".3g")],
        ),
        "model",
        heat["model"],
        height=150,
        title="Perplexity change per strategy and layer",
    ).resolve_scale(x="independent"),
    what="The perplexity change (log10 of the ratio to clean) when one layer is edited by each "
    "strategy, one panel per model; red marks damage, blue improvement.",
    look_at="which rows stay near zero across every layer",
    claims=claims,
    claim_id="p3-anatomy-scaling",
)

# %% [markdown]
# :::{admonition} Verdicts on {glue:text}`anat_model`: only scaling preserves quality
# - **Scaling preserves quality**: worst-layer Δ% under scaling {glue:text}`anat_scaling_measured`
#   {glue:text}`anat_scaling_ci`: **{glue:text}`anat_scaling_verdict`**
#   ({glue:text}`anat_scaling_reason`).
# - **…and only scaling**: {glue:text}`anat_scaling_only_measured` other strategies preserve it:
#   **{glue:text}`anat_scaling_only_verdict`** ({glue:text}`anat_scaling_only_reason`).
#
# "Preserves" means a worst-layer PPL increase whose upper bound is below 5% (our threshold).
# :::

# %% [markdown]
# ## (1) Weight predictability across depth

# %% tags=["hide-input"]
pred = T["predictability"]
show_figure(
    facet(
        alt.Chart(pred)
        .mark_bar()
        .encode(
            x=alt.X("matrix:N", title="matrix type"),
            xOffset=alt.XOffset("target:N"),
            y=alt.Y("r2:Q", title="leave-one-layer-out R²"),
            color=alt.Color("target:N", title="target"),
            tooltip=["matrix", "target", alt.Tooltip("r2:Q", format=".3f")],
        ),
        "model",
        pred["model"],
        height=160,
        title="How well a layer's weights follow from its depth",
    ),
    what="The leave-one-layer-out R² of a ridge fit on depth for each matrix type, of its raw "
    "entries and of its per-layer summaries (norms, spectra), one panel per model.",
    look_at="the bars against the paper's R² = 0.91",
    claims=claims,
    claim_id="p3-anatomy-r2",
)

# %% tags=["hide-input"]
delta = T["delta"]
show_figure(
    facet(
        alt.Chart(delta)
        .mark_circle(size=30)
        .encode(
            x=alt.X(
                "corr_null:Q", title="expected for independent layers", scale=alt.Scale(zero=False)
            ),
            y=alt.Y("corr:Q", title="corr(ΔW(l), ΔW(l+1))", scale=alt.Scale(zero=False)),
            color="matrix:N",
            tooltip=["matrix", "layer", alt.Tooltip("corr:Q", format=".3f")],
        ),
        "model",
        delta["model"],
        height=180,
        title="Delta correlations against independent layers",
    ),
    what="Each point is one layer pair's delta correlation against the value independent layers "
    "would give (−0.5 when their variances are equal), one panel per model.",
    look_at="whether the points sit below the diagonal x = y",
    claims=claims,
    claim_id="p3-anatomy-delta-structure",
)

# %% [markdown]
# :::{admonition} Verdicts on {glue:text}`anat_model`: predictability
# - **R² = 0.91** (entries with each layer scaled to unit RMS, mean over matrix types): {glue:text}`anat_r2_measured`
#   {glue:text}`anat_r2_ci` (p {glue:text}`anat_r2_p` against shuffled layer orders, whose median
#   is {glue:text}`anat_r2_effect`): **{glue:text}`anat_r2_verdict`**. gate_proj alone (the
#   paper's figure): {glue:text}`anat_r2_gate_measured` {glue:text}`anat_r2_gate_ci`:
#   **{glue:text}`anat_r2_gate_verdict`**. Per-layer summaries: {glue:text}`anat_r2_summary_measured`
#   {glue:text}`anat_r2_summary_ci`: **{glue:text}`anat_r2_summary_verdict`**.
# - **…as oscillatory structure**: measured − independence value, mean over types
#   {glue:text}`anat_delta_structure_measured` {glue:text}`anat_delta_structure_ci` (Wilcoxon p
#   {glue:text}`anat_delta_structure_p`): **{glue:text}`anat_delta_structure_verdict`**.
# - **Delta correlation ≈ −0.50**: {glue:text}`anat_delta_measured` {glue:text}`anat_delta_ci`:
#   **{glue:text}`anat_delta_verdict`** ({glue:text}`anat_delta_reason`; −0.5 is what
#   independent layers give, so the value counts only beyond that null).
# - **Predicted weights are catastrophic**: median single-layer Δ% {glue:text}`anat_predicted_measured`
#   {glue:text}`anat_predicted_ci` (sign-test p {glue:text}`anat_predicted_p` that the median
#   exceeds +100%): **{glue:text}`anat_predicted_verdict`** ({glue:text}`anat_predicted_reason`).
#   The claim is that weights predicted by a fit that explains 91% of their variance still fail,
#   so it is judged only where our fit is that good.
# - **Nonlinear accumulation**: joint / summed single-layer log-PPL increase
#   {glue:text}`anat_accumulation_measured` {glue:text}`anat_accumulation_ci` (p over units
#   {glue:text}`anat_accumulation_p`, the larger of a sign flip's and a studentised bootstrap's,
#   so that a skewed interaction cannot pass): **{glue:text}`anat_accumulation_verdict`**
#   ({glue:text}`anat_accumulation_reason`).
# :::

# %% [markdown]
# ## (3) Recovery speed

# %% tags=["hide-input"]
rec = T["recovery"].merge(
    T["sweep"].query("surgery == 'skip'")[["model", "layer", "delta_pct"]], on=["model", "layer"]
)
if len(rec):
    show_figure(
        facet(
            alt.Chart(rec.assign(status=np.where(rec["recovered"], "recovered", "censored")))
            .mark_circle(size=60)
            .encode(
                x=alt.X(
                    "delta_pct:Q",
                    title="PPL change when skipped (%, log)",
                    scale=alt.Scale(type="log"),
                ),
                y=alt.Y("steps_ranked:Q", title="recovery time (steps, interpolated)"),
                color=alt.Color("status:N", title=None),
                tooltip=["layer", "perturbed_ppl", "final_ppl", "steps_ranked"],
            ),
            "model",
            rec["model"],
            height=180,
            title="Recovery time against layer importance",
        ),
        what="Each point is a fine-tuned layer: its importance against the optimiser steps it "
        "took to return within 5% of the clean perplexity after noise (interpolated between "
        "evaluations; censored layers rank after, by the damage left).",
        look_at="whether the points rise from left to right",
        claims=claims,
        claim_id="p3-anatomy-recovery",
    )

# %% [markdown]
# :::{admonition} Verdict on {glue:text}`anat_model`: recovery correlates with importance
# Partial Spearman ρ (importance vs recovery time, controlling for the perturbed / clean PPL
# ratio) = {glue:text}`anat_recovery_measured`, 95% CI {glue:text}`anat_recovery_ci`,
# p = {glue:text}`anat_recovery_p` (permutation): **{glue:text}`anat_recovery_verdict`**
# ({glue:text}`anat_recovery_reason`). The plain ρ is {glue:text}`anat_recovery_effect`.
# Importance also predicts how much the noise hurts before any fine-tuning, so the test asks
# whether it predicts recovery beyond that.
# :::

# %% [markdown]
# ## Structure

# %% tags=["hide-input"]
structure = T["structure"].melt(
    id_vars=["model", "layer", "matrix"], value_vars=["frobenius", "stable_rank", "effective_rank"]
)
structure = structure[structure["model"] == lead]
show_figure(
    facet(
        alt.Chart(structure)
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:O"),
            y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=False)),
            color="matrix:N",
        ),
        "variable",
        structure["variable"],
        height=150,
        title=f"Weight norms and ranks by depth: {lead}",
    ).resolve_scale(y="independent"),
    what=f"{lead}: the Frobenius norm, stable rank and effective rank of each weight matrix type "
    "at each layer.",
    look_at="any trend or break with depth",
)

# %% [markdown]
# ## Verdicts by model

# %% tags=["hide-input"]
show_verdicts(claims_view(claims))

# %% [markdown]
# ## Caveats
# - `smollm2-135m-instruct` is the instruction-tuned release, quantised to 4 bits (Q4_1) and
#   dequantised; the paper's model is SmolLM2-135M at full precision, evaluated on text it does
#   not name. Our held-out text (Shakespeare and generated curriculum documents) differs from it.
# - `gemma-3-270m` (base, Q4_K_M) has 18 layers: the paper's layer numbers are read there by
#   relative depth only, and it runs no recovery fine-tune within the book's budget.
# - On the pretrained models the other surgeries edit a subset of layers (which always holds
#   the paper's mapped core and anti-layers), on the same windows as the skip sweep.
# - The organisms are 12-layer, d = 128 models trained briefly on a small corpus.
# - Thresholds ("catastrophic" = PPL +100%, "preserves" = below +5% at every layer, R² within
#   0.1, orders of magnitude within one decade, the depth fit's ridge penalty 0.01) are ours;
#   the paper states none. The calibration page gives each claim's false-positive rate and power.

# %% tags=["hide-input"]
show_notes(result.notes)
