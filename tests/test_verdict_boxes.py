"""The compact verdict-box texts of the weight-update chapter and the organisms' gate line
(#25: the chapter pages' length): every row is still stated, with its verdict and value, and
a not-testable row with its reason."""

from __future__ import annotations

import math

import pandas as pd

from lamina.chapters.organisms.narrative import gate_outcomes, stage_detail
from lamina.chapters.weight_update_signature.figures import describe, short_note

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


def test_stage_detail_names_each_gated_stage_its_outcome_and_its_gain() -> None:
    gates = pd.DataFrame([
        {"model": "o", "stage": "base", "gated": False, "passed": float("nan")},
        {"model": "o", "stage": "sft", "gated": True, "passed": False, "sft_accuracy": 0.42,
         "base_sft_accuracy": 0.0, "gain_over_base": 0.42, "gain_over_base_ci_low": 0.3,
         "gain_over_base_ci_high": 0.5, "best_policy_accuracy": 0.46, "gain_over_best_policy": -0.04,
         "gain_over_best_policy_ci_low": -0.09, "gain_over_best_policy_ci_high": 0.01},
        {"model": "o", "stage": "dpo", "gated": True, "passed": True, "content_probe": 0.7,
         "sft_content_probe": 0.6, "content_gain": 0.1, "content_gain_ci_low": 0.05,
         "content_gain_ci_high": 0.15, "preference_accuracy": 0.8, "preference_accuracy_ci_low": 0.75,
         "preference_accuracy_ci_high": 0.85, "constant_style_baseline": 0.5},
    ])  # fmt: skip
    text = stage_detail(gates)
    assert text == ("`o`: @sft failed, held-out SFT accuracy 0.420 against the base's 0.000 (+0.420, "
                    "95% CI +0.300 to +0.500) and the best content-blind policy's 0.460 (-0.040, "
                    "95% CI -0.090 to +0.010) and @dpo passed, content probe 0.700 against @sft's "
                    "0.600 (+0.100, 95% CI +0.050 to +0.150) and preference accuracy 0.800 (95% CI "
                    "0.750–0.850) against 0.50 for a constant style")  # fmt: skip
    assert gate_outcomes(gates) == "`o` @sft failed, @dpo passed"
    two = pd.concat([gates, gates.assign(model="r", passed=[float("nan"), True, False])])
    assert gate_outcomes(two) == "`o` @sft failed, @dpo passed; `r` @sft passed, @dpo failed"
    assert stage_detail(gates.iloc[:1]) == gate_outcomes(gates.iloc[:1]) == "no gate was measured"
    untested = pd.DataFrame([{"model": "u", "stage": "dpo", "gated": True, "passed": False,
                              "reason": "not testable: no held-out triples with a content probe"}])
    assert stage_detail(untested) == ("`u`: @dpo failed (not testable: no held-out triples with a "
                                      "content probe)")  # fmt: skip

