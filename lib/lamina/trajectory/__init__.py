"""Layer 4, paper 1's science: trajectory geometry. The five metrics (:mod:`lamina.trajectory.metrics`)
and the three-phase tools (:mod:`lamina.trajectory.phases`), re-exported here as
``lamina.trajectory.X``. Beside them: the claims' tests (:mod:`.stat_tests`, dispatching to
:mod:`.convergence_stats`, :mod:`.curvature_stats`, :mod:`.bifurcation_stats`,
:mod:`.phase_stats`), the claims as data (:mod:`.claims`) and their judging (:mod:`.judging`),
the states of every source (:mod:`.model_states`), each chapter's analysis of one source
(:mod:`.analyses`), the known-answer sources (:mod:`.synthetic`: :mod:`.realistic` on the
background of :mod:`.background` fitted by :mod:`.fit`, kept in :mod:`.fitted`, with the
levers of :mod:`.levers` and the hazards of :mod:`.hazards`) and their calibration
(:mod:`.calibration`)."""

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
