"""What paper 1's analyses of one source share: their options, the main convention's states,
the controls of a claim (shuffled layers, random embeddings, a random-init model) and the
sensitivity of a measurement to the representation convention."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from lamina.evidence.decide import ControlResult
from lamina.states.controls import shuffle_layers
from lamina.trajectory.judging import control_result
from lamina.trajectory.model_states import CONVENTIONS, Convention, ModelStates, PooledStates
from lamina.trajectory.stat_tests import control_summaries, shuffle_options

__all__ = ["Analysis", "Options", "control_effects", "control_states", "main_pool",
           "sensitivity_rows"]  # fmt: skip


@dataclass(frozen=True)
class Options:
    """What an analysis reads from its chapter's config: the main convention's ``pooling``,
    the resampling budget (``n_bootstrap``, ``n_permutations``), ``seed``, whether one-token
    prompts are left out of the main test (``exclude_single_token``) and whether the
    sensitivity tables run (``sensitivity``)."""

    pooling: Literal["mean", "last"] = "mean"
    n_bootstrap: int = 10_000
    n_permutations: int = 10_000
    seed: int = 0
    exclude_single_token: bool = True
    sensitivity: bool = True

    @classmethod
    def of(cls, config: Any) -> Options:
        """The options of any config with these fields (a chapter's)."""
        return cls(**{f: getattr(config, f) for f in cls.__dataclass_fields__})


# one source's analysis: (its states, the chapter's prompts, the options) -> {table: table},
# with the claim rows under "claims"
Analysis = Callable[[ModelStates, pd.DataFrame, Options], dict[str, pd.DataFrame]]


def main_pool(ms: ModelStates, pooling: str) -> tuple[str, Convention, PooledStates]:
    """The pooling a chapter's main analysis uses: ``pooling`` when the source has it, else its
    first (released states have one). -> (pool, its default Convention, its states)."""
    pool = pooling if pooling in ms.pools else next(iter(ms.pools))
    return pool, Convention(pool), ms.pools[pool]  # type: ignore[arg-type]


def control_states(
    x: np.ndarray, ms: ModelStates, conv: Convention, seed: int, keep: np.ndarray | None = None,
    shuffle: dict[str, Any] | None = None,
) -> dict[str, np.ndarray]:  # fmt: skip
    """Control versions of the states ``x`` (n, layers, d) of convention ``conv``, for the
    rows ``keep`` of the source's prompt table (None: all):

    * "shuffled layers": each trajectory's layers in a random order (paper 1's control;
      ``shuffle``: options of :func:`lamina.states.controls.shuffle_layers`, e.g. a baseline
      kept in place);
    * "random embeddings": random input embeddings fed through the model
      (``lamina.states.controls.random_input_states``, one random vector per token id shared
      by every prompt; paper 1's control) or a synthetic source's random vocabulary; absent
      without either;
    * "random-init model": the same architecture freshly initialised, absent without a model.
    """
    rows = slice(None) if keep is None else keep
    out = {"shuffled layers": shuffle_layers(x, seed, **(shuffle or {}))}
    for name, pools in (("random embeddings", ms.random_input), ("random-init model", ms.control)):
        if pools is not None and conv.pool in pools:
            out[name] = pools[conv.pool].states(conv)[0][rows]
    return out


def control_effects(
    test: str, real: dict[str, Any], x: np.ndarray, ms: ModelStates, conv: Convention,
    table: pd.DataFrame, layers: list[int], seed: int, keep: np.ndarray | None = None,
    n_tokens: Any | None = None,
) -> tuple[dict[str, dict[str, Any]], dict[str, ControlResult]]:  # fmt: skip
    """The chapter's test on every control of :func:`control_states`
    (:func:`lamina.trajectory.stat_tests.control_summaries`, shuffled with the chapter's
    :func:`lamina.trajectory.stat_tests.shuffle_options`): (each control's summary, with its
    ``states``; each control's :class:`lamina.evidence.decide.ControlResult`)."""
    states = control_states(x, ms, conv, seed, keep, shuffle_options(test, table, real))
    summ = control_summaries(test, states, table, layers, n_tokens=n_tokens, seed=seed)
    for k, v in summ.items():
        v["states"] = states[k]
    return summ, {k: control_result(real, v) for k, v in summ.items()}


def sensitivity_rows(
    ms: ModelStates,
    measure: Callable[[np.ndarray, PooledStates, list[int], Convention], dict[str, Any]],
) -> list[dict[str, Any]]:
    """``measure(states, pooled, layers, convention)`` under every convention of
    :data:`lamina.trajectory.model_states.CONVENTIONS` that the source's states allow, one row
    each."""
    rows = []
    for name, conv in CONVENTIONS.items():
        if conv.pool not in ms.pools:
            continue
        pooled = ms.pools[conv.pool]
        x, layers = pooled.states(conv)
        row = {"model": ms.name, "convention": name, "definition": conv.label}
        row.update(measure(x, pooled, layers, conv))
        rows.append(row)
    return rows
