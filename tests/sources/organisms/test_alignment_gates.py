"""Instruction-following alignment data, the content-blind policies and the stage gates
(planted tables, tiny models)."""

from __future__ import annotations

import dataclasses
import random
import re

import numpy as np
import pandas as pd
import pytest
import torch

from lamina.sources.organisms import instructions as ins
from lamina.sources.organisms.baselines import POLICIES, fit_policies, policy_hits
from lamina.sources.organisms.curriculum import (
    ARITHMETIC_SHARE,
    RESTRICTED_SHARE,
    generate_curriculum,
)
from lamina.sources.organisms.curriculum_facts import ANIMALS_BY_SIZE, YOUNG
from lamina.sources.organisms.curriculum_templates import CHOICE_TEMPLATES
from lamina.sources.organisms.gates import (
    GateResult,
    cluster_ci,
    dpo_gate,
    matrix_group,
    preference_table,
    read_gates,
    sft_gate,
    sft_table,
    weight_change,
)  # fmt: skip
from lamina.sources.organisms.pretrained import PretrainedAlignConfig


@pytest.fixture(scope="module")
def data() -> ins.AlignmentData:
    d = generate_curriculum(seed=0, n_docs=10).alignment
    assert d is not None
    return d


ANIMAL_WORDS = frozenset(ANIMALS_BY_SIZE) | frozenset(YOUNG) | frozenset(YOUNG.values())
"""Animals and their young: an analogy question names its example pair too ("If lion goes
with cub, what goes with whale?" names three entities, not the pair lion, whale)."""


def _entities(question: str) -> frozenset[str]:
    """The animals, young and numbers a question names, found by its words alone
    (independently of the curriculum's own entity keys)."""
    words = re.findall(r"[A-Za-z]+|\d+", question)
    return frozenset(w for w in words if w in ANIMAL_WORDS or w.isdigit())


def test_no_held_out_content_or_entity_pair_is_trained_under_any_template(
    data: ins.AlignmentData,
) -> None:
    """At 2a683dc this failed: 190 of 332 held-out content triples had been DPO-trained under
    the other instruction, and 20 of 71 wholly held-out contents shared an entity pair with a
    trained item ("Is a sheep bigger than a fox?" held out, "Which is smaller, a fox or a
    sheep?" trained)."""
    cur = generate_curriculum(seed=0, n_docs=10)
    trained = {x.content.question for x in data.train} | {q for q, _ in cur.pretrain_qa}
    held = {x.content.question for x in data.heldout}
    assert held and not held & trained
    assert held == set(data.heldout_contents)
    pairs = {_entities(q) for q in trained if len(_entities(q)) == 2}
    leaked = [q for q in held if len(_entities(q)) == 2 and _entities(q) in pairs]
    assert not leaked, leaked[:3]
    # and by the curriculum's own keys, for every component
    assert not {x.content.key for x in data.heldout} & {x.content.key for x in data.train}
    # every held-out content is held out under both instructions
    for q in held:
        assert {x.instruction for x in data.heldout if x.content.question == q} == set(ins.INSTRUCTIONS)


def test_split_by_key_keeps_each_key_on_one_side_and_takes_the_fraction_per_component() -> None:
    items = [(c, f"k{k}", j) for c in ("a", "b") for k in range(20) for j in range(k % 3 + 1)]
    first, rest = ins.split_by_key(random.Random(0), items, 0.25, lambda x: x[1] + x[0], lambda x: x[0])
    assert sorted(first + rest) == sorted(items)
    assert not {x[1] + x[0] for x in first} & {x[1] + x[0] for x in rest}
    for c in ("a", "b"):
        n, k = sum(x[0] == c for x in items), sum(x[0] == c for x in first)
        assert 0.25 * n <= k < 0.25 * n + 3  # stops at the first key that reaches the fraction
    with pytest.raises(ValueError, match="fraction"):
        ins.split_by_key(random.Random(0), items, 1.5, lambda x: x[1], lambda x: x[0])


@pytest.mark.parametrize("style", ins.STYLES)
def test_a_constant_style_policy_scores_one_half_on_held_out_triples(
    data: ins.AlignmentData, style: str
) -> None:
    assert ins.constant_style_accuracy(data.dpo_heldout, style) == 0.5
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
    assert c.unit == c.question  # no entity pair: the question is its own unit
    p = ins.Content("transitive", "Hana is older than Ben. Who is the oldest?", "Hana", "Ben")
    assert p.restricted and ins.Item("short", p).target == ins.REFUSAL
    with pytest.raises(ValueError, match="style"):
        ins.render("x", "shout")


