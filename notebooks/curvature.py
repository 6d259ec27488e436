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
# # Curvature of reasoning and lexical trajectories
#
# :::{admonition} The claim (paper 1, abstract)
# "Reasoning tasks produce trajectories of greater curvature than lexical variations
# (0.71–0.83 rad vs. 0.27–0.31 rad), suggesting curvature encodes computational complexity."
# :::
#
# Curvature is the turning angle between consecutive steps of a trajectory, κ(l) =
# arccos(cos(v(l), v(l+1))) with v(l) = h(l) − h(l−1), averaged over layers (radians). We compare
# our multi-step reasoning prompts with our lexical variations of eight base words. Trajectory
# length, the first of paper 1's five metrics, is reported beside it.

# %% tags=["parameters", "hide-input"]
model = "default"  # "default": smollm2-135m-instruct, gemma-3-270m, paper 1's released states, MiniLM, organisms; or one model name/path
pooling = "mean"  # main convention: "mean" over tokens (paper text) or "last" token (released code)
prompts = (
    None  # None: the chapter's prompt families; or a JSONL path / family name (comma-separated)
)
n_bootstrap = 10000  # bootstrap resamples for 95% CIs (the paper's B; at most 5000 are used)
seed = 0  # seeds controls, bootstraps and the random-init model
quick = False  # few prompts and resamples, for CI
sensitivity = True  # also rerun the test under every representation convention (slower)
quant_control = True  # also rerun the quantised models re-quantised (Q4_0; Q8_0 where a verdict flips)
peer_root = None  # paper 1's released data; None: ../shared/peer/latent-trajectories
results_root = None  # where results are written; None: lamina.states.io.results_dir()

# %% tags=["hide-input"]
import altair as alt

from lamina.book import setup_altair
from lamina.book.chapter import (
    claims_view,
    finding_title,
    glue_claim,
    show_notes,
)
from lamina.book.charts import facet, layer_axis, model_color, show_figure
from lamina.book.tables import show_details, show_verdicts
from lamina.chapters.curvature import Config, run
from lamina.chapters.trajectory import show_quant_control

config = Config.from_globals(globals())  # the parameters above (a mistyped one is an error)
setup_altair()
result = run(config)
result.write(results_root)
claims = result.claims
glue_claim("curv", claims, "p1-curvature-gap", n_models=len(result.models))

# %% [markdown]
# ## Method
# `lamina.chapters.curvature.run_curvature` computes `lamina.trajectory.mean_curvature` per
# prompt. Mean curvature moves with a prompt's length, and paper 1's lexical variations
# (1–3 words) are all shorter than its reasoning prompts (6–25), so the main row compares the
# families at equal length: `lamina.trajectory.curvature_stats.curvature_test` keeps the
# length strata (in tokens) that both families fill — our lexical variants in sentence frames
# and our short reasoning prompts are there — and fits a mixed model
# (`lamina.trajectory.curvature_stats.mixed_gap`): the strata as fixed effects, and a random
# intercept per cluster, the prompts joined by a shared sentence frame, reasoning template or
# base word (`lamina.trajectory.curvature_stats.curvature_clusters`), because a frame moves
# the curvature of all its prompts together. Its gap has a t 95% CI and a two-sided t test on
# G − 2 degrees of freedom (G clusters). The paper's own comparison (its two families at all
# lengths) is reported beside it: CIs resample base words (all variants together) and
# reasoning prompts, and the test is a two-sided Mann–Whitney U on unit means. Prompts of a
# single token are left out of the main analysis: their last token is also their first, which
# in GPT-2-style models carries a massive activation. For the released GPT-2 states the token
# counts come from the released `metadata.parquet`, and a state at position 0 is also
# recognised by its norm (the sensitivity table puts these prompts back). The released prompts
# have no lexical family; their single-word "atomic" prompts stand in for it. The claim is
# three parts — a gap of at least 0.40 rad, reasoning in 0.71–0.83 rad, lexical in
# 0.27–0.31 rad — each judged by the rules of `lamina.evidence.claims`.

# %% [markdown]
# ## Result
# On {glue:text}`curv_model`, reasoning minus lexical mean curvature is
# {glue:text}`curv_measured:.3f` rad (95% CI {glue:text}`curv_ci_low:.3f`–{glue:text}`curv_ci_high:.3f`).

# %% tags=["hide-input"]
per_prompt = result.tables["per_prompt"]
show_figure(
    facet(
        alt.Chart(per_prompt)
        .mark_boxplot(extent="min-max")
        .encode(
            x=alt.X("family:N", title=None, axis=alt.Axis(labelAngle=0)),
            y=alt.Y(
                "mean_curvature:Q", title="mean curvature (rad)", scale=alt.Scale(zero=False)
            ),
            color="family:N",
        ),
        "model",
        per_prompt["model"],
        title=finding_title(claims, "p1-curvature-gap", "Reasoning − lexical curvature (rad)"),
    ).resolve_scale(y="independent"),
    what="The distribution of per-prompt mean curvature (radians) for each prompt family, one "
    "panel per model; each panel's axis is zoomed to its model's values (it does not start at 0).",
    look_at="how far the reasoning box sits above the lexical box; the claim needs at least "
    "0.40 rad",
    claims=claims,
    claim_id="p1-curvature-gap",
)

