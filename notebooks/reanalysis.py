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
# # Reanalysis of the released GPT-2 states
#
# :::{admonition} Released numbers vs the paper's text
# Paper 1's repository reports GPT-2 last-token curvature of 0.94–1.27 rad and peak convergence
# indices of 0.14–0.23 (across its three models); the paper's text says 0.27–0.83 rad and
# 0.41–0.58.
# :::
#
# Here lamina's own metrics run on the states that paper 1 released (170 prompts, last token;
# 50 prompts with every token), under each representation convention, beside the released tables.
# The same released prompts then run through other models (by default the real pretrained causal
# LMs SmolLM2-135M-Instruct and Gemma-3-270m), whose values sit beside the released GPT-2 states'.

# %% tags=["parameters", "hide-input"]
model = "peer-gpt2"  # fixed: this chapter reads paper 1's released GPT-2 states only
pooling = "last"  # unused: every convention is computed
seed = 0  # seeds the bootstraps and permutations
quick = False  # unused: the released data are small
n_bootstrap = 1000  # bootstrap resamples for 95% CIs (at most 1000)
peer_root = None  # paper 1's released data; None: ../shared/peer/latent-trajectories
real_models = ["smollm2-135m-instruct", "gemma-3-270m"]  # also run the released prompts through these; [] skips
results_root = None  # where results are written; None: lamina.states.io.results_dir()

# %% tags=["hide-input"]
from lamina.book import setup_altair
from lamina.chapters import reanalysis_views as V

setup_altair()
config = V.Config.from_globals(globals())  # the parameters above (a mistyped one is an error)
result = V.run_page(config, results_root)  # None when the released data are absent

# %% [markdown]
# The released data are {glue:text}`re_available`. When they are absent, this page only says so:
# lamina never depends on them.
#
# Two kinds of rows follow. **Self-checks** test lamina against the released numbers (its
# metrics, the source of the released tables); they never count as reproductions of paper 1.
# **Claims** test paper 1's statements on the released states.
#
# ## Curvature: which convention gives which number

# %% tags=["hide-input"]
V.curvature_section(result)

# %% [markdown]
# ## The released bootstrap table
# `results/statistics/bootstrap_ci.csv` gives category means of curvature. The table below sets
# them beside the means over the prompts of the released per-prompt metrics table
# (`gpt2_trajectory_metrics.csv`) and over all 170 released trajectories.

# %% tags=["hide-input"]
V.bootstrap_table(result)

# %% [markdown]
# ## Convergence index profile

# %% tags=["hide-input"]
V.convergence_section(result)

# %% tags=["hide-input"]
V.claims_table(result)

# %% [markdown]
# ## The released prompts on other models
# Each model of `real_models` reads the released prompts (the 170 last-token prompts; the 50
# released with every token for the mean-pooled conventions) through lamina's extraction. Rows
# of peer-gpt2 are the released GPT-2 states: the self-checks above (matching released values)
# apply to them only. Rows of any other model are that model's own values; there is no released
# value to match them to. Each value has a 95% CI resampling prompts (stratified by category);
# the peak convergence index re-selects its peak layer in every resample.

# %% tags=["hide-input"]
V.real_models_section(result, real_models)

# %% [markdown]
# :::{admonition} Self-checks (lamina against the released numbers)
# :class: note
# - With the released code's convention (last token, no layer 0, post-norm final state),
#   lamina's per-prompt curvature is within {glue:text}`re_curv:.2g` rad of the released values:
#   **{glue:text}`re_curv_verdict`** ({glue:text}`re_curv_reason`); the closest other convention
#   misses by {glue:text}`re_other_min_diff:.3f` rad.
# - The released bootstrap table's curvature means differ from the means over the prompts of
#   the released per-prompt table by at most {glue:text}`re_boot:.2g` rad:
#   **{glue:text}`re_boot_verdict`** ({glue:text}`re_boot_reason`).
# - lamina's convergence profile is within {glue:text}`re_ci:.3f` of the released one:
#   **{glue:text}`re_ci_verdict`** ({glue:text}`re_ci_reason`).
# :::
#
# :::{admonition} Paper 1's claims on the released states
# :class: important
# - Curvature gap (reasoning − lexical, paper text's convention, single-token prompts
#   excluded): {glue:text}`re_gap:.3f` rad, **{glue:text}`re_gap_verdict`**
#   ({glue:text}`re_gap_reason`).
# - Reasoning in 0.71–0.83 rad: {glue:text}`re_reason:.3f`, **{glue:text}`re_reason_verdict`**;
#   lexical in 0.27–0.31 rad: {glue:text}`re_lex:.3f`, **{glue:text}`re_lex_verdict`**.
# - Peak CI 0.41–0.58: under the paper text's convention (fixed in advance) the peak is
#   {glue:text}`re_peak:.3f`,
#   **{glue:text}`re_peak_verdict`** ({glue:text}`re_peak_reason`).
# :::
#
# ## Caveats
# - The released final state is post-norm; the raw state after block 12 was not released, so the
#   raw-final conventions end at block 11.
# - Mean pooling is available only for the 50 prompts whose every token was released.
# - The peak claim is judged under the paper text's convention, fixed before the data were
#   seen; the other conventions' peaks are in the sensitivity table, not in the verdict.
# - The other models' rows come from lamina's extraction of the released prompt texts: their
#   mean pooling covers every token the tokenizer adds (a BOS token where the model has one), and
#   `smollm2-135m-instruct` and `gemma-3-270m` carry 4-bit GGUF weights dequantised to fp32.
#   Trajectory length is in each model's own state units and is not comparable across models.
# - The peak convergence index's interval resamples prompts and re-selects the peak layer; a
#   repeated prompt in a resample is not counted as a second member of its own category.
