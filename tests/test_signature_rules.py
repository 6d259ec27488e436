"""Paper 2's verdict rules on known answers (issue 21, item 4): the enrichment verdict against
W's own RSF, the write edit's random directions as units, the alignment gate, and the framing
row out of the counts. Synthetic deltas and synthetic edit tables only: no model.

The rules' new names are imported inside the tests, so each test can also be run against the
old rules (where it fails on its assertion, or on the missing name)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from lamina.chapters.weight_update_signature.config import SignatureConfig
from lamina.chapters.weight_update_signature.deltas import signature_from_deltas
from lamina.chapters.weight_update_signature.verdicts import signature
from lamina.weights import LinearMap, random_orthonormal

D, K, N_LAYERS = 64, 8, 12
STAGES = ("lm", "sft", "dpo")


def _stage_table(kind: str, seed: int = 0) -> pd.DataFrame:
    """A deltas table of a fake 12-layer model (d = 64) with one stage pair per target.

    kind: "planted" (Q/K ΔW inside the top-K eigenvectors of their input moment, write ΔW
    inside the prediction basis; W isotropic), "isotropic" (ΔW and W isotropic) or "inherits"
    (W and ΔW drawn alike, both concentrated in the top-K input subspace: RSF(ΔW) ≈ RSF(W))."""
    gen = torch.Generator().manual_seed(seed)
    basis = random_orthonormal(D, D, gen)  # eigenvectors, by decreasing eigenvalue
    moment = basis @ torch.diag(torch.linspace(10, 0.1, D, dtype=torch.float64)) @ basis.T
    pred = random_orthonormal(D, D, gen)
    tilt = torch.ones(D, dtype=torch.float64)
    tilt[:K] = 4.0  # energy of a "concentrated" matrix along the top-K input directions
    shaped = basis @ torch.diag(tilt) @ basis.T
    frames = []
    for target in STAGES:
        maps, deltas, weights, moments = [], {}, {}, {}
        for layer in range(N_LAYERS):
            for role, kind_ in (("q", "read"), ("k", "read"), ("attn_out", "write"),
                                ("mlp_out", "write")):  # fmt: skip
                m = LinearMap(layer, role, kind_, f"layers.{layer}.{role}")
                maps.append(m)
                g = torch.randn(D, D, generator=gen, dtype=torch.float64)
                w = torch.randn(D, D, generator=gen, dtype=torch.float64)
                if kind == "planted":
                    if kind_ == "read":
                        g = g @ basis[:, :K] @ basis[:, :K].T
                    else:
                        g = pred[:, :K] @ pred[:, :K].T @ g
                elif kind == "inherits" and kind_ == "read":
                    g, w = g @ shaped, w @ shaped
                deltas[m.key], weights[m.key] = g, w
                if kind_ == "read":
                    moments[m.key] = moment
        t = signature_from_deltas(deltas, maps, moments, pred, [K], weights=weights)
        frames.append(t.assign(moment="raw", family="stage", pair=f"final→{target}"))
    return pd.concat(frames, ignore_index=True)


CONFIG = SignatureConfig(k=K, n_bootstrap=500)


# -- the enrichment verdict against W's own RSF -------------------------------------------


def test_planted_enriched_update_reads_reproduced_beyond_w_itself():
    from lamina.chapters.weight_update_signature.claims import stage_claims
    from lamina.chapters.weight_update_signature.gate import AlignmentGate

    table = _stage_table("planted")
    qk, wr, vq, vw = signature(table, CONFIG, family="stage", pair="final→sft")
    assert qk["geo"] == pytest.approx(D / K) and vq == "reproduced"
    assert wr["geo"] == pytest.approx(D / K) and vw == "not reproduced"  # writes not random
    rows, _ = stage_claims("m", table, CONFIG, AlignmentGate(True, {"acc": 0.9}))
    align = [r for r in rows if r["claim_id"] == "P2.align_qk_enriched"]
    assert [r["verdict"] for r in align] == ["reproduced", "reproduced"]  # sft, dpo
    assert all(r["effect_size"] > D / K / 2 for r in align)  # RSF(ΔW)/RSF(W), W isotropic
    assert all("vs W itself" in r["note"] for r in align)


def test_isotropic_update_is_not_enriched():
    table = _stage_table("isotropic", seed=1)
    qk, wr, vq, vw = signature(table, CONFIG, family="stage", pair="final→sft")
    assert 0.8 < qk["geo"] < 1.25 and vq != "reproduced"
    assert vw == "reproduced"  # isotropic writes are close to random


@pytest.mark.parametrize("seed", range(4))
def test_update_with_the_rsf_of_w_itself_is_not_called_enriched(seed):
    """ΔW and W drawn alike, both concentrated in the input subspace: enriched against k/d
    (the old rule said "reproduced"), not against W itself."""
    table = _stage_table("inherits", seed=seed)
    qk, _, vq, _ = signature(table, CONFIG, family="stage", pair="final→sft")
    assert qk["geo"] > 2 and qk["ci_low"] > 1  # the k/d baseline alone calls it enriched
    assert vq == "not reproduced"


def test_missing_w_baseline_is_stated_in_the_note():
    from lamina.chapters.weight_update_signature.verdicts import beyond_weight_verdict

    iso = {"geo": 3.0, "ci_low": 2.0, "ci_high": 4.0, "p_greater": 1e-4}
    word, note = beyond_weight_verdict(iso, None)
    assert word == "reproduced" and "not measured" in note
    own = {"geo": 1.0, "ci_low": 0.9, "ci_high": 1.1, "p_greater": 0.5}
    assert beyond_weight_verdict(iso, own)[0] == "not reproduced"


# -- the alignment gate -----------------------------------------------------------------------


def test_failed_gate_turns_the_alignment_rows_not_testable_with_its_values():
    from lamina.chapters.weight_update_signature.claims import stage_claims
    from lamina.chapters.weight_update_signature.gate import AlignmentGate

    table = _stage_table("planted")
    failed = AlignmentGate(False, {"preference_accuracy": 0.515, "content_probe": 0.502},
                           "content probe at chance")  # fmt: skip
    passed = AlignmentGate(True, {"preference_accuracy": 0.9, "content_probe": 0.8})
    rows, _ = stage_claims("m", table, CONFIG, {"sft": passed, "dpo": failed})
    by = {(r["claim_id"], r["stage"]): r for r in rows}
    assert by[("P2.align_qk_enriched", "final→sft")]["verdict"] == "reproduced"
    for cid in ("P2.align_qk_enriched", "P2.align_write_random"):
        row = by[(cid, "final→dpo")]
        assert row["verdict"] == "not testable"
        assert row["note"].startswith("not testable: alignment did not take (")
        assert "content_probe 0.502" in row["note"] and "preference_accuracy 0.515" in row["note"]
        assert np.isnan(row["measured"]) and np.isnan(row["p"])
    # the objective rows compare objectives, not alignment: not gated
    assert by[("P2.every_objective_signature", "final→dpo")]["verdict"] != "not testable"


def test_unmeasured_gate_is_never_a_pass():
    from lamina.chapters.weight_update_signature.claims import stage_claims
    from lamina.chapters.weight_update_signature.gate import NOT_MEASURED, AlignmentGate

    table = _stage_table("planted")
    for gate in (None, {"sft": AlignmentGate(True, {"acc": 0.9})}):
        rows, _ = stage_claims("m", table, CONFIG, gate)
        dpo = [r for r in rows if r["stage"] == "final→dpo" and "align" in r["claim_id"]]
        assert len(dpo) == 2 and all(r["verdict"] == "not testable" for r in dpo)
        assert all(r["note"].startswith(NOT_MEASURED) for r in dpo)


# -- the write edit: random directions as units ---------------------------------------------


def _edits(n_dirs: int, n_tokens: int = 16, effect: float = 1.0, seed: int = 0) -> pd.DataFrame:
    """An edits table (:func:`~.causal.write_edit_effects`' columns) at stages final, sft,
    dpo: the unembedding edit raises its token by ``effect`` nats (± 0.1); each random
    direction moves every target token by one shared offset (N(0, 0.2)) plus token noise
    (N(0, 0.05)), as one edit of the model does."""
    rng = np.random.default_rng(seed)
    rows = []
    for stage in ("final", "sft", "dpo"):
        for t in range(n_tokens):
            rows.append({"stage": stage, "direction": "unembedding", "direction_id": t,
                         "token": t, "delta_logp": effect + 0.1 * rng.standard_normal(),
                         "kl": 0.01})  # fmt: skip
        for i in range(n_dirs):
            shift = 0.2 * rng.standard_normal()
            for t in range(n_tokens):
                rows.append({"stage": stage, "direction": "random", "direction_id": i,
                             "token": t, "delta_logp": shift + 0.05 * rng.standard_normal(),
                             "kl": 0.01})  # fmt: skip
    return pd.DataFrame(rows)


def _adaptation() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for group, gain in (("qk", 0.6), ("all", 1.0)):
        for i in range(16):
            before = 3.0 + rng.standard_normal() * 0.1
            rows.append({"group": group, "item": i, "loss_before": before,
                         "loss_after": before - gain + 0.05 * rng.standard_normal(),
                         "acc_before": 0.1, "acc_after": 0.3, "n_params": 10})  # fmt: skip
    return pd.DataFrame(rows)


def _edit_rows(n_dirs: int, gate) -> list[dict]:
    from lamina.chapters.weight_update_signature.causal_claims import causal_claims

    parts = {"edits": _edits(n_dirs), "adaptation": _adaptation()}
    config = SignatureConfig(targets=("sft", "dpo"), n_bootstrap=200)
    rows = causal_claims("m", parts, config, gate=gate)
    return [r for r in rows if r["claim_id"] == "P2.write_edit_after_alignment"]


def test_p_value_with_99_directions_reaches_001():
    from lamina.chapters.weight_update_signature.causal_claims import direction_p_value
    from lamina.chapters.weight_update_signature.gate import AlignmentGate

    assert direction_p_value(1.0, np.zeros(99)) == pytest.approx(0.01)
    assert direction_p_value(0.0, np.zeros(99)) == pytest.approx(1.0)  # ties count against
    assert direction_p_value(0.5, np.r_[np.zeros(94), np.ones(5)]) == pytest.approx(0.06)
    rows = _edit_rows(99, AlignmentGate(True, {"acc": 0.9}))
    assert [r["p"] for r in rows] == pytest.approx([0.01, 0.01])
    assert [r["verdict"] for r in rows] == ["reproduced", "reproduced"]
    assert all("99 random directions" in r["note"] for r in rows)


def test_two_random_directions_cannot_carry_a_verdict():
    """Scored on 16 tokens each, 2 random directions are 2 units, not 32: the smallest p is
    1/3 (the old rule's Mann-Whitney test over direction × token gave p ~ 1e-9)."""
    from lamina.chapters.weight_update_signature.gate import AlignmentGate

    rows = _edit_rows(2, AlignmentGate(True, {"acc": 0.9}))
    assert [r["p"] for r in rows] == pytest.approx([1 / 3, 1 / 3])
    assert all(r["verdict"] == "not testable" for r in rows)
    assert all("smallest attainable p 0.333" in r["note"] for r in rows)


def test_write_edit_needs_the_aligned_checkpoint_to_pass_its_gate():
    from lamina.chapters.weight_update_signature.gate import AlignmentGate

    failed = AlignmentGate(False, {"sft_accuracy": 0.25, "majority": 0.25})
    rows = _edit_rows(99, {"sft": AlignmentGate(True, {"acc": 0.9}), "dpo": failed})
    assert [r["verdict"] for r in rows] == ["reproduced", "not testable"]
    assert "alignment did not take (majority 0.25, sft_accuracy 0.25)" in rows[1]["note"]
    assert all(r["verdict"] == "not testable" for r in _edit_rows(99, None))


# -- the framing row and the conclusion -----------------------------------------------------


def test_shared_frame_is_framing_not_a_counted_claim():
    from lamina.chapters.weight_update_signature.verdicts import CLAIMS, FRAMING

    assert "shared_frame" in FRAMING and "shared_frame" not in CLAIMS


def test_conclusion_needs_a_testable_write_edit():
    from lamina.chapters.weight_update_signature.claims import _where_not_which
    from lamina.chapters.weight_update_signature.verdicts import claim_row

    single = claim_row("single_group_effective", "m", "qk", "effective", 0.9, word="reproduced")
    edit = claim_row("write_edit_after_alignment", "m", "@sft", "x", float("nan"),
                     note="not testable: alignment gate not measured")  # fmt: skip
    row = _where_not_which("m", [edit, single])
    assert row["verdict"] == "not testable" and "write_edit_after_alignment" in row["note"]
    ok = claim_row("write_edit_after_alignment", "m", "@sft", "x", 1.0, word="reproduced")
    assert _where_not_which("m", [ok, single])["verdict"] == "reproduced"


def test_edit_effect_equals_the_log_softmax_definition():
    """The edit's score without forming the edited log-softmax agrees with the definition:
    mean_t [log p_edit - log p] and mean_t KL(p || p_edit), on a tiny random Llama."""
    import torch.nn.functional as F

    from lamina.chapters.weight_update_signature.causal import (
        _edit_effect,
        _reference,
        mean_write_inputs,
    )
    from lamina.weights.edits import rank1_write_edit

    from .conftest import tiny_model

    model = tiny_model("llama").eval()
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (3, 10), generator=gen)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0  # padding is left out
    inputs, lp0 = mean_write_inputs(model, ids, mask, log_probs=True)
    direction = torch.randn(model.config.hidden_size, generator=gen)
    dlp, kl = _edit_effect(model, inputs, _reference(lp0, mask), direction, 0.5, ids, mask)
    with rank1_write_edit(model, direction, 0.5, input_direction=inputs), torch.no_grad():
        lp1 = F.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), -1)
    valid = mask.bool()
    torch.testing.assert_close(dlp, (lp1 - lp0)[valid].mean(0), atol=1e-5, rtol=1e-5)
    expected = float((lp0.exp() * (lp0 - lp1)).sum(-1)[valid].mean())
    assert kl == pytest.approx(expected, abs=1e-6) and kl > 0


