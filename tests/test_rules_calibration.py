"""Paper 2's known-answer calibration sources (issue 22, item 3) and the seed count of a
calibration interval (paper 3's sources: tests/anatomy/test_calibration.py; its page section:
tests/chapters/test_rules_calibration.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lamina.chapters.weight_update_signature.calibration import (
    PLANTED_RATIO,
    SignatureSource,
    synthetic_deltas,
    tilt_for,
)
from lamina.chapters.weight_update_signature.calibration import (
    calibration_rows as signature_rows,
)
from lamina.weights import random_orthonormal, relative_subspace_fraction

SMALL = SignatureSource(d=128, other=32, k=8, n_layers=4)


def test_tilt_gives_the_rsf_it_is_asked_for():
    gen = torch.Generator().manual_seed(0)
    d, k, rsf = 256, 8, 0.1
    frame = random_orthonormal(d, k, gen)
    g = torch.randn(400, d, generator=gen, dtype=torch.float64)
    t = tilt_for(rsf, d, k)
    g = g + (t - 1) * (g @ frame) @ frame.T
    got = float(relative_subspace_fraction(g, frame, side="input"))
    assert got == pytest.approx(rsf, rel=0.1)
    with pytest.raises(ValueError, match="rsf must be in"):
        tilt_for(1.0, d, k)


@pytest.mark.parametrize(("kind", "ratio"), [("null", 1.0), ("planted", PLANTED_RATIO),
                                             ("planted-half", (1 + PLANTED_RATIO) / 2)])
def test_signature_source_realises_its_planted_ratio(kind, ratio):
    t = synthetic_deltas(kind, 0, SignatureSource(d=256, other=64, n_layers=8))
    q = t[t["role"].isin(["q", "k"])]
    realised = float(np.exp(np.log(q["vs_weight"]).mean()))
    assert realised == pytest.approx(ratio, rel=0.25)


def test_signature_rows_read_the_null_and_the_planted_source_apart():
    rows = signature_rows(range(2), SMALL, n_bootstrap=200)
    qk = rows[rows["claim_id"] == "P2.align_qk_enriched"].set_index(["kind", "seed"])["verdict"]
    assert set(qk.loc["planted"]) == {"reproduced"}
    assert "reproduced" not in set(qk.loc["null"])
    assert set(rows["kind"]) == {"null", "planted", "planted-half"}


@pytest.mark.parametrize("rate", [0.0, 0.02, 0.04, 0.05])
def test_seeds_for_halfwidth_is_the_smallest_count_that_reaches_it(rate):
    from lamina.evidence.stats import wilson
    from lamina.trajectory.calibration import seeds_for_halfwidth

    def half(n: int) -> float:
        share, low, high = wilson(round(rate * n), n)
        return max(share - low, high - share)

    n = seeds_for_halfwidth(rate)
    assert half(n) <= 0.05 < half(n - 10)
    assert seeds_for_halfwidth(0.0) == 80  # 0 of n needs n >= 73 (the Makefile's note)
