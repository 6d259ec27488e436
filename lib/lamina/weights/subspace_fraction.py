"""The probe of paper 2: the relative subspace fraction, its enrichment and empirical nulls.

Re-exported by :mod:`lamina.weights`; kept apart so that the probe can be read (and quoted)
on its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
import torch
from scipy import stats

from lamina.core.types import Basis, Matrix
from lamina.weights.maps import LinearMap

__all__ = [
    "Baseline",
    "Side",
    "enrichment",
    "k_sweep",
    "random_matrix_baseline",
    "random_matrix_null",
    "random_orthonormal",
    "random_subspace_baseline",
    "random_subspace_null",
    "relative_subspace_fraction",
]

Side = Literal["input", "output"]


def relative_subspace_fraction(
    delta: Matrix | np.ndarray, basis: Basis | np.ndarray, side: Side
) -> float:
    """Share of a matrix's squared Frobenius norm inside a k-dimensional subspace.

    side="input":  RSF = ‖ΔW B‖²_F / ‖ΔW‖²_F,  B (d_in, k) with orthonormal columns;
    side="output": RSF = ‖Bᵀ ΔW‖²_F / ‖ΔW‖²_F, B (d_out, k).
    delta: (d_out, d_in). -> float in [0, 1]; NaN for a zero ΔW. An isotropic random ΔW
    gives k/d in expectation (see :func:`enrichment`). Computed in float64. Tensors, numpy
    arrays or nested lists; B must have 1 <= k <= d orthonormal columns (|BᵀB - I| <= 1e-3),
    else ValueError.
    """
    if side not in ("input", "output"):
        raise ValueError(f"side must be 'input' or 'output', got {side!r}")
    delta, basis = torch.as_tensor(delta), torch.as_tensor(basis)  # numpy arrays, lists
    if delta.dim() != 2 or basis.dim() != 2:
        raise ValueError(
            f"delta and basis must be 2-D; got {tuple(delta.shape)} and {tuple(basis.shape)}"
        )
    d = delta.shape[1] if side == "input" else delta.shape[0]
    if basis.shape[0] != d:
        raise ValueError(
            f"{side}-side basis must have {d} rows for delta {tuple(delta.shape)}; got {tuple(basis.shape)}"
        )
    k = basis.shape[1]
    if not 1 <= k <= d:
        raise ValueError(f"basis has k={k} columns; need 1 <= k <= d={d}")
    b64 = basis.detach().to("cpu", torch.float64)
    off = float((b64.T @ b64 - torch.eye(k, dtype=torch.float64)).abs().max())
    if not off <= 1e-3:  # also catches NaN
        raise ValueError(
            f"basis columns are not orthonormal: max |BᵀB - I| = {off:.3g} (> 1e-3); "
            "orthonormalise it first (e.g. torch.linalg.qr)"
        )
    delta, basis = delta.to(torch.float64), basis.to(delta.device, torch.float64)
    total = float((delta * delta).sum())
    if total == 0.0:
        return float("nan")
    proj = delta @ basis if side == "input" else basis.T @ delta
    return float((proj * proj).sum()) / total


def enrichment(rsf: float | np.ndarray, k: int, d: int) -> float | np.ndarray:
    """Enrichment = RSF / (k/d): 1 for an isotropic random ΔW, > 1 when ΔW concentrates in
    the subspace, at most d/k."""
    return rsf / (k / d)


@dataclass(frozen=True)
class Baseline:
    """An empirical null for the RSF: ``values`` (n draws), their mean with a 95% t-interval
    (``ci_low``, ``ci_high``), and the 2.5/97.5 percentiles of the draws (``q025``, ``q975``)."""

    values: np.ndarray
    mean: float
    ci_low: float
    ci_high: float
    q025: float
    q975: float


def _baseline(values: list[float]) -> Baseline:
    v = np.asarray(values, dtype=np.float64)
    mean = float(v.mean())
    if len(v) > 1 and v.std() > 0:
        lo, hi = stats.t.interval(0.95, len(v) - 1, loc=mean, scale=stats.sem(v))
    else:
        lo = hi = mean
    return Baseline(
        v, mean, float(lo), float(hi), float(np.quantile(v, 0.025)), float(np.quantile(v, 0.975))
    )


def random_orthonormal(d: int, k: int, generator: torch.Generator) -> Basis:
    """A Haar-random k-frame in R^d: Q of the QR of a Gaussian (d, k) matrix, signs fixed by
    diag(R) -> (d, k) float64."""
    g = torch.randn(d, k, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(g)
    return q * torch.sign(torch.diagonal(r))


def _cumulative_rsf(x: torch.Tensor, frame: torch.Tensor, side: str) -> torch.Tensor:
    """(k,) RSF of ``x`` (d_out, d_in) float64 against the first 1..k columns of ``frame``
    (d, k), orthonormal: cumulative energy along the columns (input side, ‖x q_j‖²) or rows
    (output side, ‖q_jᵀ x‖²) over ‖x‖²_F."""
    proj = x @ frame if side == "input" else frame.T @ x  # columns / rows = directions
    energy = (proj * proj).sum(0 if side == "input" else 1)
    return torch.cumsum(energy, 0) / float((x * x).sum())


def _side_dim(shape: Sequence[int], side: str) -> int:
    """d of the side a basis acts on: d_in (input) or d_out (output) of a (d_out, d_in) map."""
    return int(shape[1] if side == "input" else shape[0])


def _subspace_draws(delta: torch.Tensor, side: str, rotations: Sequence[torch.Tensor]) -> np.ndarray:
    """(n, d) cumulative RSF of the fixed ``delta`` against the leading columns of each of
    the ``n`` Haar-random orthogonal (d, d) ``rotations``: column k-1 is a draw of the RSF
    against a Haar-random k-subspace."""
    delta = delta.detach().cpu().to(torch.float64)
    return torch.stack([_cumulative_rsf(delta, q, side) for q in rotations]).numpy()


def _matrix_draws(
    shape: tuple[int, int], basis: torch.Tensor, side: str, n: int, gen: torch.Generator
) -> np.ndarray:
    """(n, k) cumulative RSF of ``n`` isotropic Gaussian matrices of ``shape`` (d_out, d_in)
    against the leading columns of the fixed ``basis`` (d, k)."""
    basis = basis.detach().cpu().to(torch.float64)
    draws = [
        _cumulative_rsf(torch.randn(*shape, generator=gen, dtype=torch.float64), basis, side)
        for _ in range(n)
    ]
    return torch.stack(draws).numpy()


def _null_rows(key: str, cum: np.ndarray, ks: Sequence[int], prefix: str) -> list[dict]:
    """Rows key, k, {prefix}_mean, {prefix}_q025, {prefix}_q975 of the draws ``cum`` (n, k_max)
    at every k <= k_max (RSF units)."""
    rows = []
    for k in ks:
        if k <= cum.shape[1]:
            v = cum[:, k - 1]
            rows.append(
                {
                    "key": key,
                    "k": k,
                    f"{prefix}_mean": float(v.mean()),
                    f"{prefix}_q025": float(np.quantile(v, 0.025)),
                    f"{prefix}_q975": float(np.quantile(v, 0.975)),
                }
            )
    return rows


def random_subspace_null(
    deltas: Mapping[str, torch.Tensor],
    sides: Mapping[str, str],
    ks: Sequence[int],
    *,
    n: int,
    seed: int,
) -> pd.DataFrame:
    """Empirical null of the RSF of each fixed ΔW against Haar-random k-subspaces, for every
    k at once: draw n Haar-random orthogonal (d, d) matrices Q (shared by the matrices of one
    d); the first k columns of Q are a Haar-random k-frame, so RSF_k = Σ_{j<k} ‖ΔW q_j‖² / ‖ΔW‖²
    (input side; ‖q_jᵀ ΔW‖² on the output side). The one random-subspace null of lamina
    (:func:`random_subspace_baseline` is its single-matrix, single-k view).

    deltas: {key: ΔW (d_out, d_in)}; sides: {key: "input" | "output"}.
    -> columns key, k, null_mean, null_q025, null_q975 (RSF units; the isotropic value is k/d)."""
    gen = torch.Generator().manual_seed(seed)
    rotations: dict[int, list[torch.Tensor]] = {}
    rows = []
    for key, delta in deltas.items():
        d = _side_dim(delta.shape, sides[key])
        if d not in rotations:
            rotations[d] = [random_orthonormal(d, d, gen) for _ in range(n)]
        rows += _null_rows(key, _subspace_draws(delta, sides[key], rotations[d]), ks, "null")
    return pd.DataFrame(rows)


def random_matrix_null(
    shapes: Mapping[str, tuple[int, int]],
    bases: Mapping[str, tuple[torch.Tensor, str]],
    ks: Sequence[int],
    *,
    n: int,
    seed: int,
) -> pd.DataFrame:
    """Empirical null of the other kind: the RSF of ``n`` isotropic Gaussian matrices of each
    map's shape (d_out, d_in) against that map's own ordered basis (d, >= k), for every k at
    once (cumulative energy along the basis columns); expectation k/d. The one random-matrix
    null of lamina (:func:`random_matrix_baseline` is its single-basis view).

    bases: {key: (basis (d, k_max), side)}.
    -> columns key, k, rmat_mean, rmat_q025, rmat_q975 (RSF units)."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for key, shape in shapes.items():
        basis, side = bases[key]
        rows += _null_rows(key, _matrix_draws(shape, basis, side, n, gen), ks, "rmat")
    return pd.DataFrame(rows)


