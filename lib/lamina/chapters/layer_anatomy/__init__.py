"""The layer-anatomy chapter (paper 3, ``notebooks/layer_anatomy.py``): its config
(:mod:`~.config`) and the run (:mod:`~.run`); the science and the claims are
:mod:`lamina.anatomy`'s."""

from lamina.anatomy.claims import CLAIMS
from lamina.chapters.layer_anatomy.config import CHAPTER, AnatomyConfig
from lamina.chapters.layer_anatomy.run import run_anatomy

Config = AnatomyConfig  # the chapter pattern: Config, run, CLAIMS
run = run_anatomy

__all__ = ["Config", "run", "CHAPTER", "CLAIMS", "AnatomyConfig", "run_anatomy"]
