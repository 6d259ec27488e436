"""The designs that would decide paper 3's underpowered rows, by the rows' own sources."""

from __future__ import annotations

import pytest

from lamina.anatomy import design_power as dp


def test_more_fine_tuned_layers_raise_the_recovery_rows_power_not_its_null_rate():
    small = dp.design_rates("p3-anatomy-recovery", 8, range(40))
    large = dp.design_rates("p3-anatomy-recovery", 30, range(40))
    assert large["power"] >= small["power"] + 0.25
    assert large["fpr"] <= 0.15 and small["fpr"] <= 0.15


def test_six_units_cannot_decide_scaling_and_the_chapters_design_can():
    """At c995b6f the chapter edited 6 units: the scaling row was undecidable on every seed."""
    assert dp.design_rates("p3-anatomy-scaling", 6, range(3))["undecidable"] == 1.0
    assert dp.DESIGNS["p3-anatomy-scaling"][1] == 48
    assert dp.design_rates("p3-anatomy-scaling", 48, range(2))["undecidable"] == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("claim_id", ["p3-anatomy-anti", "p3-anatomy-anti-at",
                                      "p3-anatomy-recovery", "p3-anatomy-scaling"])  # fmt: skip
def test_the_chapters_design_gives_the_once_underpowered_rows_power(claim_id):
    """Issue 50, item 3: power at the paper's size at the chapter's own design (the sizes the
    calibration uses), over 20 seeds: at least 14 planted seeds read as claimed (a row of 80%
    power does so with probability 0.91), and at most 3 null seeds say yes."""
    rates = dp.design_rates(claim_id, dp.DESIGNS[claim_id][1], range(20))
    assert rates["power"] >= 0.7 and rates["fpr"] <= 0.15, rates


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


def test_the_pages_descriptions_give_the_calibrations_sizes():
    from lamina.anatomy.calibration import CALIBRATION_SOURCES
    from lamina.anatomy.calibration_sources import N_RECOVERY, N_ROBUST_UNITS, N_UNITS
    from lamina.anatomy.claims import _CAL_IMPORTANCE
    from lamina.chapters.layer_anatomy.config import BUDGETS

    assert f"{N_UNITS} units" in _CAL_IMPORTANCE and f"{N_UNITS} units" in CALIBRATION_SOURCES["skip sweeps"]
    assert f"{N_ROBUST_UNITS} units" in CALIBRATION_SOURCES["robustness sweeps"]
    assert CALIBRATION_SOURCES["recovery times"].startswith(f"{N_RECOVERY} layers")
    pretrained = BUDGETS["pretrained"]  # the calibration measures the chapter's own design
    assert pretrained["n_tokens"] == N_UNITS * 128 and pretrained["robustness_tokens"] == N_ROBUST_UNITS * 128
    assert pretrained["recovery_layers"] == N_RECOVERY
