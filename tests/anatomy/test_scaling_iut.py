"""Scaling "preserves quality" judged layer by layer (issue 50): every layer's own upper bound
below +5% (intersection-union), not a bound on the maximum over layers re-chosen in each
resample, which the noise of many layers biases upward; and "undecidable at this design" where
no layer's bound can get below the threshold."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lamina.anatomy.claims import BY_ID
from lamina.anatomy.robustness import layer_bounds, measure_scaling
from lamina.evidence.claims import REPRODUCED, UNDECIDABLE
from lamina.evidence.decide import Context, Measurement, decide


def _scale_rows(deltas: np.ndarray, n_units: int, sd: float, seed: int) -> pd.DataFrame:
    """``scale`` rows: per-unit NLLs (one window per unit) around each layer's delta_pct,
    unit noise ``sd`` nats per token."""
    rng = np.random.default_rng(seed)
    base = 3.0 + 0.3 * rng.standard_normal(n_units)
    rows = []
    for layer, d in enumerate(deltas):
        per = base + np.log1p(d / 100) + sd * rng.standard_normal(n_units)
        rows.append({"layer": layer, "surgery": "scale", "nll_per_seq": per,
                     "base_nll_per_seq": base,
                     "delta_pct": 100 * float(np.expm1(per.mean() - base.mean()))})  # fmt: skip
    return pd.DataFrame(rows)


def _verdict(sweep: pd.DataFrame, n_units: int) -> str:
    m = measure_scaling(sweep, np.arange(n_units), 1_000, 0)
    return decide(BY_ID["p3-anatomy-scaling"], Measurement(**m), Context(model="m")).verdict


def test_thirty_layers_each_well_below_the_threshold_read_as_preserving():
    reads = [_verdict(_scale_rows(np.full(30, 1.0), 40, 0.04, s), 40) for s in range(10)]
    # the maximum re-chosen in each resample: 6 of 10, and 4 "not testable" (its CI lies above
    # the worst layer's own estimate: the upward bias)
    assert reads.count(REPRODUCED) >= 8, reads


def test_the_upper_end_is_the_largest_layers_own_bound_and_covers_the_worst_layer():
    sweep = _scale_rows(np.r_[np.full(13, 0.5), 3.0], 40, 0.04, 1)
    b = layer_bounds(sweep, np.arange(40), 1_000, 0)
    m = measure_scaling(sweep, np.arange(40), 1_000, 0)
    assert m["ci_high"] == np.max(b["high"]) and m["ci_low"] == np.max(b["low_all"])
    assert (b["low_all"] <= b["low"]).all()  # a band for every layer at once is wider
    assert m["ci_low"] <= m["estimate"] == np.max(b["delta"]) <= m["ci_high"]
    assert "undecidable" not in m
    hits = 0
    for s in range(40):  # the upper end covers the worst layer's true +3% (one-sided 95%)
        hits += measure_scaling(_scale_rows(np.r_[np.full(13, 0.5), 3.0], 40, 0.04, 100 + s),
                                np.arange(40), 400, s)["ci_high"] >= 3.0  # fmt: skip
    assert hits >= 36


def test_a_layer_exactly_at_the_threshold_rarely_reads_as_preserving():
    deltas = np.r_[np.full(13, 1.0), 5.0]
    reads = [_verdict(_scale_rows(deltas, 40, 0.04, s), 40) for s in range(40)]
    assert reads.count(REPRODUCED) <= 5


def test_bounds_too_wide_for_the_threshold_are_undecidable_at_this_design():
    sweep = _scale_rows(np.full(14, 1.0), 6, 0.071, 0)  # the chapter's 6 units, SmolLM2's noise
    m = measure_scaling(sweep, np.arange(6), 1_000, 0)
    assert "units, not 6, would decide it" in m["undecidable"]
    need = int(m["undecidable"].split("about ")[1].split(" units")[0])
    assert need > 6
    assert _verdict(sweep, 6) == UNDECIDABLE


def test_the_lower_end_covers_the_worst_layer_though_many_layers_are_near_it():
    """Issue 50, item 4: the CI's lower end, max_l low_l, is a 95% lower bound of the worst
    layer's true change only if the layers' lower bounds hold at once. With each layer's own
    one-sided 95% bound (before), 14 layers of +0.2..1% put it above a true worst of +1% on
    13 of 60 planted calibration seeds (coverage 78%); the max-T band covers."""
    rng = np.random.default_rng(5)
    hits = 0
    for s in range(40):
        deltas = rng.uniform(0.2, 1.0, 14)
        deltas[s % 14] = 1.0
        m = measure_scaling(_scale_rows(deltas, 48, 0.07, 200 + s), np.arange(48), 1_000, s)
        hits += m["ci_low"] <= 1.0
    assert hits >= 36, hits
