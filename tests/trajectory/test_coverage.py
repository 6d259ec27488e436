"""Coverage of the convergence peak's CI (issue 50, item 4): the calibration reports how often
the CI covers the planted source's population peak, and that share meets 90%.

At 5a3ca44 the calibration had no coverage: the peak's CI is moved so that the resamples'
median sits on the estimate, so "the estimate lies inside its CI" held by construction and
said nothing about the CI."""

import math

import numpy as np
import pandas as pd
import pytest

from lamina.evidence.calibration import (
    COVERAGE_COLUMN,
    COVERAGE_TARGET,
    RUN_COLUMNS,
    calibration_rates,
)
from lamina.trajectory import calibration as cal
from lamina.trajectory.claims import PEAK
from lamina.trajectory.convergence_stats import convergence_test, item_units
from lamina.trajectory.coverage import MAIN_ROWS, covers, main_truth, peak_truth
from lamina.trajectory.sizes import CHAPTER_POOLING, chapter_prompts
from lamina.trajectory.synthetic import synthetic_states


def test_covers_reads_the_interval_and_leaves_undefined_ends_unread():
    assert covers(0.4, 0.6, 0.5) == 1.0 and covers(0.4, 0.6, 0.61) == 0.0
    assert covers(0.4, 0.6, 0.4) == 1.0 and math.isnan(covers(math.nan, 0.6, 0.5))


def test_the_rates_read_coverage_on_the_planted_seeds_only():
    rows = [{"claim_id": "c", "source": src, "seed": s, "verdict": "absent", "kind": "effect",
             "present": False, "reason": "", COVERAGE_COLUMN: cov}
            for src, covs in (("null", [math.nan] * 4), ("planted", [1.0, 1.0, 0.0, math.nan]))
            for s, cov in enumerate(covs)]  # fmt: skip
    r = calibration_rates(pd.DataFrame(rows)).iloc[0]
    assert r["n_coverage"] == 3 and r["coverage_hits"] == 2 and np.isclose(r["coverage"], 2 / 3)
    assert r["coverage_low"] < r["coverage"] < r["coverage_high"]
    bare = calibration_rates(pd.DataFrame(rows).drop(columns=[COVERAGE_COLUMN]))
    assert "coverage" not in bare.columns  # the column is optional


def test_the_harness_marks_the_peak_rows_of_the_planted_source(monkeypatch):
    class Row:
        def __init__(self, claim_id: str, low: float, high: float) -> None:
            self.claim_id, self.ci_low, self.ci_high = claim_id, low, high

    monkeypatch.setattr(cal, "main_truth", lambda chapter, kind: 0.5)
    assert cal._covered(Row(PEAK.id, 0.45, 0.55), "planted") == 1.0
    assert cal._covered(Row(PEAK.id, 0.51, 0.55), "planted") == 0.0
    assert math.isnan(cal._covered(Row(PEAK.id, 0.45, 0.55), "null"))
    for cid in MAIN_ROWS.values():  # every main row (issue 50, item 4; before: the peak's only)
        assert cal._covered(Row(cid, 0.45, 0.55), "planted") == 1.0
    assert math.isnan(cal._covered(Row("p1-curvature-gap-all-lengths", 0.45, 0.55), "planted"))
    assert COVERAGE_COLUMN not in RUN_COLUMNS  # optional, beside the runs' own columns


@pytest.mark.slow
def test_the_peak_ci_covers_the_planted_population_peak():
    """The CI the chapter reports (central 90%: its ends are one-sided 95% bounds) covers the
    planted source's population peak on at least 90% of 40 seeds, at the chapter's bootstrap
    budget (:data:`lamina.trajectory.calibration.BUDGET`)."""
    t = chapter_prompts("convergence")
    lab, units = t["category"].to_numpy(), item_units(t)
    truth = peak_truth("planted")
    hits = []
    for seed in range(40):
        x = synthetic_states(t, "planted", seed, CHAPTER_POOLING["convergence"])
        r = convergence_test(x, lab, list(range(x.shape[1])), units=units, seed=seed,
                             n_bootstrap=cal.BUDGET["n_bootstrap"], n_permutations=20)  # fmt: skip
        hits.append(covers(r["ci_low"], r["ci_high"], truth))
    assert np.mean(hits) >= COVERAGE_TARGET, hits


def test_a_main_row_truth_names_its_chapter():
    with pytest.raises(ValueError, match="no main-row truth for chapter 'nonsense'; known"):
        main_truth("nonsense", "planted")
    assert set(MAIN_ROWS) == {"curvature", "three_phase", "bifurcation"}


@pytest.mark.slow
def test_the_other_main_rows_cis_cover_their_planted_population_values():
    """Issue 50, item 4, every main row: the curvature gap, the SIM margin and the
    bifurcation excess, each on its chapter's planted source at the chapter's budget, cover
    the pooled population value (:func:`main_truth`) on at least 90% of 20 seeds."""
    for chapter, cid in MAIN_ROWS.items():
        truth = main_truth(chapter, "planted")
        hits = []
        for seed in range(20):
            row = cal.chapter_rows(chapter, "planted", seed, vanish=False)[0]
            assert row.claim_id == cid
            hits.append(covers(row.ci_low, row.ci_high, truth))
        assert np.mean(hits) >= COVERAGE_TARGET, (chapter, hits)
