"""Paper 3's numbers and layer names, and how its 30-layer positions map onto another depth.

Paper 3 (arXiv 2603.19348) studied SmolLM2-135M, 30 layers. Its layer numbers (critical core
L8-11, anti-layers L14 and L17) are 0-based indices of 30. On a model of L layers they stand
for the layers whose depth span [l/L, (l+1)/L) overlaps theirs (:func:`paper_layers`; the
identity at L = 30), a reimplementation choice.
"""

from __future__ import annotations

__all__ = [
    "DEPTH_MAPPINGS",
    "GROWTH_COST",
    "GROWTH_FASTER",
    "GROWTH_LOSS_RATIO",
    "PAPER_ANTI",
    "PAPER_CORE",
    "PAPER_CORE_MAX_PCT",
    "PAPER_DELTA",
    "PAPER_L",
    "PAPER_LOG10_RANGE",
    "PAPER_PPL",
    "PAPER_R2",
    "mapped_layers",
    "paper_layers",
]

PAPER_L = 30  # SmolLM2-135M's layers
PAPER_CORE = (8, 9, 10, 11)  # the critical core L8-11
PAPER_ANTI = (14, 17)  # the anti-layers L14, L17
PAPER_R2 = 0.91  # weight predictability across depth (R^2)
PAPER_DELTA = -0.50  # correlation of consecutive weight deltas
PAPER_LOG10_RANGE = 7.0  # importance range 10^7 (log10 of max / min delta_pct)
PAPER_CORE_MAX_PCT = 63_419.0  # the largest core skip delta_pct (%)
PAPER_PPL = 22.6  # the paper's baseline perplexity on its held-out set
GROWTH_LOSS_RATIO = 4.7  # uniform / growth validation loss, 0.599 / 0.127, equal steps
GROWTH_FASTER = 0.13  # growth's wall-time saving
GROWTH_COST = 0.54  # growth's cost reduction (the paper's extrapolation)
DEPTH_MAPPINGS = ("span", "none")


def paper_layers(
    paper: tuple[int, ...] | list[int], n_layers: int, paper_l: int = PAPER_L
) -> list[int]:
    """Layers of an L-layer model whose depth span [l/L, (l+1)/L) overlaps the span
    [p/paper_l, (p+1)/paper_l) of any of the paper's layers p (0-based): the one depth
    convention for the core and the anti-layers alike. Sorted layer indices."""
    out: set[int] = set()
    for p in paper:
        lo, hi = p / paper_l, (p + 1) / paper_l
        out |= {l for l in range(n_layers) if l / n_layers < hi and (l + 1) / n_layers > lo}
    return sorted(out)


def mapped_layers(
    paper: tuple[int, ...] | list[int], n_layers: int, mapping: str
) -> list[int] | None:
    """The model's layers that stand for the paper's positions ``paper``: by depth span
    (:func:`paper_layers`) with ``mapping="span"``; with "none" the positions themselves at
    L = 30 and None (not testable) at any other depth."""
    if mapping not in DEPTH_MAPPINGS:
        raise ValueError(f"depth mapping must be one of {DEPTH_MAPPINGS}, got {mapping!r}")
    if mapping == "none" and n_layers != PAPER_L:
        return None
    return paper_layers(paper, n_layers, PAPER_L)
