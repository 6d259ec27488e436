"""Known-answer tables for the calibration of paper 2's mechanism and adaptation rows
(:mod:`lamina.weights.calibration`), at the chapter's real-model sizes (SmolLM2's: d = 576,
1,024 gradient tokens, 2,048 basis tokens, k = 8).

* :func:`gradients_source`, the ``gradients`` table of 4 blocks × 5 read maps under three
  objectives. Activations a_t are heavy-tailed draws of a covariance whose spectrum decays at a
  rate that differs by block (so the activation share varies across matrices); the read basis
  comes from a *separate* finite sample, as in the chapter. ``planted`` (the paper's
  mechanism): δ_t independent of a_t, so the summed gradient inherits the activations'
  spectrum, the terms cancel like unrelated ones, and the sum keeps their direction. ``null``:
  two objectives' terms share a direction (one whose concentration is unrelated to the
  activation share, one concentrated 1.5 × beyond it), so the sum does not inherit the share,
  its terms do not cancel like unrelated ones, and it is more concentrated than its terms.
* :func:`adam_source`, the ``adam`` table of 16 read matrices. ``null``: AdamW on unrelated
  (zero-mean) or consistent gradients, after 1, 3, 8, 30 or 120 steps (the traps of
  elementwise normalisation). ``planted``: the top-k input directions are coordinate axes whose
  gradient is pure noise while a consistent gradient is spread over the other coordinates, so
  v̂ is large exactly there; ``half``: that noise weaker.
* :func:`adaptation_source`, the ``adaptation`` table of 64 held-out items and four groups.
  ``planted``: every group as effective as full fine-tuning (ratio 1); ``half``: 0.75 (half the
  excess over the 0.5 threshold); ``null``: one group at 0.25.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
import torch

from lamina.weights.gradients import GradientFactors, adam_update_direction
from lamina.weights.maps import LinearMap
from lamina.weights.mechanism import geometry_rows, held_out_share
from lamina.weights.subspace_fraction import random_orthonormal, relative_subspace_fraction
from lamina.weights.subspaces import principal_basis

__all__ = ["adam_source", "adaptation_source", "gradients_source", "lm_null_delta"]

D, K, T_GRAD, T_BASIS, D_OUT = 576, 8, 1024, 2048, 64
READ_ROLES = ("q", "k", "v", "mlp_gate", "mlp_up")


def _tokens(gen: torch.Generator, n: int, lam: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
    """(n, d) heavy-tailed (Student t, 5 df) tokens with covariance basis diag(lam) basisᵀ."""
    z = torch.randn(n, len(lam), generator=gen, dtype=torch.float64)
    chi = (torch.randn(n, 5, generator=gen, dtype=torch.float64) ** 2).sum(1)  # χ², 5 df
    return (z * lam.sqrt()) @ basis.T * (5.0 / chi).sqrt()[:, None]


def _summed_part(gen: torch.Generator, a: torch.Tensor, u: torch.Tensor, norm: float) -> torch.Tensor:
    """(T, d_out) extra δ whose gradient terms sum to a rank-one matrix w uᵀ of Frobenius norm
    ``norm``: δ_t = c_t w with c = a (aᵀa)⁻¹ u, so Σ_t c_t a_t = u (a: (T, d), T > d)."""
    c = a @ torch.linalg.solve(a.T @ a, u)
    w = torch.randn(D_OUT, generator=gen, dtype=torch.float64)
    return c[:, None] * (w * norm / float(w.norm() * u.norm()))[None, :]


def _cancelled(a: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    """(T, d_out) ``delta`` with its part in the column span of ``a`` (T, d) removed,
    δ' = δ - a (aᵀa)⁻¹ aᵀ δ, so its gradient terms δ'_t a_tᵀ sum to exactly 0 (T > d): they
    still exist token by token (the per-token RSF follows the activation share), but their sum
    carries none of it."""
    return delta - a @ torch.linalg.solve(a.T @ a, a.T @ delta)


def lm_null_delta(gen: torch.Generator, a: torch.Tensor, delta: torch.Tensor, frame: torch.Tensor,
                  norm: float) -> tuple[torch.Tensor, float]:  # fmt: skip
    """The LM null's δ (T, d_out) and u's share: ``delta`` cancelled (:func:`_cancelled`) plus
    terms summing to w uᵀ of norm 3 × ``norm`` (:func:`_summed_part`), u's squared share in
    ``frame`` (d, k) uniform in [0, 1]; the summed gradient Σ_t δ_t a_tᵀ is w uᵀ, its RSF in
    ``frame`` is that share, unrelated to the activations ``a`` (T, d)."""
    share = float(torch.rand(1, generator=gen))
    u = _direction(gen, frame, share)
    return _cancelled(a, delta) + _summed_part(gen, a, u, 3.0 * norm), share


def _direction(gen: torch.Generator, frame: torch.Tensor, share: float) -> torch.Tensor:
    """(d,) a unit vector whose squared projection on the span of ``frame`` (d, k) is ``share``."""
    p = frame @ torch.randn(frame.shape[1], generator=gen, dtype=torch.float64)
    q = torch.randn(frame.shape[0], generator=gen, dtype=torch.float64)
    q = q - frame @ (frame.T @ q)
    return share**0.5 * p / p.norm() + (1 - share) ** 0.5 * q / q.norm()


def gradients_source(kind: str, seed: int, n_layers: int = 4) -> pd.DataFrame:
    """The ``gradients`` table (:func:`lamina.weights.mechanism.objective_gradients`' columns)
    of one draw of ``kind`` ("null" or "planted"), 4 blocks × 5 read maps under three
    objectives. ``planted``: δ_t independent of a_t under every objective (the paper's
    mechanism). ``null``: SFT as planted; LM's and DPO's δ_t carry an extra part whose terms
    sum to a rank-one matrix w uᵀ (:func:`_summed_part`: terms that share a direction):

    * LM: u's share in the read basis drawn uniformly in [0, 1], its norm 3 × that of the
      independent part's sum, and the independent part's own sum cancelled exactly
      (:func:`_cancelled`), so the summed gradient is w uᵀ and its RSF is u's share, unrelated
      to the activation share (with the independent sum kept, a tenth of the summed energy
      followed the share: Spearman ρ ≈ 0.08 in truth, which 20 matrices reject 9% of the
      time); the terms do not cancel like unrelated ones;
    * DPO: u in the read basis, its norm set per matrix so that the summed gradient's RSF is
      1.5 × the activation share in expectation (concentrated beyond the share by 1.5, outside
      the claimed [0.8, 1.25]).
    """
    if kind not in ("null", "planted"):
        raise ValueError(f"kind must be 'null' or 'planted'; got {kind!r}")
    gen = torch.Generator().manual_seed(7_919 * seed + (kind == "null"))
    rows = []
    for objective in ("lm", "sft", "dpo"):
        maps, factors, moments = [], {}, {}
        bases: dict[str, tuple[torch.Tensor, Literal["input", "output"]]] = {}
        for layer in range(n_layers):
            decay = 0.4 + 0.3 * layer  # the activation share differs by block
            lam = torch.arange(1, D + 1, dtype=torch.float64) ** -decay
            basis = random_orthonormal(D, D, gen)
            sample = _tokens(gen, T_BASIS, lam, basis)
            moment = sample.T @ sample / T_BASIS
            frame = principal_basis(moment, K)
            for role in READ_ROLES:
                m = LinearMap(layer, role, "read", f"layers.{layer}.{role}")
                maps.append(m)
                a = _tokens(gen, T_GRAD, lam, basis)
                delta = torch.randn(T_GRAD, D_OUT, generator=gen, dtype=torch.float64)
                if kind == "null" and objective != "sft":
                    norm = float(torch.linalg.matrix_norm(delta.T @ a))
                    if objective == "lm":
                        delta = lm_null_delta(gen, a, delta, frame, norm)[0]
                    else:
                        share = held_out_share(a, frame)
                        kappa2 = 0.5 * share / (1 - 1.5 * share)  # (share + κ²)/(1 + κ²) = 1.5 share
                        delta = delta + _summed_part(gen, a, _direction(gen, frame, 1.0),
                                                     kappa2**0.5 * norm)  # fmt: skip
                factors[m.key] = GradientFactors(acts=a.float(), deltas=delta.float())
                bases[m.key], moments[m.key] = (frame, "input"), moment
        for row in geometry_rows(factors, maps, bases, moments, K, seed):
            rows.append({"objective": objective, "checkpoint": "synthetic", **row})
    return pd.DataFrame(rows)


def adam_source(kind: str, seed: int, n: int = 16, d_out: int = 32, tokens: int = 64,
                d: int = D) -> pd.DataFrame:  # fmt: skip
    """The ``adam`` table (state "sft") of one draw of ``kind`` (module docstring): ``n`` read
    matrices (d_out, ``d``), gradients over ``tokens`` tokens per step."""
    gen = torch.Generator().manual_seed(104_729 * seed + ("null", "planted", "half").index(kind))
    steps = (1, 3, 8, 30, 120)[seed % 5] if kind == "null" else 30
    consistent = kind == "null" and (seed // 5) % 2 == 1
    noise = {"planted": 30.0, "half": 10.0}.get(kind, 1.0)
    rows = []
    for i in range(n):
        if kind == "null":
            q = random_orthonormal(d, d, gen)
            lam = torch.linspace(10, 0.1, d, dtype=torch.float64)
            chol = q @ torch.diag(lam.sqrt())
            mean = torch.randn(d_out, d, generator=gen, dtype=torch.float64) * float(consistent)
        else:
            chol = torch.diag(torch.cat([torch.full((K,), noise), torch.ones(d - K)]).double().sqrt())
            mean = torch.randn(d_out, d, generator=gen, dtype=torch.float64)
            mean[:, :K] = 0
        basis = principal_basis(chol @ chol.T, K)
        m = torch.zeros(d_out, d, dtype=torch.float64)
        v = torch.zeros_like(m)
        for _ in range(steps):
            a = chol @ torch.randn(d, tokens, generator=gen, dtype=torch.float64)
            g = torch.randn(d_out, tokens, generator=gen, dtype=torch.float64) @ a.T / tokens**0.5
            g = g + 3 * mean
            m, v = 0.9 * m + 0.1 * g, 0.95 * v + 0.05 * g * g
        u = adam_update_direction(m, v, steps, (0.9, 0.95))

        def enr(x: torch.Tensor, basis: torch.Tensor = basis) -> float:
            return relative_subspace_fraction(x, basis, "input") / (K / d)

        rows.append({"state": "sft", "checkpoint": "synthetic", "step": steps,
                     "key": f"layers.{i}.q", "layer": i, "role": "q", "kind": "read", "k": K,
                     "d": d, "enrichment_momentum": enr(m), "enrichment_update": enr(u),
                     "enrichment_sign": enr(torch.sign(m))})  # fmt: skip
    return pd.DataFrame(rows)


def adaptation_source(kind: str, seed: int, n: int = 64) -> pd.DataFrame:
    """The ``adaptation`` table of one draw of ``kind`` (module docstring): per item, full
    fine-tuning lowers the loss by N(0.3, 0.2) nats; a group by ratio × that plus item noise
    (sd 0.1 nats)."""
    rng = np.random.default_rng(15_485_863 * seed + ("null", "planted", "half").index(kind))
    ratios = {"planted": [1.0] * 4, "half": [0.75] * 4, "null": [1.0, 1.0, 1.0, 0.25]}[kind]
    full = rng.normal(0.3, 0.2, n)
    rows = []
    for group, r in zip(("qk", "vo", "mlp_in", "mlp_out", "all"), [*ratios, 1.0], strict=True):
        red = full if group == "all" else r * full + rng.normal(0, 0.1, n)
        rows += [{"group": group, "item": i, "loss_before": 2.0, "loss_after": 2.0 - red[i],
                  "acc_before": 0.1, "acc_after": 0.3, "n_params": 1} for i in range(n)]  # fmt: skip
    return pd.DataFrame(rows)
