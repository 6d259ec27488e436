"""Known-answer sources for the Growth Training claims, at the chapter's sizes, and their
calibration runs (the format of :mod:`lamina.evidence.calibration`).

A source is one run's comparison tables (:class:`lamina.anatomy.growth_claims.GrowthTables`)
drawn per seed, measured and judged by the chapter's own code. The chapter has 3 paired seeds
and 5 interleaved timing repeats; the per-seed noise is heavy-tailed (t, 3 df) with the
spread the chapter's own seeds showed (:data:`SEED_SD`: log loss ratios across the 3 seeds of
its runs, sd about 0.01; timing repeats on a loaded core, sd 0.03 per kind of step; FLOP
savings, sd 0.05), the threat to a t test over 3 units:

* **null**: growth no better than uniform (log ratio 0), no order effect, no saving;
* **planted**: the paper's sizes -- 4.7x lower loss (every budget and every real-model order),
  13% faster, 54% fewer FLOPs -- and an order effect of 1.1x (lamina's size: the paper claims
  none);
* **half**: half of each on the log scale for ratios, half of each saving.

The ordering claims are judged given a growth gain (their precondition) and every claim given
the learning gate (each source calibrates a claim under its preconditions).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import numpy as np
import pandas as pd

from lamina.anatomy.calibration_sources import given_row
from lamina.anatomy.growth import Phase
from lamina.anatomy.growth_claims import (
    BASE_CLAIMS,
    BY_ID,
    CONTROLS,
    DEFAULT_SOURCES,
    GrowthTables,
    measure_growth,
    source_spec,
)
from lamina.anatomy.growth_compare import LEARNED_GATE
from lamina.anatomy.paper import GROWTH_COST, GROWTH_FASTER, GROWTH_LOSS_RATIO
from lamina.evidence.calibration import COVERAGE_COLUMN, covers
from lamina.evidence.decide import Context, GateResult, Judge

__all__ = ["PLANTED_TRUTH", "SEED_SD", "SOURCES", "growth_rows", "growth_runs", "growth_source"]

SOURCES = ("null", "planted", "half")
N_SEEDS, N_REPEATS = 3, 5
SEED_SD = {"loss": 0.01, "timing": 0.03, "saving": 0.05}
ORDER_PLANTED = 1.1
_PLANS = {
    0: {
        "uniform": [Phase(None, 100, True, "uniform")],
        "growth": [Phase([0], 60, True, "group 1"), Phase(None, 40, True, "full")],
    }
}


# the planted source's population values (each claim's unit), where a CI's coverage is
# checked: the loss ratio (geometric mean; the seeds' t noise is symmetric on the log scale),
# the wall-time and FLOP savings (fractions), the order effect
PLANTED_TRUTH = {
    **{s.id: GROWTH_LOSS_RATIO for s in (*BASE_CLAIMS, *(source_spec(m) for m in DEFAULT_SOURCES))
       if s.id.startswith("p3-growth-loss")},
    "p3-growth-faster": GROWTH_FASTER,
    "p3-growth-cost": GROWTH_COST,
    **{f"p3-growth-order-{c}": ORDER_PLANTED for c in CONTROLS},
}


def _t(rng: np.random.Generator, sd: float, n: int) -> np.ndarray:
    return sd * rng.standard_t(3, n) / np.sqrt(3)


def growth_source(source: str, seed: int) -> GrowthTables:
    """One run's comparison tables of a source of :data:`SOURCES` (module docstring)."""
    rng = np.random.default_rng([seed, SOURCES.index(source), 47])
    f = (0.0, 1.0, 0.5)[SOURCES.index(source)]
    seeds = np.arange(N_SEEDS)
    log_gain = f * np.log(GROWTH_LOSS_RATIO)
    runs = {"growth": log_gain, **{f"growth ({m} order)": log_gain for m in DEFAULT_SOURCES}}
    budgets = pd.DataFrame(
        [
            {"run": run, "seed": s, "budget": b, "loss_ratio": float(np.exp(mu + e))}
            for run, mu in runs.items()
            for b in ("step", "flops", "wall_s")
            for s, e in zip(seeds, _t(rng, SEED_SD["loss"], N_SEEDS), strict=True)
        ]
    )
    orders = pd.DataFrame(
        [
            {
                "run": "growth",
                "seed": s,
                "control": c,
                "loss_ratio": float(np.exp(f * np.log(ORDER_PLANTED) + e)),
            }
            for c in CONTROLS
            for s, e in zip(seeds, _t(rng, SEED_SD["loss"], N_SEEDS), strict=True)
        ]
    )
    saving = np.clip(f * GROWTH_COST + _t(rng, SEED_SD["saving"], N_SEEDS), -0.9, 0.99)
    comparison = pd.DataFrame(
        [{"run": "uniform", "seed": s, "flops_saving": np.nan, "total_flops": 1.0} for s in seeds]
        + [
            {"run": "growth", "seed": s, "flops_saving": float(v), "total_flops": 0.8}
            for s, v in zip(seeds, saving, strict=True)
        ]
    )
    fast = (100 * (1 - f * GROWTH_FASTER) - 40) / 60  # seconds of a group step: the saving
    timing = pd.DataFrame(
        [
            {"repeat": r, "key": k, "seconds": float(base * (1 + e)), "device": "synthetic"}
            for r in range(N_REPEATS)
            for k, base in (("all+emb", 1.0), ("0+emb", fast))
            for e in _t(rng, SEED_SD["timing"], 1)
        ]
    )
    sources = {m: f"growth ({m} order)" for m in DEFAULT_SOURCES}
    return GrowthTables(budgets, orders, comparison, timing, _PLANS, sources, "synthetic")


def growth_rows(seed: int) -> list[dict[str, object]]:
    """The growth claims' calibration rows of one seed (RUN_COLUMNS and COVERAGE_COLUMN against
    :data:`PLANTED_TRUTH` on the planted source), every source; the
    ordering claims given a growth gain and every claim given the learning gate."""
    specs = [*BASE_CLAIMS, *(source_spec(m) for m in DEFAULT_SOURCES)]
    rows: list[dict[str, object]] = []
    for source in SOURCES:
        measured = measure_growth(growth_source(source, seed))
        ctx = Context(
            model=f"{source}-{seed}",
            gates={LEARNED_GATE: GateResult(True, "given")},
            rows={"p3-growth-loss": given_row(BY_ID["p3-growth-loss"])},
        )
        for spec in specs:
            r = Judge(ctx)(spec, measured[spec.id])  # each given its preconditions
            rows.append(
                {
                    "claim_id": spec.id,
                    "source": source,
                    "seed": seed,
                    "verdict": r.verdict,
                    "kind": r.kind,
                    "present": r.present,
                    "reason": r.reason[:120],
                    COVERAGE_COLUMN: covers(r.ci_low, r.ci_high, PLANTED_TRUTH[spec.id])
                    if source == "planted" and spec.id in PLANTED_TRUTH
                    else float("nan"),
                }
            )
    return rows


def growth_runs(seeds: Iterable[int]) -> pd.DataFrame:
    """:func:`growth_rows` over ``seeds``; ``attrs["seconds"]``: each seed's computation time."""
    rows: list[dict[str, object]] = []
    seconds = []
    for seed in seeds:
        t0 = time.perf_counter()
        rows += growth_rows(seed)
        seconds.append(time.perf_counter() - t0)
    out = pd.DataFrame(rows)
    out.attrs["seconds"] = seconds
    return out
