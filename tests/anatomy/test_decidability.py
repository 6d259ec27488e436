"""Paper 3's level rows decide (issue 50): the importance range and the core's size are judged
by an equivalence test against their claimed decade, and the range reads "undecidable at this
design" where the smallest change the units can tell from 0 leaves no room for 10^6."""

from __future__ import annotations

import numpy as np

from lamina.anatomy import calibration_sources as cal
from lamina.anatomy.claims import BY_ID
from lamina.anatomy.importance import range_floor, skip_rows
from lamina.anatomy.measurements import AnatomyTables, measure_anatomy
from lamina.evidence.claims import REPRODUCED, UNDECIDABLE
from lamina.evidence.decide import Context, GateResult, Judge
from lamina.evidence.declare import NO_TEST


def _rows(source: str, seed: int) -> dict:
    sweep, docs = cal.importance_sweep(source, seed)
    measured, _ = measure_anatomy(AnatomyTables(sweep, docs, 30), cal.OPTIONS)
    judge = Judge(Context(model="m", gates={"p3-anatomy-depth-fit": GateResult(True)}))
    return {cid: judge(BY_ID[cid], measured[cid]) for cid in BY_ID}


def test_the_range_and_core_size_rows_have_a_test():
    for cid in ("p3-anatomy-range", "p3-anatomy-core-max"):
        assert BY_ID[cid].has_test and BY_ID[cid].calibration_text() != NO_TEST


def test_the_papers_core_size_reads_reproduced_and_present_and_the_null_does_not():
    planted, null = _rows("planted", 0), _rows("null", 0)
    assert planted["p3-anatomy-core-max"].verdict == REPRODUCED
    assert planted["p3-anatomy-core-max"].present
    assert not null["p3-anatomy-core-max"].present


def test_a_range_of_ten_to_the_seven_is_undecidable_at_sixteen_units():
    row = _rows("planted", 0)["p3-anatomy-range"]
    assert row.verdict == UNDECIDABLE and "units" in row.reason
    sweep, _ = cal.importance_sweep("planted", 0)
    skip = skip_rows(sweep)
    assert range_floor(skip, 16, 6.0) is not None
    assert range_floor(skip, 16, 3.0) is None  # three decades are within its reach
    exact = skip.assign(delta_ci_low=skip["delta_pct"] * (1 - 1e-9))  # no noise: any range
    assert range_floor(exact, 16, 6.0) is None
    assert np.isfinite(skip["delta_ci_low"]).all()
