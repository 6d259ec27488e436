"""The trajectory tour (the book's first chapter): layerwise similarity SIM(l) of a handful of
prompts on each model of a small model set.

SIM(l) = cos(h(l), h(l+1)) (:func:`lamina.trajectory.layerwise_cosine`), h(l) the pooled residual
stream after block l (layer 0 = embedding output, before any final norm). The default model
set leads with the pretrained causal LMs installed offline, then the pretrained encoder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import altair as alt
import numpy as np
import pandas as pd

from lamina.book.charts import facet, show_figure
from lamina.sources.gguf_models import OFFLINE_GGUF, installed_offline
from lamina.sources.models import load_model
from lamina.states.extract import extract
from lamina.trajectory import layerwise_cosine

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["TOUR_DEFAULT", "TOUR_PROMPTS", "tour_figure", "tour_models", "tour_sentences",
           "tour_similarity", "tour_summary"]

TOUR_DEFAULT = (*OFFLINE_GGUF, "minilm")  # smollm2-135m-instruct, gemma-3-270m, minilm
TOUR_PROMPTS = (
    "The cat slept on the warm windowsill.",
    "A heavy truck rolled down the hill.",
    "She was delighted by the surprise party.",
    "If Anna is taller than Ben and Ben is taller than Carl, who is shortest?",
    "Paris is to France as Rome is to Italy.",
    "He deposited his salary at the bank.",
)


def tour_models(model: str | Sequence[str]) -> tuple[list[str], list[str]]:
    """The models to run and notes on those skipped.

    ``"default"`` -> :data:`TOUR_DEFAULT`, skipping (with a note) an offline GGUF model whose
    wheel is not installed; one name -> [name]; a list of names -> that list (duplicates
    dropped, order kept). Raises TypeError for anything else and ValueError for an empty
    list or name."""
    if isinstance(model, str):
        if not model.strip():
            raise ValueError("model is an empty string; give a model name or 'default'")
        if model != "default":
            return [model], []
        return installed_offline(TOUR_DEFAULT)
    if not isinstance(model, (list, tuple)) or not all(isinstance(m, str) and m for m in model):
        raise TypeError(
            f"model must be 'default', a model name or a list of names; got {model!r}"
        )
    if not model:
        raise ValueError("model is an empty list; give at least one model name")
    return list(dict.fromkeys(model)), []


def _short(prompt: str) -> str:
    return prompt[:32] + ("…" if len(prompt) > 32 else "")


def tour_similarity(
    models: Sequence[str], prompts: Sequence[str], pooling: str = "mean", *, progress: bool = False
) -> pd.DataFrame:
    """SIM(l) of every prompt on every model, one row per (model, prompt, transition).

    Columns: model, prompt (first 32 characters), transition ("l→l+1"), layer (l + 0.5, the
    transition's midpoint), depth (layer / L, in (0, 1)), SIM (cosine, unitless). Each model is
    loaded in fp32 with :func:`lamina.load_model`, and its states cached by
    :func:`lamina.extract` (``cache=True``)."""
    import torch

    if pooling not in ("mean", "last"):
        raise ValueError(f"pooling must be 'mean' or 'last'; got {pooling!r}")
    if not prompts or not all(isinstance(p, str) and p.strip() for p in prompts):
        raise ValueError("prompts must be a non-empty list of non-empty strings")
    rows: list[dict[str, Any]] = []
    for name in models:
        net, tokenizer = load_model(name, dtype=torch.float32)
        tok = cast("PreTrainedTokenizerBase", tokenizer)
        traj = extract(net, tok, list(prompts), pool=pooling, progress=progress, cache=True)
        sim = layerwise_cosine(np.asarray(traj.states))  # (n_prompts, L)
        n_blocks = sim.shape[1]
        rows += [
            {"model": name, "prompt": _short(p), "transition": f"{l}→{l + 1}",
             "layer": l + 0.5, "depth": (l + 0.5) / n_blocks, "SIM": float(s)}
            for p, row in zip(prompts, sim, strict=True)
            for l, s in enumerate(row)
        ]
        del net
    return pd.DataFrame(rows)


def tour_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per model: n_blocks, the transition with the lowest prompt-mean SIM, that mean
    (``min_mean_SIM``) and the prompt-mean SIM over all transitions (``mean_SIM``), in the
    frame's model order."""
    out = []
    for name, g in frame.groupby("model", sort=False):
        mean = g.groupby("layer")["SIM"].mean()
        low = float(mean.idxmin())
        out.append({"model": name, "n_blocks": int(mean.size),
                    "lowest_transition": f"{int(low - 0.5)}→{int(low + 0.5)}",
                    "lowest_depth": low / mean.size, "min_mean_SIM": float(mean.min()),
                    "mean_SIM": float(mean.mean())})
    return pd.DataFrame(out)


def tour_sentences(summary: pd.DataFrame) -> str:
    """One Markdown bullet per model of :func:`tour_summary`: its blocks, the transition with
    the lowest prompt-mean SIM (and its relative depth) and the mean over all transitions."""
    return "\n".join(
        f"- **{r.model}** ({r.n_blocks} blocks): the lowest mean SIM is at the transition "
        f"{r.lowest_transition} (depth {r.lowest_depth:.2f}), where it is {r.min_mean_SIM:.3f}; "
        f"the mean over all transitions is {r.mean_SIM:.3f}."
        for r in summary.itertuples()
    )


def tour_figure(frame: pd.DataFrame, models: Sequence[str]) -> None:
    """SIM(l) of each prompt (a line) against the transition's relative depth, one panel per
    model of ``models`` (independent y scales), shown with its caption
    (``lamina.book.charts.show_figure``)."""
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
    chart = facet(lines, "model", list(models), height=160,
                  title="Layerwise similarity SIM(l) of each prompt, one panel per model")
    show_figure(
        chart.resolve_scale(y="independent"),
        what="The cosine between consecutive layers' states of each prompt against relative "
        "depth (the tooltip names the transition), one panel per model ("
        + ", ".join(models) + "); a dip marks a layer that turns the representation.",
        look_at="the transitions where the lines dip, and whether the prompts (and models) "
        "agree on them",
    )
