"""The claim rows of lamina.evidence.claims: the id scheme, records that refuse bad input, and
the OSC column (the verdict rules are lamina.evidence.decide's: tests/evidence)."""


import pytest

from lamina.evidence.claims import Claim, claim_id, claims_frame, is_reproduction, osc_replicates


def test_claim_id_scheme():
    assert claim_id(1, "convergence", "peak_depth") == "p1-convergence-peak-depth"
    assert claim_id(None, "reanalysis", "released") == "self-reanalysis-released"
    with pytest.raises(ValueError, match="scheme"):
        claim_id(4, "x", "y")
    with pytest.raises(ValueError, match="scheme"):
        claim_id(1, "bad chapter", "y")


def test_claim_record_is_keyword_only_and_checked():
    with pytest.raises(TypeError):
        Claim("p1-x-y", "c", "v", "m", 1.0, "reproduced")  # type: ignore[misc]
    with pytest.raises(ValueError, match="verdict"):
        Claim(claim_id="p1-x-y", claim="c", paper_value="v", model="m", measured=1.0,
              verdict="passed")
    with pytest.raises(ValueError, match="kind"):
        Claim(claim_id="p1-x-y", claim="c", paper_value="v", model="m", measured=1.0,
              verdict="check passed", kind="self-check")
    c = Claim(claim_id="p1-x-y", claim="c", paper_value="v", model="m", measured=0.5,
              ci_low=0.45, ci_high=0.55, p=0.01, verdict="reproduced")
    assert c.row()["p"] == 0.01
    assert list(claims_frame([c])["claim_id"]) == ["p1-x-y"]


def test_self_checks_never_count_as_reproductions():
    s = Claim(claim_id="self-reanalysis-curvature", claim="c", paper_value="v", model="m",
              measured=0.0, verdict="check passed", kind="self-check")
    assert s.verdict == "check passed" and not is_reproduction(s.row())
    assert is_reproduction({"claim_id": "p1-a-b", "verdict": "reproduced"})
    # an old-style row that says "reproduced" under a self-check id is not counted either
    assert not is_reproduction({"claim_id": "self-a-b", "verdict": "reproduced"})


def test_osc_column_is_direction_and_p():
    """The OSC criterion: direction and p < 0.05, whatever the size (peer-gpt2's curvature gap
    +0.249, p = 1e-4, is "smaller than claimed" for lamina and "yes" for the OSC)."""
    assert osc_replicates(0.249, 1e-4, direction=1) == "yes"
    assert osc_replicates(0.249, 0.2, direction=1) == "no"
    assert osc_replicates(-0.2, 1e-4, direction=1) == "no"
    assert osc_replicates(5.0, 1e-3, direction=1, null=1.0) == "yes"
    assert osc_replicates(0.2, None, direction=1) == ""
