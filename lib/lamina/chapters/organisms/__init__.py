"""The organisms appendix chapter (``notebooks/organisms.py``): the run (:mod:`~.run`) over
the measurements of :mod:`lamina.sources.organisms.quality` (generation probes
:mod:`lamina.sources.organisms.probes`, bits per byte beside pretrained reference models
:mod:`lamina.sources.organisms.reference`, the self-checks :mod:`lamina.sources.organisms.checks`)
and the homograph probe (:mod:`lamina.trajectory.homographs`). The notebook enters through
:mod:`~.views` (the run with its results written and glued, then one call per table or figure);
the sentences its prose quotes are in :mod:`~.narrative`, the figures in :mod:`~.figures`.

The chapter pattern: :class:`Config` (= :class:`~.run.OrganismsConfig`), :data:`CLAIMS` (the
organisms' self-checks, :mod:`lamina.sources.organisms.claims`) and the run,
:func:`~.run.run_organisms` (not aliased ``run``: that name is the submodule :mod:`~.run`)."""

from lamina.chapters.organisms.run import (
    CHECKPOINTS,
    DEFAULT_ORGANISMS,
    TARGETS,
    OrganismsConfig,
    OrganismsResult,
    organism_names,
    run_organisms,
)
from lamina.sources.organisms.claims import CLAIMS

Config = OrganismsConfig

__all__ = [
    "CHECKPOINTS",
    "CLAIMS",
    "Config",
    "DEFAULT_ORGANISMS",
    "TARGETS",
    "OrganismsConfig",
    "OrganismsResult",
    "organism_names",
    "run_organisms",
]
