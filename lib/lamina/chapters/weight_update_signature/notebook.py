"""The weight-update-signature notebook's entry: its parameters -> :class:`SignatureConfig`,
one run (:func:`~.run.run_weight_signature`) with its results written and the values the prose
quotes glued. The figures and tables are in :mod:`~.views`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lamina.book.glue import glue
from lamina.chapters.results import ExperimentResult
from lamina.chapters.weight_update_signature.config import SignatureConfig
from lamina.chapters.weight_update_signature.figures import describe
from lamina.chapters.weight_update_signature.run import run_weight_signature
from lamina.chapters.weight_update_signature.verdicts import CLAIMS
from lamina.chapters.weight_update_signature.views import signature_config_of

__all__ = ["glue_signature", "run_signature", "signature_config"]


def signature_config(params: Mapping[str, Any]) -> SignatureConfig:
    """The config of the notebook's parameters (pass ``globals()``): every name of ``params``
    that is a field of :class:`SignatureConfig` (other names are ignored);
    ``model_budgets=None`` keeps the config's default per-model budgets."""
    fields = set(SignatureConfig.parameter_names())
    chosen = {k: v for k, v in params.items() if k in fields}
    if chosen.get("model_budgets", ...) is None:
        del chosen["model_budgets"]
    return SignatureConfig.from_params(chosen)


def run_signature(config: SignatureConfig) -> ExperimentResult:
    """The chapter's run: :func:`~.run.run_weight_signature`, its results written
    (``lamina.states.io.results_dir()``), and :func:`glue_signature`."""
    result = run_weight_signature(config)
    result.write()
    glue_signature(result)
    return result


def glue_signature(result: ExperimentResult) -> None:
    """Glue what the prose quotes: ``ws_<claim>`` (:func:`~.figures.describe`, one sentence per
    model and stage) for every claim of :data:`~.verdicts.CLAIMS`; ``ws_models``, ``ws_notes``;
    the config's ``ws_k``, ``ws_margin``, ``ws_n_tokens``, ``ws_early_fraction`` (percent),
    ``ws_edit_scale``; ``ws_text`` (the text sample, in words) and ``ws_seconds`` (the run's
    summed timings, s)."""
    config = signature_config_of(result)
    for cid in CLAIMS:
        glue(f"ws_{cid}", describe(result.claims, cid))
    glue("ws_models", ", ".join(result.models) or "none")
    glue("ws_k", config.k)
    glue("ws_margin", config.random_margin)
    glue("ws_n_tokens", config.n_tokens)
    glue("ws_early_fraction", f"{config.early_fraction:.0%}")
    glue("ws_edit_scale", config.edit_scale)
    glue("ws_notes", "; ".join(result.notes) or "none")
    text = "held-out text" if config.text_source == "heldout" else "curriculum documents"
    glue("ws_text", f"the organisms' {text}")
    glue("ws_seconds", round(sum(config.timings.values()), 1))
