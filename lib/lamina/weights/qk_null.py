"""The Q/K rows' ratio RSF(ΔW) / RSF(W) when P_A is *estimated*: its null centre and each RSF
read back into the true P_A, by a plug-in (parametric bootstrap) fit per read moment, from that
moment's own data.

Why a centre. P_A is the top-k of a finite-sample second moment M̂ = (1/n) Σ_t a_t a_tᵀ
(n tokens at width d: 2,048 at d = 576 for SmolLM2, 512 at d = 640 for Gemma 3, fewer than d).
Its top directions are estimated well and those near the eigengap at k poorly. A
gradient-shaped ΔW (input covariance ∝ λ_i on the true top-k: most of its energy in the
best-estimated directions) keeps more of its true RSF in P̂ than a W spread evenly over the
true top-k, so RSF(ΔW)/RSF(W) exceeds 1 where the truth is 1. The Q/K rows' test is therefore
against a centre c, not 1: its null is "ΔW no more concentrated than W beyond what estimating
P_A gives a gradient-shaped update" (:func:`lamina.weights.measures_signature.beyond_both`).

How it is fitted (:func:`fit_moment`), from what the chapter has on any model, real or
synthetic: the sample eigenvalues ℓ (d,) of M̂, the token count n, and the tokens' squared
norms (their tails; optional). Nothing of a source's generative model is used.

1. **Deconvolve the spectrum.** The sample spectrum is over-dispersed (its top eigenvalues
   too large, the eigengaps too wide), so simulating from ℓ itself under-states the
   estimation error. λ⁰ = ℓ; then :data:`DECONVOLVE_STEPS` times: simulate one M̃ from λᵗ
   (n tokens, step 2's tails), ℓ̃ its sorted eigenvalues, λᵗ⁺¹_i = λᵗ_i ℓ_i / ℓ̃_i on the top
   m = min(n, d) // 2 (the factor clipped to [1/2, 2], then made non-increasing); below m the
   sample's own shape (its n < d zeros filled flat), scaled so that tr λ = tr ℓ
   (E tr M̂ = tr Σ).
2. **Tails.** Tokens are simulated as a scale mixture a = s · diag(λ)^{1/2} z, z ~ N(0, I),
   s² drawn from the observed squared token norms ‖a_t‖² / mean (shrunk towards 1 by the part
   of their variance, 2 Σλ² / (Σλ)², that the Gaussian factor adds); without norms, s = 1
   (Gaussian tokens, which under-states heavy tails).
3. **Leakage.** :data:`FIT_BLOCKS` simulated moments M̃ from λ̂ (identity basis: the model is
   rotation invariant), P̃_k their top-k eigenvectors, q_k,i = E‖P̃_kᵀ e_i‖² (d,) for each k.
4. **Centre** (:func:`null_centre`), per matrix from its own measured RSF(W) = r:
   rows of input covariance diag(c), c_i = F w_i on i < k, 1 elsewhere, Σ_{i<k} w_i = 1, have
   true RSF F / (F + d - k) = r and expected RSF in P̃ of (F Σ_{i<k} w_i q_i + Σ_{i≥k} q_i) /
   (F + d - k). The centre is that of the gradient shape w_i = λ̂_i / Σ_{j<k} λ̂_j over that
   of the flat shape w_i = 1/k (≥ 1 when the best-estimated directions are the largest).
5. **Inversion** (:func:`true_rsf`; what the Q/K rows read). In the true RSF ρ = F / (F + d - k)
   the expected RSF in P̃ is linear, g_w(ρ) = ρ A_w + (1 - ρ) R', A_w = Σ_{i<k} w_i q_i,
   R' = Σ_{i≥k} q_i / (d - k), so each measured RSF maps back to ρ̂ = (m - R') / (A_w - R'):
   ΔW's with the gradient shape, W's with the flat one. The centre of step 4 corrects the ratio
   at equal concentrations only; a real excess is also *attenuated*, because R' > 0 pulls every
   measured RSF towards one floor. Through the fit of one block of the calibration's source, the
   centre-corrected ratio of a planted doubling is 1.96 at 2,048 tokens and d = 576, and 1.85 at
   512 tokens and d = 640 (tests/weights/test_qk_null.py); ρ̂(ΔW) / ρ̂(W) is 2.

Cost: (:data:`DECONVOLVE_STEPS` + :data:`FIT_BLOCKS`) simulated moments, each an (n, d) × (d, n)
product and a d × d eigendecomposition, per read moment (Q and K of a block share one).
The fit is code in ``lamina.weights``, so the calibration cache key covers it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
import torch

__all__ = ["DECONVOLVE_STEPS", "FIT_BLOCKS", "FIT_SEED", "MomentFit", "QK_ROLES", "add_null_centres",
           "fit_moment", "null_centre", "token_scales", "true_rsf"]  # fmt: skip

QK_ROLES = ("q", "k")
"""The roles whose rows get a centre (the Q/K rows' matrices)."""
FIT_SEED = 900_001
"""Seed of every fit's generator (fixed: the fit is a deterministic function of its inputs)."""
DECONVOLVE_STEPS = 3
"""Multiplicative deconvolution steps of the spectrum (step 1), one simulated moment each."""
FIT_BLOCKS = 4
"""Simulated moments whose leakage is averaged (step 3)."""


@dataclass(frozen=True)
class MomentFit:
    """One read moment's fit. spectrum: λ̂ (d,), the deconvolved input spectrum (units of the
    moment: squared activation); leakage: {k: q_k (d,)} (unitless, in [0, 1], summing to k);
    n_tokens, d; tail: the mean of s⁴ of the simulated tokens' scales (1: Gaussian, about 3
    for Student t with 5 df); sample_top: ℓ_1 / λ̂_1 (how much the sample inflates the top
    eigenvalue)."""

    spectrum: torch.Tensor
    leakage: dict[int, torch.Tensor]
    n_tokens: int
    d: int
    tail: float
    sample_top: float


def token_scales(squared_norms: torch.Tensor) -> torch.Tensor:
    """Tokens' squared norms ‖a_t‖² (n,) -> their scales ‖a_t‖² / mean_t ‖a_t‖² (n,), float64
    (the raw material of step 2; zero-norm tokens dropped)."""
    x = squared_norms.detach().to(torch.float64).flatten()
    x = x[x > 0]
    if not len(x):
        raise ValueError("no token with a non-zero norm")
    return x / x.mean()


def _mixture(scales: torch.Tensor | None, lam: torch.Tensor) -> torch.Tensor | None:
    """s² to draw from: ``scales`` shrunk towards 1 so that s² ‖z‖²_λ has their variance v:
    var(s²) = (1 + v) / (1 + v_z) - 1, v_z = 2 Σλ² / (Σλ)² (None: Gaussian tokens)."""
    if scales is None or len(scales) < 2:
        return None
    v = float(scales.var())
    v_z = 2 * float((lam**2).sum()) / float(lam.sum()) ** 2
    v_s = max((1 + v) / (1 + v_z) - 1, 0.0)
    c = math.sqrt(v_s / v) if v > 0 else 0.0
    return (1 + c * (scales - 1)).clamp_min(0.0)


def _simulate(gen: torch.Generator, lam: torch.Tensor, n: int, s2: torch.Tensor | None) -> torch.Tensor:
    """(d, d) moment (1/n) Σ_t a_t a_tᵀ of n tokens a_t = s_t diag(lam)^{1/2} z_t."""
    z = torch.randn(n, len(lam), generator=gen, dtype=torch.float64) * lam.sqrt()
    if s2 is not None:
        pick = torch.randint(0, len(s2), (n,), generator=gen)
        z = z * s2[pick].sqrt()[:, None]
    return z.T @ z / n


def _deconvolve(gen: torch.Generator, ell: torch.Tensor, n: int, scales: torch.Tensor | None,
                steps: int, draws: int = 1, damping: float = 1.0) -> torch.Tensor:  # fmt: skip
    """Step 1 (module docstring): ℓ (d,), descending -> λ̂ (d,), descending. Only the top
    m = min(n, d) // 2 eigenvalues are updated (each step's factor clipped to [1/2, 2]; near the
    sample spectrum's lower edge the ratio is unstable); the rest keeps the sample's shape (its
    zeros, when n < d, filled flat) scaled so that tr λ̂ = tr ℓ."""
    d = len(ell)
    m = max(min(n, d) // 2, 1)
    total = float(ell.sum())
    floor = 1e-12 * float(ell[0])
    live = min(n, d)
    tail = ell[m:].clone()
    if live < d:
        tail[live - m:] = float(ell[live - 1]) if live > m else floor
    lam = ell.clamp_min(floor).clone()

    def with_tail(top: torch.Tensor) -> torch.Tensor:
        top = torch.cummin(torch.sort(top, descending=True).values, 0).values
        left = max(total - float(top.sum()), floor * (d - m))
        rest = tail * (left / float(tail.sum())) if float(tail.sum()) > 0 else tail + left / (d - m)
        return torch.cat([top, rest.clamp_max(float(top[-1]))]).clamp_min(floor)

    lam = with_tail(lam[:m])
    for _ in range(steps):
        s2 = _mixture(scales, lam)
        sim = sum(torch.linalg.eigvalsh(_simulate(gen, lam, n, s2)).flip(0) for _ in range(draws)) / draws
        factor = (ell[:m] / sim[:m].clamp_min(floor)).clamp(0.5, 2.0) ** damping
        lam = with_tail(lam[:m] * factor)
    return lam


def fit_moment(
    eigenvalues: torch.Tensor, n_tokens: int, ks: Sequence[int],
    squared_norms: torch.Tensor | None = None, *, seed: int = FIT_SEED,
    steps: int = DECONVOLVE_STEPS, blocks: int = FIT_BLOCKS,
) -> MomentFit:
    """The plug-in fit of one read moment (module docstring, steps 1-3). eigenvalues: the
    sample moment's (d,), any order; n_tokens: the tokens it averages; ks: the subspace
    dimensions to fit; squared_norms: the tokens' ‖a_t‖² (n,) or None (Gaussian tails)."""
    ell = torch.sort(eigenvalues.detach().to(torch.float64).clamp_min(0.0), descending=True).values
    d = len(ell)
    if n_tokens < 2 or not ks or not all(1 <= k < d for k in ks) or not float(ell[0]) > 0:
        raise ValueError(f"need n_tokens >= 2, 1 <= k < d and a positive moment; got {n_tokens=}, "
                         f"{list(ks)=}, {d=}")  # fmt: skip
    scales = token_scales(squared_norms) if squared_norms is not None else None
    gen = torch.Generator().manual_seed(seed + 7 * d + 13 * n_tokens)
    lam = _deconvolve(gen, ell, n_tokens, scales, steps)
    s2 = _mixture(scales, lam)
    leak = {k: torch.zeros(d, dtype=torch.float64) for k in ks}
    for _ in range(blocks):
        vecs = torch.linalg.eigh(_simulate(gen, lam, n_tokens, s2)).eigenvectors.flip(1)
        sq = vecs**2  # (d, d): squared loading of true direction i on sample eigenvector j
        for k in ks:
            leak[k] += sq[:, :k].sum(1) / blocks
    tail = 1.0 if s2 is None else float((s2**2).mean() / s2.mean() ** 2)
    return MomentFit(lam, leak, n_tokens, d, tail, float(ell[0] / lam[0]))


def null_centre(fit: MomentFit, k: int, weight_rsf: float) -> float:
    """The centre (unitless, a ratio of RSFs) of RSF(ΔW) / RSF(W) at k for a matrix whose W has
    RSF ``weight_rsf`` in P̂ (module docstring, step 4):

        c = (F Σ_{i<k} g_i q_i + R) / (F q̄_k + R),  g_i = λ̂_i / Σ_{j<k} λ̂_j,
        q̄_k = (1/k) Σ_{i<k} q_i,  R = Σ_{i≥k} q_i,  F = r (d - k) / (1 - r),

    r = ``weight_rsf`` clipped to [k/d, 0.95] (W's true RSF, taken as measured)."""
    d = fit.d
    r = min(max(float(weight_rsf), k / d), 0.95)
    big_f = r * (d - k) / (1 - r)
    (a_grad, rest), (a_flat, _) = _leakage(fit, k, "gradient"), _leakage(fit, k, "flat")
    return (big_f * a_grad + rest) / (big_f * a_flat + rest)


def _leakage(fit: MomentFit, k: int, shape: str) -> tuple[float, float]:
    """(A_w = Σ_{i<k} w_i q_i, R = Σ_{i≥k} q_i) of ``shape``: "gradient" (w_i = λ̂_i /
    Σ_{j<k} λ̂_j) or "flat" (w_i = 1/k)."""
    if shape not in ("gradient", "flat"):
        raise ValueError(f"shape must be 'gradient' or 'flat'; got {shape!r}")
    q, lam = fit.leakage[k], fit.spectrum
    a = float((lam[:k] / lam[:k].sum() * q[:k]).sum()) if shape == "gradient" else float(q[:k].mean())
    return a, float(q[k:].sum())


def true_rsf(fit: MomentFit, k: int, measured_rsf: float, shape: str) -> float:
    """The true RSF (unitless, in P_A) of a matrix whose RSF in P̂ is ``measured_rsf``, through
    the fit's leakage model, which is linear in the true RSF ρ:

        E RSF_P̂ = g(ρ) = ρ A + (1 - ρ) R',  A = Σ_{i<k} w_i q_i,  R' = Σ_{i≥k} q_i / (d - k),

    so ρ̂ = (measured - R') / (A - R'), clipped to [1e-6, 0.95]. ``shape``: "gradient" (w_i =
    λ̂_i / Σ_{j<k} λ̂_j, an update's) or "flat" (w_i = 1/k, a weight's). The centre of
    :func:`null_centre` is g_gradient(r) / g_flat(r) at one true RSF r; the inversion also
    undoes the attenuation of a real excess (ρ_ΔW > ρ_W), which the centre leaves: R' > 0
    pulls every measured RSF towards the same floor."""
    a, rest = _leakage(fit, k, shape)
    rest /= fit.d - k
    return min(max((float(measured_rsf) - rest) / (a - rest), 1e-6), 0.95)


def add_null_centres(
    table: pd.DataFrame, moments: Mapping[str, torch.Tensor], n_tokens: int | Mapping[str, int],
    squared_norms: Mapping[str, torch.Tensor] | None = None, cache: dict | None = None,
) -> pd.DataFrame:
    """``table`` (one row per matrix and k, with ``key``, ``kind``, ``k``, ``weight_rsf``) with
    the read rows' null centre of RSF(ΔW)/RSF(W) (:func:`null_centre`) and its inputs:
    ``null_centre`` (unitless), ``null_tokens`` (n), ``null_tail`` (the fit's mean s⁴: 1 for
    Gaussian tokens), ``null_top`` (ℓ_1 / λ̂_1) and, where the table has ΔW's ``rsf``,
    ``vs_weight_true`` = ρ̂(ΔW) / max(ρ̂(W), k/d) (:func:`true_rsf`: ΔW gradient-shaped, W
    flat; unitless), on the Q and K rows (:data:`QK_ROLES`, the rows that use it); NaN
    elsewhere. One fit per moment tensor (Q and K of a block share one).
    moments: {key: (d, d)}; n_tokens: the tokens each moment averages (one count, or per key);
    squared_norms: {key: (n,) ‖a_t‖²}, or None (Gaussian tails assumed); cache: a dict whose
    ``"null_fits"`` entry keeps each moment's fit across calls (the moment tensor is kept with
    it, so its id stays unique)."""
    out = table.copy()
    for col in ("null_centre", "null_tokens", "null_tail", "null_top", "vs_weight_true"):
        out[col] = math.nan
    read = out[(out["kind"] == "read") & out["role"].isin(QK_ROLES) & out["key"].isin(list(moments))]
    ks = sorted({int(k) for k in read["k"]})
    fits: dict[int, tuple[torch.Tensor, MomentFit]] = (
        cache.setdefault("null_fits", {}) if cache is not None else {})  # fmt: skip
    for i, row in read.iterrows():
        moment = moments[row["key"]]
        hit = fits.get(id(moment))
        if hit is None or hit[0] is not moment or not set(ks) <= set(hit[1].leakage):
            n = n_tokens if isinstance(n_tokens, int) else n_tokens[row["key"]]
            norms = None if squared_norms is None else squared_norms.get(row["key"])
            ok = [k for k in ks if k < moment.shape[0]]
            eig = torch.linalg.eigvalsh(moment.to(torch.float64))
            hit = fits[id(moment)] = (moment, fit_moment(eig, n, ok, norms))
        f = hit[1]
        k = int(row["k"])
        if k in f.leakage:
            ratio = (true_rsf(f, k, float(row["rsf"]), "gradient")
                     / max(true_rsf(f, k, float(row["weight_rsf"]), "flat"), k / f.d)
                     if "rsf" in out else math.nan)  # fmt: skip
            out.loc[i, ["null_centre", "null_tokens", "null_tail", "null_top", "vs_weight_true"]] = (
                null_centre(f, k, float(row["weight_rsf"])), f.n_tokens, f.tail, f.sample_top,
                ratio)  # fmt: skip
    return out
