"""The seed count of a calibration interval (lamina.evidence.calibration.seeds_for_halfwidth)."""

from __future__ import annotations

import pytest

from lamina.evidence.calibration import seeds_for_halfwidth
from lamina.evidence.stats import wilson


@pytest.mark.parametrize("rate", [0.0, 0.02, 0.04, 0.05])
def test_seeds_for_halfwidth_is_the_smallest_count_that_reaches_it(rate):
    def half(n: int) -> float:
        share, low, high = wilson(round(rate * n), n)
        return max(share - low, high - share)

    n = seeds_for_halfwidth(rate)
    assert half(n) <= 0.05 < half(n - 10)
    assert seeds_for_halfwidth(0.0) == 80  # 0 of n needs n >= 73 (the Makefile's note)
