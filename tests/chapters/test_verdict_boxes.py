"""The organisms' gate lines (#25: the chapter pages' length). The weight-update chapter's verdict
boxes are tested in tests/chapters/test_weight_update_signature_notebook.py."""

from __future__ import annotations

import math

import pandas as pd

from lamina.chapters.organisms.narrative import gate_outcomes, stage_detail

NAN = math.nan


def test_stage_detail_names_each_gated_stage_its_outcome_and_its_gain() -> None:
    gates = pd.DataFrame([
        {"model": "o", "stage": "base", "gated": False, "passed": float("nan")},
        {"model": "o", "stage": "sft", "gated": True, "passed": False, "sft_accuracy": 0.42,
         "base_sft_accuracy": 0.0, "gain_over_base": 0.42, "gain_over_base_ci_low": 0.3,
         "gain_over_base_ci_high": 0.5, "best_policy_accuracy": 0.46, "gain_over_best_policy": -0.04,
         "gain_over_best_policy_ci_low": -0.09, "gain_over_best_policy_ci_high": 0.01},
        {"model": "o", "stage": "dpo", "gated": True, "passed": True, "content_probe": 0.7,
         "sft_content_probe": 0.6, "content_gain": 0.1, "content_gain_ci_low": 0.05,
         "content_gain_ci_high": 0.15, "base_content_probe": 0.65, "content_gain_over_base": 0.05,
         "content_gain_over_base_ci_low": 0.01, "content_gain_over_base_ci_high": 0.09,
         "preference_accuracy": 0.8, "sft_preference_accuracy": 0.7, "preference_gain": 0.1,
         "preference_gain_ci_low": 0.04, "preference_gain_ci_high": 0.16,
         "constant_style_baseline": 0.5},
    ])  # fmt: skip
    text = stage_detail(gates)
    assert text == ("`o`: @sft failed, held-out SFT accuracy 0.420 against the base's 0.000 (+0.420, "
                    "95% CI +0.300 to +0.500) and the best content-blind policy's 0.460 (-0.040, "
                    "95% CI -0.090 to +0.010) and @dpo passed, preference accuracy 0.800 against "
                    "@sft's 0.700 (+0.100, 95% CI +0.040 to +0.160) and 0.50 for a constant style; "
                    "content probe 0.700 against the base's 0.650 (+0.050, 95% CI +0.010 to +0.090) "
                    "and @sft's 0.600 (+0.100, 95% CI +0.050 to +0.150)")  # fmt: skip
    assert gate_outcomes(gates) == "`o` @sft failed, @dpo passed"
    two = pd.concat([gates, gates.assign(model="r", passed=[float("nan"), True, False])])
    assert gate_outcomes(two) == "`o` @sft failed, @dpo passed; `r` @sft passed, @dpo failed"
    assert stage_detail(gates.iloc[:1]) == gate_outcomes(gates.iloc[:1]) == "no gate was measured"
    # a record from before the preference gain (gates format 3): its @dpo reads its reason
    old = gates.drop(columns=["preference_gain"]).assign(reason=["", "", "rebuild"])
    assert stage_detail(old).endswith("@dpo passed (rebuild)")
    untested = pd.DataFrame([{"model": "u", "stage": "dpo", "gated": True, "passed": False,
                              "reason": "not testable: no held-out triples with a content probe"}])
    assert stage_detail(untested) == ("`u`: @dpo failed (not testable: no held-out triples with a "
                                      "content probe)")  # fmt: skip

