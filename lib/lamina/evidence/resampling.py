"""Resampling for claims: bootstraps that resample the independent unit (rows, rows within
strata, whole clusters) and rerun the whole statistic, the permutation null of a maximum,
a partial rank correlation, the permutation test of Spearman's ρ, the permutation null of a
top-k share and the studentised bootstrap test of a mean.

Re-exported by :mod:`lamina.evidence.stats`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypedDict, Unpack, cast

import numpy as np
from scipy import stats as sps

__all__ = [
    "Resampling",
    "bootstrap_t_test",
    "index_bootstrap",
    "max_permutation_test",
    "partial_spearman",
    "peak_bootstrap",
    "resample_indices",
    "spearman_permutation",
    "top_share_permutation",
]


BATCH = 64
_UNIT_R_EPS = 1e-12  # partial_spearman: 1 - r^2 at or below it counts as r = +/-1
"""Resamples or permutations evaluated at once by the batched statistics (``many``,
``profiles``): bounds their memory, never their result."""


def _in_batches(fn: Callable[[Any], np.ndarray], items: list) -> np.ndarray:
    """fn over ``items`` in chunks of :data:`BATCH`, concatenated: (len(items), ...)."""
    parts = [np.asarray(fn(items[i : i + BATCH]), dtype=np.float64) for i in range(0, len(items), BATCH)]
    return np.concatenate(parts) if parts else np.empty(0)


# ----------------------------------------------------------------------------- resampling units
def _plan(n: int, strata: Any | None, clusters: Any | None) -> list[list[np.ndarray]]:
    """Per stratum, the row indices of each resampling unit (a cluster, or a single row)."""
    groups = [np.arange(n)] if strata is None else _groups(np.asarray(strata))
    if clusters is None:
        return [[g[:, None]] for g in groups]  # one (size, 1) block: draw rows
    cl = np.asarray(clusters)
    return [[g[cl[g] == c] for c in dict.fromkeys(cl[g].tolist())] for g in groups]


def _draw(plan: list[list[np.ndarray]], rng: np.random.Generator) -> np.ndarray:
    out = []
    for units in plan:
        if len(units) == 1 and units[0].ndim == 2:  # rows are the units
            rows = units[0][:, 0]
            out.append(rng.choice(rows, size=rows.size, replace=True))
        else:
            pick = rng.integers(0, len(units), len(units))
            out += [units[k] for k in pick]
    return np.concatenate(out)


def resample_indices(
    n: int,
    rng: np.random.Generator,
    *,
    strata: Any | None = None,
    clusters: Any | None = None,
) -> np.ndarray:
    """One bootstrap resample of row indices 0..n-1.

    Plain: n draws with replacement. ``strata`` (n,): draws within each stratum, keeping its
    size (e.g. prompts within a category). ``clusters`` (n,): the independent unit is the
    cluster (e.g. a lexical base word): as many clusters as there are are drawn with
    replacement and all their rows kept (within strata when both are given).
    Returns an int array of row indices (length n for plain/strata; variable with clusters).
    """
    return _draw(_plan(n, strata, clusters), rng)


def _groups(labels: np.ndarray) -> list[np.ndarray]:
    _, inv = np.unique(labels, return_inverse=True)
    return [np.flatnonzero(inv == k) for k in range(inv.max() + 1)]


def index_bootstrap(
    statistic: Callable[[np.ndarray], float],
    n: int,
    n_resamples: int = 2_000,
    seed: int | None = 0,
    *,
    strata: Any | None = None,
    clusters: Any | None = None,
    confidence: float = 0.95,
    many: Callable[[list[np.ndarray]], np.ndarray] | None = None,
) -> dict[str, Any]:
    """Percentile bootstrap of any statistic of a resample of rows.

    ``statistic(idx)`` recomputes the statistic from the rows ``idx`` (with repeats): the
    whole pipeline is rerun on every resample, so selection steps inside it are resampled too.
    Rows are drawn by :func:`resample_indices` (``strata`` / ``clusters`` name the
    independent unit). Returns estimate (on all rows), ci_low, ci_high (percentiles), the
    bootstrap standard error and the draws (B,). ``many(list of idx)`` -> (len,), when given,
    computes the statistic of a batch of resamples at once (the same draws, in the same order).
    """
    if n < 2:
        raise ValueError(f"index_bootstrap needs at least 2 rows; got {n}")
    rng = np.random.default_rng(seed)
    plan = _plan(n, strata, clusters)
    est = float(statistic(np.arange(n)))
    if many is None:
        draws = np.array(
            [statistic(_draw(plan, rng)) for _ in range(n_resamples)], dtype=np.float64
        )
    else:
        draws = _in_batches(many, [_draw(plan, rng) for _ in range(n_resamples)])
    ok = draws[np.isfinite(draws)]
    tail = 100 * (1 - confidence) / 2
    lo, hi = (np.percentile(ok, [tail, 100 - tail]) if ok.size else (np.nan, np.nan))
    return {
        "estimate": est,
        "ci_low": float(lo),
        "ci_high": float(hi),
        "standard_error": float(np.std(ok, ddof=1)) if ok.size > 1 else np.nan,
        "draws": draws,
    }


class Resampling(TypedDict, total=False):
    """The resampling options of :func:`index_bootstrap` that :func:`peak_bootstrap` passes
    on unchanged (their defaults are :func:`index_bootstrap`'s): ``strata`` (n,) and
    ``clusters`` (n,) name the independent unit (:func:`resample_indices`); ``confidence``
    is the CI's level, in (0, 1)."""

    strata: Any | None
    clusters: Any | None
    confidence: float


def peak_bootstrap(
    profile: Callable[[np.ndarray], np.ndarray],
    n: int,
    n_resamples: int = 2_000,
    seed: int | None = 0,
    *,
    profiles: Callable[[list[np.ndarray]], np.ndarray] | None = None,
    **resampling: Unpack[Resampling],
) -> dict[str, Any]:
    """Bootstrap of a profile's peak with the peak re-selected in every resample.

    ``profile(idx)`` -> (m,) recomputes the whole profile (e.g. the convergence index per
    layer) from the rows ``idx``; the statistic is max_l profile(l), so the choice of the
    peak layer is part of what is resampled (a CI at a fixed, data-chosen layer is too
    narrow). Returns :func:`index_bootstrap`'s fields plus ``peak_index`` (on all rows) and
    ``peak_share`` (m,): how often each layer was the peak. ``profiles(list of idx)`` -> (B, m),
    when given, computes the profiles of a batch of resamples at once (same draws).
    ``resampling``: ``strata``, ``clusters``, ``confidence`` (:class:`Resampling`), as in
    :func:`index_bootstrap`.
    """
    picks: list[int] = []

    def stat(idx: np.ndarray) -> float:
        return stat_of(np.asarray(profile(idx), dtype=np.float64))

    def stats(idx: list[np.ndarray]) -> np.ndarray:
        return np.array([stat_of(prof) for prof in np.asarray(cast(Any, profiles)(idx), float)])

    def stat_of(prof: np.ndarray) -> float:
        if not np.isfinite(prof).any():
            return np.nan
        picks.append(int(np.nanargmax(prof)))
        return float(np.nanmax(prof))

    full = np.asarray(profile(np.arange(n)), dtype=np.float64)
    out = index_bootstrap(
        stat, n, n_resamples, seed, many=None if profiles is None else stats, **resampling
    )
    share = np.bincount(picks[1:], minlength=full.size)[: full.size] / max(len(picks) - 1, 1)
    out.update(peak_index=int(np.nanargmax(full)), peak_share=share)
    return out


def _block_permuter(lab: np.ndarray, blocks: Any | None) -> Callable[[np.random.Generator], np.ndarray]:
    """A draw of permuted labels: rows exchangeable (``blocks`` None), or whole blocks
    exchangeable (every row of a block keeps its block's label; the blocks' labels are
    permuted among blocks). Raises ValueError if a block mixes labels."""
    if blocks is None:
        return lambda rng: lab[rng.permutation(lab.size)]
    blk = np.asarray(blocks)
    if blk.shape != lab.shape:
        raise ValueError(f"blocks must match labels' shape {lab.shape}; got {blk.shape}")
    names, inv = np.unique(blk, return_inverse=True)
    first = np.array([np.flatnonzero(inv == k)[0] for k in range(names.size)])
    block_label = lab[first]
    if np.any(block_label[inv] != lab):
        raise ValueError("a permutation block mixes labels: each block must carry one label")
    return lambda rng: block_label[rng.permutation(names.size)][inv]


def max_permutation_test(
    profile: Callable[[np.ndarray], np.ndarray],
    labels: Any,
    n_permutations: int = 2_000,
    seed: int | None = 0,
    *,
    profiles: Callable[[np.ndarray], np.ndarray] | None = None,
    blocks: Any | None = None,
) -> dict[str, Any]:
    """Label-permutation test of a profile's maximum, corrected for choosing the peak.

    Statistic T = max_l profile(labels)(l). Null: labels exchangeable across rows, so T under
    uniformly permuted labels (category sizes kept) is a draw of the null of the *maximum over
    layers*; p = (1 + #{T_perm >= T}) / (1 + B). The smallest attainable p is 1 / (1 + B), so
    B must exceed 1/alpha - 1 for a claim at level alpha. ``blocks`` (n,): the exchangeable
    unit is the block (e.g. an item whose several prompts share a word), not the row: the
    blocks' labels are permuted and every row keeps its block's (rows of one block are not
    independent, and a row-level permutation would count their shared component as an effect).

    Monte-Carlo error: ``mc_error`` = sqrt(p (1 - p) / B), the standard error of p as an
    estimate of the exact permutation p; ``exceedances`` = #{T_perm >= T}.

    profile(labels) -> (m,); labels: (n,)  ->  dict with statistic, p_value, null (B,),
    n_permutations, exceedances, mc_error. ``profiles(labels (B, n))`` -> (B, m), when given,
    computes the profiles of a batch of permutations at once (the same permutations, in the
    same order).
    """
    lab = np.asarray(labels)
    if lab.ndim != 1:
        raise ValueError(f"labels must be one-dimensional; got shape {lab.shape}")
    rng = np.random.default_rng(seed)
    draw = _block_permuter(lab, blocks)
    obs = float(np.nanmax(profile(lab)))
    if profiles is None:
        null = np.array([np.nanmax(profile(draw(rng))) for _ in range(n_permutations)])
    else:
        perms = [draw(rng) for _ in range(n_permutations)]
        null = _in_batches(lambda p: np.nanmax(profiles(np.stack(p)), axis=1), perms)
    hits = int(np.sum(null >= obs - 1e-12))
    p = (1 + hits) / (1 + n_permutations)
    return {"statistic": obs, "p_value": float(p), "null": null, "n_permutations": n_permutations,
            "exceedances": hits, "mc_error": float(np.sqrt(p * (1 - p) / max(n_permutations, 1)))}


def _rank_correlation(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """Pearson correlation along ``axis`` (Spearman's ρ when ``a`` and ``b`` are ranks)."""
    a = a - a.mean(axis=axis, keepdims=True)
    b = b - b.mean(axis=axis, keepdims=True)
    return (a * b).sum(axis=axis) / np.sqrt((a * a).sum(axis=axis) * (b * b).sum(axis=axis))


def spearman_permutation(
    x: Any, y: Any, *, alternative: Literal["two-sided", "less", "greater"],
    n_resamples: int = 9_999, seed: int | None = 0,
) -> tuple[float, float]:
    """Spearman's ρ of paired samples and its permutation p: the pairings of y with x
    reshuffled (exact when n! <= ``n_resamples``, else Monte Carlo with p = (b + 1) / (R + 1)),
    a test of exact size under independence. scipy's default p for ρ is a t approximation,
    whose size at n = 20 is 5.2% at the 5% level (20,000 draws of independent samples).
    x, y: (n,), n >= 3 -> (ρ, p), unitless."""
    xa, ya = np.asarray(x, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
    if xa.size != ya.size:
        raise ValueError(f"x and y must be paired: {xa.size} != {ya.size} values")
    if xa.size < 3:
        raise ValueError(f"x and y need at least 3 pairs; got {xa.size}")
    bad = int((~np.isfinite(xa) | ~np.isfinite(ya)).sum())
    if bad:
        raise ValueError(f"x and y must be finite (a pair is not dropped): {bad} of {xa.size} pairs are NaN or inf")
    res = sps.permutation_test((sps.rankdata(xa), sps.rankdata(ya)), _rank_correlation,
                               permutation_type="pairings", vectorized=True,
                               n_resamples=n_resamples, alternative=alternative,
                               rng=np.random.default_rng(seed))  # fmt: skip
    return float(res.statistic), float(res.pvalue)


def partial_spearman(
    x: Any, y: Any, z: Any, *, n_resamples: int = 2_000, seed: int | None = 0
) -> dict[str, float]:
    """Spearman partial correlation of x and y given z, with a permutation p and a bootstrap CI.

    rho_xy.z = (r_xy - r_xz r_yz) / sqrt((1 - r_xz^2)(1 - r_yz^2)) on ranks (Spearman r's).
    p: two-sided, from permuting y against (x, z) (Freedman-Lane would permute residuals;
    with n ~ 12 layers the raw permutation is the simple, slightly conservative choice);
    CI: percentile bootstrap over rows (resamples with a constant variable are skipped).
    The resamples are computed at once, (n_resamples, n) ranks.
    x, y, z: (n,), n >= 4  ->  dict rho, p, ci_low, ci_high, n.
    """
    a, b, c = (np.asarray(v, float) for v in (x, y, z))
    ok = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    a, b, c = a[ok], b[ok], c[ok]
    n = a.size
    nan = float("nan")
    if n < 4:
        return {"rho": nan, "p": nan, "ci_low": nan, "ci_high": nan, "n": n}

    def rho(u: np.ndarray, v: np.ndarray, w: np.ndarray) -> np.ndarray:
        """rho_xy.z of each row of ranks u, v, w: (m, n) -> (m,); nan where r_xz or r_yz is
        +/-1 up to rounding (1 - r^2 <= _UNIT_R_EPS: rounding alone would give a value)."""

        def r(s: np.ndarray, t: np.ndarray) -> np.ndarray:
            s, t = s - s.mean(1, keepdims=True), t - t.mean(1, keepdims=True)
            return (s * t).sum(1) / np.sqrt((s * s).sum(1) * (t * t).sum(1))

        with np.errstate(invalid="ignore", divide="ignore"):
            rxy, rxz, ryz = (np.clip(r(*pair), -1, 1) for pair in ((u, v), (u, w), (v, w)))
            ok = (1 - rxz**2 > _UNIT_R_EPS) & (1 - ryz**2 > _UNIT_R_EPS)  # else undefined
            den = np.sqrt(np.where(ok, (1 - rxz**2) * (1 - ryz**2), 1.0))
            return np.where(ok, (rxy - rxz * ryz) / den, nan)

    ra, rb, rc = (sps.rankdata(v)[None] for v in (a, b, c))
    obs = float(rho(ra, rb, rc)[0])
    rng = np.random.default_rng(seed)
    perms = np.array([rng.permutation(n) for _ in range(n_resamples)], int).reshape(-1, n)
    null = rho(ra, rb[0][perms], rc)  # (R,): a permutation of y permutes its ranks
    p = (1 + np.sum(np.abs(null) >= abs(obs) - 1e-12)) / (1 + n_resamples)
    idx = np.array([rng.integers(0, n, n) for _ in range(n_resamples)], int).reshape(-1, n)
    keep = (np.ptp(a[idx], 1) > 0) & (np.ptp(b[idx], 1) > 0) & (np.ptp(c[idx], 1) > 0)
    i = idx[keep]  # (kept, n): the same draws, in order, as one resample at a time
    draws = rho(*(sps.rankdata(v[i], axis=1) for v in (a, b, c))) if len(i) else np.empty(0)
    boots = draws[np.isfinite(draws)]
    lo, hi = np.percentile(boots, [2.5, 97.5]) if boots.size else (nan, nan)
    return {"rho": obs, "p": float(p), "ci_low": float(lo), "ci_high": float(hi), "n": n}


def top_share_permutation(
    importance: Any, layers: Any, core: list[int], *, n_resamples: int = 10_000, seed: int = 0
) -> dict[str, float]:
    """Share of the len(core) most important layers that lie in ``core``, and its permutation
    p: the share's null under a uniformly random assignment of the importances to layers.
    importance, layers: (L,)  ->  dict share, p, null_mean."""
    imp, lay = np.asarray(importance, float), np.asarray(layers)
    k = len(core)

    def share(v: np.ndarray) -> float:
        return float(np.isin(lay[np.argsort(-v)[:k]], core).mean())

    obs = share(imp)
    rng = np.random.default_rng(seed)
    null = np.array([share(imp[rng.permutation(imp.size)]) for _ in range(n_resamples)])
    return {"share": obs, "p": float((1 + np.sum(null >= obs - 1e-12)) / (1 + n_resamples)),
            "null_mean": float(null.mean())}


def bootstrap_t_test(
    d: Any,
    n_resamples: int = 10_000,
    seed: int | None = 0,
    alternative: Literal["greater", "less"] = "greater",
) -> float:
    """Studentised (bootstrap-t) p-value that the mean of ``d`` is 0.

    t = mean(d) / se(d), se = sd(d) / sqrt(n); the null distribution of t is that of
    t* = (mean(d*) - mean(d)) / se(d*) over B resamples d* of the n values with replacement.
    It assumes no symmetry: its error in the size is O(1/n), where the t test's and a
    sign-flip test's under a skewed distribution are O(1/sqrt(n)) (Hall 1992, ch. 3), and a
    sign-flip test of a left-skewed difference with mean 0 rejects "greater" too often (8.2% at
    skewness -2 and 48 values over 1,000 draws; both tests together 5.8%:
    ``tests/anatomy/test_accumulation_size.py``). Heavy tails make the bootstrap-t
    anti-conservative instead (7.4% on t with 3 df at 48 values; both together 4.7%), so
    :func:`lamina.anatomy.robustness.interaction_p` requires both tests.
    p = (1 + #{t* >= t}) / (1 + B) ("greater"; "less": t* <= t). d: (n,), n >= 3, not all
    equal  ->  p in (0, 1].
    """
    if alternative not in ("greater", "less"):
        raise ValueError(f"alternative must be 'greater' or 'less'; got {alternative!r}")
    x = np.asarray(d, dtype=np.float64).ravel()
    if x.size < 3 or not np.isfinite(x).all():
        raise ValueError(f"bootstrap_t_test needs at least 3 finite values; got {x.size}")
    n, m = x.size, float(x.mean())
    se = float(x.std(ddof=1)) / np.sqrt(n)
    if not se > 0:
        raise ValueError("bootstrap_t_test: every value is equal, so t is undefined")
    t = m / se
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, n_resamples, 1_024):  # (batch, n) resamples at a time
        xb = x[rng.integers(0, n, (min(1_024, n_resamples - start), n))]
        with np.errstate(divide="ignore", invalid="ignore"):
            tb = (xb.mean(1) - m) / (xb.std(1, ddof=1) / np.sqrt(n))
        tb = np.where(np.isfinite(tb), tb, 0.0)  # a resample of one repeated value: t* = 0
        hits += int(np.sum(tb >= t - 1e-12) if alternative == "greater" else np.sum(tb <= t + 1e-12))
    return float((1 + hits) / (1 + n_resamples))
