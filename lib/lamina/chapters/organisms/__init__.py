"""The organisms appendix chapter (``notebooks/organisms.py``): the run (:mod:`~.run`) and
the generation and homograph probes (:mod:`~.probes`), and bits per byte beside pretrained
reference models (:mod:`~.reference`). The notebook enters through :mod:`~.views` (the run
with its results written and glued, then one call per table or figure); the sentences its
prose quotes are in :mod:`~.narrative`, the figures in :mod:`~.figures`.

The chapter pattern: :class:`Config` (= :class:`~.run.OrganismsConfig`), :data:`CLAIMS` (the
organisms' self-checks, :mod:`lamina.sources.organisms.claims`) and the run,
:func:`~.run.run_organisms` (not aliased ``run``: that name is the submodule :mod:`~.run`)."""

from lamina.chapters.organisms.probes import SAMPLE_PROMPTS, homograph_separation, samples
from lamina.chapters.organisms.reference import (
    DEFAULT_REFERENCE_MODELS,
    bits_per_byte,
    bpb_summary,
    document_bits,
    reference_texts,
)
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
    "DEFAULT_REFERENCE_MODELS",
    "DEFAULT_ORGANISMS",
    "SAMPLE_PROMPTS",
    "TARGETS",
    "OrganismsConfig",
    "OrganismsResult",
    "bits_per_byte",
    "bpb_summary",
    "document_bits",
    "homograph_separation",
    "organism_names",
    "reference_texts",
    "run_organisms",
    "samples",
]
