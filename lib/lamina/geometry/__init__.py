"""Trajectory geometry (paper 1): the five metrics (:mod:`lamina.geometry.metrics`) and the
three-phase tools (:mod:`lamina.geometry.phases`), re-exported here as ``lamina.geometry.X``."""

from lamina.geometry.metrics import (
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
from lamina.geometry.phases import (
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
