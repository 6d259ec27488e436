"""Thin wrappers over scipy / statsmodels: the tests and confidence intervals of the whole book.

Every confidence interval is defined here (bootstrap, paired bootstrap, Spearman, Wilson,
geometric mean); the chapters call these and never scipy's bootstrap directly.

Each test returns one row per call (``fdr_bh`` one row per p-value), so results concatenate with
``pd.concat`` into tables for the book. Inputs are 1-D array-likes (numpy, lists, torch tensors);
NaNs are dropped before testing and the counts used are reported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from lamina.core.arrays import to_numpy
from lamina.evidence.resampling import (
    bootstrap_t_test,
    index_bootstrap,
    max_permutation_test,
    partial_spearman,
    peak_bootstrap,
    resample_indices,
    spearman_permutation,
    top_share_permutation,
)

__all__ = [
    "bootstrap_ci",
    "bootstrap_t_test",
    "cohens_d",
    "fdr_bh",
    "geometric_summary",
    "index_bootstrap",
    "mann_whitney",
    "max_permutation_test",
    "paired_bootstrap_ci",
    "partial_spearman",
    "peak_bootstrap",
    "permutation_test",
    "rank_biserial",
    "resample_indices",
    "sign_flip_test",
    "spearman_ci",
    "spearman_permutation",
    "t_summary",
    "top_share_permutation",
    "wilcoxon",
    "wilson",
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


Method = Literal["percentile", "basic", "BCa"]
"""scipy.stats.bootstrap's interval methods."""


def _scipy_bootstrap(
    samples: tuple[np.ndarray, ...],
    statistic: Callable[..., Any],
    n_resamples: int,
    seed: int | None,
    method: Method,
    *,
    paired: bool,
    confidence: float = 0.95,
    vectorized: bool = True,
) -> Any:
    """scipy.stats.bootstrap of ``statistic(*samples)`` (each sample (n_k,); jointly
    resampled when ``paired``), ``n_resamples`` draws from ``np.random.default_rng(seed)``,
    the ``method`` interval at level ``confidence``: scipy's BootstrapResult (its
    ``confidence_interval`` and ``standard_error`` in the statistic's units)."""
    return sps.bootstrap(
        samples,
        statistic,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method=method,
        paired=paired,
        vectorized=vectorized,
        rng=np.random.default_rng(seed),
    )


