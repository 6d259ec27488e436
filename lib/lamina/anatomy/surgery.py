"""Layer surgery: context managers that change one block and restore it bit-exactly on exit.

Each surgery saves clones of the touched block's tensors only (never the whole model), edits
them in place, and copies the saved values back in a ``finally`` clause, so the model is
restored exactly also when the body raises. ``skip_layers`` edits no tensor at all: it adds a
forward hook and removes it on exit.

Which tensors a surgery touches is a named option (reimplementation choice, paper 3 does not
say): ``tensors="matrices"`` edits the 2-D weights of the block (attention and MLP maps),
``tensors="all"`` also edits its 1-D tensors (norm gains, biases).

``SURGERIES`` maps a surgery name to a factory ``(model, layer, **options) -> context manager``;
:func:`apply_surgery` looks it up and validates the name and the layer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import torch
from torch import nn

from lamina.anatomy.layers import check_layer
from lamina.anatomy.predictability import RIDGE_ALPHA, predicted_layer_state
from lamina.sources.models import get_adapter
from lamina.states import hooks

__all__ = [
    "SURGERIES",
    "SurgeryOption",
    "apply_surgery",
    "check_layer",
    "interpolate_neighbours",
    "noise_layer",
    "reinit_layer",
    "scale_layer",
    "skip_layers",
    "substitute_weights",
]

# One keyword argument of a surgery: alpha (float), rel_scale (float), seed (int), tensors
# ("matrices" / "all") or state_dict (names relative to the block -> tensors).
SurgeryOption = float | str | Mapping[str, torch.Tensor]

TENSOR_SETS = ("matrices", "all")


def _block(model: nn.Module, layer: int) -> nn.Module:
    return get_adapter(model).block_list(model)[check_layer(model, layer)]


def _tensors(block: nn.Module, which: str) -> dict[str, torch.Tensor]:
    """The block's parameters selected by ``which`` (see module docstring), by relative name."""
    if which not in TENSOR_SETS:
        raise ValueError(f"tensors must be one of {TENSOR_SETS}, got {which!r}")
    params: dict[str, torch.Tensor] = dict(block.named_parameters())
    if which == "matrices":
        return {k: p for k, p in params.items() if p.dim() >= 2}
    return params


@contextmanager
def _restoring(block: nn.Module) -> Iterator[dict[str, torch.Tensor]]:
    """Save clones of every parameter and buffer of ``block``; copy them back on exit."""
    live = dict(block.named_parameters()) | dict(block.named_buffers())
    saved = {k: t.detach().clone() for k, t in live.items()}
    try:
        yield live
    finally:
        with torch.no_grad():
            for k, t in live.items():
                t.copy_(saved[k])


@contextmanager
def skip_layers(model: nn.Module, layers: int | Sequence[int]) -> Iterator[None]:
    """Blocks in ``layers`` pass the residual stream through unchanged: output = input.

    Implemented with a forward hook that returns the block's input hidden state (keeping any
    extra outputs of a tuple-returning block), so no weight is edited. For a pre-LN block this
    equals zeroing its attention-output and MLP-down maps (weights and biases).
    """
    layers = [layers] if isinstance(layers, int) else list(layers)
    checked = [check_layer(model, l) for l in layers]

    def hook(module: nn.Module, args: tuple, kwargs: dict, output: Any) -> Any:
        hidden = args[0] if args else kwargs["hidden_states"]
        if isinstance(output, tuple):
            return (hidden, *output[1:])
        return hidden

    with hooks.attached(model, [(f"block.{l}.out", hook) for l in checked], raw=True):
        yield


@contextmanager
def interpolate_neighbours(model: nn.Module, layer: int, *, tensors: str = "all") -> Iterator[None]:
    """Replace block ``layer``'s tensors with the mean of its neighbours' (l-1 and l+1).

    W_l <- (W_{l-1} + W_{l+1}) / 2;  an edge layer copies its single neighbour.
    """
    blocks = get_adapter(model).block_list(model)
    layer = check_layer(model, layer)
    neighbours = [j for j in (layer - 1, layer + 1) if 0 <= j < len(blocks)]
    if not neighbours:
        raise ValueError("interpolate_neighbours needs a model with at least 2 layers")
    block = blocks[layer]
    targets = _tensors(block, tensors)
    sources = [dict(blocks[j].named_parameters()) for j in neighbours]
    with _restoring(block):
        with torch.no_grad():
            for name, p in targets.items():
                p.copy_(torch.stack([s[name].detach() for s in sources]).mean(0))
        yield


@contextmanager
def scale_layer(
    model: nn.Module, layer: int, alpha: float, *, tensors: str = "matrices"
) -> Iterator[None]:
    """Multiply block ``layer``'s tensors by ``alpha``: W <- alpha * W."""
    block = _block(model, layer)
    with _restoring(block):
        with torch.no_grad():
            for p in _tensors(block, tensors).values():
                p.mul_(alpha)
        yield


