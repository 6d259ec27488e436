"""The calibration runs' format, shared by the science packages that write runs and by
:mod:`lamina.evidence.calibration`, which reads them: a science's runs import only this small
module, so an edit to the page's rates leaves the key of their cached runs unchanged
(:func:`lamina.weights.calibration.cache_key`)."""

from __future__ import annotations

import math

__all__ = ["COVERAGE_COLUMN", "RUN_COLUMNS", "SOURCES", "covers"]

RUN_COLUMNS = ("claim_id", "source", "seed", "verdict", "kind", "present", "reason")
"""One row per claim, source and seed: the row's verdict, kind and presence (``present``)."""
COVERAGE_COLUMN = "covered"
"""Optional run column: 1 / 0 / NaN, the row's CI covers its source's known value (:func:`covers`)."""
SOURCES = ("null", "planted", "half")
"""The known-answer kinds: no effect, the paper's size, half of it."""


def covers(ci_low: float, ci_high: float, truth: float) -> float:
    """:data:`COVERAGE_COLUMN` of one row: 1.0 when ci_low <= truth <= ci_high (same unit),
    0.0 when not, NaN when an end is undefined."""
    if not (math.isfinite(ci_low) and math.isfinite(ci_high)):
        return float("nan")
    return float(ci_low <= truth <= ci_high)
