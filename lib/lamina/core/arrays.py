"""Array conventions shared by the library: shape-annotated aliases and the conversion of
numpy / torch inputs to numpy.

The aliases name an array's role and document its shape; the shape letters are used the same
way in every docstring:

n: prompts (or sequences); L: blocks, so L+1 states per trajectory (layer 0 = embedding
output); T: tokens; d: model width; k: subspace dimension.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # torch is optional for the geometry; annotations only
    import torch

__all__ = ["ArrayIn", "Labels", "Profile", "States", "to_numpy"]

# A numpy array or a torch tensor of any float dtype (converted with :func:`to_numpy`).
ArrayIn: TypeAlias = "npt.ArrayLike | torch.Tensor"
# (n, L+1, d) hidden states: n prompts, L+1 layers, width d (numpy or torch, any float dtype).
States: TypeAlias = "npt.ArrayLike | torch.Tensor"
# (n,) category labels of the prompts (any hashable values).
Labels: TypeAlias = "npt.ArrayLike"
# (n, L) a per-prompt profile over layers or layer transitions (e.g. SIM(l)).
Profile: TypeAlias = "npt.ArrayLike | torch.Tensor"


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
