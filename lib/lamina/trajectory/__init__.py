"""Layer 4, paper 1's science: trajectory geometry. The five metrics (:mod:`lamina.trajectory.metrics`) and the
three-phase tools (:mod:`lamina.trajectory.phases`), re-exported here as ``lamina.trajectory.X``; the claim tests (:mod:`.stat_tests`), verdict rules
(:mod:`.verdicts`), known-answer sources (:mod:`.synthetic`) and their calibration
(:mod:`.calibration`) sit beside them."""

from lamina.trajectory.metrics import (
    Bifurcation,
    bifurcation,
    convergence_index,
    convergence_index_per_prompt,
    convergence_index_pooled,
    curvature,
    layerwise_cosine,
    mean_curvature,
    stability,
    trajectory_length,
)
from lamina.trajectory.phases import (
    PHASE_NAMES,
    PhaseDetection,
    detect_phases,
    fixed_phase_bands,
    phase_summary,
)

__all__ = [
    "PHASE_NAMES",
    "Bifurcation",
    "PhaseDetection",
    "bifurcation",
    "convergence_index",
    "convergence_index_per_prompt",
    "convergence_index_pooled",
    "curvature",
    "detect_phases",
    "fixed_phase_bands",
    "layerwise_cosine",
    "mean_curvature",
    "phase_summary",
    "stability",
    "trajectory_length",
]
