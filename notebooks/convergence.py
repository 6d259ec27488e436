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
# # Semantic convergence
#
# :::{admonition} The claim (paper 1, abstract)
# "Semantically related prompts converge significantly in middle-to-late layers (peak CI
# 0.41–0.58, p<0.001, Mann-Whitney U), consistent with attractor-like dynamics."
# :::
#
# If prompts about animals end up closer to each other than to prompts about tools, the
# convergence index CI(l) — the mean distance to other categories minus the mean distance
# within the category, on L2-normalised states — rises with depth and peaks somewhere in the
# middle or late layers. We test that on our semantic family (6 categories × 10 prompts, each
# ending in the category member) and on paper 1's released GPT-2 states.

# %% tags=["parameters", "hide-input"]
model = "default"  # "default": organisms, MiniLM and paper 1's released GPT-2 states; or one model name/path
pooling = "mean"  # main convention: "mean" over tokens (paper text) or "last" token (released code)
prompts = (
    None  # None: the chapter's prompt families; or a JSONL path / family name (comma-separated)
)
n_bootstrap = 10000  # bootstrap resamples for 95% CIs (the paper's B)
seed = 0  # seeds controls, bootstraps and the random-init model
quick = False  # few prompts and resamples, for CI
peer_root = None  # paper 1's released data; None: ../shared/peer/latent-trajectories
results_root = None  # where results are written; None: lamina.io.results_dir()

# %% tags=["hide-input"]
import altair as alt
import pandas as pd

from lamina.book.chapter import claims_view, glue_claim, run_trajectory_chapter
from lamina.book.charts import facet, model_color, show_figure
from lamina.chapters.convergence import run_convergence

result = run_trajectory_chapter(run_convergence, globals())  # the parameters above

# %% [markdown]
# ## Method
# `lamina.chapters.convergence.run_convergence` extracts every prompt's trajectory in fp32 (layer 0 =
# embedding output, layer l = residual stream after block l, before the final norm), computes
# the per-prompt convergence index with `lamina.geometry.convergence_index_per_prompt`, takes the
# layer where its mean peaks, and reports the peak with a BCa bootstrap 95% CI over prompts. The
# test is the paper's: a two-sided Mann–Whitney U of the per-prompt CI at the peak against the
# first layer, with the rank-biserial correlation as effect size. The released GPT-2 states
# (`peer-gpt2`) use the released categories (animals, objects, reasoning, emotions, analogies).
# A claimed "reproduced" needs p < 0.05, a peak of at least 0.41, and a peak in the last three
# quarters of the depth; significant but smaller is "partially".

# %% [markdown]
# ## Result
# The convergence index of the headline model, {glue:text}`conv_model`, peaks at
# {glue:text}`conv_measured:.3f` (95% CI {glue:text}`conv_ci_low:.3f`–{glue:text}`conv_ci_high:.3f`).

# %% tags=["hide-input"]
profiles = result.tables["profiles"]
real = profiles[profiles["condition"] == "real"]
band = (
    alt.Chart(real)
    .mark_area(opacity=0.25)
    .encode(
        x=alt.X("depth:Q", title="depth (layer / last layer)"),
        y="ci_low:Q",
        y2="ci_high:Q",
        color=model_color(real),
    )
)
line = (
    alt.Chart(real)
    .mark_line(point=True)
    .encode(
        x="depth:Q",
        y=alt.Y("ci:Q", title="convergence index (chord units)"),
        color=model_color(real),
        tooltip=["model", "layer", alt.Tooltip("ci:Q", format=".3f")],
    )
)
rule = (
    alt.Chart(pd.DataFrame({"y": [0.41, 0.58]}))
    .mark_rule(strokeDash=[4, 4], color="gray")
    .encode(y="y:Q")
)
show_figure(
    (band + line + rule).properties(title="Convergence index across depth, with 95% CIs"),
    what="The convergence index of the semantic categories at each relative depth, one line "
    "per model, with its 95% bootstrap band; the dashed lines mark the paper's 0.41-0.58.",
    look_at="where each curve peaks, and whether the peak reaches the dashed band in the middle "
    "to late layers",
    claims=result.claims,
    claim_id="convergence_peak",
)

