"""Calibration of paper 2's alignment verdicts on known-answer weight updates: the false-
positive rate of "Q/K alignment updates are enriched in the principal input subspace" when the
update is only as concentrated as the matrix it updates, and its power when it is more so.

The source (:func:`synthetic_deltas`) is a fake model probed at the chapter's real-model size:
``n_layers`` blocks (``SignatureConfig.real_layers``), d = 576 (SmolLM2-135M's width), k =
``SignatureConfig.k``. Each read matrix's input second moment has eigenvalues falling
linearly from 10 to 0.1 in a random basis; its prediction subspace is a random k-frame. A
matrix drawn with Gaussian rows "tilted" by a factor t along the top-k input directions has

    RSF = k t² / (k t² + d − k)    (in expectation)

so t sets its enrichment. Matrices differ: each one's RSF is its kind's value times a
log-normal factor of sd :data:`SPREAD` (0.4, from the width of the chapter's CI for SmolLM2's
Q/K enrichment, 4.85–6.95 over 16 matrices: a log half-width of 0.195 = 1.96 sd / √16), drawn
independently for W and ΔW, so a null ΔW is as concentrated as its W only on average. W (the
start checkpoint) is tilted to the enrichment lamina measured
for SmolLM2's Q/K weights (:data:`W_ENRICHMENT`: the chapter's enrichment of ΔW, 5.72, over
its RSF(ΔW)/RSF(W), 3.15). Kinds:

* ``null``: ΔW drawn like W (RSF(ΔW) = RSF(W) in expectation): enriched against k/d, not
  beyond W itself. The writes' ΔW is concentrated in the prediction subspace by the same
  factor, so "writes close to random" is false here too.
* ``planted``: ΔW's Q/K tilted so that RSF(ΔW) = :data:`PLANTED_RATIO` × RSF(W); writes
  isotropic (close to random). Paper 2 states no size: the ratio is lamina's choice (a
  doubling of W's own concentration).
* ``planted-half``: half the planted excess, RSF(ΔW) = (1 + (ratio − 1) / 2) × RSF(W).

The verdicts are the chapter's own (:func:`~.claims.stage_claims`, gate passed). The rows are
summarised by :func:`lamina.trajectory.calibration.summarise` (FPR over the null, power over
the planted sources, Wilson intervals).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

import pandas as pd
import torch

from lamina.chapters.weight_update_signature.claims import stage_claims
from lamina.chapters.weight_update_signature.config import SignatureConfig
from lamina.chapters.weight_update_signature.deltas import signature_from_deltas
from lamina.chapters.weight_update_signature.gate import AlignmentGate
from lamina.trajectory.calibration import known_answer_rows
from lamina.weights import LinearMap, random_orthonormal

__all__ = ["KINDS", "PLANTED_RATIO", "W_ENRICHMENT", "SignatureSource", "calibration_rows",
           "synthetic_deltas", "tilt_for"]

KINDS = ("null", "planted", "planted-half")
W_ENRICHMENT = 5.72 / 3.15  # SmolLM2-135M-Instruct's Q/K: enrichment(ΔW) / (RSF(ΔW)/RSF(W))
PLANTED_RATIO = 2.0  # RSF(ΔW) / RSF(W) of the planted source (lamina's choice)
SPREAD = 0.4  # sd of log RSF across matrices: SmolLM2's Q/K enrichment CI 4.85-6.95 over 16 matrices
CLAIMS = ("P2.align_qk_enriched", "P2.align_write_random")
ROLES: tuple[tuple[str, Literal["read", "write"]], ...] = (
    ("q", "read"), ("k", "read"), ("attn_out", "write"), ("mlp_out", "write"))


@dataclass(frozen=True)
class SignatureSource:
    """The fake model's sizes: width ``d``, subspace dimension ``k``, probed blocks
    ``n_layers``; ``other``: the side of each matrix that is not probed (a read matrix is
    (other, d), a write matrix (d, other)). RSF is measured on the probed side, so ``other``
    sets only how many rows average into it (64 keeps a seed at about 1 s)."""

    d: int = 576
    other: int = 64
    k: int = SignatureConfig.k
    n_layers: int = SignatureConfig.real_layers


def tilt_for(rsf: float, d: int, k: int) -> float:
    """The tilt t that gives a Gaussian matrix RSF = ``rsf`` in expectation over its top-k
    input directions: t² = rsf (d − k) / (k (1 − rsf)). rsf in (0, 1)."""
    if not 0 < rsf < 1:
        raise ValueError(f"rsf must be in (0, 1); got {rsf}")
    return math.sqrt(rsf * (d - k) / (k * (1 - rsf)))


def _tilt_in(g: torch.Tensor, frame: torch.Tensor, t: float) -> torch.Tensor:
    """g (d_out, d_in) with its input side scaled by t along the k-frame ``frame`` (d_in, k):
    g + (t − 1) (g frame) frameᵀ."""
    return g + (t - 1) * (g @ frame) @ frame.T


def _rsf(base: float, z: float) -> float:
    return min(base * math.exp(SPREAD * z), 0.9)


def synthetic_deltas(kind: str, seed: int, source: SignatureSource = SignatureSource()) -> pd.DataFrame:
    """The deltas table (:func:`~.deltas.signature_from_deltas`, pair "final→sft", family
    "stage", raw moments) of one known-answer source: ``kind`` in :data:`KINDS` (see the
    module docstring), Q, K (read, (other, d)), attention-output and MLP-down (write, (d, other)) maps in
    ``source.n_layers`` blocks of width ``source.d``, at k = ``source.k``. Each matrix's RSF varies around its kind's
    value by a log-normal factor of sd :data:`SPREAD` (W and ΔW independently)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    d, k = source.d, source.k
    gen = torch.Generator().manual_seed(10_007 * seed + KINDS.index(kind))
    basis = random_orthonormal(d, d, gen)
    moment = basis @ torch.diag(torch.linspace(10, 0.1, d, dtype=torch.float64)) @ basis.T
    pred = random_orthonormal(d, d, gen)
    top, top_pred = basis[:, :k], pred[:, :k]
    rsf_w = W_ENRICHMENT * k / d
    ratio = {"null": 1.0, "planted": PLANTED_RATIO, "planted-half": (1 + PLANTED_RATIO) / 2}[kind]
    maps: list[LinearMap] = []
    deltas: dict[str, torch.Tensor] = {}
    weights: dict[str, torch.Tensor] = {}
    moments: dict[str, torch.Tensor] = {}
    for layer in range(source.n_layers):
        for role, rw in ROLES:
            m = LinearMap(layer, role, rw, f"layers.{layer}.{role}")
            maps.append(m)
            shape = (source.other, d) if rw == "read" else (d, source.other)
            g = torch.randn(*shape, generator=gen, dtype=torch.float64)
            w = torch.randn(*shape, generator=gen, dtype=torch.float64)
            z = torch.randn(2, generator=gen, dtype=torch.float64).tolist()
            if rw == "read":
                w = _tilt_in(w, top, tilt_for(_rsf(rsf_w, z[0]), d, k))
                g = _tilt_in(g, top, tilt_for(_rsf(ratio * rsf_w, z[1]), d, k))
                moments[m.key] = moment
            else:
                write_rsf = _rsf(rsf_w, z[1]) if kind == "null" else k / d
                g = _tilt_in(g.T, top_pred, tilt_for(write_rsf, d, k)).T  # output side
            deltas[m.key], weights[m.key] = g, w
    t = signature_from_deltas(deltas, maps, moments, pred[:, :k], [k], weights=weights, cache={})
    return t.assign(moment="raw", family="stage", pair="final→sft")


def calibration_rows(
    seeds: range | list[int], source: SignatureSource = SignatureSource(), n_bootstrap: int = 500
) -> pd.DataFrame:
    """One row per (kind, seed, claim of :data:`CLAIMS`) in the format of
    ``lamina.trajectory.calibration.calibrate`` (``known_answer_rows``), the alignment gate
    passed."""
    config = replace(SignatureConfig(k=source.k, n_bootstrap=n_bootstrap), targets=("sft",))
    gate = AlignmentGate(True, {"calibration": 1.0}, "known-answer source: no gate")

    def judge(kind: str, seed: int) -> list[dict]:
        return stage_claims("synthetic", synthetic_deltas(kind, seed, source), config, gate)[0]

    return known_answer_rows(seeds, judge, CLAIMS)
