"""The convergence claim's test: the peak of the convergence-index profile, its CI and p.

Items are the independent unit: an item's prompts (one word in several sentence frames)
share the word, so a prompt's own item siblings are left out of its within-category mean, in
the estimate and in every resample (:func:`ci_profiles`); the bootstrap resamples items within
their category and the permutation test permutes the items' labels. Sentence frames shared
across categories (every item in the same two neutral frames) then shift within- and
between-category distances alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from lamina.core.types import Profile
from lamina.evidence.stats import max_permutation_test, peak_bootstrap, wilcoxon
from lamina.trajectory.metrics import convergence_index_per_prompt

__all__ = ["ci_profile", "ci_profiles", "convergence_test", "distance_stack", "item_units",
           "label_codes", "profiles_of", "shuffled_distance_stack", "unit_rows"]


def distance_stack(x: np.ndarray) -> np.ndarray:
    """Chord distances between L2-normalised states, layer by layer.

    x: (n, m, d)  ->  D (m, n, n) with D[l, i, j] = ||ĥ_i(l) - ĥ_j(l)|| = sqrt(2 - 2 ĥ_i·ĥ_j).
    """
    u = x / np.linalg.norm(x, axis=-1, keepdims=True).clip(1e-30)
    g = np.einsum("ild,jld->lij", u, u)
    return np.sqrt(np.clip(2.0 - 2.0 * g, 0.0, None))


def shuffled_distance_stack(x: np.ndarray) -> np.ndarray:
    """The expectation of :func:`distance_stack` over the shuffled-layers control: each
    prompt's layers permuted uniformly and independently
    (:func:`lamina.states.controls.shuffle_layers` with no fixed layer and no groups).

    x: (n, m, d)  ->  D (m, n, n) with, for i != j,
    E[D[l, i, j]] = (1/m^2) sum_a sum_b ||ĥ_i(a) - ĥ_j(b)||
    (the layers pi_i(l) and pi_j(l) are independent and uniform), the same at every l, and 0
    on the diagonal. The convergence index is linear in D for fixed labels and row weights
    (:func:`ci_profiles`), so its profile on this stack is the expected profile over
    shuffles; no shuffle's own noise is left for the maximum over layers to pick up. The
    stack is the same for x and for any per-prompt permutation of x's layers.
    """
    x = np.asarray(x, dtype=np.float64)
    n, m, _ = x.shape
    u = x / np.linalg.norm(x, axis=-1, keepdims=True).clip(1e-30)
    flat = u.reshape(n * m, -1)  # (n m, d)
    mean = np.zeros((n, n))
    for a in range(m):  # one layer of every prompt against all layers of all: (n, n m)
        g = np.sqrt(np.clip(2.0 - 2.0 * (u[:, a] @ flat.T), 0.0, None))
        mean += g.reshape(n, n, m).sum(2)
    mean /= m * m
    np.fill_diagonal(mean, 0.0)
    return np.broadcast_to(mean, (m, n, n))


def _unit_codes(units: Any | None, n: int) -> np.ndarray:
    """(n,) int unit code of each row (None: each row its own unit)."""
    if units is None:
        return np.arange(n)
    u = np.asarray(units).astype(str)
    if u.shape != (n,):
        raise ValueError(f"units must have shape ({n},); got {u.shape}")
    return np.unique(u, return_inverse=True)[1].reshape(n)


def label_codes(lab: np.ndarray) -> np.ndarray:
    """Integer codes of labels (any shape) in the labels' sorted order: ``np.unique``'s
    inverse. Object labels (category names) are hashed (``pandas.factorize``) and only their
    few distinct values sorted, instead of sorting every element as a Python object (a batch
    of 50 permutations of 180 names: 19 ms by ``np.unique``)."""
    lab = np.asarray(lab)
    if lab.dtype == object:
        codes, cats = pd.factorize(lab.ravel())
        if len(codes) and (codes >= 0).all():  # no missing label
            rank = np.empty(len(cats), dtype=np.intp)
            rank[np.argsort(np.asarray(cats, dtype=object))] = np.arange(len(cats))
            return rank[codes].reshape(lab.shape)
    return np.unique(lab, return_inverse=True)[1].reshape(lab.shape)


def unit_rows(u: np.ndarray) -> np.ndarray:
    """The rows of each row's unit: u (n,) int unit codes 0..K-1  ->  (n, width) int, row i
    holding the rows j with u_j = u_i in ascending order, padded with -1 to the largest unit's
    size ``width``."""
    u = np.asarray(u)
    order = np.argsort(u, kind="stable")  # rows grouped by unit, ascending within each
    sizes = np.bincount(u)
    rank = np.arange(len(u)) - (np.cumsum(sizes) - sizes)[u[order]]  # place within its unit
    table = np.full((len(sizes), int(sizes.max())), -1, dtype=np.intp)
    table[u[order], rank] = order
    return table[u]


def ci_profile(D: np.ndarray, labels: np.ndarray, idx: np.ndarray | None = None,
               units: Any | None = None) -> np.ndarray:  # fmt: skip
    """Mean per-prompt convergence index over the rows ``idx`` (repeats allowed), leaving
    each prompt's own unit out of its within-category mean.

    CI_i(l) = mean_{j: y_j != y_i} D[l, i, j] - mean_{j: y_j = y_i, u_j != u_i} D[l, i, j]
    over the resampled rows, averaged over i: the definition of
    ``lamina.trajectory.convergence_index_per_prompt`` with the prompts of i's own unit u_i
    (``units``, e.g. an item's prompts in other frames, and any copy of i in a resample) not
    counted as its neighbours (None: only copies of i). D: (m, n, n) from
    :func:`distance_stack`; labels: (n,)  ->  (m,).
    """
    n = D.shape[1]
    c = np.ones(n) if idx is None else np.bincount(np.asarray(idx), minlength=n).astype(float)
    return ci_profiles(D, np.asarray(labels)[None], c[None], units)[0]


def ci_profiles(D: np.ndarray, labels: np.ndarray, counts: np.ndarray,
                units: Any | None = None) -> np.ndarray:  # fmt: skip
    """:func:`ci_profile` of B label vectors and row multiplicities at once (permutations or
    resamples): labels (B, n) and counts (B, n) float, D (m, n, n)  ->  (B, m).

    With w_bjk = c_bj [y_bj = k], S_libk = sum_j D[l, i, j] w_bjk is one matrix product for the
    whole batch; the own unit's part V_lib = sum_{j: u_j = u_i} D[l, i, j] c_bj [y_bj = y_bi]
    (a unit carries one label) is a sum over at most the largest unit's rows;
    CI_bi(l) = (sum_k S_libk - S_lib,y_bi) / n_between - (S_lib,y_bi - V_lib) / n_within,
    n_within = size_b,y_bi - sum_{j: u_j = u_i} c_bj [y_bj = y_bi],
    n_between = sum_j c_bj - size_b,y_bi, averaged over i with weights c_bi (rows with no
    neighbour on either side are left out).

    Where every unit's rows carry one label and one multiplicity in each of the B vectors (the
    permutations permute units' labels; the bootstrap resamples whole units), the sums over a
    unit's rows are taken once, on the (m, U, U) unit-by-unit sums of D (:func:`_by_units`):
    the same values, from about (U/n)^2 of the work.
    """
    return profiles_of(D, units)(labels, counts)


def profiles_of(D: np.ndarray, units: Any | None = None) -> Callable[[Any, Any], np.ndarray]:
    """``ci_profiles(D, ., ., units)`` as a function of (labels (B, n), counts (B, n)) -> (B, m),
    with D's unit-by-unit sums A (m, U, U), A[l, u, v] = sum_{i in u, j in v} D[l, i, j], taken
    once for every batch (D must not change while the function is used)."""
    m, n = D.shape[0], D.shape[1]
    u = _unit_codes(units, n)
    first = np.unique(u, return_index=True)[1]  # (U,) the first row of each unit
    U = len(first)
    A: np.ndarray | None = None
    if units is not None and U < n:
        P = np.zeros((n, U))
        P[np.arange(n), u] = 1.0
        A = P.T @ (np.asarray(D).reshape(m * n, n) @ P).reshape(m, n, U)  # (m, U, U)

    def profiles(labels: Any, counts: Any) -> np.ndarray:
        inv = label_codes(np.asarray(labels))  # (B, n) category codes
        c = np.asarray(counts, dtype=np.float64)
        if A is not None and np.array_equal(inv, inv[:, first][:, u]) and np.array_equal(
                c, c[:, first][:, u]):  # fmt: skip
            return _by_units(A, inv[:, first], c[:, first], np.bincount(u, minlength=U))
        return _by_rows(D, inv, c, units)

    return profiles


def _by_units(A: np.ndarray, yu: np.ndarray, cu: np.ndarray, nu: np.ndarray) -> np.ndarray:
    """:func:`ci_profiles` from the unit-by-unit sums A (m, U, U) of D (:func:`profiles_of`),
    unit-level labels yu (B, U) int category codes and multiplicities cu (B, U) float, and the
    rows of each unit nu (U,)  ->  (B, m).

    With n_u the rows of unit u and W_bvk = c_bv [y_bv = k], the sum over u's rows of S_libk
    is (A W)[l, u, b, k], of V_lib is A[l, u, u] c_bu, and every row of u has the same
    n_within, n_between and weight c_bu.
    """
    m, U = A.shape[0], A.shape[1]
    B = yu.shape[0]
    K = int(yu.max()) + 1
    nu = np.asarray(nu, dtype=np.float64)
    W = np.zeros((U, B, K))
    W[np.arange(U)[:, None], np.arange(B)[None, :], yu.T] = cu.T  # (U, B, K)
    sums = (A.reshape(m * U, U) @ W.reshape(U, B * K)).reshape(m, U, B, K)
    size = np.einsum("ubk,u->bk", W, nu)  # (B, K) resampled category sizes in rows
    own = sums[:, np.arange(U)[:, None], np.arange(B)[None, :], yu.T]  # (m, U, B)
    size_own = size[np.arange(B)[None, :], yu.T]  # (U, B)
    unit_sum = A[:, np.arange(U), np.arange(U)][:, :, None] * cu.T[None]  # (m, U, B)
    n_within = size_own - nu[:, None] * cu.T
    n_between = (cu * nu).sum(1)[None, :] - size_own
    with np.errstate(invalid="ignore", divide="ignore"):
        ci = (sums.sum(3) - own) / n_between - (own - unit_sum) / n_within  # (m, U, B)
    ok = (cu.T > 0) & (n_within > 0) & (n_between > 0)  # (U, B)
    weight = np.where(ok, cu.T, 0.0)
    total = (weight * nu[:, None]).sum(0)  # (B,)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.einsum("lub,ub->bl", np.where(ok[None], ci, 0.0), weight) / total[:, None]
    out[total == 0] = np.nan
    return out


def _by_rows(D: np.ndarray, inv: np.ndarray, c: np.ndarray, units: Any | None) -> np.ndarray:
    """:func:`ci_profiles` row by row: D (m, n, n), inv (B, n) int category codes, c (B, n)
    float multiplicities  ->  (B, m)."""
    m, n = D.shape[0], D.shape[1]
    B, K = inv.shape[0], int(inv.max()) + 1
    w = np.zeros((n, B, K))
    w[np.arange(n)[:, None], np.arange(B)[None, :], inv.T] = c.T  # (n, B, K)
    sums = (D.reshape(m * n, n) @ w.reshape(n, B * K)).reshape(m, n, B, K)
    size = w.sum(0)  # (B, K) resampled category sizes
    rows = np.arange(n)[:, None]
    own = sums[:, rows, np.arange(B)[None, :], inv.T]  # (m, n, B)
    size_own = size[np.arange(B)[None, :], inv.T]  # (n, B)
    nb = unit_rows(_unit_codes(units, n))  # (n, width) the rows of i's unit, -1 padding
    valid = nb >= 0
    nbi = np.where(valid, nb, 0)
    same = (inv.T[nbi] == inv.T[:, None, :]) & valid[..., None]  # (n, width, B)
    cu = np.where(same, c.T[nbi], 0.0)  # (n, width, B)
    unit_sum = np.einsum("lnw,nwb->lnb", D[:, np.arange(n)[:, None], nbi], cu)  # (m, n, B)
    n_within = size_own - cu.sum(1)
    n_between = c.sum(1)[None, :] - size_own
    with np.errstate(invalid="ignore", divide="ignore"):
        ci = (sums.sum(3) - own) / n_between - (own - unit_sum) / n_within  # (m, n, B)
    ok = (c.T > 0) & (n_within > 0) & (n_between > 0)  # (n, B)
    weight = np.where(ok, c.T, 0.0)
    total = weight.sum(0)  # (B,)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.einsum("lib,ib->bl", np.where(ok[None], ci, 0.0), weight) / total[:, None]
    out[total == 0] = np.nan
    return out


def _depth_interval(depth: np.ndarray, share: np.ndarray) -> tuple[float, float]:
    """The 2.5 and 97.5 percentiles of the re-selected peak's depth: depth (m,) of each layer
    as a fraction of the last, share (m,) the share of bootstrap resamples peaking there
    (NaN, NaN when no resample has a peak)."""
    cdf = np.cumsum(share)
    if not cdf[-1] > 0:
        return np.nan, np.nan
    lo = depth[int(np.searchsorted(cdf, 0.025))]
    return lo, depth[min(int(np.searchsorted(cdf, 0.975)), len(depth) - 1)]


def _peak_vs_first(per: Profile, k: int) -> tuple[float, float]:
    """(p, rank-biserial) of the Wilcoxon signed-rank test of per-prompt values ``per``
    (n, m) at layer index ``k`` vs index 0; (1, 0) when the peak is the first layer."""
    if k == 0:
        return 1.0, 0.0
    w = wilcoxon(per[:, k], per[:, 0]).iloc[0]
    return float(w["p_value"]), float(w["rank_biserial"])


def _check_labelled(x: np.ndarray, lab: np.ndarray) -> None:
    """ValueError unless x is (n, m, d) with n labels of at least 2 categories."""
    if x.ndim != 3 or lab.shape != (x.shape[0],):
        raise ValueError(
            f"convergence_test needs states (n, m, d) and n labels; got states {x.shape} and "
            f"labels of length {lab.size}"
        )
    if len(np.unique(lab)) < 2:
        raise ValueError("convergence_test needs at least 2 categories")


def _is_flat(profile: np.ndarray, rtol: float = 1e-9) -> bool:
    """Whether a profile (m,) is constant to ``rtol`` of its largest magnitude (NaN: not flat)."""
    p = np.asarray(profile, dtype=np.float64)
    if not np.all(np.isfinite(p)):
        return False
    return bool(np.ptp(p) <= rtol * max(float(np.abs(p).max()), 1e-300))


def item_units(table: Any) -> np.ndarray | None:
    """(n,) "category:item" for tables with an ``item`` column (the prompts of one item share
    its word: one independent unit), else None (each prompt is its own unit)."""
    if "item" not in table or table["item"].isna().any():
        return None
    return (table["category"].astype(str) + ":" + table["item"].astype(str)).to_numpy()


def convergence_test(
    x: np.ndarray,
    labels: Any,
    layers: list[int],
    *,
    n_bootstrap: int = 2_000,
    n_permutations: int = 2_000,
    seed: int = 0,
    units: Any | None = None,
    confidence: float = 0.90,
    distances: np.ndarray | None = None,
) -> dict[str, Any]:
    """Peak of the convergence-index profile and the claim's tests.

    x: (n, m, d) states at ``layers``; labels: (n,); units: (n,) the independent unit of each
    prompt (an item whose several prompts share its word; None: the prompt). The profile is
    :func:`ci_profile` with each prompt's own unit left out of its within-category mean.
    Returns ``peak`` (chord units), its ``peak_layer`` and ``peak_fraction`` (layer / last
    layer; both NaN, with ``fraction_low``/``fraction_high``, when the profile is flat to
    1e-9 of its size, as the shuffled-layers control's expectation is: no layer is its peak); ``ci_low``/``ci_high``: the central ``confidence`` interval of the peak (0.90:
    its ends are one-sided 95% bounds, the sidedness of the test) from a bootstrap that
    resamples units (with all their prompts) within their category and re-selects the peak
    layer in every resample, moved so that the resamples' median sits on the estimate: the
    maximum of a resampled profile is biased upwards (every resample's noise is selected
    again), so the raw percentile interval (``resampled_low``/``resampled_high``) can lie
    above the estimate; ``p``: the label-permutation p of the maximum over layers,
    permuting the units' labels (:func:`lamina.evidence.resampling.max_permutation_test`;
    one-sided: large peaks), with ``p_mc_error`` and ``exceedances``;
    ``p_wilcoxon`` and ``rank_biserial``: Wilcoxon signed-rank of per-prompt CI at the peak
    vs the first layer (paired by prompt; not corrected for choosing the peak); ``profile``
    (m,); ``fraction_low``/``fraction_high``: percentiles of the re-selected peak's depth.
    ``distances``: the (m, n, n) stack to test instead of :func:`distance_stack` of x (the
    shuffled-layers control's :func:`shuffled_distance_stack`); the Wilcoxon still reads x.
    """
    lab = np.asarray(labels)
    x = np.asarray(x, dtype=np.float64)
    _check_labelled(x, lab)
    D = distance_stack(x) if distances is None else np.asarray(distances, dtype=np.float64)
    n = len(lab)
    if D.shape != (x.shape[1], n, n):
        raise ValueError(f"distances must be (m, n, n) = {(x.shape[1], n, n)}; got {D.shape}")

    prof = profiles_of(D, units)  # D's unit sums taken once for every batch

    def one(y: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:  # ci_profile's rows
        c = np.ones(n) if idx is None else np.bincount(np.asarray(idx), minlength=n).astype(float)
        return prof(np.asarray(y)[None], c[None])[0]

    def resampled(idx: list[np.ndarray]) -> np.ndarray:  # B resamples -> (B, m)
        counts = np.stack([np.bincount(i, minlength=n) for i in idx]).astype(float)
        return prof(np.broadcast_to(lab, counts.shape), counts)

    perm = max_permutation_test(
        one, lab, n_permutations, seed, profiles=lambda y: prof(y, np.ones(y.shape)),
        blocks=units,
    )  # fmt: skip
    boot = peak_bootstrap(
        lambda i: one(lab, i), n, n_bootstrap, seed, strata=lab, clusters=units,
        profiles=resampled, confidence=confidence,
    )  # fmt: skip
    profile = one(lab)
    k = int(np.nanargmax(profile))
    flat = _is_flat(profile)  # no peak to locate (e.g. the shuffled control's expectation)
    draws = boot["draws"][np.isfinite(boot["draws"])]
    shift = float(profile[k] - np.median(draws)) if draws.size else np.nan
    tail = 100 * (1 - confidence) / 2
    depth = np.asarray(layers, dtype=float) / layers[-1]
    frac_lo, frac_hi = _depth_interval(depth, boot["peak_share"])
    per = convergence_index_per_prompt(x, lab)
    pw, rb = _peak_vs_first(per, k)
    return {
        "peak": float(profile[k]),
        "peak_layer": np.nan if flat else int(layers[k]),
        "peak_fraction": np.nan if flat else float(depth[k]),
        "fraction_low": np.nan if flat else float(frac_lo),
        "fraction_high": np.nan if flat else float(frac_hi),
        "ci_low": float(np.percentile(draws, tail) + shift) if draws.size else np.nan,
        "ci_high": float(np.percentile(draws, 100 - tail) + shift) if draws.size else np.nan,
        "resampled_low": boot["ci_low"],
        "resampled_high": boot["ci_high"],
        "standard_error": boot["standard_error"],
        "p": perm["p_value"],
        "p_mc_error": perm["mc_error"],
        "exceedances": perm["exceedances"],
        "n_permutations": n_permutations,
        "n_units": int(len(np.unique(units))) if units is not None else n,
        "p_wilcoxon": pw,
        "rank_biserial": rb,
        "profile": profile,
        "per_prompt": per,
        "peak_index": k,
    }
