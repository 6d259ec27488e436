"""Paper 2, the weight-update signature: where pretraining and alignment put their ΔW.

One config (:class:`SignatureConfig`) drives three pipelines, each in its own module:

It runs on lamina's organisms (``model``) or, by parameters only, on any pair of Hugging Face
causal LMs of one architecture (``base`` and ``target``, :mod:`~.units`).

* **deltas** (:mod:`~.deltas`): ΔW between checkpoint pairs of one organism (consecutive pretraining
  checkpoints, early → late pretraining, base → every alignment stage), probed with
  :func:`lamina.weights.subspace_fraction.relative_subspace_fraction` in the input principal subspace (read
  maps) or the prediction subspace (write maps), swept over k, with random-subspace nulls;
* **mechanism** (:mod:`~.mechanism`): per-token gradient
  geometry under each objective, Adam's update against its momentum, write gradients across
  pretraining;
* **causal** (:mod:`~.causal`): rank-1 unembedding edits vs
  random directions, single-group adaptation.

:func:`run_weight_signature` runs all three on every organism of ``config.model`` (or on the
pair ``config.base`` -> ``config.target``) and turns
the tables into one verdict row per claim of the abstract
(:mod:`~.claims`, built on :mod:`~.verdicts`, :mod:`~.mechanism_claims` and :mod:`~.causal_claims`); the chapter's figure tables and verdict
sentences are in :mod:`~.figures`. The package is acyclic:
:mod:`~.config` → :mod:`~.units` (the :class:`~.units.Units` protocol, an organism's
:class:`~.units.Checkpoints`, a real :class:`~.units.ModelPair`) → measurements
(:mod:`~.deltas`, :mod:`~.mechanism`, :mod:`~.causal`) → claims (:mod:`~.verdicts`,
:mod:`~.mechanism_claims`, :mod:`~.causal_claims`, :mod:`~.claims`) → :mod:`~.figures` and
:mod:`~.run`.
"""

from lamina.chapters.weight_update_signature.claims import all_claims, sensitivity
from lamina.chapters.weight_update_signature.config import (
    CHAPTER,
    FULL_ORGANISMS,
    MICRO_ORGANISMS,
    SignatureConfig,
    check_pair,
    context_length,
    expand_organisms,
)
from lamina.chapters.weight_update_signature.run import run_weight_signature
from lamina.chapters.weight_update_signature.units import (
    Checkpoints,
    ModelPair,
    Units,
    checkpoint_pairs,
    text_sample,
)

__all__ = [
    "CHAPTER",
    "FULL_ORGANISMS",
    "MICRO_ORGANISMS",
    "Checkpoints",
    "ModelPair",
    "SignatureConfig",
    "Units",
    "all_claims",
    "check_pair",
    "checkpoint_pairs",
    "context_length",
    "expand_organisms",
    "run_weight_signature",
    "sensitivity",
    "text_sample",
]
