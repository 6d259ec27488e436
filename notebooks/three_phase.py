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
# Stability, the fifth of paper 1's metrics, is measured here too.

# %% tags=["parameters", "hide-input"]
model = "default"  # "default": smollm2-135m-instruct, gemma-3-270m, paper 1's released states, MiniLM, organisms; or one model name/path
pooling = "mean"  # main convention: "mean" over tokens (paper text) or "last" token (released code)
prompts = (
    None  # None: the chapter's prompt families; or a JSONL path / family name (comma-separated)
)
n_bootstrap = 10000  # bootstrap resamples for 95% CIs (the paper's B)
seed = 0  # seeds controls, bootstraps and the random-init model
quick = False  # few prompts and resamples, for CI
sensitivity = True  # also rerun the test under every representation convention (slower)
quant_control = True  # also rerun the quantised models re-quantised (Q4_0; Q8_0 where a verdict flips)
peer_root = None  # paper 1's released data; None: ../shared/peer/latent-trajectories
results_root = None  # where results are written; None: lamina.states.io.results_dir()

# %% tags=["hide-input"]
import altair as alt

from lamina.book import glue, setup_altair
from lamina.book.chapter import (
    claims_view,
    finding_title,
    glue_claim,
    show_notes,
)
from lamina.book.charts import facet, model_color, show_figure
from lamina.book.tables import show_details, show_verdicts
from lamina.chapters.three_phase import Config, run
from lamina.chapters.trajectory import show_quant_control

config = Config.from_globals(globals())  # the parameters above (a mistyped one is an error)
setup_altair()
result = run(config)
result.write(results_root)
claims = result.claims
glue_claim("tp", claims, "p1-three-phase-bands", n_models=len(result.models))

# %% [markdown]
# ## Method
# `lamina.chapters.three_phase.run_three_phase` computes `lamina.trajectory.layerwise_cosine` for the
# semantic, analogy, reasoning and lexical families (single-token prompts left out), then
# (a) the paper's fixed bands (`lamina.trajectory.phases.fixed_phase_bands`), tested within
# independent units (a prompt, or all lexical variants of one base word together): each unit's
# mean SIM in the elaboration band is compared with its own encoding and output-preparation
# bands (two paired t-tests of the mean, as the estimate is a mean; both must hold, so p is
# the larger of the two).
# The estimate is the margin by which elaboration exceeds both neighbours, with a bootstrap CI
# over units. Three phases need a size, not only a direction: the margin's whole CI must clear
# half the smallest gap between GPT-2's quoted band middles
# (`lamina.trajectory.claims.PHASE_MARGIN`). "Consistent across architectures" is its own row,
# over the sources this chapter ran (`lamina.trajectory.claims.UNIVERSAL`). GPT-2's quoted band
# ranges are tested on GPT-2 models only.
# (b) `lamina.trajectory.phases.detect_phases`: exact least-squares change points with the number
# of phases chosen by a penalised BIC (and, for comparison, cross-validation), on the
# prompt-mean profile and on 300 prompt resamples.
# (c) Stability STAB(l) = cos(h_p(l), h_p′(l)) on the perturbation pairs of
# `perturbations.jsonl` ("cat" → "a cat", synonyms, tense, ...).

# %% [markdown]
# ## Result
# The fixed bands on {glue:text}`tp_model`: the margin of elaboration over its two neighbouring
# bands is {glue:text}`tp_measured:.3f` in mean SIM (95% CI {glue:text}`tp_ci_low:.3f`–{glue:text}`tp_ci_high:.3f`).
# Change-point detection finds {glue:text}`tp_k` phase(s) there.

# %% tags=["hide-input"]
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
show_figure(
    facet(
        base.mark_line(color="gray") + points,
        "model",
        real["model"],
        title=finding_title(
            claims, "p1-three-phase-bands", "Elaboration's SIM margin over both neighbours"
        ),
    ).resolve_scale(y="independent"),
    what="The cosine similarity SIM(l) of consecutive layers across depth; colour gives the phase "
    "change-point detection assigns, shape the paper's fixed band, one panel per model.",
    look_at="whether the detected phases line up with the paper's three bands",
    claims=claims,
    claim_id="p1-three-phase-detected",
)

# %% tags=["hide-input"]
show_details(result.tables["bands"].round(3), "The band means and margins, per model")

# %% tags=["hide-input"]
show_verdicts(claims_view(claims))