# %% [markdown]
# ## Controls
# Beside the result: the same statistic on per-trajectory shuffled layers, on Gaussian states
# matched to each layer's mean and covariance, on a random-init model of the same architecture
# (not for the released states: no model was released), and under permuted labels (a
# permutation p-value). Each control is compared with the real per-prompt CI at the real peak
# layer (Mann–Whitney U, Benjamini–Hochberg q across controls).

# %% tags=["hide-input"]
controls = profiles[profiles["condition"] != "real"]
both = pd.concat([real, controls])
show_figure(
    facet(
        alt.Chart(both)
        .mark_line()
        .encode(
            x=alt.X("depth:Q", title="depth"),
            y=alt.Y("ci:Q", title="convergence index"),
            color=alt.Color("condition:N", title="condition"),
            strokeDash="condition:N",
        ),
        "model",
        both["model"],
        title="Convergence index of the real states and of each control",
    ),
    what="The convergence index across depth for the real states and for each control, one "
    "panel per model.",
    look_at="whether the control curves stay flat where the real curve peaks",
    claims=result.claims,
    claim_id="convergence_controls_vanish",
)

# %% tags=["hide-input"]
result.tables["controls"].round(4)

# %% tags=["hide-input"]
claims = result.claims
glue_claim("conv", claims, "convergence_peak", n_models=len(result.models))
claims_view(claims)

# %% [markdown]
# :::{admonition} Verdict
# :class: important
# On {glue:text}`conv_model` the peak convergence index is {glue:text}`conv_measured:.3f`
# (95% CI {glue:text}`conv_ci_low:.3f`–{glue:text}`conv_ci_high:.3f`; peak vs first layer
# p = {glue:text}`conv_p:.3g`, rank-biserial r = {glue:text}`conv_effect:.3f`): the claim is
# **{glue:text}`conv_verdict`**. It is reproduced in full on {glue:text}`conv_n_reproduced` of
# {glue:text}`conv_n_models` models; the table above gives every model and claim.
# :::
#
# ## Sensitivity to the representation convention
# The paper's text mean-pools with layer 0; the released code takes the last token, drops layer
# 0 and ends on the post-norm state. The convergence index normalises states itself, so
# "normalised" cannot change it; the pooling and the final state can.

# %% tags=["hide-input"]
sens = result.tables["sensitivity"]
show_figure(
    alt.Chart(sens)
    .mark_point(filled=True, size=70)
    .encode(
        x=alt.X("peak:Q", title="peak convergence index"),
        y=alt.Y("convention:N", title=None),
        color=model_color(sens),
        shape="verdict:N",
        tooltip=["model", "convention", "peak", "peak_layer", "p"],
    )
    .properties(title="Peak convergence index under each representation convention"),
    what="The peak convergence index of each model under each representation convention.",
    look_at="how far the points move between conventions, against the paper's 0.41",
)

# %% tags=["hide-input"]
sens.drop(columns=["definition"]).round(4)

# %% [markdown]
# ## Caveats
# - Our organisms are small (about 12 layers, d ≤ 256) and MiniLM is an encoder; neither is the
#   paper's GPT-2, TinyLlama or Qwen. The released GPT-2 states are the only paper-scale model here.
# - Picking the peak layer and then testing it is optimistic; the bootstrap CI does not include
#   the choice of layer.
# - Mean pooling includes the first token; in GPT-2 it carries a massive activation (see the
#   notes above), which dominates mean-pooled cosines and distances.
# - The paper's peak CI depends on its category set and on normalisation; an absolute value of
#   CI is not comparable across prompt sets with different numbers of categories.
