"""Layer anatomy (paper 3): the five diagnostics, their claims, and Growth Training.

Measuring: :mod:`~lamina.anatomy.surgery` (context managers), :mod:`~lamina.anatomy.perplexity`,
:mod:`~lamina.anatomy.ablation` (sweeps with prefix reuse), :mod:`~lamina.anatomy.predictability`
(the depth fit, per-layer structure), :mod:`~lamina.anatomy.recovery` (recovery after noise),
:mod:`~lamina.anatomy.heldout` (held-out text as independent units, cluster CIs) and
:mod:`~lamina.anatomy.model_tables` (one model's tables).
The claims: :mod:`~lamina.anatomy.paper` (the paper's numbers and layer names),
:mod:`~lamina.anatomy.importance`, :mod:`~lamina.anatomy.regularity`,
:mod:`~lamina.anatomy.robustness` (the measurements), :mod:`~lamina.anatomy.measurements` (all
of one model's), :mod:`~lamina.anatomy.claims` (declared as data), :mod:`~lamina.anatomy.coverage`.
Growth Training: :mod:`~lamina.anatomy.growth` (schedules, the training loop),
:mod:`~lamina.anatomy.growth_compare`, :mod:`~lamina.anatomy.growth_timing`,
:mod:`~lamina.anatomy.growth_orders`, :mod:`~lamina.anatomy.growth_text`,
:mod:`~lamina.anatomy.growth_claims`.
Calibration: :mod:`~lamina.anatomy.calibration` (the runs of every claim), its sources
:mod:`~lamina.anatomy.calibration_sources`, :mod:`~lamina.anatomy.calibration_weights`,
:mod:`~lamina.anatomy.growth_calibration`.
The measuring functions are re-exported here.
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