# %% tags=["hide-input"]
detected = claims[claims["claim_id"] == "p1-three-phase-detected"].reset_index(drop=True)
glue("tp_k", int(detected.loc[0, "measured"]))
glue("tp_share_three", float(detected.loc[0, "effect_size"]))
glue("tp_n_three", int((detected["verdict"] == "reproduced").sum()))
universal = claims[claims["claim_id"] == "p1-three-phase-universal"]
glue("tp_universal_verdict", str(universal["verdict"].iloc[0]) if len(universal) else "not run")
glue("tp_universal_reason", str(universal["reason"].iloc[0]) if len(universal) else "")

# %% [markdown]
# :::{admonition} Verdict
# :class: important
# Fixed bands on {glue:text}`tp_model`: elaboration's margin over both neighbouring bands =
# {glue:text}`tp_measured:.3f` (95% CI {glue:text}`tp_ci_low:.3f`–{glue:text}`tp_ci_high:.3f`,
# p = {glue:text}`tp_p:.3g`): **{glue:text}`tp_verdict`** ({glue:text}`tp_reason`); reproduced
# in full on {glue:text}`tp_n_reproduced` of {glue:text}`tp_n_models` sources. **Across
# architectures:** **{glue:text}`tp_universal_verdict`** ({glue:text}`tp_universal_reason`).
# **Is it three?** Change points find {glue:text}`tp_k`
# phase(s) on {glue:text}`tp_model` (three in a share {glue:text}`tp_share_three:.2f` of prompt
# resamples), and three phases on {glue:text}`tp_n_three` of {glue:text}`tp_n_models` sources.
# :::

# %% [markdown]
# ## Controls
# Shuffled layers, random input embeddings fed through the model, and a random-init model: their
# SIM profiles and band margins. "Vanishes" is testable only where the real structure is present.

# %% tags=["hide-input"]
show_figure(
    facet(
        alt.Chart(prof)
        .mark_line()
        .encode(
            x=alt.X("depth:Q", title="depth"),
            y=alt.Y("sim:Q", title="SIM(l)"),
            color=alt.Color("condition:N"),
            strokeDash="condition:N",
        ),
        "model",
        prof["model"],
        title="SIM(l) of the real states and of each control",
    ),
    what="The layerwise similarity profile of the real states and of each control, one panel "
    "per model.",
    look_at="whether the controls keep the shape of the real profile",
)

# %% tags=["hide-input"]
show_details(result.tables["controls"], "The controls, per model")

# %% [markdown]
# ## Stability
# Mean STAB(l) over the perturbation pairs with a bootstrap 95% band; paper 1 names the metric
# but states no number for it.

# %% tags=["hide-input"]
stab = result.tables["stability"]
if len(stab):
    stab_all = stab[stab["kind"] == "all"]
    show_figure(
        alt.Chart(stab_all)
        .mark_line(point=True)
        .encode(
            x=alt.X("depth:Q", title="depth (layer / last layer)"),
            y=alt.Y("stability:Q", title="STAB(l)", scale=alt.Scale(zero=False)),
            color=model_color(stab_all),
        )
        .properties(title="Stability under small lexical edits, by depth"),
        what="The mean cosine similarity STAB(l) between each prompt and its small lexical edit, "
        "by depth, per model.",
        look_at="the depths where the perturbed prompts drift furthest from the originals",
    )
    show_details(
        stab.groupby(["model", "kind"])["stability"].mean().unstack().round(3),
        "Mean stability per model and perturbation kind",
    )

# %% [markdown]
# ## Sensitivity to the representation convention

# %% tags=["hide-input"]
sens = result.tables["sensitivity"]
if len(sens):
    show_figure(
        alt.Chart(sens)
        .mark_point(filled=True, size=70)
        .encode(
            x=alt.X("margin:Q", title="elaboration's SIM margin over both neighbours"),
            y=alt.Y("convention:N", title=None),
            color=model_color(sens),
            shape="verdict:N",
            tooltip=["model", "convention", "encoding", "elaboration", "output", "p"],
        )
        .properties(title="Band margin under each representation convention"),
        what="Elaboration's SIM margin over both neighbouring bands under each representation "
        "convention, per model.",
        look_at="how much the points move, and whether any margin changes sign, between "
        "conventions",
    )
    show_details(sens.drop(columns=["definition"]).round(3), "Every convention, per model")

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
# - With 6 (MiniLM) or 12 blocks the profile has 6 or 12 points; the BIC penalty then favours
#   few phases. A fixed band of one or two points is not a phase in any data-driven sense.
# - Under mean pooling, a first-token massive activation, where a model has one, can dominate
#   the pooled state; the chapter's notes name each model whose first token's norm exceeds ten
#   times the median of the others.
# - The paper's ranges are for GPT-2; other models are tested on the band structure only.

# %% tags=["hide-input"]
show_notes(result.notes)
