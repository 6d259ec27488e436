"""Shape-typed aliases for the public API of extraction, trajectory geometry, weights and
anatomy: a name for each array role, its dimensions written out, and types that a checker can
tell apart.

Each alias is a jaxtyping annotation, ``Float[A, "prompt layer d_model"]``, so the shape is
written where the signature is read and can be checked at run time (``isinstance(x, States)``,
or ``jaxtyping.jaxtyped`` with a type checker, which also checks that a dimension name binds
one size across a call's arguments and result). Dimension names: ``prompt`` (n prompts or
texts), ``layer`` (L+1 states, layer 0 = embedding output), ``token`` (T tokens), ``d_model``
(width), ``d_in`` / ``d_out`` (a linear map's input / output width), ``k`` (subspace
dimension), ``seq`` (sequences). A leading underscore (``_layer``) documents a dimension
without binding it: a profile over layer *transitions* has L or L-1 columns, not L+1.

What mypy sees, and why the array type inside carries its rank. For a static checker
jaxtyping's ``Float[A, "..."]`` is ``Annotated[A, "..."]``, that is ``A``: two aliases over a
plain ``np.ndarray`` are one type to mypy, and a profile passed where states are expected
would go unnoticed. numpy (>= 2.1) types an array's shape, so the array type of each alias
states its rank, ``np.ndarray[tuple[int, int, int], ...]`` for (prompt, layer, d_model) and
``np.ndarray[tuple[int, int], ...]`` for (prompt, layer): a value known to be a 2-D profile
(e.g. the result of :func:`lamina.trajectory.metrics.layerwise_cosine`) passed where 3-D
states are expected is an ``arg-type`` error. The check is gradual: an array whose rank numpy's
stubs do not know (``ndarray[tuple[Any, ...]]``, what ``np.load``, ``np.stack`` or ``.mean``
give) passes, so callers need neither wrappers nor casts. Rejected alternatives:
``typing.NewType`` over ``np.ndarray`` (distinct, but every plain array from numpy would then
be rejected until wrapped, at every call site of the library, notebooks and tests); runtime
checking alone (jaxtyping + beartype), which finds a mix-up only when the line runs.

torch tensors have no shape type parameter: statically a tensor matches every torch alias
(the dimension names still document it and jaxtyping still checks them at run time). The
weight-side aliases (:data:`Matrix`, :data:`Basis`, ...) are torch tensors and are distinct
for the runtime check only. tests/core/test_types.py shows both checks catching a mix-up.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from jaxtyping import Bool, Float, Int

__all__ = [
    "Acts",
    "Basis",
    "BoolMask",
    "Deltas",
    "LayerBands",
    "Matrix",
    "MeanProfile",
    "Moment",
    "PerPrompt",
    "Profile",
    "PromptStates",
    "States",
    "StatesArray",
    "TokenIdBatch",
    "TokenSeq",
    "TokenStates",
    "Vector",
]

# numpy arrays of known rank (see the module docstring: mypy sees the rank, not the names)
_F = np.dtype[np.floating[Any]]
_F1 = np.ndarray[tuple[int], _F]
_F2 = np.ndarray[tuple[int, int], _F]
_F3 = np.ndarray[tuple[int, int, int], _F]
_I1 = np.ndarray[tuple[int], np.dtype[np.integer[Any]]]
_B1 = np.ndarray[tuple[int], np.dtype[np.bool_]]

# ----------------------------------------------------------------------------- states side
# (n, L+1, d) hidden states: n prompts, L+1 layers (0 = embedding output), width d; numpy or
# torch, any float dtype (paper 1's metrics read them in float64); StatesArray: numpy only.
StatesArray = Float[_F3, "prompt layer d_model"]
States = StatesArray | Float[torch.Tensor, "prompt layer d_model"]
# (L+1, d) the trajectory of one prompt.
PromptStates = Float[_F2, "layer d_model"] | Float[torch.Tensor, "layer d_model"]
# (L+1, T, d) per-token states of one text (``extract(pool="none")``), numpy.
TokenStates = Float[_F3, "layer token d_model"]
# (n, L') a per-prompt profile over layers or layer transitions (SIM(l): L' = L, curvature:
# L' = L-1, stability and the per-prompt convergence index: L' = L+1).
Profile = Float[_F2, "prompt _layer"] | Float[torch.Tensor, "prompt _layer"]
# (L',) a profile averaged over prompts (or of one prompt).
MeanProfile = Float[_F1, "_layer"]
# (n,) one number per prompt (trajectory length, mean curvature).
PerPrompt = Float[_F1, "prompt"]
# (L',) integer phase id of each profile index.
LayerBands = Int[_I1, "_layer"]
# (T,) True at the kept tokens of one text.
BoolMask = Bool[_B1, "token"]

# ----------------------------------------------------------------------------- weights side
# (d_out, d_in) a linear map's matrix or its update ΔW (torch, fp32 or fp64).
Matrix = Float[torch.Tensor, "d_out d_in"]
# (d, k) orthonormal columns spanning a k-dimensional subspace.
Basis = Float[torch.Tensor, "d k"]
# (d, d) a symmetric second moment (or covariance) of a map's inputs.
Moment = Float[torch.Tensor, "d d"]
# (d,) a direction or a gain in the residual stream.
Vector = Float[torch.Tensor, "d_model"]
# (T, d_in) a map's input a_t and (T, d_out) the loss gradient at its output δ_t, per token.
Acts = Float[torch.Tensor, "token d_in"]
Deltas = Float[torch.Tensor, "token d_out"]
# (B, T) token ids of a batch (LongTensor), or its attention mask.
TokenIdBatch = Int[torch.Tensor, "batch token"]
# (T,) the token ids of one sequence.
TokenSeq = Int[torch.Tensor, "token"]
