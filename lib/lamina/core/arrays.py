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

__all__ = ["Labels", "to_numpy"]

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
