"""lamina.evidence.stats: the wrappers agree with scipy/statsmodels called directly and with the formulas."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from lamina.evidence import stats

RNG = np.random.default_rng(0)
A = RNG.normal(1.0, 1.0, 40)
B = RNG.normal(0.0, 1.5, 55)


def test_mann_whitney_matches_scipy_and_reports_effect_sizes() -> None:
    row = stats.mann_whitney(A, B).iloc[0]
    direct = sps.mannwhitneyu(A, B, alternative="two-sided")
    assert row["u"] == direct.statistic and row["p_value"] == pytest.approx(direct.pvalue)
    brute = np.mean(A[:, None] > B[None]) - np.mean(A[:, None] < B[None])
    assert row["rank_biserial"] == pytest.approx(brute)
    assert row["cohens_d"] == pytest.approx(stats.cohens_d(A, B))
    assert row["rank_biserial"] > 0 and row["cohens_d"] > 0
    less = stats.mann_whitney(A, B, alternative="less").iloc[0]
    assert less["p_value"] == pytest.approx(sps.mannwhitneyu(A, B, alternative="less").pvalue)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.floats(-10, 10), min_size=2, max_size=15),
    st.lists(st.floats(-10, 10), min_size=2, max_size=15),
)
def test_rank_biserial_is_probability_of_superiority_difference(
    a: list[float], b: list[float]
) -> None:
    x, y = np.array(a), np.array(b)
    brute = np.mean(x[:, None] > y[None]) - np.mean(x[:, None] < y[None])
    assert stats.rank_biserial(x, y) == pytest.approx(brute, abs=1e-12)
    assert stats.rank_biserial(y, x) == pytest.approx(-brute, abs=1e-12)


def test_cohens_d_uses_the_pooled_standard_deviation() -> None:
    pooled = np.sqrt(
        ((A.size - 1) * A.var(ddof=1) + (B.size - 1) * B.var(ddof=1)) / (A.size + B.size - 2)
    )
    assert stats.cohens_d(A, B) == pytest.approx((A.mean() - B.mean()) / pooled)
    ranks = sps.rankdata(np.r_[A, B])
    assert stats.cohens_d(A, B, ranks=True) == pytest.approx(
        stats.cohens_d(ranks[: A.size], ranks[A.size :])
    )
    assert np.isnan(stats.cohens_d([1.0, 1.0], [1.0, 1.0]))


def test_fdr_bh_matches_statsmodels_and_keeps_nan_and_index() -> None:
    p = RNG.uniform(0, 0.1, 20)
    table = stats.fdr_bh(p)
    reject, q, _, _ = multipletests(p, method="fdr_bh")
    np.testing.assert_allclose(table["q_value"], q)
    np.testing.assert_array_equal(table["reject"], reject)
    hand = stats.fdr_bh([0.01, 0.04, 0.03])  # m = 3: q = min over j >= i of 3 p_(j) / j
    np.testing.assert_allclose(hand["q_value"], [0.03, 0.04, 0.04])
    series = pd.Series([0.01, np.nan, 0.5], index=["x", "y", "z"])
    out = stats.fdr_bh(series)
    assert list(out.index) == ["x", "y", "z"] and np.isnan(out.loc["y", "q_value"])
    assert not out.loc["y", "reject"]
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        stats.fdr_bh([0.5, 1.5])


def test_bootstrap_ci_matches_scipy_and_covers_the_mean() -> None:
    row = stats.bootstrap_ci(A, n_resamples=2000, seed=3).iloc[0]
    direct = sps.bootstrap((A,), np.mean, n_resamples=2000, rng=np.random.default_rng(3))
    assert row["ci_low"] == pytest.approx(direct.confidence_interval.low)
    assert row["ci_high"] == pytest.approx(direct.confidence_interval.high)
    assert row["ci_low"] < A.mean() < row["ci_high"] and row["estimate"] == pytest.approx(A.mean())
    narrow = stats.bootstrap_ci(A, n_resamples=2000, seed=3, confidence=0.5).iloc[0]
    assert narrow["ci_high"] - narrow["ci_low"] < row["ci_high"] - row["ci_low"]


def test_bootstrap_ci_of_a_paired_difference() -> None:
    shifted = A - 0.5 + RNG.normal(0, 0.1, A.size)
    diff = stats.bootstrap_ci(
        (A, shifted),
        statistic=lambda x, y, axis=-1: np.mean(x - y, axis=axis),
        paired=True,
        n_resamples=500,
    ).iloc[0]
    assert diff["estimate"] == pytest.approx(np.mean(A - shifted))
    assert 0.4 < diff["ci_low"] < 0.5 < diff["ci_high"] < 0.6


def test_permutation_test_matches_scipy_and_detects_a_shift() -> None:
    row = stats.permutation_test(A + 1.0, B, n_resamples=2000, seed=1).iloc[0]
    direct = sps.permutation_test(
        (A + 1.0, B),
        lambda x, y, axis=-1: np.mean(x, axis=axis) - np.mean(y, axis=axis),
        vectorized=True,
        n_resamples=2000,
        rng=np.random.default_rng(1),
    )
    assert row["statistic"] == pytest.approx(direct.statistic)
    assert row["p_value"] == pytest.approx(direct.pvalue)
    assert row["p_value"] < 0.01
    null = stats.permutation_test(A, RNG.permutation(A), n_resamples=500).iloc[0]
    assert null["p_value"] > 0.5


def test_bad_samples_raise_value_errors() -> None:
    with pytest.raises(ValueError, match="one-dimensional"):
        stats.mann_whitney(np.ones((3, 2)), B)
    with pytest.raises(ValueError, match="non-NaN"):
        stats.mann_whitney([np.nan], B)


def test_spearman_permutation_holds_its_size_where_scipys_t_approximation_does_not() -> None:
    """Under independence every ordering of y against x is equally likely: over all 5,040
    orderings at n = 7, scipy's t-approximate p rejects 5.5% at the 5% level (the cause of
    ``raw-read-grad-follows``' excess on its exact null), the permutation p at most 5%."""
    import itertools

    n = 7
    x = np.arange(n, dtype=float)
    perms = np.array(list(itertools.permutations(range(n))), dtype=float)
    rho = np.array([sps.spearmanr(x, p)[0] for p in perms]).round(9)
    t_size = np.mean([sps.spearmanr(x, p, alternative="greater")[1] < 0.05 for p in perms])
    first = {r: i for i, r in reversed(list(enumerate(rho)))}  # one ordering per value of ρ
    p_of = {r: stats.spearman_permutation(x, perms[i], alternative="greater")[1] for r, i in first.items()}
    assert t_size > 0.05
    assert np.mean([p_of[r] < 0.05 for r in rho]) <= 0.05
    with pytest.raises(ValueError, match="paired"):
        stats.spearman_permutation(x, x[:5], alternative="greater")
    with pytest.raises(ValueError, match="1 of 7 pairs are NaN"):  # named, never dropped
        stats.spearman_permutation(x, np.where(x == x[0], np.nan, x), alternative="greater")
    with pytest.raises(ValueError, match="at least 3 pairs"):
        stats.spearman_permutation(x[:2], x[:2], alternative="greater")
