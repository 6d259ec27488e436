"""Pooling of per-token hidden states (``lamina.states.extract.extract(pool="none")``) into
one vector per text and layer: the mean over tokens, the last content token, and for a causal
LM the same two after the model's final norm. Re-exported by :mod:`lamina.states.extract`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from lamina.core.types import BoolMask, TokenStates
from lamina.sources.models import get_adapter

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["content_token_mask", "pool_token_states"]


def content_token_mask(
    tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], lengths: Sequence[int]
) -> list[BoolMask]:
    """Per text, a bool (T_i,) mask that is True at its content tokens: those the tokenizer
    does not mark special (``return_special_tokens_mask``). ``lengths``: the T_i actually
    extracted (a text longer than the context was truncated)."""
    special = tokenizer(list(texts), return_special_tokens_mask=True)["special_tokens_mask"]
    return [
        ~np.asarray(mask[:length], dtype=bool)
        for mask, length in zip(special, lengths, strict=True)
    ]


def pool_token_states(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    ragged: Sequence[TokenStates],
) -> dict[str, np.ndarray]:
    """Pool per-token states of ``extract(pool="none")`` (each (L+1, T_i, d)).

    -> "mean" (n, L+1, d): mean over every token; "last" (n, L+1, d): the last content token
    (:func:`content_token_mask`; the last token when a text has none); for a causal LM with a
    final norm also "mean_post" and "last_post" (n, d): the same pooling of the final state
    after the final norm; "n_content" (n,): content tokens per text. float32.
    """
    adapter = get_adapter(model)
    norm = adapter.final_norm_module(model) if adapter.causal else None
    content = content_token_mask(tokenizer, texts, [a.shape[1] for a in ragged])
    dev = next(iter(norm.parameters()), torch.empty(0)).device if norm is not None else None
    out: dict[str, list] = {"mean": [], "last": [], "mean_post": [], "last_post": []}
    for arr, mask in zip(ragged, content, strict=True):
        idx = np.flatnonzero(mask)
        last = int(idx[-1]) if idx.size else arr.shape[1] - 1
        out["mean"].append(arr.mean(axis=1))
        out["last"].append(arr[:, last])
        if norm is not None:
            with torch.inference_mode():
                post = norm(torch.from_numpy(np.ascontiguousarray(arr[-1])).to(dev)).float().cpu().numpy()
            out["mean_post"].append(post.mean(axis=0))
            out["last_post"].append(post[last])
    pooled = {k: np.stack(v).astype(np.float32) for k, v in out.items() if v}
    pooled["n_content"] = np.array([int(m.sum()) for m in content])
    return pooled
