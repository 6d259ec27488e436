"""Paper 3's Growth Training chapter: importance-ordered phased training against uniform
training (:func:`run_growth`, configured by :class:`GrowthConfig`).

Modules: :mod:`.config` (the config and schedule names), :mod:`.importance` (skip-ablation
importance of the organism or of real pretrained models, mapped by relative depth),
:mod:`.claims` (budget comparisons and claim rows), :mod:`.run` (schedules and the
experiment), :mod:`.figures` (the importance-profile figure).
"""

from lamina.chapters.growth_training.claims import (
    budget_comparison,
    growth_claims,
    order_claims,
    source_claims,
)
from lamina.chapters.growth_training.config import (
    CHAPTER,
    CONTROLS,
    PAPER_SCALE,
    REAL_MODELS,
    SCHEDULES,
    GrowthConfig,
)
from lamina.chapters.growth_training.importance import (
    build_model,
    depth_map,
    layer_importance,
    rank_correlations,
    real_importance,
    real_label,
    resolve_real_models,
)
from lamina.chapters.growth_training.run import run_growth, schedules_for, source_run

__all__ = [
    "CHAPTER",
    "CONTROLS",
    "PAPER_SCALE",
    "REAL_MODELS",
    "SCHEDULES",
    "GrowthConfig",
    "budget_comparison",
    "build_model",
    "depth_map",
    "growth_claims",
    "layer_importance",
    "order_claims",
    "rank_correlations",
    "real_importance",
    "real_label",
    "resolve_real_models",
    "run_growth",
    "schedules_for",
    "source_claims",
    "source_run",
]
