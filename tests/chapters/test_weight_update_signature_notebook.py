"""The weight-update chapter's verdict-box texts (#25: the page's length): every row of a claim is
stated once, with its verdict and value, a not-testable row with its reason's head only."""

from __future__ import annotations

import math

import pandas as pd

from lamina.chapters.weight_update_signature.notebook import describe

NAN = math.nan
QK = "p2-signature-align-qk-enriched"


def _claims() -> pd.DataFrame:
    rows = [
        {"model": "m1", "claim_id": QK, "verdict": "reproduced", "measured": 5.72,
         "ci_low": 4.85, "ci_high": 6.95, "p": 1.5e-5, "reason": ""},
        {"model": "m2", "claim_id": QK, "verdict": "not reproduced", "measured": 0.91,
         "ci_low": 0.8, "ci_high": 1.1, "p": 0.4, "reason": ""},
        {"model": "org", "claim_id": QK, "verdict": "not testable", "measured": 7.37,
         "ci_low": NAN, "ci_high": NAN, "p": NAN,
         "reason": "gate objective-dpo failed: content probe 0.593 < 0.7; preference 0.835"},
        {"model": "other", "claim_id": "p2-signature-writes-random", "verdict": "reproduced",
         "measured": 2.0, "ci_low": 1.5, "ci_high": 2.5, "p": 0.01, "reason": ""},
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_describe_states_every_row_of_the_claim_once() -> None:
    text = describe(_claims(), QK)
    assert text.startswith("m1: reproduced 5.72 [4.85, 6.95], p = 1.5e-05; ")
    assert "m2: not reproduced 0.91 [0.8, 1.1], p = 0.4" in text
    # a not-testable row: its verdict and its reason's head, never its measured value
    assert "org: not testable (gate objective-dpo failed)." in text
    assert "7.37" not in text and "preference 0.835" not in text
    assert "other" not in text  # another claim's rows never leak in


def test_describe_without_rows_says_so() -> None:
    assert describe(_claims(), "p2-signature-stage-not-objective").startswith("no result")
