"""The organisms appendix chapter (``notebooks/organisms.py``): the run (:mod:`~.run`) and
the generation and homograph probes (:mod:`~.probes`)."""

from lamina.chapters.organisms.probes import SAMPLE_PROMPTS, homograph_separation, samples
from lamina.chapters.organisms.run import (
    CHECKPOINTS,
    DEFAULT_ORGANISMS,
    TARGETS,
    OrganismsConfig,
    OrganismsResult,
    organism_names,
    run_organisms,
)

__all__ = [
    "CHECKPOINTS",
    "DEFAULT_ORGANISMS",
    "SAMPLE_PROMPTS",
    "TARGETS",
    "OrganismsConfig",
    "OrganismsResult",
    "homograph_separation",
    "organism_names",
    "run_organisms",
    "samples",
]
