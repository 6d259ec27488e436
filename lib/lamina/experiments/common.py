"""Small helpers shared by the trajectory experiments: model loops, controls, vanish verdicts."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Literal

import numpy as np
import pandas as pd

from lamina.controls import random_embeddings, shuffle_layers
from lamina.experiments.states import ModelStates, PooledStates, load_model_states
from lamina.experiments.trajectory import (
    CONVENTIONS,
    Convention,
    TrajectoryConfig,
    claim_record,
    expand_models,
)
from lamina.peer import is_peer

__all__ = ["each_model", "state_controls", "sensitivity_rows", "vanish_claim", "vanish_verdict"]

# the two controls under which paper 1 says its effects vanish
VANISH_CONTROLS = ("shuffled layers", "random embeddings")


def each_model(
    config: TrajectoryConfig, prompts: pd.DataFrame, notes: list[str], *, peer: bool = True
) -> Iterator[ModelStates]:
    """Yield the states of every model of ``config.model`` (see ``expand_models``); models
    skipped (not built, no released data, or ``peer=False``) are recorded in ``notes``."""
    models, skipped = expand_models(config)
    notes.extend(skipped)
    for name in models:
        if is_peer(name) and not peer:
            notes.append(f"{name} skipped: paper 1 released no states for these prompts.")
            continue
        states = load_model_states(name, prompts, config)
        notes.extend(states.notes)
        yield states


def state_controls(
    x: np.ndarray, ms: ModelStates, conv: Convention, seed: int
) -> dict[str, np.ndarray | None]:
    """Control versions of the states ``x`` (n, layers, d) of convention ``conv``: shuffled
    layers, moment-matched Gaussian states, and the random-init model (None when absent)."""
    init = None
    if ms.control is not None and conv.pool in ms.control:
        init = ms.control[conv.pool].states(conv)[0]
    return {
        "shuffled layers": shuffle_layers(x, seed=seed),
        "random embeddings": random_embeddings(x, seed=seed),
        "random-init model": init,
    }


def sensitivity_rows(
    ms: ModelStates,
    measure: Callable[[np.ndarray, PooledStates, list[int], Convention], dict[str, Any]],
    *,
    pools: tuple[str, ...] = ("mean", "last"),
) -> list[dict[str, Any]]:
    """``measure(states, pooled, layers, convention)`` under every convention of
    ``CONVENTIONS`` that the model's states allow, one row each."""
    rows = []
    for name, conv in CONVENTIONS.items():
        if conv.pool not in ms.pools or conv.pool not in pools:
            continue
        pooled = ms.pools[conv.pool]
        x, layers = pooled.states(conv)
        row = {"model": ms.name, "convention": name, "definition": conv.label}
        row.update(measure(x, pooled, layers, conv))
        rows.append(row)
    return rows


def vanish_verdict(fractions: list[float]) -> str:
    """Verdict on "the effect vanishes under the controls", from the fraction of the effect
    that remains under each control: reproduced if every fraction is below 0.5, partially if
    some are, not reproduced if none; not testable without a finite fraction."""
    f = np.array([v for v in fractions if v is not None and np.isfinite(v)])
    if f.size == 0:
        return "not testable"
    small = np.abs(f) < 0.5
    return "reproduced" if small.all() else "partially" if small.any() else "not reproduced"


def vanish_claim(
    claim_id: str,
    claim: str,
    model: str,
    controls: pd.DataFrame,
    *,
    effect_name: str,
    convention: str,
    p_rule: Literal["min p", "max q"] = "min p",
) -> dict[str, Any]:
    """Claims row for "the effect vanishes under shuffled-layer and random-embedding
    controls", from one model's controls table (columns ``control``, ``fraction_remaining``,
    ``p`` and, for ``p_rule="max q"``, ``q``). Measured: the largest |fraction of the effect
    remaining| over the two controls; p: their smallest ``p`` ("min p") or largest
    Benjamini-Hochberg ``q`` ("max q"); verdict: :func:`vanish_verdict`."""
    named = controls[controls["control"].isin(VANISH_CONTROLS)]
    p = named["p"].min() if p_rule == "min p" else named["q"].max()
    return claim_record(
        claim_id,
        claim,
        "effect absent under controls",
        model,
        float(named["fraction_remaining"].abs().max()),
        p=float(p),
        verdict_word=vanish_verdict(named["fraction_remaining"].tolist()),
        effect_name=effect_name,
        convention=convention,
    )
