"""Paper 2, the weight-update signature: where pretraining and alignment put their ΔW.

The chapter is glue: :class:`Config` (paper 2's settings and the models), :func:`run` (on every
unit: the applied objectives, the measurements of :mod:`lamina.weights`, the gates, the claims)
and :data:`CLAIMS` (the declarations, :mod:`lamina.weights.claims`). The science (probes,
nulls, measurements, calibration) is in :mod:`lamina.weights`.
"""

from lamina.chapters.weight_update_signature.config import CHAPTER, Config, expand_models
from lamina.chapters.weight_update_signature.run import run
from lamina.weights.claims import CLAIMS

__all__ = ["CHAPTER", "CLAIMS", "Config", "expand_models", "run"]
