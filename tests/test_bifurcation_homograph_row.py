"""The homograph-ratio row of paper 1's bifurcation claim is judged against the matched
controls at the pair level (pairs the independent unit), not against a ratio of 1."""

from __future__ import annotations

import numpy as np

from lamina.evidence.claims import PRESENT
from lamina.trajectory.stat_tests import bifurcation_test
from lamina.trajectory.verdicts import bifurcation_claims


def _pairs(rng: np.random.Generator, n: int, growth: float, m: int = 8, d: int = 24) -> tuple:
    """Two contexts of n words whose distance grows from 0.1 at layer 0 to 0.1 x ``growth``
    at the last layer, times per-pair noise exp(N(0, 0.3)): (n, m, d) twice."""
    scale = 0.1 * np.linspace(1.0, growth, m)[None, :, None] * np.exp(rng.normal(0, 0.3, (n, 1, 1)))
    base = rng.normal(size=(n, m, d))
    v = rng.normal(size=(n, 1, d)) / np.sqrt(d)
    return base + scale * v, base - scale * v


def _row(growth_homograph: float, growth_control: float, seed: int) -> str:
    rng = np.random.default_rng(seed)
    a, b = _pairs(rng, 20, growth_homograph)
    ca, cb = _pairs(rng, 20, growth_control)
    s = bifurcation_test(a, b, ca, cb, n_bootstrap=200, seed=seed)
    assert s["base_defined"]
    rows = {c.claim_id: c for c in bifurcation_claims(s, "m", "c")}
    return rows["p1-bifurcation-homograph-ratio"].verdict


def test_homograph_ratio_shared_by_the_controls_is_not_present() -> None:
    """Homograph and control pairs exchangeable, all drifting apart 2x with depth (no
    ambiguity effect): the row read "smaller than claimed" (present) in every seed, since the
    CI of the median homograph ratio clears 1; a bifurcation of ambiguous tokens that the
    controls share is no evidence for the claim. Present now at most at about the test's
    level."""
    hits = sum(_row(2.0, 2.0, seed) in PRESENT for seed in range(12))
    assert hits <= 2, hits


def test_homograph_ratio_beyond_the_controls_is_present() -> None:
    """Homographs 2x, controls 1x: a real excess, smaller than the claimed 4.9x."""
    assert all(_row(2.0, 1.0, seed) == "smaller than claimed" for seed in range(3))
    assert _row(5.6, 1.1, 0) == "reproduced"