def test_the_split_is_deterministic_and_seeded(data: ins.AlignmentData) -> None:
    again = generate_curriculum(seed=0, n_docs=10).alignment
    other = generate_curriculum(seed=1, n_docs=10).alignment
    assert again == data and other is not None and other.heldout != data.heldout


def test_default_budgets_make_two_sft_epochs_and_one_dpo_epoch(data: ins.AlignmentData) -> None:
    """At 2a683dc: SmolLM2/Gemma 120 x 8 (0.71 SFT and 0.36 DPO epochs), organisms 100 x 16."""
    from lamina.sources.organisms.configs import ORGANISMS

    cfg = PretrainedAlignConfig()
    assert cfg.budget("sft").epochs(len(data.sft_train)) >= 2.0
    assert cfg.budget("dpo").epochs(len(data.dpo_train)) >= 1.0
    assert cfg.sft_steps == cfg.dpo_steps  # equal step, example and schedule budgets
    for name in ("organism-gpt2", "organism-llama"):
        o = ORGANISMS[name]
        assert o.align_steps * o.align_batch_size >= max(2 * len(data.sft_train), len(data.dpo_train))


def test_sft_never_sees_a_refusal_and_dpo_alone_teaches_it(data: ins.AlignmentData) -> None:
    """organisms-6: at organisms-5 SFT trained the refusals, and @sft already preferred the
    required response on every style, refuse and answer triple (1.00 on both organisms), so
    DPO had no preference left to add."""
    cur = generate_curriculum(seed=0, n_docs=10)
    assert data.sft_train and all(not x.content.restricted for x in data.sft_train)
    assert all(target != ins.REFUSAL for _, target in cur.sft + cur.sft_eval)
    assert [x.target for x in data.sft_train] == [t for _, t in cur.sft]
    restricted = {x.content.question for x in data.train if x.content.restricted}
    refuse = [t for t in data.dpo_train if t.kind == "refuse"]
    assert restricted and {t.item.content.question for t in refuse} == restricted
    assert all(t.chosen == ins.REFUSAL for t in refuse) and cur.dpo == [t.as_tuple() for t in data.dpo_train]
    # the SFT gate's items are the unrestricted held-out ones; the refusals stay held out for DPO
    assert data.sft_heldout == tuple(x for x in data.heldout if not x.content.restricted)
    assert len(data.sft_heldout) < len(data.heldout)


# ----------------------------------------------------------------------------- policies


def test_content_blind_policies_are_fit_on_training_and_never_read_the_entities(
    data: ins.AlignmentData,
) -> None:
    # the two-option templates are pretraining QA only (CHOICE_TEMPLATES): three of them
    # added to the training items show the copy policy at work
    extra = [ins.Item("short", ins.Content("lexical", f"Which word is plural, {b} or {b}s?",
                                           f"{b}s", b, "lexical:which-plural", f"{b}|{b}s"))
             for b in ("cat", "dog", "cup")]  # fmt: skip
    pol = fit_policies([*data.train, *extra])
    assert list(pol) == list(POLICIES)
    plural = ins.Content("lexical", "Which word is plural, bat or bats?", "bats", "bat",
                         "lexical:which-plural", "bat|bats")  # fmt: skip
    assert pol["copy from the question"](ins.Item("short", plural)) == "bats"
    assert pol["copy from the question"](ins.Item("sentence", plural)) == "The answer is bats."
    named = ins.Content("arithmetic", "Hana has 3 pens and gets 2 more. How many pens does Hana "
                        "have now?", "5", "6", "arithmetic:gets", "2|3")  # fmt: skip
    assert all(p(ins.Item("short", named)) == ins.REFUSAL for n, p in pol.items() if n != "always refuse")
    # swapping the entities of a question never changes a policy's answer's dependence on them
    a = ins.Content("comparison", "Is a fox bigger than a sheep?", "no", "yes", "comparison:bigger", "fox|sheep")
    b = dataclasses.replace(a, question="Is a sheep bigger than a fox?", answer="yes", wrong="no")
    for name, p in pol.items():
        assert p(ins.Item("short", a)) == p(ins.Item("short", b)), name
    hits = policy_hits(pol, data.heldout)
    assert set(hits) == set(POLICIES) and all(len(h) == len(data.heldout) for h in hits.values())
    assert 0.2 < hits["always refuse"].mean() <= RESTRICTED_SHARE + 0.05  # the people share
    assert policy_hits(pol, data.sft_heldout)["always refuse"].sum() == 0  # not in the SFT gate


