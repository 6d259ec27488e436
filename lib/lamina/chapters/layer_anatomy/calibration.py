"""Calibration of paper 3's importance verdicts on known-answer skip sweeps: the false-
positive rate of "the critical core (L8-11) holds the most important layers" and of its size
claim (+63,419%) when no layer depth is special, and their power when a core is planted.

The source (:func:`synthetic_sweep`) is a 30-layer skip sweep at the chapter's size
(:data:`N_DOCUMENTS` documents of :data:`WINDOWS_PER_DOCUMENT` windows: the chapter's 2,048
tokens in windows of 128). Its importance profile is SmolLM2-135M-Instruct's measured skip
profile (:data:`REAL_SKIP_PCT`, the chapter's 30 delta_pct values) in a random layer order,
so it has a real profile's magnitudes (a layer at +74,279%, four above +1,000%) and no depth
structure. Each window's NLL shift is its layer's mean shift log(1 + delta/100) plus a
document component and a window component, each with sd :data:`REL_SD` times the mean shift
(fitted: the chapter's document-bootstrap CIs give a relative standard error of the mean
shift of 0.12 at the median layer over 8 documents, a per-document sd of 0.12 sqrt(8) = 0.34
of the shift). Kinds:

* ``null``: that profile, no core.
* ``planted``: the same, with the mapped core layers set to the paper's size: the largest
  at +63,419%, the others 5%, 10% and 15% lower.
* ``planted-half``: the core at half those percentages.

The verdicts are the chapter's own (:func:`~.claims.importance_claims`, documents as the
resampling unit); the rows are summarised by :func:`lamina.trajectory.calibration.summarise`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lamina.anatomy.perplexity import paired_diff_ci
from lamina.chapters.layer_anatomy.claims import importance_claims, mapped_layers
from lamina.chapters.layer_anatomy.config import AnatomyConfig
from lamina.chapters.layer_anatomy.nulls import PAPER_CORE, PAPER_L
from lamina.trajectory.calibration import known_answer_rows

__all__ = ["KINDS", "REAL_SKIP_PCT", "calibration_rows", "synthetic_sweep"]

KINDS = ("null", "planted", "planted-half")
# SmolLM2-135M-Instruct, skip ablation, delta_pct per layer 0..29 (the chapter's run of
# 2026-12-01, data/results/smollm2-135m-instruct/layer_anatomy.sweep.parquet)
REAL_SKIP_PCT = (
    74279.4, 2048.0, 154.9, 20.39, 11.46, 12.23, 34.0, 15.65, 169.3, 13.53,
    21.25, 390.0, 8.041, 4.458, 10.79, 22.68, 13.02, 7.806, 15.95, 26.13,
    29.07, 24.33, 18.86, 28.17, 91.68, 16.64, 8.907, 47.26, 142.5, 1695.5,
)  # fmt: skip
PAPER_CORE_MAX = 63_419.0  # paper 3's largest core delta_pct (%)
N_DOCUMENTS, WINDOWS_PER_DOCUMENT = 8, 2
SEQ_LEN = AnatomyConfig.seq_len  # tokens per window (128)
REL_SD = 0.34  # per-document (and per-window) sd of a layer's NLL shift, relative to its mean
CLAIMS = ("P3-core", "P3-core-max")


def _profile(kind: str, rng: np.random.Generator, core: list[int]) -> np.ndarray:
    """delta_pct per layer (30,): the real profile permuted, with the planted core."""
    pct = rng.permutation(np.asarray(REAL_SKIP_PCT))
    if kind != "null":
        size = PAPER_CORE_MAX * (1.0 if kind == "planted" else 0.5)
        for i, layer in enumerate(core):
            pct[layer] = size * (1 - 0.05 * i)
    return pct


def synthetic_sweep(kind: str, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """(sweep, doc_ids): the skip rows of one known-answer source (``kind`` in :data:`KINDS`)
    with the columns the claims read (layer, surgery, delta_pct, its 95% CI over documents,
    nll_per_seq and base_nll_per_seq: per-window mean NLL, nats, (n_windows,)), and the
    document of each window (n_windows,). Each layer's CI is the chapter's own
    (``lamina.anatomy.perplexity.paired_diff_ci`` over windows)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    rng = np.random.default_rng([seed, KINDS.index(kind), 3])
    core = mapped_layers(PAPER_CORE, PAPER_L, "span") or []
    pct = _profile(kind, rng, core)
    doc_ids = np.repeat(np.arange(N_DOCUMENTS), WINDOWS_PER_DOCUMENT)
    counts = np.full(doc_ids.size, float(SEQ_LEN))  # predicted tokens per window
    base = 3.0 + 0.3 * rng.standard_normal(N_DOCUMENTS)[doc_ids]  # nats per token
    rows = []
    for layer, d in enumerate(pct):
        mu = np.log1p(d / 100)
        per_doc = mu * REL_SD * rng.standard_normal(N_DOCUMENTS)
        shift = mu + per_doc[doc_ids] + mu * REL_SD * rng.standard_normal(doc_ids.size)
        per = base + shift
        # the chapter's per-layer CI (lamina.anatomy.ablation): paired BCa over windows
        lo, hi = 100 * np.expm1(paired_diff_ci(per * SEQ_LEN, base * SEQ_LEN, counts, 500, seed))
        rows.append({"layer": layer, "surgery": "skip", "delta_pct": np.expm1(shift.mean()) * 100,
                     "delta_ci_low": lo, "delta_ci_high": hi, "nll_per_seq": per,
                     "base_nll_per_seq": base})
    return pd.DataFrame(rows), doc_ids


def calibration_rows(seeds: range | list[int], n_bootstrap: int = 1_000) -> pd.DataFrame:
    """One row per (kind, seed, claim of :data:`CLAIMS`) in the format of
    ``lamina.trajectory.calibration.calibrate`` (``known_answer_rows``)."""
    config = AnatomyConfig(n_bootstrap=n_bootstrap)

    def judge(kind: str, seed: int) -> list[dict]:
        sweep, docs = synthetic_sweep(kind, seed)
        return importance_claims(config, sweep, PAPER_L, docs)

    return known_answer_rows(seeds, judge, CLAIMS, reason="effect_name")
