"""Known-answer sources for paper 1's chapters: ``synthetic-null``, ``synthetic-planted``,
``synthetic-planted-half``, ``synthetic-survivor``, ``synthetic-removable`` and the last two at
the fitted model's own convergence peak (``-survivor-model``, ``-removable-model``), the
realistic sources of
:mod:`lamina.trajectory.realistic` (a background fitted to SmolLM2's states, the paper's
effects planted by :mod:`lamina.trajectory.levers`), dispatched by :func:`synthetic_states`.

They return states (n, L+1, d) for any prompt table of lamina's families, under mean or
last-token pooling (each pooling has its own fitted background; ``pool`` =
:data:`lamina.trajectory.fitted.POSITIONAL`: last-token pooling on organism-gpt2's background,
whose layer 0 carries position signal, for the bifurcation ratio's calibration), so the
trajectory chapters run
on them exactly as on a model (``lamina.chapters.states.load_model_states`` dispatches here).
A prompt's tokens are its whitespace words times the fitted tokens per word
(:func:`synthetic_tokens`).

Controls of a source (:func:`control_states`): the random-embedding control is a draw of
:func:`lamina.trajectory.realistic.control_kind` (a null draw, or for the survivor source
another draw of its kind) with its own seed: a fresh random vocabulary, every key's component
drawn again and shared, as a random embedding is, by every prompt holding the key; the
random-init model is a null draw of another seed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lamina.trajectory.fitted import background
from lamina.trajectory.levers import levers
from lamina.trajectory.realistic import (
    CALIBRATION_KINDS,
    ELSEWHERE,
    KINDS,
    REMOVABLE,
    compose,
    control_kind,
    draw,
    source_tokens,
)

__all__ = ["CONTROL_SEED", "RANDOM_INIT_SEED", "SYNTHETIC", "control_states", "synthetic_states",
           "synthetic_tokens"]  # fmt: skip

SYNTHETIC = tuple(f"synthetic-{k}" for k in KINDS)
CONTROL_SEED = 20_002  # added to the source's seed for its random-embedding control
RANDOM_INIT_SEED = 10_001  # added to the source's seed for its random-init model


def synthetic_tokens(prompts: pd.DataFrame, pool: str = "mean") -> np.ndarray:
    """(n,) tokens of each prompt on the synthetic sources (whitespace words x the fitted
    tokens per word, at least 1)."""
    return source_tokens(prompts.reset_index(drop=True), background(pool))


def synthetic_states(prompts: pd.DataFrame, kind: str, seed: int = 0, pool: str = "mean") -> np.ndarray:
    """States (n, L+1, d) float64 for the rows of ``prompts`` (columns ``prompt`` and, where
    present, ``family``, ``category``, ``item``, ``base``, ``frame``, ``subtype``, ``role``,
    ``pair_id``, ``sense``, ``word_last``) on the realistic source ``kind`` (one of
    :data:`lamina.trajectory.realistic.CALIBRATION_KINDS`) under ``pool`` ("mean", "last" or
    :data:`lamina.trajectory.fitted.POSITIONAL`).
    Deterministic in ``seed``."""
    if kind not in CALIBRATION_KINDS:
        raise ValueError(f"synthetic kind must be one of {CALIBRATION_KINDS}; got {kind!r}")
    t = prompts.reset_index(drop=True)
    if len(t) == 0:
        raise ValueError("synthetic_states needs at least one prompt")
    bg = background(pool)
    base = {"survivor": "planted", "removable": "planted", "survivor-model": "planted-model",
            "removable-model": "planted-model", "planted-elsewhere": "planted"}  # fmt: skip
    lv = levers(base.get(kind, kind), pool)
    if kind.startswith("removable"):  # the sizes carried by what the controls remove
        lv = lv.but(**REMOVABLE)
    if kind == "planted-elsewhere":  # the planted sizes, each location moved
        lv = lv.but(**ELSEWHERE)
    return compose(t, draw(t, seed, bg), bg, lv)


def control_states(prompts: pd.DataFrame, kind: str, seed: int = 0, pool: str = "mean") -> dict[str, np.ndarray]:
    """The model controls of source ``kind`` at ``seed`` (module docstring): {"random
    embeddings": (n, L+1, d), "random-init model": (n, L+1, d)}."""
    return {
        "random embeddings": synthetic_states(prompts, control_kind(kind), seed + CONTROL_SEED, pool),
        "random-init model": synthetic_states(prompts, "null", seed + RANDOM_INIT_SEED, pool),
    }
