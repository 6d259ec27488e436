"""The Growth Training claims judged by the one engine: the ordering controls need a gain to
explain, CI and p have one sidedness, and the wall-time rows say they depend on the machine."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lamina.anatomy.growth import Phase
from lamina.anatomy.growth_claims import GrowthTables, judge_growth, measure_growth
from lamina.anatomy.growth_compare import LEARNED_GATE
from lamina.evidence.decide import GateResult

PLANS = {
    0: {
        "uniform": [Phase(None, 100, True)],
        "growth": [Phase([0], 60, True), Phase(None, 40, True)],
    }
}


def _tables(gain: list[float], orders: list[float], saving: float = 0.1) -> GrowthTables:
    budgets = pd.DataFrame(
        [
            {"run": "growth", "seed": s, "budget": b, "loss_ratio": r}
            for b in ("step", "flops", "wall_s")
            for s, r in enumerate(gain)
        ]
    )
    o = pd.DataFrame(
        [
            {"run": "growth", "seed": s, "control": c, "loss_ratio": r}
            for c in ("reverse", "random")
            for s, r in enumerate(orders)
        ]
    )
    cmp = pd.DataFrame(
        [
            {"run": "uniform", "seed": s, "flops_saving": np.nan, "total_flops": 1.0}
            for s in range(3)
        ]
        + [{"run": "growth", "seed": s, "flops_saving": 0.2, "total_flops": 0.8} for s in range(3)]
    )
    group = (100 * (1 - saving) - 40) / 60
    timing = pd.DataFrame(
        [
            {"repeat": r, "key": k, "seconds": v * (1 + 0.01 * r), "device": "cpu"}
            for r in range(5)
            for k, v in (("all+emb", 1.0), ("0+emb", group))
        ]
    )
    return GrowthTables(budgets, o, cmp, timing, PLANS, {}, "cpu, 1 thread(s)")


def _judge(t: GrowthTables) -> pd.DataFrame:
    rows = judge_growth("m", measure_growth(t), {LEARNED_GATE: GateResult(True, "")})
    return pd.DataFrame([r.row() for r in rows]).set_index("claim_id")


ORDERS = [1.015, 1.03, 1.045]  # at 2a683dc: one-sided p 0.036 beside a two-sided CI reaching 1


def test_an_order_effect_without_a_growth_gain_is_not_judged():
    """G-loss 0.991 (no gain) and the reverse control 1.03x (p 0.036): at 2a683dc
    "reproduced"; there is no gain for the order to explain."""
    claims = _judge(_tables([0.98, 0.99, 1.003], ORDERS))
    assert not claims.loc["p3-growth-loss", "present"]
    assert claims.loc["p3-growth-order-reverse", "verdict"] == "not testable"
    assert "p3-growth-loss" in claims.loc["p3-growth-order-reverse", "reason"]


def test_order_rows_use_a_multiplicity_corrected_alpha_and_a_ci_of_the_same_sidedness():
    claims = _judge(_tables([4.0, 4.5, 5.0], ORDERS))
    row = claims.loc["p3-growth-order-reverse"]
    assert row["alpha"] == 0.025 and row["sided"] == "greater"
    # one-sided p < alpha exactly when the one-sided bound excludes 1
    assert (row["p"] < row["alpha"]) == (row["ci_low"] > 1)
    assert row["verdict"] in ("absent", "smaller than claimed", "partially")
    strong = _judge(_tables([4.0, 4.5, 5.0], [1.10, 1.12, 1.14])).loc["p3-growth-order-reverse"]
    assert strong["verdict"] == "reproduced"


def test_half_the_claimed_gain_reads_smaller_than_claimed():
    half = 4.7**0.5
    claims = _judge(_tables([half * 0.99, half, half * 1.01], [1.0, 1.0, 1.0]))
    assert claims.loc["p3-growth-loss", "verdict"] == "smaller than claimed"


def test_wall_time_rows_come_from_interleaved_timing_and_name_the_machine():
    claims = _judge(_tables([4.0, 4.5, 5.0], ORDERS, saving=0.13))
    faster = claims.loc["p3-growth-faster"]
    assert abs(faster["measured"] - 0.13) < 0.01
    assert "machine-dependent: cpu, 1 thread(s)" in faster["reason"]
    assert faster["resampling"] == "timing repeat"
    assert "machine-dependent" in claims.loc["p3-growth-loss-wall", "reason"]
