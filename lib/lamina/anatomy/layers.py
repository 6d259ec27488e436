"""Layer indices of a model's blocks, checked once for every diagnostic of paper 3."""

from __future__ import annotations

from torch import nn

from lamina.sources.models import get_adapter

__all__ = ["check_layer"]


def check_layer(model: nn.Module, layer: int) -> int:
    """``layer`` as a plain int after checking 0 <= layer < L; a clear ValueError otherwise."""
    n = get_adapter(model).n_layers(model)
    if isinstance(layer, bool) or not isinstance(layer, int):
        try:
            layer = int(layer)  # numpy integers
        except (TypeError, ValueError):
            raise ValueError(f"layer must be an integer, got {layer!r}") from None
    if not 0 <= layer < n:
        raise ValueError(
            f"layer {layer} is out of range for a model with {n} layers (valid: 0..{n - 1})"
        )
    return layer
