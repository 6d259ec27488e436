"""Trajectories of one source for one prompt table, under every representation convention.

A *convention* (:class:`Convention`) says how a prompt's trajectory is built from a forward pass:

* ``pool``: "mean" over the prompt's non-padding tokens (paper text) or the "last" non-special
  token (released code; for an encoder it skips the trailing ``[SEP]``);
* ``layer0``: keep the embedding output h(0) (paper text) or drop it (released code);
* ``final``: the last state raw (the residual stream after block L, lamina's convention) or
  "post_norm" (after the model's final norm, as in Hugging Face's ``hidden_states[-1]``, which
  the released code uses);
* ``normalize``: L2-normalise every state before any metric.

:func:`load_model_states` runs one forward pass per prompt (all tokens, all layer boundaries,
fp32, cached on disk), pools it by mean and by last content token, and keeps the final state
after the model's final norm beside the raw one, so that every convention is a view of the same
extraction. ``"peer-<folder>"`` reads paper 1's released states instead, and
``"synthetic-<kind>"`` the known-answer sources (:mod:`lamina.trajectory.synthetic`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
import pandas as pd

from lamina.sources.models import load_model
from lamina.sources.peer import default_peer_root, is_peer, peer_folder
from lamina.states.controls import random_init_like, random_input_states
from lamina.states.extract import extract, pool_token_states
from lamina.states.peer_states import read_latent_hidden_states, read_latent_trajectories
from lamina.trajectory.synthetic import (
    SYNTHETIC,
    control_states,
    synthetic_states,
    synthetic_tokens,
)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["CONVENTIONS", "PEER_MODEL", "Convention", "ModelStates", "PooledStates",
           "content_token_ids", "load_model_states", "peer_states", "position0_flags",
           "synthetic_model_states"]  # fmt: skip

PEER_MODEL = "peer-gpt2"


@dataclass(frozen=True)
class Convention:
    """How a trajectory is built (see the module docstring)."""

    pool: Literal["mean", "last"]
    layer0: bool = True
    final: Literal["raw", "post_norm"] = "raw"
    normalize: bool = False

    @property
    def label(self) -> str:
        parts = [f"{self.pool} token" if self.pool == "last" else "mean pool"]
        parts.append("with layer 0" if self.layer0 else "without layer 0")
        parts.append("post-norm final" if self.final == "post_norm" else "raw final")
        if self.normalize:
            parts.append("normalised")
        return ", ".join(parts)


CONVENTIONS: dict[str, Convention] = {
    "paper text": Convention("mean", True, "raw", False),
    "released code": Convention("last", False, "post_norm", False),
    "mean, post-norm final": Convention("mean", True, "post_norm", False),
    "last, with layer 0": Convention("last", True, "raw", False),
    "paper text, normalised": Convention("mean", True, "raw", True),
    "released code, normalised": Convention("last", False, "post_norm", True),
}




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
    for random input embeddings fed through the model (``random_input``, paper 1's control;
    None where no model exists), diagnostics (the massive first-token activation; the weights'
    quantisation from provenance, ``"quantization"``, None for fp32) and notes."""

    name: str
    pools: dict[str, PooledStates]
    control: dict[str, PooledStates] | None
    diagnostics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    random_input: dict[str, PooledStates] | None = None


def _pool_ragged(
    model: Any, tokenizer: Any, texts: list[str], ragged: list[np.ndarray]
) -> tuple[dict[str, PooledStates], dict[str, Any]]:
    """Pool per-token states (L+1, T_i, d) by mean and last content token, with the final
    state after the model's final norm too (:func:`lamina.states.extract.pool_token_states`)."""
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
    pools, diag = _pool_ragged(model, tokenizer, texts, cast(list[np.ndarray], traj.states))  # pool="none": ragged list
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


