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
# middle or late layers. We test that on our semantic prompts, 30 per category in 6 categories:
# 10 sentences with a topical frame ending in the category member, and the same members in two
# neutral frames shared by every category ("Next on the list is the word fox"), and on paper 1's
# released GPT-2 states.

# %% tags=["parameters", "hide-input"]
model = "default"  # "default": smollm2-135m-instruct, gemma-3-270m, paper 1's released states, MiniLM, organisms; or one model name/path
pooling = "mean"  # main convention: "mean" over tokens (paper text) or "last" token (released code)
prompts = (
    None  # None: the chapter's prompt families; or a JSONL path / family name (comma-separated)
)
n_bootstrap = 10000  # bootstrap resamples for 95% CIs (the paper's B; the peak bootstrap uses at most 2000)
n_permutations = 10000  # label permutations for the claim's p (9,999 or more: a p below 0.001 then rests on 10 exceedances or more)
seed = 0  # seeds controls, bootstraps and the random-init model
quick = False  # few prompts and resamples, for CI
sensitivity = True  # also rerun the test under every representation convention (slower)
quant_control = True  # also rerun the quantised models re-quantised (Q4_0; Q8_0 where a verdict flips)
peer_root = None  # paper 1's released data; None: ../shared/peer/latent-trajectories
results_root = None  # where results are written; None: lamina.states.io.results_dir()

# %% tags=["hide-input"]
import altair as alt
import pandas as pd

from lamina.book import setup_altair
from lamina.book.chapter import (
    claims_view,
    finding_title,
    glue_claim,
    show_notes,
)
from lamina.book.charts import facet, model_color, show_figure
from lamina.book.tables import show_details, show_verdicts
from lamina.chapters.convergence import Config, run
from lamina.chapters.trajectory import show_quant_control

config = Config.from_globals(globals())  # the parameters above (a mistyped one is an error)
setup_altair()
result = run(config)
result.write(results_root)
claims = result.claims

# %% [markdown]
# ## Method
# `lamina.chapters.convergence.run_convergence` extracts every prompt's trajectory in fp32
# (layer 0 = embedding output, layer l = residual stream after block l, before the final norm)
# and computes the per-prompt convergence index (`lamina.trajectory.convergence_index_per_prompt`).
# The statistic is the peak of its mean over layers. Because the peak layer is chosen from the
# data, the claim's p-value is the label-permutation null of the *maximum over layers*
# (`lamina.evidence.resampling.max_permutation_test`), and its 95% CI resamples within their
# category and re-selects the peak in every resample (`lamina.evidence.resampling.peak_bootstrap`).
# The independent unit is the item: one member word appears in a topical sentence and in two
# neutral frames, so its three prompts are permuted and resampled together. The claim's own
# level is used: p < 0.001, with at least 9,999 permutations so that the decision rests on at
# least ten exceedances (the row gives p's Monte-Carlo standard error). The verdict rules are
# those of `lamina.evidence.claims` (see the methods page): the peak must lie in 0.41–0.58 with
# a CI that does not reach beyond the range by more than half its width, and the test must be
# significant at 0.001; the peak's depth CI must lie at or beyond a third of the depth.

# %% [markdown]
# ## Result
# The convergence index of the headline source, {glue:text}`conv_model`, peaks at
# {glue:text}`conv_measured:.3f` (95% CI {glue:text}`conv_ci_low:.3f`–{glue:text}`conv_ci_high:.3f`).

# %% tags=["hide-input"]
glue_claim("conv", claims, "p1-convergence-peak", n_models=len(result.models))
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
    (band + line + rule).properties(
        title=finding_title(
            claims, "p1-convergence-peak", "Peak convergence index (dashed: 0.41–0.58)"
        )
    ),
    what="The convergence index of the semantic categories at each relative depth, one line "
    "per model, with its 95% band at each layer (items resampled within their category); the "
    "dashed lines mark the paper's 0.41-0.58.",
    look_at="where each curve peaks, and whether the peak reaches the dashed band in the middle "
    "to late layers",
    claims=claims,
    claim_id="p1-convergence-peak",
)

# %% tags=["hide-input"]
own_axis = alt.layer(
    band.encode(
        y=alt.Y("ci_low:Q", title="convergence index", scale=alt.Scale(zero=False)),
        color=model_color(real, legend=False),  # each panel is named by its model
    ),
    line.encode(
        y=alt.Y("ci:Q", title="convergence index", scale=alt.Scale(zero=False)),
        color=model_color(real, legend=False),
    ),
)
show_figure(
    facet(own_axis, "model", real["model"], legend=False,
          title="Each model's profile on its own axis").resolve_scale(y="independent"),
    what="The profiles above, one panel per model, each with its 95% band at each layer; each "
    "panel's axis is zoomed to its model's values (it does not start at 0, and the paper's "
    "0.41-0.58 is not drawn).",
    look_at="the depth at which each profile peaks, and how wide its band is there",
)

