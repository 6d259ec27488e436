"""Calibration rates from declared claims (lamina.evidence.calibration)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lamina.evidence.calibration import calibration_rates, calibration_table
from lamina.evidence.declare import ClaimSpec


def _spec(cid: str, kind: str = "effect", **kw: object) -> ClaimSpec:
    base: dict[str, object] = {"id": cid, "claim": "c", "paper_value": "v", "kind": kind,
                               "statistic": "s", "unit": "u", "calibrated": "a null"}
    if kind == "effect":  # a tested effect (a level row without a test has no rate)
        base |= {"test": "a test", "direction": 1}
    return ClaimSpec(**(base | kw))  # type: ignore[arg-type]


def _runs(rows: list[tuple[str, str, int, str, str, bool]]) -> pd.DataFrame:
    cols = ["claim_id", "source", "seed", "verdict", "kind", "present"]
    df = pd.DataFrame(rows, columns=cols)
    df["reason"] = "r"
    return df


def test_a_smaller_than_claimed_effect_on_the_null_is_a_false_positive() -> None:
    runs = _runs([
        ("p1-a-b", "null", 0, "smaller than claimed", "effect", True),
        ("p1-a-b", "null", 1, "absent", "effect", False),
        ("p1-a-b", "null", 2, "not testable", "effect", False),
        ("p1-a-b", "null", 3, "absent", "effect", False),
        ("p1-a-b", "planted", 0, "reproduced", "effect", True),
        ("p1-a-b", "planted", 1, "partially", "effect", True),
        ("p1-a-b", "half", 0, "smaller than claimed", "effect", True),
        ("p1-a-b", "half", 1, "reproduced", "effect", True),
    ])  # fmt: skip
    r = calibration_rates(runs).iloc[0]
    assert (r["fpr_hits"], r["n_null_testable"]) == (1, 3)
    assert math.isclose(r["power"], 0.5)
    assert math.isclose(r["half_smaller"], 0.5) and math.isclose(r["half_reproduced"], 0.5)
    assert r["fpr_low"] < r["fpr"] < r["fpr_high"]


def test_count_rows_say_yes_only_as_claimed_and_are_never_present() -> None:
    runs = _runs([
        ("p1-a-phases", "null", 0, "count as claimed", "count", False),
        ("p1-a-phases", "null", 1, "fewer than claimed", "count", False),
        ("p1-a-phases", "planted", 0, "count as claimed", "count", False),
    ])  # fmt: skip
    r = calibration_rates(runs).iloc[0]
    assert r["fpr_hits"] == 1 and r["power"] == 1.0


def test_every_declared_claim_appears_with_rates_or_a_reason() -> None:
    specs = [_spec("p1-a-b"), _spec("p1-a-c", not_calibrated="no null keeps X", calibrated="")]
    runs = _runs([("p1-a-b", "null", s, "not testable", "effect", False) for s in range(3)]
                 + [("p1-a-b", "null", 3, "absent", "effect", False)])  # fmt: skip
    table = calibration_table(specs, calibration_rates(runs))
    assert list(table["claim_id"]) == ["p1-a-b", "p1-a-c"]
    assert table["status"].iloc[0].startswith("not calibrated: not testable on 3 of 4")
    assert table["status"].iloc[1] == "not calibrated: no null keeps X"
    with pytest.raises(ValueError, match="no calibration runs"):
        calibration_table([_spec("p1-a-b"), _spec("p1-a-d")], calibration_rates(runs))
    with pytest.raises(ValueError, match="not declared"):
        calibration_table([], calibration_rates(runs))
