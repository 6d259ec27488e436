"""Thin wrappers over scipy / statsmodels that return tidy pandas DataFrames.

Each test returns one row per call (``fdr_bh`` one row per p-value), so results concatenate with
``pd.concat`` into tables for the book. Inputs are 1-D array-likes (numpy, lists, torch tensors);
NaNs are dropped before testing and the counts used are reported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from lamina.arrays import to_numpy

__all__ = [
    "bootstrap_ci",
    "cohens_d",
    "fdr_bh",
    "index_bootstrap",
    "mann_whitney",
    "max_permutation_test",
    "partial_spearman",
    "peak_bootstrap",
    "permutation_test",
    "rank_biserial",
    "resample_indices",
    "sign_flip_test",
    "top_share_permutation",
    "wilcoxon",
]

Alternative = Literal["two-sided", "less", "greater"]


def _sample(x: Any, name: str, min_size: int = 1) -> np.ndarray:
    arr = to_numpy(x, name).astype(np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got shape {arr.shape}")
    arr = arr[~np.isnan(arr)]
    if arr.size < min_size:
        raise ValueError(f"{name} needs at least {min_size} non-NaN values; got {arr.size}")
    return arr


def cohens_d(a: Any, b: Any, ranks: bool = False) -> float:
    """Cohen's d: standardised difference of means with the pooled standard deviation.

    d = (mean(a) - mean(b)) / s_p,  s_p = sqrt(((n_a-1) var(a) + (n_b-1) var(b)) / (n_a + n_b - 2)),
    var with ddof=1. With ``ranks=True`` (the paper's "Cohen's d on ranks"), a and b are first
    replaced by their ranks in the pooled sample (average ranks for ties).

    a: (n_a,), b: (n_b,), n_a + n_b >= 3  ->  float, in pooled-SD units (NaN if s_p = 0).
    """
    x, y = _sample(a, "a"), _sample(b, "b")
    if x.size + y.size < 3:
        raise ValueError("cohens_d needs n_a + n_b >= 3")
    if ranks:
        r = sps.rankdata(np.concatenate([x, y]))
        x, y = r[: x.size], r[x.size :]
    ss = np.sum((x - x.mean()) ** 2) + np.sum((y - y.mean()) ** 2)
    pooled = ss / (x.size + y.size - 2)
    return float((x.mean() - y.mean()) / np.sqrt(pooled)) if pooled > 0 else float("nan")


def rank_biserial(a: Any, b: Any) -> float:
    """Rank-biserial correlation of two independent samples.

    r = 2 U_a / (n_a n_b) - 1 = P(a > b) - P(a < b), with U_a the Mann-Whitney U statistic of a
    (ties count 1/2). a: (n_a,), b: (n_b,)  ->  float in [-1, 1]; positive when a tends to be larger.
    """
    x, y = _sample(a, "a"), _sample(b, "b")
    u = sps.mannwhitneyu(x, y, alternative="two-sided").statistic
    return float(2.0 * u / (x.size * y.size) - 1.0)


def mann_whitney(a: Any, b: Any, alternative: Alternative = "two-sided") -> pd.DataFrame:
    """Mann-Whitney U test of two independent samples (scipy.stats.mannwhitneyu, automatic method).

    H0: P(a > b) = P(a < b). Effect sizes: rank-biserial r = 2 U_a / (n_a n_b) - 1 and Cohen's d
    (raw and on pooled ranks), see ``rank_biserial`` and ``cohens_d``.

    a: (n_a,), b: (n_b,)  ->  one-row DataFrame with columns n_a, n_b, median_a, median_b, u, p_value,
    alternative, rank_biserial, cohens_d, cohens_d_ranks.
    """
    x, y = _sample(a, "a"), _sample(b, "b")
    res = sps.mannwhitneyu(x, y, alternative=alternative)
    return pd.DataFrame(
        [
            {
                "n_a": x.size,
                "n_b": y.size,
                "median_a": float(np.median(x)),
                "median_b": float(np.median(y)),
                "u": float(res.statistic),
                "p_value": float(res.pvalue),
                "alternative": alternative,
                "rank_biserial": float(2.0 * res.statistic / (x.size * y.size) - 1.0),
                "cohens_d": cohens_d(x, y) if x.size + y.size >= 3 else np.nan,
                "cohens_d_ranks": cohens_d(x, y, ranks=True) if x.size + y.size >= 3 else np.nan,
            }
        ]
    )


def fdr_bh(pvalues: Any, alpha: float = 0.05) -> pd.DataFrame:
    """Benjamini-Hochberg false-discovery-rate correction (statsmodels multipletests, "fdr_bh").

    q_(i) = min_{j >= i} min(1, m p_(j) / j) over the m sorted non-NaN p-values; reject where q <= alpha.

    pvalues: (m,) in [0, 1] (NaN allowed: q NaN, not rejected)  ->  DataFrame with columns p_value,
    q_value, reject, one row per input, index kept from a pandas Series.
    """
    index = pvalues.index if isinstance(pvalues, pd.Series) else None
    p = to_numpy(np.asarray(pvalues, dtype=np.float64), "pvalues")
    if p.ndim != 1:
        raise ValueError(f"pvalues must be one-dimensional; got shape {p.shape}")
    ok = ~np.isnan(p)
    if np.any((p[ok] < 0) | (p[ok] > 1)):
        raise ValueError("pvalues must lie in [0, 1]")
    q = np.full(p.shape, np.nan)
    reject = np.zeros(p.shape, dtype=bool)
    if ok.any():
        reject[ok], q[ok], _, _ = multipletests(p[ok], alpha=alpha, method="fdr_bh")
    return pd.DataFrame({"p_value": p, "q_value": q, "reject": reject}, index=index)


def bootstrap_ci(
    data: Any,
    statistic: Callable[..., Any] = np.mean,
    n_resamples: int = 10_000,
    seed: int | None = 0,
    confidence: float = 0.95,
    method: Literal["percentile", "basic", "BCa"] = "BCa",
    paired: bool = False,
) -> pd.DataFrame:
    """Bootstrap confidence interval of a statistic (scipy.stats.bootstrap).

    Resamples the data with replacement n_resamples times; the interval is the ``method`` interval
    (default BCa) at level ``confidence``. ``statistic(*samples, axis=-1)`` must be vectorised
    (np.mean, np.median, ... are); pass a tuple of arrays for multi-sample statistics, with
    ``paired=True`` to resample them jointly.

    data: (n,) or tuple of (n_k,)  ->  one-row DataFrame with columns estimate, ci_low, ci_high,
    standard_error, confidence, n_resamples, method.
    """
    samples = tuple(data) if isinstance(data, tuple) else (data,)
    samples = tuple(_sample(s, "data", min_size=2) for s in samples)
    res = sps.bootstrap(
        samples,
        statistic,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method=method,
        paired=paired,
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return pd.DataFrame(
        [
            {
                "estimate": float(statistic(*samples, axis=-1)),
                "ci_low": float(res.confidence_interval.low),
                "ci_high": float(res.confidence_interval.high),
                "standard_error": float(res.standard_error),
                "confidence": confidence,
                "n_resamples": n_resamples,
                "method": method,
            }
        ]
    )


def _mean_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def permutation_test(
    a: Any,
    b: Any,
    statistic: Callable[..., Any] = _mean_difference,
    n_resamples: int = 10_000,
    seed: int | None = 0,
    alternative: Alternative = "two-sided",
    permutation_type: Literal["independent", "samples", "pairings"] = "independent",
) -> pd.DataFrame:
    """Permutation test of two samples (scipy.stats.permutation_test).

    The null distribution of ``statistic(a, b, axis=-1)`` (default: mean(a) - mean(b)) comes from
    n_resamples random relabellings ("independent": pooled samples reassigned to groups;
    "samples": paired values swapped within pairs); exact when fewer permutations exist.

    a: (n_a,), b: (n_b,)  ->  one-row DataFrame with columns n_a, n_b, statistic, p_value,
    alternative, n_resamples, permutation_type.
    """
    x, y = _sample(a, "a"), _sample(b, "b")
    res = sps.permutation_test(
        (x, y),
        statistic,
        permutation_type=permutation_type,
        vectorized=True,
        n_resamples=n_resamples,
        alternative=alternative,
        rng=np.random.default_rng(seed),
    )
    return pd.DataFrame(
        [
            {
                "n_a": x.size,
                "n_b": y.size,
                "statistic": float(res.statistic),
                "p_value": float(res.pvalue),
                "alternative": alternative,
                "n_resamples": n_resamples,
                "permutation_type": permutation_type,
            }
        ]
    )


# ----------------------------------------------------------------------------- paired tests
def wilcoxon(a: Any, b: Any | None = None, alternative: Alternative = "two-sided") -> pd.DataFrame:
    """Wilcoxon signed-rank test of paired samples (scipy.stats.wilcoxon, zero differences
    dropped: "wilcox" zero method), on d = a - b (or on a alone when b is None).

    H0: the distribution of d is symmetric about 0. Effect size: the matched-pairs
    rank-biserial r = (W+ - W-) / (W+ + W-), with W+/- the rank sums of the positive/negative
    differences (in [-1, 1]; positive when a tends to exceed b).

    a: (n,), b: (n,) paired with a (NaN pairs dropped)  ->  one-row DataFrame with columns n,
    median_difference, mean_difference, statistic, p_value, alternative, rank_biserial.
    """
    x = to_numpy(a, "a").astype(np.float64)
    if b is not None:
        y = to_numpy(b, "b").astype(np.float64)
        if y.shape != x.shape:
            raise ValueError(f"paired samples need equal shapes; got {x.shape} and {y.shape}")
        x = x - y
    if x.ndim != 1:
        raise ValueError(f"differences must be one-dimensional; got shape {x.shape}")
    d = x[np.isfinite(x)]
    nz = d[d != 0]
    if nz.size < 2:
        p, stat, rb = np.nan, np.nan, np.nan
    else:
        res = sps.wilcoxon(nz, alternative=alternative)
        r = sps.rankdata(np.abs(nz))
        wp, wm = r[nz > 0].sum(), r[nz < 0].sum()
        p, stat, rb = float(res.pvalue), float(res.statistic), float((wp - wm) / (wp + wm))
    return pd.DataFrame(
        [
            {
                "n": int(d.size),
                "median_difference": float(np.median(d)) if d.size else np.nan,
                "mean_difference": float(np.mean(d)) if d.size else np.nan,
                "statistic": stat,
                "p_value": p,
                "alternative": alternative,
                "rank_biserial": rb,
            }
        ]
    )


def sign_flip_test(
    d: Any, n_resamples: int = 10_000, seed: int | None = 0, alternative: Alternative = "two-sided"
) -> float:
    """Paired permutation (sign-flip) p-value of the mean of paired differences d.

    Null: each d_i is symmetric about 0, so its sign is exchangeable. p = (1 + #{|mean(s d)|
    >= |mean(d)|}) / (1 + B) over B random sign vectors s (one-sided versions compare without
    the absolute value). d: (n,)  ->  p in (0, 1].
    """
    x = _sample(d, "d", min_size=1)
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(n_resamples, x.size))
    null = signs @ x / x.size
    obs = x.mean()
    if alternative == "two-sided":
        hits = np.sum(np.abs(null) >= abs(obs) - 1e-12)
    elif alternative == "greater":
        hits = np.sum(null >= obs - 1e-12)
    else:
        hits = np.sum(null <= obs + 1e-12)
    return float((1 + hits) / (1 + n_resamples))


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
) -> dict[str, Any]:
    """Percentile bootstrap of any statistic of a resample of rows.

    ``statistic(idx)`` recomputes the statistic from the rows ``idx`` (with repeats): the
    whole pipeline is rerun on every resample, so selection steps inside it are resampled too.
    Rows are drawn by :func:`resample_indices` (``strata`` / ``clusters`` name the
    independent unit). Returns estimate (on all rows), ci_low, ci_high (percentiles), the
    bootstrap standard error and the draws (B,).
    """
    if n < 2:
        raise ValueError(f"index_bootstrap needs at least 2 rows; got {n}")
    rng = np.random.default_rng(seed)
    plan = _plan(n, strata, clusters)
    est = float(statistic(np.arange(n)))
    draws = np.array([statistic(_draw(plan, rng)) for _ in range(n_resamples)], dtype=np.float64)
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


def peak_bootstrap(
    profile: Callable[[np.ndarray], np.ndarray],
    n: int,
    n_resamples: int = 2_000,
    seed: int | None = 0,
    *,
    strata: Any | None = None,
    clusters: Any | None = None,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Bootstrap of a profile's peak with the peak re-selected in every resample.

    ``profile(idx)`` -> (m,) recomputes the whole profile (e.g. the convergence index per
    layer) from the rows ``idx``; the statistic is max_l profile(l), so the choice of the
    peak layer is part of what is resampled (a CI at a fixed, data-chosen layer is too
    narrow). Returns :func:`index_bootstrap`'s fields plus ``peak_index`` (on all rows) and
    ``peak_share`` (m,): how often each layer was the peak.
    """
    picks: list[int] = []

    def stat(idx: np.ndarray) -> float:
        prof = np.asarray(profile(idx), dtype=np.float64)
        if not np.isfinite(prof).any():
            return np.nan
        picks.append(int(np.nanargmax(prof)))
        return float(np.nanmax(prof))

    full = np.asarray(profile(np.arange(n)), dtype=np.float64)
    out = index_bootstrap(
        stat, n, n_resamples, seed, strata=strata, clusters=clusters, confidence=confidence
    )
    share = np.bincount(picks[1:], minlength=full.size)[: full.size] / max(len(picks) - 1, 1)
    out.update(peak_index=int(np.nanargmax(full)), peak_share=share)
    return out


