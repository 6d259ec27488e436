"""Array conventions shared by the library: the conversion of numpy / torch inputs to numpy,
and the label alias.

The shape-typed aliases of states, profiles and weights are in :mod:`lamina.core.types`; the
shape letters are used the same way in every docstring: n: prompts (or sequences); L: blocks,
so L+1 states per trajectory (layer 0 = embedding output); T: tokens; d: model width; k:
subspace dimension.
"""

from __future__ import annotations

import sys
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

__all__ = ["LOGIT_BYTES", "Labels", "logit_rows", "to_numpy"]

LOGIT_BYTES = 2**29
"""The float32 logits one evaluation forward may hold at once (512 MiB): a batch of sequences
is cut into chunks of :func:`logit_rows` rows."""

# (n,) category labels of the prompts (any hashable values).
Labels: TypeAlias = "npt.ArrayLike"


def to_numpy(x: Any, name: str) -> np.ndarray:
    """``x`` (numpy, torch on any device, bf16/fp16 widened to fp32, or a sequence) as a
    numpy array; ValueError naming ``name`` for a non-numeric dtype."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        t = x.detach().cpu()
        if t.dtype in (torch.bfloat16, torch.float16):
            t = t.float()
        x = t.numpy()
    arr = np.asarray(x)
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(f"{name} must be a real numeric array; got dtype {arr.dtype}")
    return arr


def logit_rows(model: Any, length: int, cap: int = 64, budget: int = LOGIT_BYTES) -> int:
    """Sequences per chunk of an evaluation forward of ``model`` (a causal LM with
    ``config.vocab_size`` words) whose (rows, length, vocab) float32 logits (and a log-softmax
    of the same size) fit ``budget`` bytes each: at least 1, at most ``cap``.
    Gemma-3's 262,144 words at 128 tokens give 4 rows (64 rows were 8 GiB of logits, and as
    much again for their log-softmax); SmolLM2's 49,152 give 21."""
    vocab = int(model.config.vocab_size)
    return max(1, min(cap, budget // max(1, 4 * vocab * length)))