# %% tags=["hide-input"]
show_verdicts(claims_view(claims))

# %% [markdown]
# :::{admonition} Verdict
# :class: important
# On {glue:text}`conv_model` the peak convergence index is {glue:text}`conv_measured:.3f`
# (95% CI {glue:text}`conv_ci_low:.3f`–{glue:text}`conv_ci_high:.3f`; permutation p of the
# maximum = {glue:text}`conv_p:.3g`): the claim is **{glue:text}`conv_verdict`**
# ({glue:text}`conv_reason`). It is reproduced in full on {glue:text}`conv_n_reproduced` of
# {glue:text}`conv_n_models` sources; the table above gives every source and claim.
# :::

# %% [markdown]
# ## Which test is the paper's?
# The abstract reports "p<0.001, Mann-Whitney U". In the released code
# (`results/statistics/convergence_tests.csv`) that p is a Mann–Whitney U of all
# between-category against all within-category pair distances at the final layer, which tests
# separation at one layer over pairs of prompts (which share prompts), not convergence across
# layers or the peak.
# The table gives that test, the claim's test, and a paired Wilcoxon test of the peak against the
# first layer (which ignores the choice of the peak).

# %% tags=["hide-input"]
show_details(result.tables["tests"].round(4), "The three tests, per model")

# %% [markdown]
# ## Topical and neutral frames
# A topical sentence ("Next to the pond the children found a frog") shares context words with its
# category; a neutral frame shares nothing but the member. The same test on each half:

# %% tags=["hide-input"]
show_details(result.tables["frames"].round(4), "The test on topical and on neutral frames, per model")

# %% [markdown]
# ## Controls
# Paper 1 says the effect vanishes under shuffled layers and random embeddings. Shuffled layers
# permute each trajectory's layers; random embeddings feed Gaussian input embeddings (matched to
# the embedding matrix's moments) through the model itself; a random-init model has the same
# architecture without training. The released states have no model, so only shuffled layers
# apply there. "Vanishes" is testable only where the real effect is present and every control
# the claim names exists. The random input embeddings are one random vocabulary: a token gets the
# same random input in every prompt (matched to the embedding matrix's moments), so an effect
# carried by shared tokens survives it and the control can fail.
#
# The shuffled-layers control is tested on the expected distances over all shuffles
# (`lamina.trajectory.convergence_stats.shuffled_distance_stack`): two prompts' states at one
# "layer" come from independent random depths, so each distance is the mean over all pairs of
# depths and the control's profile is flat. One random shuffle would add its own noise, which
# the maximum over layers picks up and which is of the real peaks' size.
#
# Whether shuffled layers can fail is measured on each model's own states
# (`lamina.trajectory.control_power`). A category code with one direction at every layer is
# planted under random labels, at the real peak's size, and the layers are then shuffled. If
# less than half of that code's peak remains, the control also removes a convergence that
# does not depend on depth. The same is done with a code of each layer's own direction, which
# the control should remove; if half or more of it remains, the control cannot remove even a
# convergence tied to its layers. In either case the control is no evidence, and the row
# reads "undecidable at this design". The shares that remain are the `invariant_share_kept`
# and `specific_share_kept` columns below.

# %% tags=["hide-input"]
controls = profiles[profiles["condition"] != "real"]
vanish = claims[claims["claim_id"] == "p1-convergence-controls-vanish"]
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
        title="Convergence index, real and under controls — vanishing: "
        + "; ".join(f"{m}: {v}" for m, v in zip(vanish["model"], vanish["verdict"], strict=True)),
    ),
    what="The convergence index across depth for the real states and for each control, one "
    "panel per model.",
    look_at="whether the control curves stay flat where the real curve peaks",
    claims=claims,
    claim_id="p1-convergence-controls-vanish",
)

# %% tags=["hide-input"]
show_details(result.tables["controls"].round(4), "The controls, per model")

# %% [markdown]
# ## Sensitivity to the representation convention
# The paper's text mean-pools with layer 0; the released code takes the last token, drops layer
# 0 and ends on the post-norm state. The convergence index normalises states itself, so
# "normalised" cannot change it; the pooling and the final state can.

# %% tags=["hide-input"]
sens = result.tables["sensitivity"]
if len(sens):
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
# - Our organisms are small (about 12 layers, d ≤ 256) and MiniLM is an encoder; neither is the
#   paper's GPT-2, TinyLlama or Qwen. The released GPT-2 states are the only paper-scale model here.
# - Mean pooling includes the first token; where it carries a massive activation (the notes
#   below name each model whose first token's norm exceeds ten times the median), it can
#   dominate mean-pooled cosines and distances.
# - The paper's peak CI depends on its category set and on normalisation; an absolute value of
#   CI is not comparable across prompt sets with different numbers of categories.

# %% tags=["hide-input"]
show_notes(result.notes)