def max_permutation_test(
    profile: Callable[[np.ndarray], np.ndarray],
    labels: Any,
    n_permutations: int = 2_000,
    seed: int | None = 0,
) -> dict[str, Any]:
    """Label-permutation test of a profile's maximum, corrected for choosing the peak.

    Statistic T = max_l profile(labels)(l). Null: labels exchangeable across rows, so T under
    uniformly permuted labels (category sizes kept) is a draw of the null of the *maximum over
    layers*; p = (1 + #{T_perm >= T}) / (1 + B). The smallest attainable p is 1 / (1 + B), so
    B must exceed 1/alpha - 1 for a claim at level alpha.

    profile(labels) -> (m,); labels: (n,)  ->  dict with statistic, p_value, null (B,),
    n_permutations.
    """
    lab = np.asarray(labels)
    if lab.ndim != 1:
        raise ValueError(f"labels must be one-dimensional; got shape {lab.shape}")
    rng = np.random.default_rng(seed)
    obs = float(np.nanmax(profile(lab)))
    null = np.array([np.nanmax(profile(lab[rng.permutation(lab.size)])) for _ in range(n_permutations)])
    p = (1 + np.sum(null >= obs - 1e-12)) / (1 + n_permutations)
    return {"statistic": obs, "p_value": float(p), "null": null, "n_permutations": n_permutations}


