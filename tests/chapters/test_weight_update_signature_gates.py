"""Preconditions of paper 2's rows (issues 32, 34): a failed gate on a stage makes every row
that reads that stage "not testable"; a conjunction is judged on its weakest part."""

from __future__ import annotations

import pandas as pd

from lamina.evidence.declare import Gate
from lamina.weights.claims import CLAIMS
from lamina.weights.judging import judge_unit
from lamina.weights.measure import measure_unit
from lamina.weights.settings import SignatureSettings
from lamina.weights.summaries import QK
from tests.weights.known_answers import adam_table, adaptation_table, signature_deltas

S = SignatureSettings(k=8, n_bootstrap=300, targets=("lm", "sft", "dpo"))


class _Unit:
    name, total, untestable, aligned_base = "known", 0, {}, False


def _parts() -> dict[str, pd.DataFrame]:
    stages = signature_deltas(0, "stage")
    objectives = signature_deltas(1, "objective")
    edits = pd.DataFrame(columns=["stage", "direction", "direction_id", "token", "delta_logp", "kl"])
    return {"deltas": pd.concat([stages, objectives], ignore_index=True),
            "gradients": pd.DataFrame(columns=["kind", "objective", "layer"]),
            "write_gradients": pd.DataFrame(columns=["step", "layer"]),
            "adam": adam_table(0, 3), "edits": edits, "adaptation": adaptation_table(0, 1.0)}  # fmt: skip


def _rows(gates):
    return judge_unit("known", measure_unit(_parts(), S, _Unit()), gates).set_index("claim_id")


PASS = {"sft": (True, "passed"), "dpo": (True, "passed"), "adaptation": (True, ""),
        **{f"objective-{o}": (True, "") for o in ("lm", "sft", "dpo")}}  # fmt: skip


def test_planted_signature_reads_reproduced_on_every_stage_and_objective():
    rows = _rows(PASS)
    for cid in ("align-qk-sft", "align-qk-dpo", "every-objective-qk"):
        assert rows.loc[f"p2-signature-{cid}", "verdict"] == "reproduced", cid


def test_a_failed_dpo_gate_reaches_every_row_that_reads_dpo():
    # at 2a683dc, with @dpo's gate failed, every_objective_signature final->dpo still read
    # "reproduced" and stage_not_objective used the failed stage
    rows = _rows({**PASS, "dpo": (False, "content_probe 0.5")})
    reads_dpo = [c.id for c in CLAIMS if Gate("dpo") in c.requires]
    assert {"p2-signature-align-qk-dpo", "p2-signature-write-edit-dpo"} <= set(reads_dpo)
    for cid in reads_dpo:
        assert rows.loc[cid, "verdict"] == "not testable"
        assert "gate dpo failed: content_probe 0.5" in rows.loc[cid, "reason"]
    assert rows.loc["p2-signature-align-qk-sft", "verdict"] == "reproduced"


def test_a_failed_objective_gate_reaches_every_objective_row_and_the_stage_row():
    rows = _rows({**PASS, "objective-dpo": (False, "held-out dpo improvement -0.01")})
    for cid in ("every-objective-qk", "every-objective-writes", "stage-not-objective"):
        assert rows.loc[f"p2-signature-{cid}", "verdict"] == "not testable", cid


def test_an_unmeasured_gate_is_never_a_pass():
    rows = _rows({})
    assert rows.loc["p2-signature-align-qk-sft", "verdict"] == "not testable"
    assert "was not measured" in rows.loc["p2-signature-align-qk-sft", "reason"]


def test_one_objective_without_the_signature_breaks_every_objective():
    parts = _parts()
    d = parts["deltas"]
    null = (d["pair"] == "final→obj-dpo") & d["role"].isin(QK)
    d.loc[null, "enrichment"] = d.loc[null, "enrichment"] / d.loc[null, "enrichment"]  # = 1
    d.loc[null, "vs_weight"] = 1.0
    rows = judge_unit("known", measure_unit(parts, S, _Unit()), PASS).set_index("claim_id")
    row = rows.loc["p2-signature-every-objective-qk"]
    assert row["verdict"] != "reproduced" and "weakest: dpo" in row["reason"]


def test_no_row_with_p_at_or_above_alpha_reads_reproduced_or_partially():
    rows = _rows(PASS)
    tested = rows[rows["p"].notna()]
    bad = tested[(tested["p"] >= tested["alpha"]) & tested["verdict"].isin(["reproduced", "partially"])]
    assert bad.empty, bad[["verdict", "p"]]
