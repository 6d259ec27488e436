"""Trajectories of one model for one prompt table, under every representation convention.

``load_model_states`` runs one forward pass per prompt (all tokens, all layer boundaries, fp32,
cached on disk), pools it by mean and by last content token, and keeps the final state after the
model's final norm beside the raw one, so that every :class:`~lamina.chapters.trajectory.Convention`
is a view of the same extraction. ``"peer-gpt2"`` reads paper 1's released states instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from lamina import load_model
from lamina.chapters.trajectory import PEER_MODEL, Convention, TrajectoryConfig, peer_root
from lamina.controls import random_init_like
from lamina.extract import extract, pool_token_states
from lamina.io import read_latent_hidden_states, read_latent_trajectories

__all__ = ["ModelStates", "PooledStates", "load_model_states"]


@dataclass
class PooledStates:
    """States of one pooling mode.

    raw: (n, L_raw + 1, d) float32, layer 0 = embedding output, rows = residual stream before
        any final norm; post_final: (n, d) the final state after the final norm, or None;
    raw_has_final: whether raw's last row is the raw state after block L (False for the
        released states, whose row L exists only post-norm: it is then appended, not replaced).
    prompts: the rows' prompt table; n_tokens: (n,) tokens per prompt (0 = unknown).
    """

    raw: np.ndarray
    post_final: np.ndarray | None
    raw_has_final: bool
    prompts: pd.DataFrame
    n_tokens: np.ndarray

    def states(self, conv: Convention) -> tuple[np.ndarray, list[int]]:
        """(n, layers, d) states of ``conv`` and their layer indices (0 = embedding output)."""
        x = self.raw
        if conv.final == "post_norm" and self.post_final is not None:
            x = np.concatenate(
                [x[:, :-1] if self.raw_has_final else x, self.post_final[:, None]], axis=1
            )
        layers = list(range(x.shape[1]))
        if not conv.layer0:
            x, layers = x[:, 1:], layers[1:]
        if conv.normalize:
            x = x / np.linalg.norm(x, axis=-1, keepdims=True).clip(1e-30)
        return x, layers


@dataclass
class ModelStates:
    """One model's trajectories for one prompt table: ``pools[pool]`` for "mean"/"last", the
    same for a random-init model of the architecture (``control``, None where no model exists),
    diagnostics (the massive first-token activation) and notes."""

    name: str
    pools: dict[str, PooledStates]
    control: dict[str, PooledStates] | None
    diagnostics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _pool_ragged(
    model: Any, tokenizer: Any, texts: list[str], ragged: list[np.ndarray]
) -> tuple[dict[str, PooledStates], dict[str, Any]]:
    """Pool per-token states (L+1, T_i, d) by mean and last content token, with the final
    state after the model's final norm too (:func:`lamina.extract.pool_token_states`)."""
    pooled = pool_token_states(model, tokenizer, texts, ragged)
    n_content = pooled["n_content"]
    pools = {
        pool: PooledStates(
            pooled[pool], pooled.get(f"{pool}_post"), True, pd.DataFrame(), n_content
        )
        for pool in ("mean", "last")
    }
    ratios = [first_token_norm_ratio(arr) for arr in ragged if arr.shape[1] > 2]
    ratio = np.mean(ratios, axis=0) if ratios else np.array([np.nan])
    diag = {
        "first_token_norm_ratio_max": float(np.nanmax(ratio)),
        "first_token_norm_ratio_layer": int(np.nanargmax(ratio)) + 1 if ratios else -1,
        "single_token_prompts": int(np.sum(n_content <= 1)),
        "median_tokens": float(np.median([a.shape[1] for a in ragged])),
        "has_final_norm": "mean_post" in pooled,
    }
    return pools, diag


def first_token_norm_ratio(arr: np.ndarray) -> np.ndarray:
    """(L,) ratio of the first token's state norm to the median norm of the other tokens, at
    layers 1..L of one prompt's states ``arr`` (L+1, T, d), T > 2: GPT-2's massive first-token
    activation shows as a ratio far above 1."""
    nrm = np.linalg.norm(arr[1:], axis=-1)  # (L, T)
    return nrm[:, 0] / np.median(nrm[:, 1:], axis=1)


