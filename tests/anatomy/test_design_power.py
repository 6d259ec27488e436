"""The designs that would decide paper 3's underpowered rows, by the rows' own sources."""

from __future__ import annotations

import pytest

from lamina.anatomy import design_power as dp


def test_more_fine_tuned_layers_raise_the_recovery_rows_power_not_its_null_rate():
    small = dp.design_rates("p3-anatomy-recovery", 8, range(40))
    large = dp.design_rates("p3-anatomy-recovery", 30, range(40))
    assert large["power"] >= small["power"] + 0.25
    assert large["fpr"] <= 0.15 and small["fpr"] <= 0.15


def test_the_chapters_six_units_cannot_decide_scaling_and_more_units_can():
    assert dp.design_rates("p3-anatomy-scaling", dp.DESIGNS["p3-anatomy-scaling"][1],
                           range(3))["undecidable"] == 1.0  # fmt: skip
    assert dp.design_rates("p3-anatomy-scaling", 48, range(2))["undecidable"] == 0.0


def test_the_smallest_design_stops_at_the_first_size_reaching_the_target(monkeypatch):
    seen = []

    def rates(claim_id: str, size: int, seeds: object) -> dict[str, float]:
        seen.append(size)
        return {"size": size, "power": size / 40, "fpr": 0.0, "undecidable": 0.0}

    monkeypatch.setattr(dp, "design_rates", rates)
    size, table = dp.smallest_design("p3-anatomy-anti", [48, 16, 32, 40], range(2))
    assert size == 32 and seen == [16, 32] and len(table) == 2
    assert dp.smallest_design("p3-anatomy-anti", [8, 16], range(2))[0] is None
    with pytest.raises(ValueError, match="no design study"):
        dp._row("p3-anatomy-core", "null", 0, 16)
