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
# # Three phases of layerwise similarity
#
# :::{admonition} The claim (paper 1, abstract)
# "Layerwise cosine similarity reveals a universal three-phase structure: encoding, elaboration,
# and output preparation, consistent across all three architectures."
# :::
#
# SIM(l) = cos(h(l), h(l+1)) says how much block l+1 turns the representation. The paper cuts
# the SIM profile into three **fixed** bands (l ≤ ⌊L/4⌋, ≤ ⌊3L/4⌋, the rest) and quotes GPT-2
# ranges 0.35–0.55, 0.70–0.85 and 0.60–0.70. Fixed bands always give three phases; whether the
# data have three is a separate question, which we answer with change-point detection.

# %% tags=["parameters"]
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

# %%
import altair as alt

from lamina.book import glue
from lamina.book.chapter import claims_view, glue_claim, run_trajectory_chapter
from lamina.chapters.three_phase import run_three_phase

result = run_trajectory_chapter(run_three_phase, globals())  # the parameters above

# %% [markdown]
# ## Method
# `lamina.chapters.three_phase.run_three_phase` computes `lamina.geometry.layerwise_cosine` for the
# semantic, analogy, reasoning and lexical families (single-token prompts left out), then
# (a) `lamina.geometry.phases.fixed_phase_bands` and `phase_summary`: per-prompt band means, the
# elaboration − encoding difference with a bootstrap CI, and Mann–Whitney U tests of elaboration
# against each other band (BH-adjusted; p is the larger q). "Reproduced" needs p < 0.05 and the
# paper's ordering encoding < output preparation < elaboration.
# (b) `lamina.geometry.phases.detect_phases`: exact least-squares change points with the number of phases
# chosen by a penalised BIC (and, for comparison, cross-validation), on the prompt-mean profile
# and on 300 prompt resamples.

# %% [markdown]
# ## Result
# The fixed bands on {glue:text}`tp_model`: elaboration exceeds encoding by
# {glue:text}`tp_measured:.3f` in mean SIM (95% CI {glue:text}`tp_ci_low:.3f`–{glue:text}`tp_ci_high:.3f`).
# Change-point detection finds {glue:text}`tp_k` phase(s) there.

# %%
prof = result.tables["profiles"]
real = prof[prof["condition"] == "real"]
base = alt.Chart(real).encode(
    x=alt.X("depth:Q", title="depth of the transition l → l+1"),
    y=alt.Y("sim:Q", title="SIM(l)", scale=alt.Scale(zero=False)),
)
points = base.mark_point(filled=True, size=80).encode(
    color=alt.Color("detected_phase:N", title="detected phase"),
    shape=alt.Shape("fixed_band:N", title="paper's band"),
    tooltip=["model", "transition", alt.Tooltip("sim:Q", format=".3f")],
)
(base.mark_line(color="gray") + points).facet(
    column=alt.Column("model:N", title=None)
).resolve_scale(y="independent").properties(
    title="Fixed bands impose three phases; the data choose their own"
)

# %%
result.tables["bands"].round(3)

# %% [markdown]
# ## Controls
# Shuffled layers, moment-matched random states and a random-init model: their SIM profiles,
# detected phases and band ordering.

# %%
alt.Chart(prof).mark_line().encode(
    x=alt.X("depth:Q", title="depth"),
    y=alt.Y("sim:Q", title="SIM(l)"),
    color=alt.Color("condition:N"),
    strokeDash="condition:N",
).facet(column=alt.Column("model:N", title=None)).properties(
    title="Shuffled layers flatten the SIM profile"
)

# %%
result.tables["controls"]

# %%
claims = result.claims
glue_claim("tp", claims, "three_phase_fixed_bands", n_models=len(result.models))
claims_view(claims)

# %%
detected = claims[claims["claim_id"] == "three_phase_detected"].reset_index(drop=True)
glue("tp_k", int(detected.loc[0, "measured"]))
glue("tp_share_three", float(detected.loc[0, "effect_size"]))
glue("tp_n_three", int((detected["verdict"] == "reproduced").sum()))

# %% [markdown]
# :::{admonition} Verdict
# :class: important
# Fixed bands on {glue:text}`tp_model`: elaboration − encoding = {glue:text}`tp_measured:.3f`
# (95% CI {glue:text}`tp_ci_low:.3f`–{glue:text}`tp_ci_high:.3f`, p = {glue:text}`tp_p:.3g`):
# **{glue:text}`tp_verdict`**; the ordering holds in full on {glue:text}`tp_n_reproduced` of
# {glue:text}`tp_n_models` models. **Is it three?** Change points find {glue:text}`tp_k`
# phase(s) on {glue:text}`tp_model` (three in a share {glue:text}`tp_share_three:.2f` of prompt
# resamples), and three phases on {glue:text}`tp_n_three` of {glue:text}`tp_n_models` models.
# :::
#
# ## Sensitivity to the representation convention

# %%
sens = result.tables["sensitivity"]
alt.Chart(sens).mark_point(filled=True, size=70).encode(
    x=alt.X("k_bic:O", title="phases detected (BIC)"),
    y=alt.Y("convention:N", title=None),
    color="model:N",
    shape="ordered:N",
    tooltip=["model", "convention", "encoding", "elaboration", "output"],
).properties(title="Change points rarely find three phases under any convention")

# %%
sens.drop(columns=["definition"]).round(3)

# %% [markdown]
# ## Caveats
# - With 6 (MiniLM) or 12 blocks the profile has 6 or 12 points; the BIC penalty then favours
#   few phases. A fixed band of one or two points is not a phase in any data-driven sense.
# - Under mean pooling, GPT-2's first-token massive activation dominates the pooled state, so
#   SIM stays near 1 in the middle layers (see the released states).
# - The paper's ranges are for GPT-2; other models are compared on the ordering only.
