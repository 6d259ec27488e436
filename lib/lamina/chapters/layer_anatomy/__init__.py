"""The layer-anatomy chapter (paper 3, ``notebooks/layer_anatomy.py``): its config
(:mod:`~.config`), the run (:mod:`~.run`) and the claims of the abstract (:mod:`~.claims`)."""

from lamina.chapters.layer_anatomy.claims import anatomy_claims
from lamina.chapters.layer_anatomy.config import CHAPTER, AnatomyConfig
from lamina.chapters.layer_anatomy.run import delta_null, loo_hat_matrix, permuted_r2, run_anatomy

__all__ = [
    "CHAPTER",
    "AnatomyConfig",
    "anatomy_claims",
    "delta_null",
    "loo_hat_matrix",
    "permuted_r2",
    "run_anatomy",
]
