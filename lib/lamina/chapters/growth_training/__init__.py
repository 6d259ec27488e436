"""Paper 3's Growth Training chapter: importance-ordered phased training against uniform
training (:func:`run_growth`, configured by :class:`GrowthConfig`); the science and the claims
are :mod:`lamina.anatomy`'s (growth, growth_runs, growth_compare, growth_timing,
growth_orders, growth_claims)."""

from lamina.anatomy.growth_claims import CLAIMS
from lamina.chapters.growth_training.config import CHAPTER, CONTROLS, GrowthConfig
from lamina.chapters.growth_training.run import run_growth

Config = GrowthConfig  # the chapter pattern: Config, run, CLAIMS
run = run_growth

__all__ = ["Config", "run", "CHAPTER", "CLAIMS", "CONTROLS", "GrowthConfig", "run_growth"]
