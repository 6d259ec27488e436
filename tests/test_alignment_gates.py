"""Instruction-following alignment data and the behavioural gates (planted tables, tiny models)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch

from lamina.sources.organisms import instructions as ins
from lamina.sources.organisms.curriculum import generate_curriculum
from lamina.sources.organisms.gates import (
    GateResult,
    majority_targets,
    matrix_group,
    preference_gate,
    preference_table,
    sft_gate,
    sft_table,
    weight_change,
)  # fmt: skip


@pytest.fixture(scope="module")
def data() -> ins.AlignmentData:
    d = generate_curriculum(seed=0, n_docs=10).alignment
    assert d is not None
    return d


def test_no_instruction_content_pair_is_in_training_and_held_out(data: ins.AlignmentData) -> None:
    train = {(x.instruction, x.content.question) for x in data.train}
    held = {(x.instruction, x.content.question) for x in data.heldout}
    assert train and held and not train & held
    assert {t.item.prompt for t in data.dpo_train}.isdisjoint({t.item.prompt for t in data.dpo_heldout})
    # some contents are held out under every instruction, and never trained at all
    trained_q = {x.content.question for x in data.train}
    assert data.heldout_contents and not data.heldout_contents & trained_q
    # the other held-out items pair a trained content with the instruction it never trained with
    combos = [x for x in data.heldout if x.content.question not in data.heldout_contents]
    assert combos and all(x.content.question in trained_q for x in combos)


def test_curriculum_tuples_are_the_alignment_items(data: ins.AlignmentData) -> None:
    cur = generate_curriculum(seed=0, n_docs=10)
    assert cur.sft == [(x.prompt, x.target) for x in data.train]
    assert cur.dpo_eval == [t.as_tuple() for t in data.dpo_heldout]
    pre = {q for q, _ in cur.pretrain_qa}
    assert pre.isdisjoint({x.content.question for x in data.train + data.heldout})


@pytest.mark.parametrize("style", ins.STYLES)
def test_a_constant_style_policy_scores_one_half_on_held_out_triples(
    data: ins.AlignmentData, style: str
) -> None:
    assert ins.constant_style_accuracy(data.dpo_heldout, style) == 0.5
    # and on the content probe: both responses share the style, so the policy ties
    content = [t for t in data.dpo_heldout if t.kind == "content"]
    assert content and ins.constant_style_accuracy(content, style) == 0.5


def test_every_kind_is_in_training_and_held_out(data: ins.AlignmentData) -> None:
    for triples in (data.dpo_train, data.dpo_heldout):
        assert {t.kind for t in triples} == set(ins.KINDS)
    for t in data.dpo_heldout:
        assert t.chosen != t.rejected
        assert t.chosen == t.item.target  # chosen is always the required response


def test_responses_depend_on_the_instruction_and_the_content() -> None:
    c = ins.Content("analogy", "What is the capital of Peru?", "Lima", "Oslo")
    assert ins.Item("short", c).target == "Lima"
    assert ins.Item("sentence", c).target == "The answer is Lima."
    p = ins.Content("transitive", "Hana is older than Ben. Who is the oldest?", "Hana", "Ben")
    assert p.restricted and ins.Item("short", p).target == ins.REFUSAL
    with pytest.raises(ValueError, match="style"):
        ins.render("x", "shout")


def test_the_split_is_deterministic_and_seeded(data: ins.AlignmentData) -> None:
    again = generate_curriculum(seed=0, n_docs=10).alignment
    other = generate_curriculum(seed=1, n_docs=10).alignment
    assert again == data and other is not None and other.heldout != data.heldout


def _planted(rng: np.random.Generator, p_style: float, p_content: float, n: int = 400) -> pd.DataFrame:
    """A preference table in which the chosen wins with the given probabilities per kind."""
    rows = []
    for k in range(n):
        kind = ("style", "content", "refuse", "answer")[k % 4]
        instr = ("short", "sentence")[(k // 4) % 2]
        styles = {"style": (instr, "sentence" if instr == "short" else "short"),
                  "content": (instr, instr), "refuse": ("refusal", instr),
                  "answer": (instr, "refusal")}[kind]  # fmt: skip
        win = rng.random() < (p_content if kind == "content" else p_style)
        rows.append({"kind": kind, "instruction": instr, "chosen_style": styles[0],
                     "rejected_style": styles[1], "whole_content": k % 3 == 0,
                     "logp_chosen": -1.0 if win else -2.0, "logp_rejected": -2.0 if win else -1.0})  # fmt: skip
    return pd.DataFrame(rows)


def test_preference_gate_passes_an_aligned_table_and_fails_a_style_only_one() -> None:
    rng = np.random.default_rng(0)
    good = preference_gate(_planted(rng, 0.95, 0.85))
    assert good.passed, good.reason
    assert good.values["constant_style_baseline"] == 0.5
    assert good.values["content_ci_low"] < 0.85 < good.values["content_ci_high"]
    # perfect on style, chance on content: the content-blind DPO
    blind = preference_gate(_planted(rng, 1.0, 0.5))
    assert not blind.passed and "content probe" in blind.reason
    weak = preference_gate(_planted(rng, 0.6, 0.9))
    assert not weak.passed and "preference accuracy" in weak.reason


def test_preference_gate_counts_ties_as_one_half_and_reports_not_testable() -> None:
    t = _planted(np.random.default_rng(1), 1.0, 1.0)
    t["logp_rejected"] = t["logp_chosen"]
    g = preference_gate(t)
    assert g.values["preference_accuracy"] == 0.5 and not g.passed
    empty = preference_gate(t.iloc[0:0])
    assert not empty.passed and "not testable" in empty.reason


def test_sft_gate_needs_the_difference_ci_to_exclude_zero() -> None:
    rng = np.random.default_rng(2)
    n = 300
    base = (rng.random(n) < 0.3).astype(float)
    better = pd.DataFrame({"hit": np.maximum(base, rng.random(n) < 0.4), "majority_hit": base})
    same = pd.DataFrame({"hit": base[rng.permutation(n)], "majority_hit": base})
    assert sft_gate(better).passed
    g = sft_gate(same)
    assert not g.passed and g.values["difference_ci_low"] < 0 < g.values["difference_ci_high"]


def test_gate_result_converts_to_a_consumer_type_with_the_same_field_names() -> None:
    @dataclasses.dataclass(frozen=True)
    class AlignmentGate:
        passed: bool
        values: dict[str, float]
        reason: str

    g = GateResult(True, {"a": 1.0}, "ok")
    assert g.to(AlignmentGate) == AlignmentGate(**dataclasses.asdict(g)) == AlignmentGate(True, {"a": 1.0}, "ok")


def test_majority_targets_take_the_most_common_response_per_instruction(
    data: ins.AlignmentData,
) -> None:
    m = majority_targets(data.train)
    assert set(m) == set(ins.INSTRUCTIONS)
    for i, target in m.items():
        n = sum(x.target == target for x in data.train if x.instruction == i)
        assert all(sum(x.target == y.target for x in data.train if x.instruction == i) <= n
                   for y in data.train if y.instruction == i)  # fmt: skip


@pytest.mark.parametrize(("name", "group"), [
    ("model.layers.3.self_attn.q_proj.weight", "q"), ("model.layers.0.mlp.gate_proj.weight", "gate"),
    ("transformer.h.1.attn.c_proj.weight", "o"), ("transformer.h.1.mlp.c_proj.weight", "down"),
    ("transformer.h.0.attn.c_attn.weight", "qkv"), ("model.embed_tokens.weight", "embed"),
    ("model.layers.2.input_layernorm.weight", "norm")])  # fmt: skip
def test_matrix_groups(name: str, group: str) -> None:
    assert matrix_group(name) == group


def test_weight_change_is_relative_frobenius_per_group() -> None:
    base = torch.nn.Sequential()
    base.add_module("q_proj", torch.nn.Linear(4, 4, bias=False))
    aligned = torch.nn.Sequential()
    aligned.add_module("q_proj", torch.nn.Linear(4, 4, bias=False))
    with torch.no_grad():
        aligned.q_proj.weight.copy_(base.q_proj.weight * 1.1)
    assert weight_change(base, aligned) == pytest.approx({"q": 0.1})
    assert weight_change(base, base) == {"q": 0.0}


def test_tables_from_a_tiny_random_model(data: ins.AlignmentData) -> None:
    from lamina.sources.organisms.configs import ORGANISMS
    from lamina.sources.organisms.tokenizer import train_tokenizer
    from lamina.sources.organisms.train import make_model

    texts = [f"Question: {x.prompt}\nAnswer: {x.target}" for x in data.train[:200]]
    tok = train_tokenizer(texts, 384)
    model = make_model(ORGANISMS["organism-llama-micro"].replace(context=96), tok)
    triples = data.dpo_heldout[:40]
    pt = preference_table(model, tok, triples, 96, data.heldout_contents)
    assert len(pt) == 40 and (pt[["logp_chosen", "logp_rejected"]].to_numpy() < 0).all()
    st = sft_table(model, tok, data.heldout[:30], majority_targets(data.train), 96)
    assert len(st) == 30 and set(st["hit"]) <= {0.0, 1.0}


def test_align_pretrained_on_a_tiny_random_model_trains_all_but_the_tied_embedding(
    data: ins.AlignmentData,
) -> None:
    from lamina.sources.organisms.configs import ORGANISMS
    from lamina.sources.organisms.pretrained import PretrainedAlignConfig, align_pretrained
    from lamina.sources.organisms.tokenizer import train_tokenizer
    from lamina.sources.organisms.train import make_model

    small = dataclasses.replace(data, train=data.train[:24], dpo_train=data.dpo_train[:24])
    texts = [f"Question: {x.prompt}\nAnswer: {x.target}" for x in data.train[:200]]
    tok = train_tokenizer(texts, 384)
    model = make_model(ORGANISMS["organism-llama-micro"].replace(context=96), tok)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    cfg = PretrainedAlignConfig(sft_steps=12, dpo_steps=6, batch_size=4, sft_lr=3e-3, dpo_lr=1e-3,
                                max_length=96, warmup_steps=1)  # fmt: skip
    out = align_pretrained(model, tok, cfg, small)
    for n, p in model.named_parameters():  # the input model is left unchanged
        assert torch.equal(p, before[n]), n
    emb = "model.embed_tokens.weight"
    assert emb not in out["trainable"]
    assert torch.equal(dict(out["dpo"].named_parameters())[emb], before[emb])
    changed = weight_change(model, out["sft"])
    assert changed["q"] > 0 and changed["embed"] == 0
    sft_curve = [r["train_loss"] for r in out["curve"] if r["stage"] == "sft"]
    assert np.mean(sft_curve[-4:]) < np.mean(sft_curve[:4])
    dpo_curve = [r["train_loss"] for r in out["curve"] if r["stage"] == "dpo"]
    assert dpo_curve[0] == pytest.approx(np.log(2), abs=1e-4)  # policy = reference at step 1
    assert PretrainedAlignConfig().config_hash != cfg.config_hash


def test_build_aligned_writes_once_per_config_hash_with_gates(
    data: ins.AlignmentData, tmp_path
) -> None:
    import json

    from lamina.sources.organisms.configs import ORGANISMS
    from lamina.sources.organisms.pretrained import PretrainedAlignConfig, build_aligned
    from lamina.sources.organisms.tokenizer import train_tokenizer
    from lamina.sources.organisms.train import make_model

    texts = [f"Question: {x.prompt}\nAnswer: {x.target}" for x in data.train[:200]]
    tok = train_tokenizer(texts, 384)
    model = make_model(ORGANISMS["organism-llama-micro"].replace(context=96), tok)
    src = tmp_path / "tiny"
    model.save_pretrained(src)
    tok.save_pretrained(src)
    cfg = PretrainedAlignConfig(sft_steps=2, dpo_steps=2, batch_size=2, max_length=96, warmup_steps=1)
    folder = build_aligned(str(src), cfg, tmp_path / "aligned", log=lambda s: None)
    assert folder.name.endswith(cfg.config_hash)
    gates = json.loads((folder / "gates.json").read_text())
    assert set(gates) == {"sft", "dpo"} and set(gates["dpo"]) == {"preference", "sft"}
    assert gates["dpo"]["preference"]["values"]["constant_style_baseline"] == 0.5
    stamp = (folder / "build.json").stat().st_mtime_ns
    assert build_aligned(str(src), cfg, tmp_path / "aligned") == folder  # cached: not rebuilt
    assert (folder / "build.json").stat().st_mtime_ns == stamp
    assert not list((tmp_path / "aligned").glob(".tmp-*"))
