"""Known-answer deltas tables for the calibration of paper 2's signature rows
(:mod:`lamina.weights.calibration`): Q/K enriched (alignment stages, late pretraining, every
objective) and writes close to random, at the chapter's real-model sizes.

What the null keeps, beside the claim's own null (a ΔW as concentrated as the matrix it
updates): **the finite-sample noise of the probe subspaces**. The input second moment of each
block is *estimated*, as the chapter estimates it, from ``n_tokens`` tokens whose true
covariance Σ has a decaying spectrum (λ_i ∝ i^-0.8, a random basis) and heavy tails (Student t,
5 degrees of freedom); P_A is the top-k of that estimate, not of Σ. Two sizes alternate with the
seed: SmolLM2's (d = 576, 2,048 tokens) and Gemma's (d = 640, 512 tokens: fewer tokens than
dimensions). And the null's ΔW is shaped like a gradient (its concentration follows Σ's
spectrum, most of it in the best-estimated directions) while W's is spread evenly over Σ's top-k:
the shapes for which a noisy P_A favours ΔW. Measured on this source (10 blocks per size, equal
true RSF): the estimated P_A raises RSF(ΔW)/RSF(W) by 6% at SmolLM2's size and 14% at Gemma's.
The Q/K rows read the ratio in the true P_A, through a leakage model fitted per block from the
block's own data (sample eigenvalues, token count, the tokens' squared norms: :mod:`lamina.weights.qk_null`,
which knows nothing of this source's spectrum or tails); the source hands those data to
:func:`~lamina.weights.probes.signature_from_deltas` as the chapter does.

Each matrix's true RSF is its kind's target times a log-normal factor (sd :data:`SPREAD`, from
the width of SmolLM2's Q/K CI over 16 matrices), W's and ΔW's drawn independently. W's target is
the enrichment measured for SmolLM2's Q/K weights (:data:`W_ENRICHMENT`). Kinds:

* ``null``: RSF(ΔW) = RSF(W) in truth; writes as concentrated in the prediction subspace as W;
  for ``every_objective``, one of the three objectives null and two planted.
* ``planted``: RSF(ΔW) = :data:`PLANTED_RATIO` × RSF(W) (paper 2 states no size: lamina's
  choice, a doubling); writes isotropic.
* ``half``: half the planted excess, 1.5 × RSF(W); writes isotropic.

**Known value** (the calibration page's coverage): :func:`qk_truth`, the population value of
the Q/K rows' statistic in the true P_A, where estimating P_A biases nothing (c = 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
import torch

from lamina.weights.maps import LinearMap
from lamina.weights.probes import signature_from_deltas
from lamina.weights.subspace_fraction import random_orthonormal

__all__ = ["KINDS", "PLANTED_RATIO", "SIZES", "SPREAD", "W_ENRICHMENT", "Size", "qk_truth",
           "signature_source"]

KINDS = ("null", "planted", "half")
W_ENRICHMENT = 5.72 / 3.15  # SmolLM2-135M-Instruct's Q/K: enrichment(ΔW) / (RSF(ΔW)/RSF(W))
PLANTED_RATIO = 2.0
SPREAD = 0.4
ROLES: tuple[tuple[str, Literal["read", "write"]], ...] = (
    ("q", "read"), ("k", "read"), ("attn_out", "write"), ("mlp_out", "write"))  # fmt: skip


@dataclass(frozen=True)
class Size:
    """A real model's probe sizes: width ``d``, tokens of the second-moment sample, probed
    blocks, k; ``other``: the unprobed side of each matrix (64 rows keep a seed fast)."""

    d: int
    n_tokens: int
    n_layers: int = 8
    k: int = 8
    other: int = 64


SIZES = (Size(576, 2048), Size(640, 512))
"""SmolLM2-135M's and Gemma-3-270m's (the chapter's real-model budgets)."""


def _shaped(gen: torch.Generator, size: Size, basis: torch.Tensor, shape: torch.Tensor,
            rsf: float, rows: int) -> torch.Tensor:  # fmt: skip
    """(rows, d) Gaussian rows whose input covariance is basis diag(c) basisᵀ with c = f·shape on
    the first k directions and 1 elsewhere, f set so that the expected RSF in those k is
    ``rsf``."""
    d, k = size.d, size.k
    rsf = min(max(rsf, 1e-4), 0.95)
    f = rsf * (d - k) / ((1 - rsf) * float(shape.sum()))
    c = torch.ones(d, dtype=torch.float64)
    c[:k] = f * shape
    return (torch.randn(rows, d, generator=gen, dtype=torch.float64) * c.sqrt()) @ basis.T


def _moment(gen: torch.Generator, size: Size) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(estimated second moment (d, d), true basis (d, d), true spectrum (d,), the tokens'
    squared norms (n,)) of one block: ``size.n_tokens`` heavy-tailed tokens of a covariance
    with spectrum i^-0.8."""
    d = size.d
    basis = random_orthonormal(d, d, gen)
    lam = torch.arange(1, d + 1, dtype=torch.float64) ** -0.8
    z = torch.randn(size.n_tokens, d, generator=gen, dtype=torch.float64)
    chi = (torch.randn(size.n_tokens, 5, generator=gen, dtype=torch.float64) ** 2).sum(1)  # χ², 5 df
    x = (z * lam.sqrt()) @ basis.T * (5.0 / chi).sqrt()[:, None]
    return x.T @ x / size.n_tokens, basis, lam, (x * x).sum(1)


def _rsf(gen: torch.Generator, target: float) -> float:
    z = float(torch.randn(1, generator=gen, dtype=torch.float64))
    return target * math.exp(SPREAD * z)


def _clamped(rsf: np.ndarray) -> np.ndarray:
    return np.clip(rsf, 1e-4, 0.95)  # as _shaped clamps a target


def qk_truth(kind: str, size: Size) -> float:
    """The population value (a ratio) of the Q/K rows' statistic, the geometric mean over
    matrices of RSF(ΔW) / max(c RSF(W), k/d), on source ``kind`` at ``size``, in the true P_A
    (c = 1): exp(E log RSF(ΔW) - E log max(RSF(W), k/d)), each true RSF its kind's target
    times exp(SPREAD z), z ~ N(0, 1), clamped as :func:`_shaped` clamps it; by 80-point
    Gauss-Hermite quadrature. ``planted``: :data:`PLANTED_RATIO` less what the floor k/d takes
    (about 1%); a late-pretraining matrix's mean log ratio over its pairs has the same value."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    ratio = {"null": 1.0, "planted": PLANTED_RATIO, "half": (1 + PLANTED_RATIO) / 2}[kind]
    z, w = np.polynomial.hermite_e.hermegauss(80)  # nodes and weights of N(0, 1), unnormalised
    w = w / w.sum()
    floor, rsf_w = size.k / size.d, W_ENRICHMENT * size.k / size.d
    spread = np.exp(SPREAD * z)
    delta = float(w @ np.log(_clamped(ratio * rsf_w * spread)))
    weight = float(w @ np.log(np.maximum(_clamped(rsf_w * spread), floor)))
    return float(np.exp(delta - weight))


def signature_source(kind: str, seed: int) -> pd.DataFrame:
    """The deltas table (:func:`lamina.weights.probes.signature_from_deltas`'s columns, plus
    moment, family, phase, pair) of one known-answer draw (module docstring): stage pairs
    final→sft and final→dpo, objective pairs final→obj-{lm,sft,dpo}, three late pretraining
    pairs; Q, K, attention-output and MLP-down maps of ``n_layers`` blocks at the size
    ``SIZES[seed % 2]``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    size = SIZES[seed % len(SIZES)]
    d, k = size.d, size.k
    gen = torch.Generator().manual_seed(10_007 * seed + KINDS.index(kind))
    pred = random_orthonormal(d, d, gen)
    rsf_w = W_ENRICHMENT * k / d
    ratio = {"null": 1.0, "planted": PLANTED_RATIO, "half": (1 + PLANTED_RATIO) / 2}[kind]
    blocks = [_moment(gen, size) for _ in range(size.n_layers)]
    weights = {}
    for layer, (_, basis, _, _) in enumerate(blocks):
        for role, rw in ROLES:
            key = LinearMap(layer, role, rw, f"layers.{layer}.{role}").key
            if rw == "read":
                w = _shaped(gen, size, basis, torch.ones(k, dtype=torch.float64), _rsf(gen, rsf_w), size.other)
            else:
                w = _shaped(gen, size, pred, torch.ones(k, dtype=torch.float64), _rsf(gen, rsf_w), size.other).T
            weights[key] = w
    pairs = [("stage", "alignment", "final→sft", ratio, kind == "null"),
             ("stage", "alignment", "final→dpo", ratio, kind == "null"),
             *[("pretraining", "late", f"step-{i}→step-{i + 1}", ratio, kind == "null") for i in range(3)],
             ("objective", "objective", "final→obj-lm", max(ratio, PLANTED_RATIO if kind == "null" else ratio), False),
             ("objective", "objective", "final→obj-sft", max(ratio, PLANTED_RATIO if kind == "null" else ratio), False),
             ("objective", "objective", "final→obj-dpo", ratio, kind == "null")]  # fmt: skip
    frames: list[pd.DataFrame] = []
    cache: dict = {}  # one eigendecomposition per block moment
    for family, phase, pair, r, writes_null in pairs:
        maps, deltas, moments, norms = [], {}, {}, {}
        for layer, (moment, basis, lam, sq) in enumerate(blocks):
            grad_shape = lam[:k] / lam[:k].mean()
            for role, rw in ROLES:
                m = LinearMap(layer, role, rw, f"layers.{layer}.{role}")
                maps.append(m)
                if rw == "read":
                    moments[m.key], norms[m.key] = moment, sq
                    deltas[m.key] = _shaped(gen, size, basis, grad_shape, _rsf(gen, r * rsf_w), size.other)
                else:
                    target = _rsf(gen, rsf_w) if writes_null else k / d
                    deltas[m.key] = _shaped(gen, size, pred, torch.ones(k, dtype=torch.float64), target, size.other).T
        t = signature_from_deltas(deltas, maps, moments, pred[:, :k], [k], weights=weights, cache=cache,
                                  n_tokens=size.n_tokens, squared_norms=norms)  # fmt: skip
        frames.append(t.assign(moment="raw", family=family, phase=phase, pair=pair))
    return pd.concat(frames, ignore_index=True)