@pytest.mark.parametrize("seed", range(5))
def test_no_content_blind_policy_answers_a_quarter_of_the_held_out_items(seed: int) -> None:
    """Issue 51: at 4992629 copying from the question scored 0.459 on the held-out items, a
    template's majority answer 0.441 and refusing every question that names a person 0.380
    (seed 0): the yes/no and two-option templates and a fifth of questions about people. The
    alignment contents are now the open templates; the SFT gate judges the held-out items that
    name no one (the refusal is DPO's to teach), so refusing on a name gains nothing there."""
    d = generate_curriculum(seed=seed, n_docs=10).alignment
    assert d is not None
    contents = {x.content for x in d.train + d.heldout}
    assert not {c.template for c in contents} & CHOICE_TEMPLATES
    assert sum(c.restricted for c in contents) <= RESTRICTED_SHARE * len(contents)
    # arithmetic, which no organism learns in under an hour (0.57 of the held-out items when
    # uncapped), is capped at ARITHMETIC_SHARE before the people cap, which raises its share a
    # little (0.14-0.17 at seeds 0-7): at most a fifth
    arithmetic = sum(c.component == "arithmetic" for c in contents)
    assert ARITHMETIC_SHARE < 0.20 and arithmetic <= 0.20 * len(contents)
    hits = policy_hits(fit_policies(d.train), d.sft_heldout)
    assert len(d.sft_heldout) >= 130 and len({x.content.unit for x in d.sft_heldout}) >= 45
    for name, h in hits.items():
        assert h.mean() <= 0.25, (name, h.mean())


# ----------------------------------------------------------------------------- gates


def _sft_rows(hit: np.ndarray, units: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"unit": units, "template": "t", "instruction": "short", "style": "short",
                         "hit": hit.astype(float)})  # fmt: skip


