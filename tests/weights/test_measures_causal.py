"""Single-group adaptation: "remains effective" needs the ratio's CI above the threshold."""

from __future__ import annotations

from lamina.weights.judging import judge_unit
from lamina.weights.measures_causal import adaptation_gate, single_group
from lamina.weights.settings import SignatureSettings
from tests.weights.known_answers import adaptation_table

ID = "p2-signature-single-group"
S = SignatureSettings(n_bootstrap=500)


def _row(a):
    gates = {"adaptation": adaptation_gate(a, S.n_bootstrap, S.seed)}
    return judge_unit("known", {ID: single_group(a, S)}, gates).set_index("claim_id").loc[ID]


def test_a_ratio_whose_ci_reaches_below_half_is_not_reproduced():
    # at 2a683dc the same table read "reproduced" for every group (CI lows 0.39-0.51)
    row = _row(adaptation_table(seed=0, ratio=0.6))
    assert row["ci_low"] < 0.5
    assert row["verdict"] != "reproduced"


def test_every_group_as_effective_as_full_fine_tuning_is_reproduced():
    row = _row(adaptation_table(seed=0, ratio=1.0, noise=0.3))
    assert row["verdict"] == "reproduced" and row["ci_low"] > 0.5


def test_one_weak_group_decides_the_conjunction():
    a = adaptation_table(seed=1, ratio=1.0, noise=0.3)
    weak = a["group"] == "mlp_out"
    a.loc[weak, "loss_after"] = 2.0 - 0.2 * (2.0 - a.loc[weak, "loss_after"])
    m = single_group(a, S)
    assert m["detail"].startswith("weakest: mlp_out") and m["estimate"] < 0.3
    assert _row(a)["verdict"] != "reproduced"


def test_full_fine_tuning_that_did_not_help_fails_the_gate_and_the_row_is_not_testable():
    a = adaptation_table(seed=2, ratio=1.0)
    a["loss_after"] = a["loss_before"] + 0.01  # nothing learnt by anyone
    row = _row(a)
    assert row["verdict"] == "not testable" and "gate adaptation failed" in row["reason"]