@contextmanager
def noise_layer(
    model: nn.Module,
    layer: int,
    rel_scale: float = 0.5,
    seed: int = 0,
    *,
    tensors: str = "matrices",
) -> Iterator[None]:
    """Add relative Gaussian noise to block ``layer``'s tensors.

    W <- W + rel_scale * rms(W) * N(0, 1),  rms(W) = sqrt(mean(W^2)) per tensor,
    so the noise has standard deviation ``rel_scale`` times the tensor's own RMS (paper 3's
    "50% relative noise" is rel_scale = 0.5). Seeded by ``seed``; the global RNG is untouched.
    """
    if rel_scale < 0:
        raise ValueError(f"rel_scale must be >= 0, got {rel_scale}")
    block = _block(model, layer)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    with _restoring(block):
        with torch.no_grad():
            for p in _tensors(block, tensors).values():
                noise = torch.randn(p.shape, generator=gen, dtype=torch.float32).to(
                    p.device, p.dtype
                )
                rms = p.detach().float().pow(2).mean().sqrt().to(p.dtype)
                p.add_(noise * (rel_scale * rms))
        yield


def _is_norm(module: nn.Module) -> bool:
    return "norm" in type(module).__name__.lower()


@contextmanager
def reinit_layer(model: nn.Module, layer: int, seed: int = 0) -> Iterator[None]:
    """Re-initialise every parameter of block ``layer`` as a fresh model would.

    Matrices ~ N(0, sigma^2) with sigma = ``config.initializer_range`` (default 0.02); biases 0;
    norm gains 1. (Hugging Face's extra 1/sqrt(2L) scaling of GPT-2's output projections is
    not applied: reimplementation choice.) Seeded; the global RNG is untouched.
    """
    block = _block(model, layer)
    sigma = float(getattr(model.config, "initializer_range", 0.02) or 0.02)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    with _restoring(block):
        with torch.no_grad():
            for module in block.modules():
                for name, p in module.named_parameters(recurse=False):
                    if p.dim() >= 2:
                        init = torch.randn(p.shape, generator=gen, dtype=torch.float32) * sigma
                        p.copy_(init.to(p.device, p.dtype))
                    elif _is_norm(module) and name == "weight":
                        p.fill_(1.0)
                    else:
                        p.zero_()
        yield


@contextmanager
def substitute_weights(
    model: nn.Module, layer: int, state_dict: Mapping[str, torch.Tensor]
) -> Iterator[None]:
    """Replace some of block ``layer``'s tensors with ``state_dict`` (names relative to the
    block, e.g. ``"self_attn.q_proj.weight"``; shapes must match). Others are left as they are."""
    block = _block(model, layer)
    live = dict(block.named_parameters()) | dict(block.named_buffers())
    unknown = sorted(set(state_dict) - set(live))
    if unknown:
        raise ValueError(f"substitute_weights: block {layer} has no tensors named {unknown}")
    for k, v in state_dict.items():
        if tuple(v.shape) != tuple(live[k].shape):
            raise ValueError(
                f"substitute_weights: {k} has shape {tuple(v.shape)}, expected {tuple(live[k].shape)}"
            )
    with _restoring(block):
        with torch.no_grad():
            for k, v in state_dict.items():
                live[k].copy_(v)
        yield


def _predicted(
    model: nn.Module, layer: int, *, alpha: float = RIDGE_ALPHA, degree: int = 2
) -> AbstractContextManager:

    return substitute_weights(
        model, layer, predicted_layer_state(model, layer, alpha=alpha, degree=degree)
    )


SURGERIES: dict[str, Callable[..., AbstractContextManager]] = {
    "skip": lambda model, layer: skip_layers(model, [layer]),
    "interpolate": interpolate_neighbours,
    "scale": scale_layer,
    "noise": noise_layer,
    "reinit": reinit_layer,
    "predicted": _predicted,
}


def check_surgery(name: str) -> str:
    """``name`` if it is a key of SURGERIES; a ValueError listing the valid names otherwise."""
    if name not in SURGERIES:
        raise ValueError(f"unknown surgery {name!r}; valid: {sorted(SURGERIES)}")
    return name


def apply_surgery(
    model: nn.Module, name: str, layer: int, **options: SurgeryOption
) -> AbstractContextManager[None]:
    """The context manager of surgery ``name`` on block ``layer`` (options go to the surgery,
    e.g. ``alpha`` for ``scale``, ``rel_scale``/``seed`` for ``noise``)."""
    check_surgery(name)
    layer = check_layer(model, layer)
    return SURGERIES[name](model, layer, **options)
