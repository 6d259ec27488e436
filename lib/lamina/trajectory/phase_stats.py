"""The three-phase claim's test: the paper's fixed bands on per-unit SIM profiles, paired."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.stats as sps

from lamina.evidence.stats import index_bootstrap, wilcoxon
from lamina.trajectory.phases import detect_phases, fixed_phase_bands

__all__ = ["detected_phases", "three_phase_test", "unit_band_means"]


def detected_phases(sim: np.ndarray, n_resamples: int, seed: int) -> dict[str, Any]:
    """``detect_phases`` (BIC and CV) on the prompt-mean SIM profile (sim: (n, L)), and the
    number of phases over ``n_resamples`` prompt resamples: its 2.5-97.5 percentiles
    (``k_low``, ``k_high``) and the share of resamples giving 3 (``share_three``)."""
    profile = np.nanmean(sim, axis=0)
    bic = detect_phases(profile, method="bic")
    cv = detect_phases(profile, method="cv") if sim.shape[1] >= 4 else bic
    rng = np.random.default_rng(seed)
    ks = np.array([
        detect_phases(np.nanmean(sim[rng.integers(0, len(sim), len(sim))], axis=0)).n_phases
        for _ in range(n_resamples)
    ])
    return {"k_bic": bic.n_phases, "k_cv": cv.n_phases, "detected_bands": bic.bands,
            "share_three": float(np.mean(ks == 3)), "k_low": float(np.percentile(ks, 2.5)),
            "k_high": float(np.percentile(ks, 97.5)), "profile": profile}


def unit_band_means(sim: np.ndarray, units: Any | None = None) -> np.ndarray:
    """(units, 3) mean SIM in the encoding, elaboration and output-preparation bands of the
    paper's fixed bands (``lamina.trajectory.fixed_phase_bands``): per prompt (sim: (n, L)
    SIM_i(l), cosine), then averaged over each unit's prompts in order of first appearance
    (units: (n,) the independent unit of each prompt; None: each prompt is its own unit).
    The three-phase margin, min(mean d1, mean d2) with d1 = elaboration - encoding and
    d2 = elaboration - output over these rows, is the estimate of :func:`three_phase_test`."""
    sim = np.asarray(sim, float)
    bands = fixed_phase_bands(sim.shape[1])
    m = np.stack([np.nanmean(sim[:, bands == k], axis=1) for k in range(3)], axis=1)  # (n, 3)
    if units is None:
        return m
    u = np.asarray(units)
    return np.stack([m[u == k].mean(0) for k in dict.fromkeys(u.tolist())])  # (units, 3)


def _t_p(d: np.ndarray, alternative: str) -> float:
    """One-sample t-test p of mean(d) = 0 (d: (units,) band differences, cosine); 1.0 when d
    has no spread (the test is undefined: no evidence either way)."""
    d = d[np.isfinite(d)]
    if d.size < 2 or np.ptp(d) == 0:
        return 1.0
    return float(sps.ttest_1samp(d, 0.0, alternative=alternative).pvalue)


def three_phase_test(
    sim: np.ndarray, *, n_bootstrap: int = 2_000, seed: int = 0, units: Any | None = None
) -> dict[str, Any]:
    """The paper's fixed bands on per-unit SIM profiles, tested paired within units.

    sim: (n, L) SIM_i(l); units: (n,) the independent unit of each prompt (the base word of
    a lexical variant: its variants share the word; None: the prompt). Band means per prompt
    (``lamina.trajectory.fixed_phase_bands``), averaged over each unit's prompts;
    d1 = elaboration - encoding, d2 = elaboration - output preparation (paired per unit).
    Estimate: ``margin`` = min(mean d1, mean d2), the margin by which elaboration exceeds
    both neighbours, with a percentile bootstrap 95% CI over units (two-sided);
    ``p`` = max of the two two-sided one-sample t-test p-values of mean d1 = 0 and mean d2 = 0
    over units (an intersection-union test: both must hold, no correction needed);
    ``p_opposite`` = the same for the opposite shape, elaboration *below* both neighbours
    (max of the one-sided "less" p-values). The test is on the means, as the estimate is: a
    signed-rank test rejects a mean difference of 0 whenever the units' differences are
    skewed (on the realistic null, whose lexical units have the opposite sign, it read
    present on 6 of 8 seeds). ``rank_biserial``: the smaller of the two matched-pairs
    rank-biserial correlations (descriptive). Also ``band_means`` (3,), ``ordered``
    (encoding < output < elaboration, GPT-2's order), ``n_units``.
    """
    sim = np.asarray(sim, float)
    bands = fixed_phase_bands(sim.shape[1])
    if len(np.unique(bands)) < 3:
        nan = np.nan
        return {"margin": nan, "margin_low": nan, "margin_high": nan, "p": None,
                "p_opposite": None, "band_means": [], "ordered": None, "n_units": 0}
    m = unit_band_means(sim, units)  # (units, 3)
    d1, d2 = m[:, 1] - m[:, 0], m[:, 1] - m[:, 2]

    def margin(i: np.ndarray) -> float:
        return float(min(d1[i].mean(), d2[i].mean()))

    boot = index_bootstrap(margin, len(m), n_bootstrap, seed)
    p1, p2 = (_t_p(d, "two-sided") for d in (d1, d2))
    q1, q2 = (_t_p(d, "less") for d in (d1, d2))
    bm = m.mean(0)
    rb = min(wilcoxon(d1).iloc[0]["rank_biserial"], wilcoxon(d2).iloc[0]["rank_biserial"])
    return {
        "margin": boot["estimate"],
        "margin_low": boot["ci_low"],
        "margin_high": boot["ci_high"],
        "p": max(p1, p2),
        "p_opposite": max(q1, q2),
        "rank_biserial": float(rb),
        "band_means": [float(v) for v in bm],
        "ordered": bool(bm[0] < bm[2] < bm[1]),
        "per_prompt": m,
        "n_units": len(m),
    }
