"""Paper 3's importance measurements: the range over significant layers, the core share and
its exact null, the core's size, and anti-layers; CIs over units."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from lamina.anatomy.heldout import document_delta_ci, document_ppl_ci, document_sums, regroup_sweep
from lamina.anatomy.importance import (
    anti_layers,
    core_share_p,
    measure_core,
    measure_core_max,
    measure_range,
    skip_rows,
    unit_sums,
)
from lamina.anatomy.paper import PAPER_ANTI, PAPER_CORE, mapped_layers, paper_layers


def _sweep(delta: list[float], n: int = 15, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    base = 3.0 + rng.normal(0, 0.2, n)
    rows = [
        {
            "layer": l,
            "surgery": "skip",
            "base_nll_per_seq": base,
            "nll_per_seq": base + np.log1p(d / 100) + rng.normal(0, 0.003, n),
        }
        for l, d in enumerate(delta)
    ]
    df = pd.DataFrame(rows).assign(
        delta_pct=lambda f: [100 * np.expm1(np.mean(a - base)) for a in f["nll_per_seq"]]
    )
    return regroup_sweep(df, np.arange(n), 64, 300, 0), np.arange(n)


def test_document_sums_aggregate_windows_by_unit():
    s, c = document_sums(np.array([1.0, 2.0, 3.0, 4.0]), np.full(4, 10.0), np.array([5, 2, 5, 2]))
    assert np.allclose(s, [60.0, 40.0]) and np.allclose(c, [20.0, 20.0])


def test_a_unit_bootstrap_is_wider_than_a_window_bootstrap_under_clustering():
    rng = np.random.default_rng(0)
    n_docs, per_doc = 12, 10
    nll = (
        3.0 + np.repeat(rng.normal(0, 0.5, n_docs), per_doc) + rng.normal(0, 0.02, n_docs * per_doc)
    )
    counts = np.full(nll.size, 63.0)
    docs = np.repeat(np.arange(n_docs), per_doc)
    _, lo_d, hi_d = document_ppl_ci(nll, counts, docs, 1000, 0)
    _, lo_w, hi_w = document_ppl_ci(nll, counts, np.arange(nll.size), 1000, 0)
    assert hi_d - lo_d > 2 * (hi_w - lo_w)
    ablated = nll + np.log1p(0.2) + np.repeat(rng.normal(0, 0.05, n_docs), per_doc)
    lo, hi = document_delta_ci(ablated, nll, counts, docs, 1000, 0)
    assert lo < 100 * (np.exp(np.mean(ablated - nll)) - 1) < hi


def test_the_range_divides_only_by_layers_whose_ci_excludes_zero():
    sweep, docs = _sweep([1000.0, 50.0, 10.0, 0.0])
    skip = skip_rows(sweep)
    m = measure_range(skip, unit_sums(skip, docs), 300, 0)
    assert np.isclose(m["estimate"], np.log10(1000 / 10), atol=0.05)
    assert m["effect_size"] == 3 and m["ci_low"] < m["estimate"] < m["ci_high"]


def test_the_core_share_p_is_the_hypergeometric_tail_and_holds_its_level():
    assert np.isclose(core_share_p(30, 4, 4, 2), stats.hypergeom.sf(1, 30, 4, 4))
    assert core_share_p(30, 4, 4, 0) == 1.0
    rng = np.random.default_rng(1)
    hits = [np.isin(np.argsort(-rng.random(30))[:4], PAPER_CORE).sum() for _ in range(4000)]
    assert np.mean([core_share_p(30, 4, 4, h) < 0.05 for h in hits]) <= 0.05


def test_a_dominant_core_is_found_and_its_size_is_the_core_peak():
    delta = [30.0] * 30
    delta[0] = 80_000.0  # the overall peak, outside the core: named, not deciding
    for l in PAPER_CORE:
        delta[l] = 50_000.0
    sweep, docs = _sweep(delta)
    us = unit_sums(skip_rows(sweep), docs)
    core = mapped_layers(PAPER_CORE, 30, "span")
    m = measure_core(us, core, 300, 0)
    assert m["estimate"] == 0.75 and m["p"] < 0.01 and m["sided"] == "greater"
    size = measure_core_max(us, core, 300, 0)
    assert np.isclose(size["estimate"], np.log10(50_000), atol=0.01)
    assert "layer 0 +79,9" in size["detail"] and "largest layer 0" in size["detail"]
    assert "untestable" in measure_core(us, None, 300, 0, why="no mapping")


def test_the_core_and_the_anti_layers_share_one_depth_convention():
    assert paper_layers(list(PAPER_CORE), 30) == [8, 9, 10, 11]
    assert paper_layers(list(PAPER_CORE), 18) == [4, 5, 6, 7]
    assert [paper_layers([p], 12) for p in PAPER_ANTI] == [[5], [6, 7]]  # L17: [17/30, 18/30)
    assert mapped_layers(PAPER_CORE, 18, "none") is None


def test_an_anti_layer_needs_a_consistent_drop_and_its_ci_below_zero():
    sweep, docs = _sweep([50.0, -4.0, 20.0, 10.0], n=16)
    skip = skip_rows(sweep)
    anti, q = anti_layers(unit_sums(skip, docs), skip)
    assert list(anti) == [1] and q[1] < 0.05
