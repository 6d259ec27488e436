"""The verdict rules of lamina.evidence.claims: every branch, and records that refuse bad input."""

import math

import pytest

from lamina.evidence.claims import (
    Claim,
    claim_id,
    claims_frame,
    decide,
    is_reproduction,
    range_decide,
    self_check,
    vanish_decide,
)


def test_claim_id_scheme():
    assert claim_id(1, "convergence", "peak_depth") == "p1-convergence-peak-depth"
    assert claim_id(None, "reanalysis", "released") == "self-reanalysis-released"
    with pytest.raises(ValueError, match="scheme"):
        claim_id(4, "x", "y")
    with pytest.raises(ValueError, match="scheme"):
        claim_id(1, "bad chapter", "y")


def test_range_rules():
    r = range_decide(0.5, 0.45, 0.55, 0.41, 0.58)
    assert r == {"in_range": True, "ci_overlaps": True, "precise": True, "matches": True}
    wide = range_decide(0.5, 0.0, 1.0, 0.41, 0.58)  # a wide CI is no reproduction
    assert wide["in_range"] and not wide["precise"] and not wide["matches"]
    out = range_decide(0.3, 0.2, 0.4, 0.41, 0.58)
    assert not out["in_range"] and not out["ci_overlaps"]
    assert range_decide(0.5, 0.45, 0.6, 0.4, math.inf)["matches"]
    assert not range_decide(0.5, 0.35, 0.6, 0.4, math.inf)["precise"]
    assert range_decide(0.5, 0.36, 0.6, 0.4, math.inf, tolerance=0.05)["precise"]
    assert not range_decide(0.5, math.nan, math.nan, 0.4, 0.6)["ci_overlaps"]


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"estimate": 0.5, "ci": (0.45, 0.55), "p": 1e-4}, "reproduced"),
        ({"estimate": 0.5, "ci": (0.45, 0.55), "p": 0.01}, "absent"),  # alpha 0.001: never partly
        ({"estimate": 0.3, "ci": (0.2, 0.45), "p": 1e-5}, "partially"),  # size not excluded
        ({"estimate": 0.1, "ci": (0.05, 0.15), "p": 1e-9}, "smaller than claimed"),  # tiny, sig.
        ({"estimate": -0.5, "ci": (-0.55, -0.45), "p": 1e-9}, "reversed"),  # direction, sig.
        ({"estimate": -0.5, "ci": (-0.9, 0.1), "p": 0.2}, "absent"),  # wrong way, not sig.
        ({"estimate": 0.1, "ci": (0.05, 0.15), "p": 0.5}, "absent"),
        ({"estimate": 0.9, "ci": (0.85, 0.95), "p": 1e-9}, "not reproduced"),  # above the range
        ({"estimate": math.nan, "ci": (0.0, 1.0), "p": 0.01}, "not testable"),
        ({"estimate": 0.5, "ci": (0.45, 0.55), "p": math.nan}, "not testable"),
    ],
)
def test_decide(kw, expected):
    verdict, reason = decide(
        kw["estimate"], *kw["ci"], claimed=(0.41, 0.58), p=kw["p"], alpha=0.001, direction=1
    )
    assert verdict == expected, reason
    assert reason


def test_decide_untestable_keeps_reason():
    assert decide(0.5, 0.4, 0.6, claimed=(0, 1), untestable="no pairs") == (
        "not testable",
        "no pairs",
    )


def test_vanish_needs_the_real_effect():
    v, why = vanish_decide("not reproduced", [0.1, 0.2], [0.9, 0.9])
    assert v == "not testable" and "absent" in why
    assert vanish_decide("reproduced", [0.1, 0.2], [0.9, 0.8])[0] == "reproduced"
    assert vanish_decide("reproduced", [0.1, 0.2], [0.001, 0.8])[0] == "partially"
    assert vanish_decide("partially", [0.9, 1.2], [0.001, 0.001])[0] == "not reproduced"
    assert vanish_decide("reproduced", [-1.0, 0.2], [0.001, 0.8])[0] == "reproduced"


def test_claim_record_is_keyword_only_and_checked():
    with pytest.raises(TypeError):
        Claim("p1-x-y", "c", "v", "m", 1.0, "reproduced")  # type: ignore[misc]
    with pytest.raises(ValueError, match="verdict"):
        Claim(claim_id="p1-x-y", claim="c", paper_value="v", model="m", measured=1.0,
              verdict="passed")
    with pytest.raises(ValueError, match="kind"):
        Claim(claim_id="p1-x-y", claim="c", paper_value="v", model="m", measured=1.0,
              verdict="check passed", kind="self-check")
    c = Claim.tested(claim_id="p1-x-y", claim="c", paper_value="v", model="m", measured=0.5,
                     ci_low=0.45, ci_high=0.55, p=0.01, claimed=(0.4, 0.6))
    assert c.verdict == "reproduced" and c.row()["p"] == 0.01
    assert list(claims_frame([c])["claim_id"]) == ["p1-x-y"]


def test_self_checks_never_count_as_reproductions():
    verdict, _ = self_check(True)
    s = Claim(claim_id="self-reanalysis-curvature", claim="c", paper_value="v", model="m",
              measured=0.0, verdict=verdict, kind="self-check")
    assert s.verdict == "check passed" and not is_reproduction(s.row())
    assert is_reproduction({"claim_id": "p1-a-b", "verdict": "reproduced"})
    # an old-style row that says "reproduced" under a self-check id is not counted either
    assert not is_reproduction({"claim_id": "self-a-b", "verdict": "reproduced"})


def test_osc_column_is_direction_and_p():
    """The OSC criterion: direction and p < 0.05, whatever the size (peer-gpt2's curvature gap
    +0.249, p = 1e-4, is "smaller than claimed" for lamina and "yes" for the OSC)."""
    from lamina.evidence.claims import Claim, osc_replicates

    row = Claim.tested(claim_id="p1-curvature-gap", claim="c", paper_value="v", model="m",
                       measured=0.249, ci_low=0.15, ci_high=0.35, p=1e-4, claimed=(0.4, math.inf),
                       direction=1)
    assert row.verdict == "smaller than claimed" and row.osc == "yes"
    assert osc_replicates(0.249, 0.2, direction=1) == "no"
    assert osc_replicates(-0.2, 1e-4, direction=1) == "no"
    assert osc_replicates(5.0, 1e-3, direction=1, null=1.0) == "yes"
    assert osc_replicates(0.2, None, direction=1) == ""