def partial_spearman(
    x: Any, y: Any, z: Any, *, n_resamples: int = 2_000, seed: int | None = 0
) -> dict[str, float]:
    """Spearman partial correlation of x and y given z, with a permutation p and a bootstrap CI.

    rho_xy.z = (r_xy - r_xz r_yz) / sqrt((1 - r_xz^2)(1 - r_yz^2)) on ranks (Spearman r's).
    p: two-sided, from permuting y against (x, z) (Freedman-Lane would permute residuals;
    with n ~ 12 layers the raw permutation is the simple, slightly conservative choice);
    CI: percentile bootstrap over rows (resamples with a constant variable are skipped).
    x, y, z: (n,), n >= 4  ->  dict rho, p, ci_low, ci_high, n.
    """
    a, b, c = (np.asarray(v, float) for v in (x, y, z))
    ok = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    a, b, c = a[ok], b[ok], c[ok]
    n = a.size
    nan = float("nan")
    if n < 4:
        return {"rho": nan, "p": nan, "ci_low": nan, "ci_high": nan, "n": n}

    def rho(u: np.ndarray, v: np.ndarray, w: np.ndarray) -> float:
        r = np.corrcoef(np.stack([sps.rankdata(u), sps.rankdata(v), sps.rankdata(w)]))
        den = np.sqrt((1 - r[0, 2] ** 2) * (1 - r[1, 2] ** 2))
        return float((r[0, 1] - r[0, 2] * r[1, 2]) / den) if den > 0 else nan

    obs = rho(a, b, c)
    rng = np.random.default_rng(seed)
    null = np.array([rho(a, b[rng.permutation(n)], c) for _ in range(n_resamples)])
    p = (1 + np.sum(np.abs(null) >= abs(obs) - 1e-12)) / (1 + n_resamples)
    boots = []
    for _ in range(n_resamples):
        i = rng.integers(0, n, n)
        if min(np.ptp(a[i]), np.ptp(b[i]), np.ptp(c[i])) > 0:
            boots.append(rho(a[i], b[i], c[i]))
    boots = np.array([v for v in boots if np.isfinite(v)])
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
