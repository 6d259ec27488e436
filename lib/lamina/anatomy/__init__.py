"""Layer anatomy (paper 3): one import for the five diagnostics, plus recovery speed.

The pieces: :mod:`~lamina.anatomy.surgery` (context managers), :mod:`~lamina.anatomy.perplexity`,
:mod:`~lamina.anatomy.ablation` (sweeps with prefix reuse),
:mod:`~lamina.anatomy.predictability` (weight predictability and structure),
:mod:`~lamina.anatomy.recovery` (recovery speed) and :mod:`~lamina.anatomy.growth` (Growth
Training schedules). All but Growth Training are re-exported here.
"""

from lamina.anatomy.ablation import (
    ablation_sweep,
    predicted_replacement_curve,
    sweep_nll,
)
from lamina.anatomy.perplexity import PerplexityResult, TokenIds, chunk_tokens, perplexity
from lamina.anatomy.predictability import (
    delta_correlation,
    layer_structure,
    predicted_layer_state,
    singular_spectra,
    weight_predictability,
)
from lamina.anatomy.recovery import recovery_steps
from lamina.anatomy.surgery import (
    SURGERIES,
    apply_surgery,
    check_layer,
    interpolate_neighbours,
    noise_layer,
    reinit_layer,
    scale_layer,
    skip_layers,
    substitute_weights,
)
from lamina.evidence.stats import spearman_ci

__all__ = [
    "SURGERIES",
    "PerplexityResult",
    "TokenIds",
    "ablation_sweep",
    "apply_surgery",
    "check_layer",
    "chunk_tokens",
    "delta_correlation",
    "interpolate_neighbours",
    "layer_structure",
    "noise_layer",
    "perplexity",
    "predicted_layer_state",
    "predicted_replacement_curve",
    "recovery_steps",
    "reinit_layer",
    "scale_layer",
    "singular_spectra",
    "skip_layers",
    "spearman_ci",
    "substitute_weights",
    "sweep_nll",
    "weight_predictability",
]