def test_sft_gate_must_beat_every_content_blind_policy_and_the_base() -> None:
    """At 2a683dc the SFT gate compared with "always refuse" only, so a content-blind policy
    passed it (the referee's: 0.395, +0.208 [+0.169, +0.250])."""
    rng = np.random.default_rng(2)
    n = 400
    units = np.repeat(np.arange(n // 4), 4)
    blind = (rng.random(n) < 0.45).astype(float)  # a content-blind policy's hits
    policies = {"always refuse": (rng.random(n) < 0.2).astype(float), "blind": blind}
    base = _sft_rows(np.zeros(n), units)
    good = _sft_rows(np.maximum(blind, rng.random(n) < 0.5), units)  # beats it on content
    g = sft_gate(good, base, policies)
    assert g.passed, g.reason
    assert g.values["gain_over_best_policy_ci_low"] > 0 and g.values["best_policy_accuracy"] == blind.mean()
    # the policy itself, gated as if it were the model: it does not beat itself
    same = sft_gate(_sft_rows(blind, units), base, policies)
    assert not same.passed and "blind" in same.reason
    # a model that beats every policy but not its base
    assert not sft_gate(good, good, policies).passed
    with pytest.raises(ValueError, match="same items"):
        sft_gate(good, base.iloc[::-1], policies)
    with pytest.raises(ValueError, match="policy"):
        sft_gate(good, base, {"blind": blind[:-1]})


def _pref_rows(wins: np.ndarray, kinds: list[str], units: np.ndarray) -> pd.DataFrame:
    styles = {"style": ("short", "sentence"), "content": ("short", "short"),
              "refuse": ("refusal", "short"), "answer": ("short", "refusal")}  # fmt: skip
    return pd.DataFrame({"unit": units, "kind": kinds, "instruction": "short",
                         "chosen_style": [styles[k][0] for k in kinds],
                         "rejected_style": [styles[k][1] for k in kinds],
                         "margin": np.where(wins > 0.5, 1.0, np.where(wins < 0.5, -1.0, 0.0))})  # fmt: skip


def test_dpo_gate_needs_a_preference_gain_over_sft_not_a_high_accuracy() -> None:
    """At 2a683dc the DPO gate was absolute (content probe >= 0.70): a @dpo no better than its
    @sft (SmolLM2: 0.893 vs 0.896) passed it."""
    rng = np.random.default_rng(3)
    n = 600
    kinds = [("style", "content", "refuse", "answer")[k % 4] for k in range(n)]
    units = np.repeat(np.arange(n // 4), 4)
    sft = (rng.random(n) < 0.9).astype(float)
    base = _pref_rows(np.zeros(n), kinds, units)  # a base that knows nothing
    high_same = _pref_rows(sft[rng.permutation(n)], kinds, units)
    g = dpo_gate(high_same, _pref_rows(sft, kinds, units), base)
    assert g.values["preference_accuracy"] > 0.8 and not g.passed and "over @sft" in g.reason
    better = _pref_rows(np.maximum(sft, rng.random(n) < 0.9), kinds, units)
    g = dpo_gate(better, _pref_rows(sft, kinds, units), base)
    assert g.passed and g.values["preference_gain_ci_low"] > 0
    assert g.values["content_gain_over_base_ci_low"] > 0
    assert g.values["preference_accuracy_ci_low"] > g.values["constant_style_baseline"]
    # ties count one half; no content triple: not testable
    tie = _pref_rows(np.full(n, 0.5), kinds, units)
    assert dpo_gate(tie, tie, tie).values["preference_accuracy"] == 0.5
    empty = dpo_gate(tie.iloc[0:0], tie.iloc[0:0], tie.iloc[0:0])
    assert not empty.passed and "not testable" in empty.reason


def test_dpo_gate_needs_a_content_gain_over_the_base_too() -> None:
    """Issue 51: until then the DPO gate compared @dpo with @sft only, so a DPO that recovered
    part of what a damaging SFT lost passed while ending below the base it started from."""
    rng = np.random.default_rng(5)
    n = 800
    kinds = [("style", "content", "refuse", "answer")[k % 4] for k in range(n)]
    units = np.repeat(np.arange(n // 4), 4)
    base = _pref_rows((rng.random(n) < 0.9).astype(float), kinds, units)
    sft = _pref_rows((rng.random(n) < 0.4).astype(float), kinds, units)  # SFT lost content
    dpo = _pref_rows((rng.random(n) < 0.7).astype(float), kinds, units)  # DPO regained some
    g = dpo_gate(dpo, sft, base)
    assert g.values["content_gain_ci_low"] > 0  # beats @sft ...
    assert g.values["content_gain_over_base_ci_high"] < 0  # ... but not the base
    assert not g.passed and "over the base" in g.reason
    with pytest.raises(ValueError, match="same triples"):
        dpo_gate(dpo, sft, base.iloc[::-1])


def test_dpo_gate_needs_a_preference_gain_over_sft_not_only_a_content_gain() -> None:
    """Issue 51 ("@dpo must beat @sft on its preference gate"): until organisms-6 the gate
    required the content probe's gain over @sft, so a DPO that gained on content while losing
    the refusal passed; and a DPO that teaches the refusal SFT never saw, with no content gain
    over @sft but one over the base, failed."""
    rng = np.random.default_rng(7)
    n = 800
    kinds = [("style", "content", "refuse", "answer")[k % 4] for k in range(n)]
    units = np.repeat(np.arange(n // 4), 4)
    is_ = {k: np.array([x == k for x in kinds]) for k in ins.KINDS}
    base = _pref_rows(np.where(is_["content"], rng.random(n) < 0.5, 0.0), kinds, units)
    sft = np.where(is_["refuse"], 0.0, np.where(is_["content"], rng.random(n) < 0.6, 1.0))
    # more content, but the refusal lost everywhere else: the format-3 gate passed this
    worse = np.where(is_["content"], rng.random(n) < 0.9, np.where(is_["refuse"], 0.0, 0.5))
    g = dpo_gate(_pref_rows(worse, kinds, units), _pref_rows(sft, kinds, units), base)
    assert g.values["content_gain_ci_low"] > 0 and g.values["content_gain_over_base_ci_low"] > 0
    assert g.values["preference_gain_ci_high"] < 0 and not g.passed
    assert "preference accuracy's gain over @sft" in g.reason
    # the refusal learnt, content as at @sft (above the base): passes
    taught = np.where(is_["refuse"], 1.0, sft)
    g = dpo_gate(_pref_rows(taught, kinds, units), _pref_rows(sft, kinds, units), base)
    assert g.passed, g.reason
    assert g.values["content_gain"] == 0 and g.values["preference_gain_ci_low"] > 0


def test_a_gates_record_older_than_format_4_fails_dpo_and_keeps_sft() -> None:
    from lamina.sources.organisms.gates import DPO_WITHOUT_BASE, GATES_FORMAT

    passed = {"passed": True, "values": {"content_gain": 0.2}, "reason": "passed: ok"}
    for fmt in (2, 3):
        old = read_gates({"format": fmt, "sft": passed, "dpo": passed})
        assert old["sft"].passed and not old["dpo"].passed
        assert old["dpo"].reason == DPO_WITHOUT_BASE.format(fmt=fmt) and "@sft" in old["dpo"].reason
        assert old["dpo"].values == {"content_gain": 0.2}  # its values stay on the page
    assert read_gates({"format": GATES_FORMAT, "sft": passed, "dpo": passed})["dpo"].passed


def test_cluster_ci_resamples_whole_units() -> None:
    rng = np.random.default_rng(4)
    x = np.repeat(rng.random(40) < 0.5, 10).astype(float)  # 40 units of 10 identical items
    m, lo, hi = cluster_ci(x, np.repeat(np.arange(40), 10), 0)
    _, lo1, hi1 = cluster_ci(x, np.arange(400), 0)  # as if items were independent
    assert lo < m < hi and hi - lo > 2.5 * (hi1 - lo1)
    assert cluster_ci(np.ones(5), np.arange(5), 0) == (1.0, 1.0, 1.0)


def test_gate_records_round_trip_and_reach_the_engine_as_a_stage_gate() -> None:
    from lamina.evidence.decide import Context, Measurement, decide
    from lamina.evidence.declare import ClaimSpec, Gate

    g = GateResult(False, {"content_gain": 0.0}, "failed: no gain")
    rec = {"format": 3, "sft": dataclasses.asdict(g), "dpo": {"values": {}}}
    got = read_gates(rec)
    assert got["sft"] == g and not got["dpo"].passed and "missing" in got["dpo"].reason
    with pytest.raises(ValueError, match="format"):
        read_gates({"sft": {}, "dpo": {}})
    spec = ClaimSpec(id="p2-signature-x", claim="c", paper_value="1", kind="effect", statistic="s",
                     unit="u", requires=(Gate("sft"),), not_calibrated="test")  # fmt: skip
    row = decide(spec, Measurement(estimate=1.0, ci_low=0.5, ci_high=1.5, sided="two-sided"),
                 Context(model="m", gates={"sft": g.for_engine()}))  # fmt: skip
    assert row.verdict == "not testable" and "failed: no gain" in row.reason


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


# ----------------------------------------------------------------------------- tiny models


@pytest.fixture(scope="module")
def tiny(data: ins.AlignmentData):
    from lamina.sources.organisms.configs import ORGANISMS
    from lamina.sources.organisms.tokenizer import train_tokenizer
    from lamina.sources.organisms.train import make_model

    texts = [f"Question: {x.prompt}\nAnswer: {x.target}" for x in data.train[:200]]
    tok = train_tokenizer(texts, 384)
    return make_model(ORGANISMS["organism-llama-micro"].replace(context=96), tok), tok


def test_tables_from_a_tiny_random_model(data: ins.AlignmentData, tiny) -> None:
    model, tok = tiny
    pt = preference_table(model, tok, data.dpo_heldout[:40], 96)
    assert len(pt) == 40 and np.isfinite(pt["margin"]).all()
    assert list(pt["unit"]) == [t.item.content.unit for t in data.dpo_heldout[:40]]
    st = sft_table(model, tok, data.heldout[:30], 96)
    assert len(st) == 30 and set(st["hit"]) <= {0.0, 1.0}


def test_align_pretrained_on_a_tiny_random_model_trains_all_but_the_tied_embedding(
    data: ins.AlignmentData, tiny,
) -> None:  # fmt: skip
    from lamina.sources.organisms.pretrained import align_pretrained

    model, tok = tiny
    small = dataclasses.replace(data, train=data.train[:24], dpo_train=data.dpo_train[:24])
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
    assert out["epochs"] == {"sft": 12 * 4 / len(small.sft_train), "dpo": 6 * 4 / 24}
    assert PretrainedAlignConfig().config_hash != cfg.config_hash


def test_build_aligned_writes_once_with_base_gates_and_the_adam_state(
    data: ins.AlignmentData, tiny, tmp_path
) -> None:
    import json

    from lamina.sources.organisms.pretrained import build_aligned
    from lamina.weights.aligned import aligned_optimizer_state

    model, tok = tiny
    src = tmp_path / "tiny"
    model.save_pretrained(src)
    tok.save_pretrained(src)
    cfg = PretrainedAlignConfig(sft_steps=2, dpo_steps=2, batch_size=2, max_length=96, warmup_steps=1,
                                gate_items=24)  # fmt: skip
    folder = build_aligned(str(src), cfg, tmp_path / "aligned", log=lambda s: None)
    assert folder.name.endswith(cfg.config_hash)
    record = json.loads((folder / "gates.json").read_text())
    assert set(record["measures"]) == {"base", "sft", "dpo"}
    assert 0.5 <= record["measures"]["sft"]["constant_style_baseline"] < 1  # of the sample
    assert record["policy_names"] == list(POLICIES)
    gates = read_gates(record)
    assert "gain_over_base" in gates["sft"].values and "preference_gain" in gates["dpo"].values
    items = pd.read_csv(folder / "gates_items.csv")
    assert set(items["stage"]) == {"base", "sft", "dpo"}
    trained = set(aligned_optimizer_state(folder, "sft") or {})
    assert "model.embed_tokens.weight" not in trained and trained
    state = aligned_optimizer_state(folder, "dpo") or {}
    assert set(state) == trained and all(int(s["step"]) == 2 for s in state.values())
    assert "dpo.adam.safetensors" in json.loads((folder / "lamina-manifest.json").read_text())["files"]
    assert all(float(s["exp_avg_sq"].sum()) > 0 for s in state.values())
    build = json.loads((folder / "build.json").read_text())
    assert build["epochs"]["sft"] == pytest.approx(4 / len(data.sft_train))
    stamp = (folder / "build.json").stat().st_mtime_ns
    assert build_aligned(str(src), cfg, tmp_path / "aligned") == folder  # cached: not rebuilt
    assert (folder / "build.json").stat().st_mtime_ns == stamp
    assert not list((tmp_path / "aligned").glob(".tmp-*"))


def test_stage_measures_judge_sft_on_the_unrestricted_items_and_report_the_refusals() -> None:
    from lamina.sources.organisms.gates import stage_gates, stage_measures

    t = pd.DataFrame({"unit": ["a", "a", "b", "c"], "template": "t", "instruction": "short",
                      "style": ["short", "refusal", "sentence", "refusal"], "hit": [1.0, 1.0, 1.0, 0.0]})  # fmt: skip
    m = stage_measures(t, t.iloc[0:0])  # all four rows: 0.75; the unrestricted two: 1.0
    assert m["sft_accuracy"] == 1.0 and m["refusal_accuracy"] == 0.5 and m["n_items"] == 2
    # the SFT gate reads the same unrestricted rows, in order, with the policies' hits on them
    kinds = ["content"] * 4
    pref = _pref_rows(np.ones(4), kinds, np.array(["a", "a", "b", "c"]))
    g = stage_gates({"base": (t.assign(hit=0.0), pref), "sft": (t, pref), "dpo": (t, pref)},
                    {"blind": np.zeros(2)})  # fmt: skip
    assert g["sft"].values["n_items"] == 2 and g["sft"].values["sft_accuracy"] == 1.0


def test_an_organisms_key_covers_its_curriculum(monkeypatch: pytest.MonkeyPatch) -> None:
    """Until organisms-6 the key hashed the config and the code version only: a curriculum
    edit without a version bump reused a stale organism."""
    from lamina.sources.organisms import curriculum
    from lamina.sources.organisms.configs import ORGANISMS

    cfg = ORGANISMS["organism-gpt2-micro"]
    before = cfg.config_hash
    curriculum.curriculum_fingerprint.cache_clear()
    monkeypatch.setattr(curriculum, "RESTRICTED_SHARE", 0.2)  # the alignment data change
    try:
        assert cfg.config_hash != before
    finally:
        curriculum.curriculum_fingerprint.cache_clear()
    monkeypatch.undo()
    assert cfg.config_hash == before