def _extract_model(
    model: Any, tokenizer: Any, texts: list[str], cache: bool
) -> tuple[dict[str, PooledStates], dict[str, Any]]:

    cfg = model.config
    limit = getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", None)
    traj = extract(
        model, tokenizer, texts, pool="none", progress=False, cache=cache, max_length=limit
    )
    pools, diag = _pool_ragged(model, tokenizer, texts, traj.states)
    diag["truncated_prompts"] = len(traj.meta.get("truncated", []))
    return pools, diag


def _peer_families(table: pd.DataFrame) -> pd.DataFrame:
    """Released prompts with lamina's columns: ``category`` = the released group; ``family`` =
    "reasoning", "lexical" (the released single-word "atomic" prompts, the closest match to
    lexical variations) or "semantic"."""
    out = table.rename(columns={"group": "category"})
    out["family"] = np.where(
        out["category"] == "reasoning",
        "reasoning",
        np.where(out["prompt_type"] == "atomic", "lexical", "semantic"),
    )
    return out


def peer_states(config: TrajectoryConfig) -> ModelStates:

    root = peer_root(config)
    traj = read_latent_trajectories(root)
    x = np.asarray(traj.states, dtype=np.float32)  # (n, 13, d), row 12 post-norm
    prompts = _peer_families(traj.prompts)
    last = PooledStates(x[:, :-1], x[:, -1], False, prompts, np.zeros(len(x), dtype=int))
    pools = {"last": last}
    notes = [
        "peer-gpt2: paper 1's released last-token states (170 prompts); their final row is "
        "post-norm only, so the raw-final conventions end at block 11."
    ]
    try:
        hs = read_latent_hidden_states(root, pool="mean")
        hx = np.asarray(hs.states, dtype=np.float32)
        hp = _peer_families(hs.prompts)
        pools["mean"] = PooledStates(hx[:, :-1], hx[:, -1], False, hp, np.zeros(len(hx), int))
        notes.append("peer-gpt2 mean pooling: only the 50 prompts released with every token.")
    except Exception as exc:  # hidden states absent: mean pooling unavailable
        notes.append(f"peer-gpt2 mean pooling unavailable: {exc}")
    return ModelStates(PEER_MODEL, pools, None, {"has_final_norm": True}, notes)


def load_model_states(
    name: str, prompts: pd.DataFrame, config: TrajectoryConfig, *, random_init: bool = True
) -> ModelStates:
    """Trajectories of ``prompts["prompt"]`` for model ``name``, in fp32, cached on disk; plus,
    when ``random_init``, the same for a random-init model of the architecture (seeded).
    ``name == "peer-gpt2"`` reads the released states instead (their own prompts)."""
    if name == PEER_MODEL:
        return peer_states(config)
    import torch

    model, tokenizer = load_model(name, dtype=torch.float32)
    texts = prompts["prompt"].tolist()
    pools, diag = _extract_model(model, tokenizer, texts, cache=True)
    for p in pools.values():
        p.prompts = prompts.reset_index(drop=True)
    control = None
    if random_init:
        fresh = random_init_like(model, seed=config.seed)
        control, _ = _extract_model(fresh, tokenizer, texts, cache=False)
        for p in control.values():
            p.prompts = prompts.reset_index(drop=True)
    notes = []
    if diag["truncated_prompts"]:
        notes.append(
            f"{name}: {diag['truncated_prompts']} prompt(s) longer than the context were truncated."
        )
    if not diag["has_final_norm"]:
        notes.append(f"{name}: no final norm (encoder); post-norm conventions equal raw ones.")
    if diag["first_token_norm_ratio_max"] > 10:
        notes.append(
            f"{name}: the first token's norm is {diag['first_token_norm_ratio_max']:.0f}x the "
            f"median of the others (layer {diag['first_token_norm_ratio_layer']}): a massive "
            "activation that dominates mean-pooled and single-token states."
        )
    return ModelStates(name, pools, control, diag, notes)
