"""The six rule defects of issue 22, each pinned by a test that failed on the code before it."""

from __future__ import annotations

import math

from lamina.evidence.claims import Claim
from lamina.trajectory.verdicts import vanish_claim


def _real(verdict: str = "reproduced") -> Claim:
    return Claim(claim_id="p1-convergence-peak", claim="c", paper_value="v", model="m",
                 measured=0.5, verdict=verdict)


def test_vanish_needs_every_named_control() -> None:
    """Defect 1: a vanish row judged on shuffled layers alone read "reproduced"."""
    row = vanish_claim("convergence", "Convergence", _real(), {"shuffled layers": (0.1, 0.6)})
    assert row.verdict == "not testable"
    assert "random embeddings" in row.reason
    nan = vanish_claim("convergence", "Convergence", _real(),
                       {"shuffled layers": (0.1, 0.6), "random embeddings": (math.nan, None)})
    assert nan.verdict == "not testable" and "random embeddings" in nan.reason
    both = vanish_claim("convergence", "Convergence", _real(),
                        {"shuffled layers": (0.1, 0.6), "random embeddings": (0.0, 0.9)})
    assert both.verdict == "reproduced"