def bootstrap_ci(
    data: Any,
    statistic: Callable[..., Any] = np.mean,
    n_resamples: int = 10_000,
    seed: int | None = 0,
    confidence: float = 0.95,
    method: Method = "BCa",
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
    res = _scipy_bootstrap(
        samples, statistic, n_resamples, seed, method, paired=paired, confidence=confidence
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


def paired_bootstrap_ci(
    data: tuple[np.ndarray, ...],
    statistic: Callable[..., Any],
    n_resamples: int,
    seed: int,
    *,
    method: Method = "percentile",
    min_size: int = 2,
    vectorized: bool = True,
) -> tuple[float, float]:
    """95% bootstrap CI (scipy.stats.bootstrap) of ``statistic(*data)``, resampling the
    samples of ``data`` (each (n,)) jointly; (NaN, NaN) when ``n_resamples <= 0`` or the
    samples have fewer than ``min_size`` values. ``statistic(*samples, axis)`` must be
    vectorised unless ``vectorized=False``."""
    if n_resamples <= 0 or len(data[0]) < min_size:
        return float("nan"), float("nan")
    res = _scipy_bootstrap(
        data, statistic, n_resamples, seed, method, paired=True, vectorized=vectorized
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def spearman_ci(
    x: Sequence[float], y: Sequence[float], *, n_bootstrap: int = 2000, seed: int = 0
) -> dict[str, float]:
    """Spearman rho of paired samples with its p-value (scipy) and a 95% percentile bootstrap CI over
    pairs. Censored values (e.g. recovery beyond the budget) must be encoded by the caller."""
    xa, ya = np.asarray(x, float), np.asarray(y, float)
    res = sps.spearmanr(xa, ya)
    lo = hi = float("nan")
    if len(xa) >= 4:
        lo, hi = paired_bootstrap_ci(
            (xa, ya), lambda a, b: sps.spearmanr(a, b).statistic, n_bootstrap, seed, vectorized=False
        )
    return {
        "rho": float(res.statistic),
        "p": float(res.pvalue),
        "ci_low": lo,
        "ci_high": hi,
        "n": len(xa),
    }


def wilson(hits: int, n: int) -> tuple[float, float, float]:
    """Accuracy hits/n with the Wilson score 95% interval (scipy); NaNs when n = 0."""
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    ci = sps.binomtest(int(hits), int(n)).proportion_ci(0.95, method="wilson")
    return hits / n, float(ci.low), float(ci.high)


def geometric_summary(
    values: Any, n_bootstrap: int, seed: int, *, sided: Alternative = "two-sided"
) -> dict[str, float]:
    """Geometric mean of positive ratios (e.g. enrichments) with a percentile bootstrap CI over
    the values (matrices) and the one-sample Wilcoxon signed-rank p of log(value) = 0.

    sided: the sidedness of ``p`` and of the CI ("two-sided": the central 95% interval;
    "greater"/"less": both ends are one-sided 95% bounds, the central 90% interval).
    -> {geo, ci_low, ci_high, p, sided, p_two, p_greater, p_less, n} (ratios; p of ``sided``;
    p_two/p_greater/p_less for reference)."""
    x = np.log(np.asarray(values, dtype=np.float64))
    x = x[np.isfinite(x)]
    nan = float("nan")
    out: dict[str, Any] = {"geo": nan, "ci_low": nan, "ci_high": nan, "p": nan, "sided": sided,
                           "p_two": nan, "p_greater": nan, "p_less": nan, "n": len(x)}  # fmt: skip
    if len(x) == 0:
        return out
    out["geo"] = float(np.exp(x.mean()))
    if len(x) >= 2 and np.ptp(x) > 0:
        level = 0.95 if sided == "two-sided" else 0.90
        b = bootstrap_ci(x, n_resamples=n_bootstrap, seed=seed, method="percentile",
                         confidence=level).iloc[0]  # fmt: skip
        out["ci_low"], out["ci_high"] = float(np.exp(b["ci_low"])), float(np.exp(b["ci_high"]))
        for alt in ("two-sided", "greater", "less"):
            key = "p_two" if alt == "two-sided" else f"p_{alt}"
            out[key] = float(sps.wilcoxon(x, alternative=alt).pvalue)
        out["p"] = out["p_two" if sided == "two-sided" else f"p_{sided}"]
    return out


def t_summary(
    values: np.ndarray, *, log: bool = False, sided: Alternative
) -> tuple[float, float, float, float]:
    """Mean over seeds (geometric if ``log``) with a t CI and the one-sample t-test p of
    mean = 0 (= 1 if ``log``), both of sidedness ``sided``: "two-sided" gives the central 95%
    interval and the two-sided p; "greater"/"less" give the one-sided p and a CI whose ends are
    one-sided 95% bounds (the central 90% interval), so that p < 0.05 exactly when the CI
    excludes the null on the tested side. -> (mean, ci_low, ci_high, p)."""
    x = np.log(values) if log else np.asarray(values, float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return (float("nan"),) * 4
    m = float(x.mean())
    if x.size < 2 or np.ptp(x) == 0:
        lo = hi = m
        p = float("nan")
    else:
        level = 0.95 if sided == "two-sided" else 0.90
        lo, hi = sps.t.interval(level, x.size - 1, loc=m, scale=sps.sem(x))
        p = float(sps.ttest_1samp(x, 0.0, alternative=sided).pvalue)
    f = np.exp if log else (lambda v: v)
    return float(f(m)), float(f(lo)), float(f(hi)), p


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
