"""The six rule defects of issue 22, each pinned by a test that failed on the code before it."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from lamina.evidence.claims import Claim
from lamina.evidence.resampling import max_permutation_test
from lamina.trajectory.stat_tests import convergence_test, item_units
from lamina.trajectory.verdicts import convergence_claims, vanish_claim


def _real(verdict: str = "reproduced") -> Claim:
    return Claim(claim_id="p1-convergence-peak", claim="c", paper_value="v", model="m",
                 measured=0.5, verdict=verdict)


def test_vanish_needs_every_named_control() -> None:
    """Defect 1: a vanish row judged on shuffled layers alone read "reproduced"."""
    row = vanish_claim("convergence", "Convergence", _real(), {"shuffled layers": (0.1, 0.6)})
    assert row.verdict == "not testable"
    assert "random embeddings" in row.reason
    nan = vanish_claim("convergence", "Convergence", _real(),
                       {"shuffled layers": (0.1, 0.6), "random embeddings": (math.nan, None)})
    assert nan.verdict == "not testable" and "random embeddings" in nan.reason
    both = vanish_claim("convergence", "Convergence", _real(),
                        {"shuffled layers": (0.1, 0.6), "random embeddings": (0.0, 0.9)})
    assert both.verdict == "reproduced"


def _item_null(seed: int, n_cat: int = 3, n_items: int = 10, per_item: int = 3):
    """States with a common direction and an item component (an item's prompts share it) and
    no category effect: (n, 4, 16) states, labels (n,), item units (n,)."""
    rng = np.random.default_rng(seed)
    d, m = 16, 4
    common = rng.normal(size=d) * 3
    xs, labels, units = [], [], []
    for c in range(n_cat):
        for i in range(n_items):
            item = rng.normal(size=(1, d)) * 1.5
            for _ in range(per_item):
                xs.append(common + item + rng.normal(size=(m, d)))
                labels.append(f"c{c}")
                units.append(f"c{c}:i{i}")
    return np.stack(xs), np.array(labels), np.array(units)


def test_convergence_permutes_items_not_prompts() -> None:
    """Item-level permutation: on an item-clustered null the prompt-level p is tiny (the old
    behaviour, units=None), the item-level p is not."""
    x, lab, units = _item_null(0)
    layers = [0, 1, 2, 3]
    prompt = convergence_test(x, lab, layers, n_bootstrap=50, n_permutations=500, seed=0)
    item = convergence_test(x, lab, layers, n_bootstrap=50, n_permutations=500, seed=0,
                            units=units)
    assert prompt["p"] <= 0.01
    assert item["p"] > 0.05
    assert item["n_units"] == 30 and 0 < item["p_mc_error"] < 0.05


def test_convergence_item_units_from_the_table() -> None:
    t = pd.DataFrame({"category": ["a", "a", "b"], "item": ["x", "x", "y"]})
    assert list(item_units(t)) == ["a:x", "a:x", "b:y"]
    assert item_units(t.drop(columns="item")) is None


def test_permutation_p_needs_enough_exceedances() -> None:
    """Defect 5c: 2,000 permutations decided p < 0.001 on 2 exceedances; now a decision at
    alpha = 0.001 needs >= 10 exceedances' worth of permutations, and p carries its MC error."""
    s = {"peak": 0.5, "ci_low": 0.45, "ci_high": 0.55, "p": 1 / 2001, "n_permutations": 2000,
         "rank_biserial": 0.9, "peak_fraction": 0.6, "fraction_low": 0.5,
         "fraction_high": 0.8, "p_mc_error": 0.0005}
    assert convergence_claims(s, "m", "c")[0].verdict == "not testable"
    s.update(n_permutations=10_000, p=1 / 10_001)
    row = convergence_claims(s, "m", "c")[0]
    assert row.verdict == "reproduced" and "Monte-Carlo SE" in row.test
    null = max_permutation_test(lambda y: np.array([float(np.mean(y[:5]))]), np.arange(20.0),
                                n_permutations=400, seed=1)
    p = null["p_value"]
    assert null["mc_error"] == pytest.approx(np.sqrt(p * (1 - p) / 400))
    assert (1 + null["exceedances"]) / 401 == pytest.approx(p)


def test_peak_depth_can_fail_on_its_ci() -> None:
    """Defect 3: a depth CI from the first to the last layer read "reproduced"."""
    s = {"peak": 0.5, "ci_low": 0.45, "ci_high": 0.55, "p": 1 / 10_001, "n_permutations": 10_000,
         "rank_biserial": 0.9, "peak_fraction": 0.6, "fraction_low": 0.0, "fraction_high": 1.0}
    depth = convergence_claims(s, "m", "c")[1]
    assert depth.claim_id == "p1-convergence-peak-depth" and depth.verdict != "reproduced"
    s.update(fraction_low=0.4, fraction_high=0.9)
    assert convergence_claims(s, "m", "c")[1].verdict == "reproduced"
    s.update(peak_fraction=0.1, fraction_low=0.0, fraction_high=0.2)
    assert convergence_claims(s, "m", "c")[1].verdict != "reproduced"
