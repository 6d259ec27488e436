"""The trajectory tour's measurement: layerwise similarity SIM(l) of a handful of prompts on
each model (the book's first chapter, :mod:`lamina.chapters.trajectory_tour`).

SIM(l) = cos(h(l), h(l+1)) (:func:`lamina.trajectory.layerwise_cosine`), h(l) the pooled residual
stream after block l (layer 0 = embedding output, before any final norm).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from lamina.sources.models import load_model
from lamina.states.extract import extract
from lamina.trajectory.metrics import layerwise_cosine

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["TOUR_PROMPTS", "tour_similarity", "tour_summary"]

TOUR_PROMPTS = (
    "The cat slept on the warm windowsill.",
    "A heavy truck rolled down the hill.",
    "She was delighted by the surprise party.",
    "If Anna is taller than Ben and Ben is taller than Carl, who is shortest?",
    "Paris is to France as Rome is to Italy.",
    "He deposited his salary at the bank.",
)


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


