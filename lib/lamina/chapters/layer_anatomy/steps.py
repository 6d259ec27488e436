"""The steps of one model's layer-anatomy run that are not measurements of their own: checks
of the config against the model, the notes, and the tables built from library calls
(perplexity, weight predictability, spectra). Used by :mod:`lamina.chapters.layer_anatomy.run`."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
import pandas as pd
import torch

import lamina.anatomy as anatomy
from lamina.anatomy.predictability import summary_predictability
from lamina.chapters.layer_anatomy.config import AnatomyConfig
from lamina.chapters.layer_anatomy.documents import document_ppl_ci
from lamina.chapters.layer_anatomy.nulls import delta_null

__all__ = [
    "checked_layers",
    "heldout_note",
    "perplexity_table",
    "predictability_tables",
    "spectra_table",
    "timing_note",
    "without_predicted",
]


def checked_layers(config: AnatomyConfig, model: torch.nn.Module) -> AnatomyConfig:
    """``config`` with every explicit layer list (``layers``, ``recovery_layers``,
    ``robustness_layers``) checked against ``model`` (:func:`lamina.anatomy.check_layer`)."""
    if config.layers is not None:
        checked = [anatomy.check_layer(model, l) for l in config.layers]
        config = dataclasses.replace(config, layers=checked)
    for name in ("recovery_layers", "robustness_layers"):
        if isinstance(getattr(config, name), list):
            checked = [anatomy.check_layer(model, l) for l in getattr(config, name)]
            field: dict[str, Any] = {name: checked}
            config = dataclasses.replace(config, **field)
    return config


def heldout_note(config: AnatomyConfig, corpus: str, info: dict[str, Any], seq_len: int) -> str:
    """The note that describes the held-out text (``info``: ``HeldOut.summary()``)."""
    by_source = ", ".join(f"{v} {k}" for k, v in info["documents_by_source"].items())
    return (
        f"{config.model}: held-out text {info['n_tokens']:,} tokens of the {corpus} "
        f"corpus's held-out split (passages of its plays and curriculum documents, sources "
        f"and documents in turn, seed {config.seed}), {info['n_windows']} windows of {seq_len} "
        f"from {info['n_documents']} documents ({by_source}); every CI resamples documents."
    )


def without_predicted(config: AnatomyConfig, n_layers: int) -> tuple[AnatomyConfig, bool, list[str]]:
    """(config, few, notes): with too few layers for a leave-one-out depth fit of degree
    ``ridge_degree`` (``few``), the "predicted" surgery is dropped, with a note."""
    few = n_layers < config.ridge_degree + 2
    notes = []
    if few and "predicted" in config.surgeries:
        config = dataclasses.replace(
            config, surgeries=[s for s in config.surgeries if s != "predicted"]
        )
        notes.append(
            f"{config.model}: {n_layers} layers are too few for a leave-one-out depth fit "
            f"of degree {config.ridge_degree}: predictability not testable."
        )
    return config, few, notes


def perplexity_table(
    model: torch.nn.Module, windows: torch.Tensor, doc_ids: np.ndarray, n_documents: int,
    config: AnatomyConfig,
) -> pd.DataFrame:
    """One-row table of the intact model's held-out perplexity with its document-bootstrap
    95% CI (:func:`lamina.anatomy.perplexity`); ``windows`` (n, seq_len) tokens."""
    base = anatomy.perplexity(model, windows, batch_size=16, n_bootstrap=0)
    p, lo, hi = document_ppl_ci(
        base.nll_per_seq, base.tokens_per_seq, doc_ids, config.n_bootstrap, config.seed
    )
    row = {
        "ppl": p,
        "ci_low": lo,
        "ci_high": hi,
        "nll": base.nll,
        "n_tokens": base.n_tokens,
        "n_sequences": len(base.nll_per_seq),
        "n_documents": n_documents,
        "paper_ppl": 22.6,
    }
    return pd.DataFrame([row])


def predictability_tables(
    model: torch.nn.Module, windows: torch.Tensor, structure: pd.DataFrame, config: AnatomyConfig,
    seq_len: int,
) -> dict[str, pd.DataFrame]:
    """The "predictability", "delta" and "replacement" tables of the weight-predictability
    claims (their permuted-depth R² null is :func:`lamina.chapters.layer_anatomy.run._permuted_r2`)."""
    alpha, degree = config.ridge_alpha, config.ridge_degree
    tables = {
        "predictability": pd.concat(
            [
                anatomy.weight_predictability(model, alpha=alpha, degree=degree),
                summary_predictability(structure, alpha=alpha, degree=degree),
            ],
            ignore_index=True,
        ),
        "delta": anatomy.delta_correlation(model).merge(delta_null(model), on=["matrix", "layer"]),
    }
    n_rob = min(windows.shape[0], -(-int(config.robustness_tokens or 0) // seq_len))
    tables["replacement"] = anatomy.predicted_replacement_curve(
        model, windows[: max(n_rob, 1)], k_max=config.k_max, alpha=alpha, degree=degree,
        batch_size=16,
    )
    return tables


def spectra_table(model: torch.nn.Module) -> pd.DataFrame:
    """Singular values of every weight matrix: columns matrix, layer, index, singular_value."""
    return pd.DataFrame(
        [
            {"matrix": m, "layer": l, "index": i, "singular_value": float(v)}
            for m, s in anatomy.singular_spectra(model).items()
            for l, row in enumerate(s)
            for i, v in enumerate(row)
        ]
    )


def timing_note(config: AnatomyConfig, t0: float, cpu0: float, lap: dict[str, float]) -> str:
    """Wall and CPU seconds since (``t0``, ``cpu0``), with the ``lap`` of each stage."""
    return (
        f"{config.model}: elapsed {time.perf_counter() - t0:.0f} s wall, "
        f"{time.process_time() - cpu0:.0f} s CPU ("
        + ", ".join(f"{k} {v:.0f} s" for k, v in lap.items())
        + f"; {torch.get_num_threads() if config.threads is None else config.threads} thread(s))."
    )