def random_subspace_baseline(
    delta: Matrix, k: int, side: Side, *, n: int = 100, seed: int = 0
) -> Baseline:
    """RSF of the fixed ``delta`` (d_out, d_in) against ``n`` Haar-random k-subspaces, with a
    95% interval of the mean: :func:`random_subspace_null`'s draws for one matrix and one k."""
    d = _side_dim(delta.shape, side)
    if not 1 <= k <= d:
        raise ValueError(f"k must be in [1, {d}], got {k}")
    gen = torch.Generator().manual_seed(seed)
    rotations = [random_orthonormal(d, d, gen) for _ in range(n)]
    return _baseline(list(_subspace_draws(delta, side, rotations)[:, k - 1]))


def random_matrix_baseline(
    shape: tuple[int, int], basis: Basis, side: Side, *, n: int = 100, seed: int = 0
) -> Baseline:
    """RSF of ``n`` isotropic Gaussian matrices of ``shape`` (d_out, d_in) against ``basis``
    (d, k), with a 95% interval of the mean: :func:`random_matrix_null`'s draws at k."""
    gen = torch.Generator().manual_seed(seed)
    return _baseline(list(_matrix_draws(shape, basis, side, n, gen)[:, -1]))


def k_sweep(
    deltas: Mapping[str, Matrix],
    bases: Mapping[str, tuple[Basis, Side]],
    ks: Sequence[int],
    *,
    maps: Sequence[LinearMap] | None = None,
    n_random: int = 0,
    seed: int = 0,
) -> pd.DataFrame:
    """RSF and enrichment of every ΔW at every k, as a tidy table.

    deltas: {key: (d_out, d_in)}; bases: {key: (ordered basis (d, k_max), side)}, e.g. from
    :func:`probe_bases`; the first k columns are used. ks larger than k_max are skipped.
    With ``n_random > 0`` each row also carries the random-subspace baseline (mean, 95% CI).
    -> columns key, layer, role, kind, side, k, d, rsf, enrichment, iso (= k/d)
    [, null_mean, null_ci_low, null_ci_high, null_q975].
    """
    meta = {m.key: m for m in maps} if maps is not None else {}
    rows = []
    for key, delta in deltas.items():
        if key not in bases:
            continue
        basis, side = bases[key]
        d = basis.shape[0]
        lm = meta.get(key)
        for k in ks:
            if k > basis.shape[1]:
                continue
            rsf = relative_subspace_fraction(delta, basis[:, :k], side)
            row = {
                "key": key,
                "layer": lm.layer if lm else None,
                "role": lm.role if lm else key.split(".")[-1],
                "kind": lm.kind if lm else None,
                "side": side,
                "k": k,
                "d": d,
                "rsf": rsf,
                "enrichment": enrichment(rsf, k, d),
                "iso": k / d,
            }
            if n_random:
                null = random_subspace_baseline(delta, k, side, n=n_random, seed=seed)
                row |= {
                    "null_mean": null.mean,
                    "null_ci_low": null.ci_low,
                    "null_ci_high": null.ci_high,
                    "null_q975": null.q975,
                }
            rows.append(row)
    return pd.DataFrame(rows)