def position0_flags(x: np.ndarray, factor: float = 10.0) -> np.ndarray:
    """(n,) bool: states whose middle-layer norm exceeds ``factor`` x the median over prompts,
    the signature of GPT-2's massive activation at position 0 (a last-token state of a
    one-token prompt). x: (n, L+1, d)."""
    norms = np.linalg.norm(x[:, x.shape[1] // 2], axis=-1)
    return norms > factor * np.median(norms)


def _peer_token_counts(
    root: Any, folder: str, prompts: pd.DataFrame, x: np.ndarray
) -> tuple[np.ndarray, int]:
    """(n,) tokens per released prompt: ``num_tokens`` of the released ``metadata.parquet``
    where it lists the prompt; else 1 for a state flagged by :func:`position0_flags`, else 0
    (unknown, and not at position 0). Also the number flagged by norm."""
    n_tok = np.zeros(len(prompts), dtype=int)
    meta = Path(root) / "data" / "hidden_states" / folder / "metadata.parquet"
    if meta.is_file():
        known = pd.read_parquet(meta).set_index("prompt_id")["num_tokens"]
        ids = prompts["id"].astype(str)
        n_tok = ids.map(known).fillna(0).astype(int).to_numpy()
    flags = position0_flags(x)
    n_tok = np.where((n_tok == 0) & flags, 1, n_tok)
    return n_tok, int(flags.sum())


def peer_states(peer_root: str | Path | None = None, name: str = PEER_MODEL) -> ModelStates:
    """Paper 1's released states of model ``name`` (``peer-<folder>``, see
    :mod:`lamina.sources.peer`) under ``peer_root`` (None: ``default_peer_root()``)."""
    root = Path(peer_root) if peer_root else default_peer_root()
    folder = peer_folder(name)
    traj = read_latent_trajectories(root, folder)
    x = np.asarray(traj.states, dtype=np.float32)  # (n, L+1, d), row L post-norm
    prompts = _peer_families(traj.prompts)
    n_tok, flagged = _peer_token_counts(root, folder, prompts, x)
    last = PooledStates(x[:, :-1], x[:, -1], False, prompts, n_tok)
    pools = {"last": last}
    n_blocks = x.shape[1] - 1
    notes = [
        f"{name}: paper 1's released last-token states ({len(x)} prompts, "
        f"{traj.meta.get('hf_model', folder)}); their final row is post-norm only, so the "
        f"raw-final conventions end at block {n_blocks - 1}.",
        f"{name}: {int(np.sum(n_tok == 1))} prompts are single-token (metadata.parquet "
        f"num_tokens, or a position-0 state flagged by its norm: {flagged} flagged).",
    ]
    try:
        hs = read_latent_hidden_states(root, folder, pool="mean")
        hx = np.asarray(hs.states, dtype=np.float32)
        hp = _peer_families(hs.prompts)
        pools["mean"] = PooledStates(
            hx[:, :-1], hx[:, -1], False, hp, _peer_token_counts(root, folder, hp, hx)[0]
        )
        notes.append(f"{name} mean pooling: only the {len(hx)} prompts released with every token.")
    except Exception as exc:  # hidden states absent: mean pooling unavailable
        notes.append(f"{name} mean pooling unavailable: {exc}")
    return ModelStates(name, pools, None, {"has_final_norm": True}, notes)


def load_model_states(
    name: str, prompts: pd.DataFrame, *, seed: int = 0, peer_root: str | Path | None = None,
    random_init: bool = True, random_input: bool = True,
) -> ModelStates:
    """Trajectories of ``prompts["prompt"]`` for model ``name``, in fp32, cached on disk; plus,
    when ``random_init``, the same for a random-init model of the architecture (seeded), and
    when ``random_input``, random input embeddings fed through the model.
    ``name == "peer-<folder>"`` reads that model's released states instead (their own
    prompts)."""
    if is_peer(name):
        return peer_states(peer_root, name)
    if name in SYNTHETIC:
        return synthetic_model_states(name, prompts, seed)
    import torch

    model, tokenizer = load_model(name, dtype=torch.float32)
    texts = prompts["prompt"].tolist()
    pools, diag = _extract_model(model, tokenizer, texts, cache=True)
    # the weights' quantisation from provenance: a GGUF's llama.cpp file type, or lamina.sources.quantize's
    diag["quantization"] = (getattr(model, "lamina_source", None) or {}).get("quantization") or (
        getattr(model, "lamina_quantization", None) or {}).get("qtype")
    for p in pools.values():
        p.prompts = prompts.reset_index(drop=True)
    random_pools = None
    if random_input:
        ragged = random_input_states(model, content_token_ids(tokenizer, texts, pools["mean"].n_tokens),
                                     seed)  # fmt: skip
        random_pools = _pool_plain(model, ragged, prompts)
    control = None
    if random_init:
        fresh = random_init_like(model, seed=seed)
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
    return ModelStates(name, pools, control, diag, notes, random_pools)


def content_token_ids(tokenizer: Any, texts: list[str], n_content: Any) -> list[list[int]]:
    """Per text, the ids of its first ``n_content[i]`` content tokens (those the tokenizer does
    not mark special: the tokens the extraction pooled, after any truncation), for the
    random-embedding control's random vocabulary; a text with none keeps its first token."""
    enc = tokenizer(list(texts), return_special_tokens_mask=True)
    out = []
    for ids, special, k in zip(enc["input_ids"], enc["special_tokens_mask"], n_content, strict=True):
        content = [int(t) for t, s in zip(ids, special, strict=True) if not s][: int(k)]
        out.append(content or [int(ids[0])])
    return out


class _NoSpecialTokens:
    """Tokenizer stand-in for inputs without special tokens (random input embeddings): text i
    of length T_i reads as T_i content tokens, so that :func:`pool_token_states` pools them."""

    def __call__(self, texts: list[str], return_special_tokens_mask: bool = True) -> dict:
        return {"special_tokens_mask": [[0] * len(t) for t in texts]}


def _pool_plain(model: Any, ragged: list[np.ndarray], prompts: pd.DataFrame) -> dict[str, PooledStates]:
    """Mean / last pooling of per-token states (L+1, T_i, d) that have no special tokens
    (random input embeddings), with the model's final norm applied to the last row: the pooling
    of :func:`lamina.states.extract.pool_token_states`, every token a content token."""
    placeholders = ["." * a.shape[1] for a in ragged]  # one content token per character
    pooled = pool_token_states(
        model, cast("PreTrainedTokenizerBase", _NoSpecialTokens()), placeholders, ragged
    )
    return {
        pool: PooledStates(
            pooled[pool], pooled.get(f"{pool}_post"), True, prompts.reset_index(drop=True),
            pooled["n_content"],
        )
        for pool in ("mean", "last")
    }


def synthetic_model_states(name: str, prompts: pd.DataFrame, seed: int = 0) -> ModelStates:
    """``ModelStates`` of a synthetic source for ``prompts`` (what :func:`load_model_states`
    returns for ``name`` "synthetic-<kind>", :mod:`lamina.trajectory.synthetic`): each pool
    from its own fitted background, the random-init model and the random-embedding control
    from :func:`lamina.trajectory.synthetic.control_states` (the random-embedding control a
    fresh random vocabulary, shared by every prompt holding a key, as a real embedding is),
    ``n_tokens`` = :func:`lamina.trajectory.synthetic.synthetic_tokens`."""
    if name not in SYNTHETIC:
        raise ValueError(f"unknown synthetic source {name!r}; choose one of {SYNTHETIC}")
    table = prompts.reset_index(drop=True)
    kind = name.removeprefix("synthetic-")

    def pooled(which: str) -> dict[str, PooledStates]:
        out = {}
        for p in ("mean", "last"):
            x = (synthetic_states(table, kind, seed, p) if which == "real"
                 else control_states(table, kind, seed, p)[which])
            out[p] = PooledStates(x.astype(np.float32), None, True, table, synthetic_tokens(table, p))
        return out

    what = {"null": "no effect is planted.",
            "planted": "paper 1's effects are planted at the abstract's sizes.",
            "planted-half": "paper 1's effects are planted at half the abstract's sizes.",
            "survivor": "paper 1's effects at the abstract's sizes, carried by what the controls "
            "keep."}[kind]  # fmt: skip
    return ModelStates(
        name, pooled("real"), pooled("random-init model"),
        {"has_final_norm": False, "synthetic": kind, "seed": seed},
        [f"{name}: a known-answer source (seed {seed}), not a model: {what}"],
        pooled("random embeddings"),
    )
