"""The compact verdict-box texts of the weight-update chapter and the organisms' gate line
(#25: the chapter pages' length): every row is still stated, with its verdict and value, and
a not-testable row with its reason."""

from __future__ import annotations

import math

import pandas as pd
from lamina.chapters.weight_update_signature.figures import describe, short_note

from lamina.chapters.organisms.narrative import gate_detail

NAN = math.nan


def _claims() -> pd.DataFrame:
    base = {"claim_id": "P2.align_qk_enriched", "unit": "enrichment", "effect_size": NAN,
            "effect_name": "", "note": ""}
    rows = [
        {"model": "m1", "stage": "m1→sft", "verdict": "reproduced", "measured": 5.72,
         "ci_low": 4.85, "ci_high": 6.95, "p": 1.5e-5},
        {"model": "m1", "stage": "m1→dpo", "verdict": "not reproduced", "measured": 0.91,
         "ci_low": 0.8, "ci_high": 1.1, "p": 0.4},
        {"model": "org", "stage": "final→dpo", "verdict": "not testable", "measured": NAN,
         "ci_low": NAN, "ci_high": NAN, "p": NAN,
         "note": "not testable: alignment did not take (content_probe 0.593, n 816; failed: "
                 "content probe 0.593 < 0.7: preference 0.835 [0.808, 0.860]); measured 7.37"},
        {"model": "other", "stage": "-", "verdict": "reproduced", "measured": 2.0,
         "ci_low": 1.5, "ci_high": 2.5, "p": 0.01, "claim_id": "P2.align_write_random"},
    ]
    return pd.DataFrame([{**base, **r} for r in rows])


def test_describe_states_every_row_of_the_claim_once() -> None:
    text = describe(_claims(), "align_qk_enriched")
    assert text.startswith("3 rows: ")
    assert "reproduced 1" in text and "not reproduced 1" in text and "not testable 1" in text
    assert "m1: →sft reproduced 5.72 [4.85, 6.95] p = 1.5e-05 · →dpo not reproduced 0.91" in text
    assert "Enrichment [95% CI], p:" in text
    # the gated row: its reason, cut to the failed check, not the whole gate dump
    assert "Not testable (alignment gate failed: content probe 0.593 < 0.7): org final→dpo" in text
    assert "preference 0.835" not in text
    # another claim's rows never leak in
    assert "other" not in text


def test_describe_without_rows_says_so() -> None:
    assert describe(_claims(), "stage_not_objective").startswith("no result")


def test_short_note_keeps_the_first_clause_and_cuts_long_ones() -> None:
    assert short_note("needs consecutive checkpoints; the model has one") == (
        "needs consecutive checkpoints"
    )
    long = "x" * 300
    assert len(short_note(long)) == 110 and short_note(long).endswith("…")
    assert short_note("not testable: alignment gate not measured") == "alignment gate not measured"


def test_gate_detail_names_each_targeted_gate_and_its_outcome() -> None:
    gates = pd.DataFrame([
        {"model": "o", "checkpoint": "final", "gate": "preference", "passed": False,
         "reason": "failed: preference accuracy 0.517 < 0.75; content probe 0.539 < 0.7: x"},
        {"model": "o", "checkpoint": "sft", "gate": "sft", "passed": True,
         "reason": "passed: SFT accuracy 0.422 vs majority 0.186: difference +0.235"},
        {"model": "o", "checkpoint": "dpo", "gate": "preference", "passed": False,
         "reason": "failed: content probe 0.593 < 0.7: preference 0.835 [0.808, 0.860]"},
    ])
    text = gate_detail(gates)
    assert text == (
        "o @sft sft gate: passed: SFT accuracy 0.422 vs majority 0.186; "
        "o @dpo preference gate: failed: content probe 0.593 < 0.7"
    )
    assert gate_detail(gates.iloc[:1]) == "no gate was measured"