# %% tags=["hide-input"]
profiles, depth_x, layer_tip = layer_axis(result.tables["profiles"], title="layer l")
show_figure(
    facet(
        alt.Chart(profiles)
        .mark_line(point=True)
        .encode(
            x=depth_x,
            y=alt.Y("kappa:Q", title="κ(l), rad (angle between steps l and l+1)"),
            color="family:N",
            tooltip=["model", "family", layer_tip, alt.Tooltip("kappa:Q", format=".3f")],
        ),
        "model",
        profiles["model"],
        title="Turning angle κ(l) layer by layer, by prompt family",
    ),
    what="The mean turning angle at each layer for each prompt family, one panel per model.",
    look_at="the layers where the reasoning and lexical lines separate",
)

# %% tags=["hide-input"]
show_verdicts(claims_view(claims))

# %% [markdown]
# :::{admonition} Verdict
# :class: important
# On {glue:text}`curv_model`, reasoning minus lexical curvature at equal length is
# {glue:text}`curv_measured:.3f` rad (95% CI {glue:text}`curv_ci_low:.3f`–{glue:text}`curv_ci_high:.3f`;
# two-sided p = {glue:text}`curv_p:.3g`, clusters as random effects): the claim is
# **{glue:text}`curv_verdict`** ({glue:text}`curv_reason`). It is reproduced in full on
# {glue:text}`curv_n_reproduced` of {glue:text}`curv_n_models` sources. The two ranges, the
# paper's comparison at all lengths and the controls are separate rows of the table above.
# :::

# %% [markdown]
# ## Trajectory length
# Length = Σ_l ‖h(l+1) − h(l)‖, raw and on L2-normalised states (the released code's default),
# per family, with a base-word bootstrap 95% CI. Paper 1 names it but states no number for it.

# %% tags=["hide-input"]
show_details(result.tables["length"].round(4), "Trajectory length per family, per model")

# %% [markdown]
# ## Controls
# Shuffled layers permute each trajectory's layers; random embeddings feed Gaussian input
# embeddings (matched to the embedding matrix's moments) through the model; a random-init model
# has the same architecture without training. "Vanishes" is testable only where the real gap is
# present.

# %% tags=["hide-input"]
controls = result.tables["controls"]
show_figure(
    alt.Chart(controls)
    .mark_bar()
    .encode(
        x=alt.X("difference:Q", title="reasoning − lexical (rad)"),
        y=alt.Y("control:N", title=None),
        color=model_color(controls),
        yOffset="model:N",
    )
    .properties(title="The reasoning–lexical difference, real and under each control"),
    what="The reasoning − lexical curvature difference (radians), real and under each control, "
    "per model.",
    look_at="whether the bars shrink towards zero under the shuffled-layer and random-embedding "
    "controls",
    claims=claims,
    claim_id="p1-curvature-controls-vanish",
)

# %% tags=["hide-input"]
show_details(controls.round(4), "The controls, per model")

# %% [markdown]
# ## Sensitivity to the representation convention
# Curvature is not scale invariant: normalising states, dropping layer 0 and ending on the
# post-norm state all change the angles. Single-token prompts are shown excluded and included.

# %% tags=["hide-input"]
sens = result.tables["sensitivity"]
if len(sens):
    show_figure(
        alt.Chart(sens)
        .mark_point(filled=True, size=70)
        .encode(
            x=alt.X("difference:Q", title="reasoning − lexical (rad)"),
            y=alt.Y("convention:N", title=None),
            color=model_color(sens),
            shape="single_token_prompts:N",
            tooltip=["model", "convention", "difference", "p", "verdict"],
        )
        .properties(
            title="The reasoning − lexical difference under each representation convention"
        ),
        what="The reasoning − lexical difference under each representation convention, with "
        "and without single-token prompts.",
        look_at="how much the points move, and whether any changes sign, between conventions",
    )
    show_details(sens.drop(columns=["definition"]).round(4), "Every convention, per model")

# %% [markdown]
# ## Quantisation control
# The pretrained models' weights are stored as GGUF (4-bit) and dequantised to fp32 for the
# forward pass; the papers' models were not quantised. Each quantised model is also run with its
# dequantised weights rounded once more through GGUF Q4_0 (a 4-bit rounding), and, where a
# verdict flips, through Q8_0 (a small one); the claims are rerun on its states, with the
# controls of the model as loaded (`lamina.states.quant_control`). The table gives, per
# claim, model and quantisation, the measured value before and after, the shift in the claim's
# units, and both verdicts; the column "quantisation shift" of the claims table above says for
# each of its verdicts whether it stays the same or flips.

# %% tags=["hide-input"]
show_quant_control(result)

# %% [markdown]
# ## Caveats
# - Mean curvature of a trajectory with few layers averages few angles; MiniLM has 6 blocks.
# - Each of our four sentence frames fills its own few lengths, so within a stratum a frame's
#   own curvature and the family's cannot be told apart: the gap's uncertainty rests on the
#   four frames and eight templates (the clusters), whatever the number of prompts.

# %% tags=["hide-input"]
show_notes(result.notes)
