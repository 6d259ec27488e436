"""Causal tests of paper 2: rank-1 edits along write directions, and single-group adaptation.

Both act on the maps of :func:`lamina.weights.linear_maps`, so they work for every
architecture of the adapter table, GPT-2's transposed and fused weights included.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Literal, cast

import torch
from torch import nn

from lamina.core.types import Vector
from lamina.sources.models import get_adapter, hf_config, weight_of
from lamina.weights.maps import LinearMap, linear_maps, norm_gain

__all__ = [
    "GROUPS",
    "rank1_write_edit",
    "single_group_parameters",
    "unembedding_direction",
]

GROUPS: dict[str, tuple[str, ...]] = {
    "qk": ("q", "k"),
    "vo": ("v", "attn_out"),
    "mlp_in": ("mlp_gate", "mlp_up"),
    "mlp_out": ("mlp_out",),
}


def unembedding_direction(
    model: nn.Module, token_id: int, *, through_final_norm: bool = False
) -> Vector:
    """A write direction in the residual stream from the unembedding: row ``token_id`` of W_U.

    -> (d_model,) float32. With ``through_final_norm=True`` (reimplementation choice) the row is
    multiplied elementwise by the final norm's gain (γ; 1 + γ for Gemma's RMSNorm,
    :func:`lamina.weights.norm_gain`), so that it is the direction whose
    addition to the pre-norm residual stream most raises that token's logit (to first order,
    ignoring the norm's rescaling and, for LayerNorm, its mean removal).
    """
    adapter = get_adapter(model)
    unembed = adapter.unembedding_module(model)
    if unembed is None:
        raise ValueError(f"{hf_config(model).model_type} model has no unembedding")
    vocab = weight_of(unembed).shape[0]
    if not 0 <= token_id < vocab:
        raise ValueError(f"token_id {token_id} outside the vocabulary [0, {vocab})")
    row = weight_of(unembed).detach()[token_id].float().clone()
    if through_final_norm:
        norm = adapter.final_norm_module(model)
        gain = norm_gain(norm) if norm is not None else None
        if gain is not None:
            row = row * gain
    return row


@contextmanager
def rank1_write_edit(
    model: nn.Module,
    direction: Vector,
    scale: float,
    maps: Sequence[LinearMap] | None = None,
    *,
    input_direction: Literal["top_singular"] | dict[str, torch.Tensor] = "top_singular",
) -> Iterator[dict[str, torch.Tensor]]:
    """Temporarily add a rank-1 edit along a write direction to output matrices.

    For each map W (d_out = d_model, d_in):  W ← W + scale · ‖W‖_F · û v̂ᵀ,
    û = direction / ‖direction‖ (d_model,), v̂ a unit input direction (d_in,): by default
    W's top right singular vector (reimplementation choice; the edit then fires on the inputs
    W amplifies most), or ``input_direction[key]``. ``scale`` is relative to ‖W‖_F, so
    random directions of any norm give edits of matched norm.
    maps: default every block write map (attn_out, mlp_out).
    Where a write map writes before a post-sublayer norm (Gemma 3: the stream receives
    diag(g) (W x) / rms(W x), :func:`lamina.weights.post_norm_gain`), the edit is made, as
    the adapter defines write matrices, in the map's own output space: the stream receives
    diag(g) û up to the per-token rms. It is not divided by g: the real Gemma-3-270m has
    post-norm gains 1 + γ equal to 0 in some dimensions, which no edit of W can reach.
    Yields {key: ΔW (d_out, d_in) fp32}. On exit every edited parameter is restored bit-exactly.
    """
    maps = (
        [m for m in linear_maps(model, embeddings=False) if m.kind == "write"]
        if maps is None
        else list(maps)
    )
    u = direction.detach().float().flatten()
    if float(u.norm()) == 0.0:
        raise ValueError("direction is the zero vector")
    u = u / u.norm()
    saved: dict[str, torch.Tensor] = {}
    edits: dict[str, torch.Tensor] = {}
    try:
        with torch.no_grad():
            for m in maps:
                param = weight_of(model.get_submodule(m.module))
                w = m.weight(model)
                if w.shape[0] != u.shape[0]:
                    raise ValueError(
                        f"{m.key} writes {w.shape[0]} dims but direction has {u.shape[0]}"
                    )
                u_m = u
                if isinstance(input_direction, dict):
                    v = input_direction[m.key].detach().float().to(w.device)
                else:
                    v = torch.linalg.svd(w, full_matrices=False).Vh[0]
                v = v / v.norm()
                delta = scale * torch.linalg.matrix_norm(w) * torch.outer(u_m.to(w.device), v)
                if m.parameter not in saved:
                    saved[m.parameter] = param.detach().clone()
                m.as_matrix(param).add_(delta.to(param.dtype))
                edits[m.key] = delta
        yield edits
    finally:
        with torch.no_grad():
            for name, original in saved.items():
                weight_of(model.get_submodule(name.rsplit(".", 1)[0])).copy_(original)


def single_group_parameters(model: nn.Module, group: str) -> list[nn.Parameter]:
    """Freeze every parameter except one matrix group, for single-group adaptation.

    group: ``qk`` (Q, K), ``vo`` (V, attention output), ``mlp_in`` (gate, up) or ``mlp_out``
    (down), in every block, with their biases. Sets ``requires_grad`` accordingly and returns
    the parameters to hand to the optimiser. GPT-2's fused ``c_attn`` holds Q, K and V in one
    parameter: its gradient is masked by a hook to the group's rows (use weight_decay=0, or
    the masked rows decay). Calling again replaces earlier masks.
    """
    if group not in GROUPS:
        raise ValueError(f"group must be one of {sorted(GROUPS)}, got {group!r}")
    for handle in getattr(model, "_lamina_group_hooks", []):
        handle.remove()
    hooks: list = []
    maps = [m for m in linear_maps(model, embeddings=False) if m.role in GROUPS[group]]
    by_module: dict[str, list[LinearMap]] = {}
    for m in maps:
        by_module.setdefault(m.module, []).append(m)
    for p in model.parameters():
        p.requires_grad_(False)
    chosen: list[nn.Parameter] = []
    for path, ms in by_module.items():
        module = model.get_submodule(path)
        params = [cast(nn.Parameter, module.weight)] + (
            [cast(nn.Parameter, module.bias)] if getattr(module, "bias", None) is not None else []
        )
        for p in params:
            p.requires_grad_(True)
            chosen.append(p)
        if any(m.rows is not None for m in ms):
            for p in params:
                keep = torch.zeros_like(p, dtype=torch.bool)
                for m in ms:
                    (m.as_matrix(keep) if p.dim() == 2 else m.as_bias(keep)).fill_(True)
                hooks.append(p.register_hook(lambda g, keep=keep: g * keep))
    setattr(model, "_lamina_group_hooks", hooks)  # noqa: B010 (attribute unknown to the stubs)
    return chosen
