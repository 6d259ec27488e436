"""Experiments: everything a chapter computes, behind one config dataclass per experiment.

Trajectory geometry (paper 1): ``run_convergence``, ``run_curvature``, ``run_bifurcation``,
``run_three_phase`` and ``run_reanalysis`` each take a :class:`TrajectoryConfig` and return an
:class:`ExperimentResult` (tidy tables, a claims table, notes) that ``.write()`` saves with
``lamina.io.write_results``.
"""

from lamina.experiments.trajectory import (
    CONVENTIONS,
    Convention,
    ExperimentResult,
    TrajectoryConfig,
    expand_models,
)

__all__ = [
    "CONVENTIONS",
    "Convention",
    "ExperimentResult",
    "TrajectoryConfig",
    "expand_models",
    "run_bifurcation",
    "run_convergence",
    "run_curvature",
    "run_reanalysis",
    "run_three_phase",
]


def __getattr__(name: str):  # lazy: importing the package stays cheap
    import importlib

    modules = {
        "run_convergence": "convergence",
        "run_curvature": "curvature",
        "run_bifurcation": "bifurcation",
        "run_three_phase": "three_phase",
        "run_reanalysis": "reanalysis",
    }
    if name in modules:
        return getattr(importlib.import_module(f"lamina.experiments.{modules[name]}"), name)
    raise AttributeError(name)