def test_a_stage_without_a_null_gets_a_gated_row_not_a_silent_gap():
    """A failed stage may skip the null (``write_edit_effects(only=passed(...))``): its row
    still appears, not testable, with the gate's values."""
    from lamina.chapters.weight_update_signature.causal_claims import causal_claims
    from lamina.chapters.weight_update_signature.gate import AlignmentGate, passed

    gates = {"sft": AlignmentGate(True, {"acc": 0.9}), "dpo": AlignmentGate(False, {"acc": 0.5})}
    assert passed(gates, ["final", "sft", "dpo"]) == ["sft"]
    e = _edits(99)
    e = e[~((e["stage"] == "dpo") & (e["direction"] == "random"))]
    config = SignatureConfig(targets=("sft", "dpo"), n_bootstrap=200)
    rows = causal_claims("m", {"edits": e, "adaptation": _adaptation()}, config, gate=gates)
    edit = [r for r in rows if r["claim_id"] == "P2.write_edit_after_alignment"]
    assert [r["verdict"] for r in edit] == ["reproduced", "not testable"]
    assert "alignment did not take (acc 0.5)" in edit[1]["note"]
    assert "no random direction scored" in edit[1]["note"]


def test_the_null_is_scored_only_where_a_verdict_uses_it():
    from types import SimpleNamespace

    from lamina.chapters.weight_update_signature.causal import null_stages

    config = SignatureConfig(targets=("lm", "sft", "dpo"))
    assert null_stages(SimpleNamespace(), config) == ["sft", "dpo"]  # an organism's base: none
    released = SimpleNamespace(aligned_base=True)
    assert null_stages(released, SignatureConfig(base="x-instruct", targets=("lm", "sft"))) == [
        "x-instruct",
        "sft",
    ]
    assert null_stages(SimpleNamespace(), SignatureConfig(targets=("lm",))) == ["lm"]
