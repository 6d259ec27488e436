"""Alignment stages on micro models: DPO learns a learnable preference (and not at lr = 0),
stage_loss is the training loss (EOS scored, SFT replay added), seeds name their builds."""

from __future__ import annotations

import json

import pytest
import torch

from lamina.sources import organisms
from lamina.sources.organisms.configs import ORGANISMS, organism_config, seed_name
from lamina.sources.organisms.corpus import Corpus, format_answer, format_prompt
from lamina.sources.organisms.objectives import lm_loss, sft_loss
from lamina.sources.organisms.stages import (
    align,
    completion_logprob,
    dpo_margins,
    qa_batch,
    stage_loss,
)
from lamina.sources.organisms.tokenizer import encode_stream, train_tokenizer
from lamina.sources.organisms.train import make_model

MICRO = ORGANISMS["organism-gpt2-micro"]
NOUNS = ["cat", "dog", "owl", "fox", "hen", "cow", "pig", "elk", "ant", "bee", "yak", "emu",
         "cod", "eel", "ram", "doe", "bat", "rat", "jay", "gnu"]  # fmt: skip
TEXT = [f"Question: Is the {n} here?\nAnswer: yes" for n in NOUNS] + [
    f"Question: Is the {n} gone?\nAnswer: no" for n in NOUNS
]


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(TEXT * 5, 320)


def _pairs(tok, base) -> tuple[list, list]:
    """A preference that ignores the question: always one fixed completion over another.
    The chosen one is whichever the untrained model finds *less* likely, so the model's own
    preference must flip for the held-out accuracy to pass."""
    qs = [f"Is the {n} here?" for n in NOUNS]
    with torch.no_grad():
        lp = completion_logprob(base, tok, [format_prompt(q) for q in qs] * 2,
                                [format_answer("yes")] * 20 + [format_answer("no")] * 20, 32)  # fmt: skip
    chosen, rejected = ("yes", "no") if lp[:20].mean() < lp[20:].mean() else ("no", "yes")
    triples = [(q, chosen, rejected) for q in qs]
    return triples[:14], triples[14:]


def _train_dpo(tok, lr: float):
    torch.manual_seed(0)
    base = make_model(MICRO, tok).eval()
    train, held = _pairs(tok, base)
    stream = encode_stream(tok, TEXT)
    corpus = Corpus([], [], [], [], [], dpo=train, dpo_eval=held)
    cfg = MICRO.replace(align_steps=25, align_batch_size=7, align_eval_every=5)
    model, rows = align("dpo", cfg, base, tok, corpus, {"train": stream, "val": stream,
                        "heldout": stream}, None, progress=False, lr=lr)  # fmt: skip
    return base, model, held, rows


def _own_margins(model, tok, triples) -> torch.Tensor:
    """log pi(chosen) - log pi(rejected) per triple, chosen and rejected scored separately."""
    with torch.no_grad():
        p = [format_prompt(q) for q, _, _ in triples]
        c = completion_logprob(model, tok, p, [format_answer(x) for _, x, _ in triples], 32)
        r = completion_logprob(model, tok, p, [format_answer(x) for _, _, x in triples], 32)
    return c - r


def _own_preference(model, tok, triples) -> float:
    return float((_own_margins(model, tok, triples) > 0).float().mean())


def test_dpo_learns_a_learnable_preference_on_held_out_prompts(tok):
    base, model, held, rows = _train_dpo(tok, lr=3e-3)
    m = dpo_margins(model, base, tok, held, 32)
    assert float((m > 0).float().mean()) >= 0.9
    assert _own_preference(base, tok, held) <= 0.5 < 0.9 <= _own_preference(model, tok, held)
    assert rows[-1]["eval_reward_margin"] > rows[0]["eval_reward_margin"] == 0.0
    assert rows[-1]["train_reward_accuracy"] >= 0.9
    assert rows[-1]["eval_loss"] < rows[0]["eval_loss"]


def test_dpo_at_learning_rate_zero_learns_nothing(tok):
    """The same run with lr = 0: no margin, no flip; the test above is not true by construction."""
    base, model, held, rows = _train_dpo(tok, lr=0.0)
    m = dpo_margins(model, base, tok, held, 32)
    assert float((m > 0).float().mean()) == 0.0
    assert _own_preference(model, tok, held) <= 0.5
    assert rows[-1]["eval_reward_margin"] == 0.0


def test_stage_loss_is_the_training_loss_with_eos_and_replay(tok):
    model = make_model(MICRO, tok).eval()
    items = [("Is the cat here?", "yes"), ("Is the owl gone?", "no")]
    b = qa_batch(
        tok, [format_prompt(q) for q, _ in items], [format_answer(a) for _, a in items], 32
    )
    rows = b["attention_mask"].sum(-1) - 1
    assert (b["input_ids"][torch.arange(2), rows] == tok.eos_token_id).all()  # EOS ends each row
    assert (b["target_mask"][torch.arange(2), rows] == 1).all()  # and is scored
    with torch.no_grad():
        logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
        plain = sft_loss(logits, b["input_ids"], b["target_mask"])
        replay = encode_stream(tok, TEXT)[: 3 * 32].view(3, 32)
        cfg = MICRO.replace(replay_weight=0.5)
        assert torch.allclose(stage_loss("sft", model, None, tok, items, cfg), plain)
        both = stage_loss("sft", model, None, tok, items, cfg, replay=replay)
        assert torch.allclose(both, plain + 0.5 * lm_loss(model(input_ids=replay).logits, replay))
    with pytest.raises(ValueError, match="reference"):
        stage_loss("dpo", model, None, tok, [("q", "a", "b")], MICRO)
    with pytest.raises(ValueError, match="unknown alignment stage"):
        stage_loss("rlhf", model, None, tok, items, MICRO)


def test_seed_names_map_to_seeded_configs_and_keep_the_plain_names():
    assert organism_config("organism-gpt2") is ORGANISMS["organism-gpt2"]
    assert organism_config("organism-gpt2~s0") is ORGANISMS["organism-gpt2"]
    s2 = organism_config("organism-gpt2~s2")
    assert (s2.seed, s2.corpus_seed, s2.name, s2.base_name) == (2, 0, "organism-gpt2~s2",
                                                                 "organism-gpt2")  # fmt: skip
    assert s2.config_hash != ORGANISMS["organism-gpt2"].config_hash
    assert seed_name("organism-gpt2~s2", 0) == "organism-gpt2"
    with pytest.raises(ValueError, match="training seed"):
        organism_config("organism-gpt2~sx")
    with pytest.raises(organisms.UnknownOrganismError, match="known organisms"):
        organisms.resolve("organism-nope~s1@sft")


@pytest.mark.slow
def test_a_seed_variant_builds_beside_seed_0_and_records_its_environment(tmp_path):
    name = "organism-gpt2-micro"
    for k in (0, 1):
        organisms.build(seed_name(name, k), root=tmp_path, progress=False, log=lambda s: None)
    assert organisms.built_seeds(name, tmp_path) == [name, f"{name}~s1"]
    a = organisms.resolve(f"{name}@sft", root=tmp_path)
    b = organisms.resolve(f"{name}~s1@sft", root=tmp_path)
    assert a != b and a.is_dir() and b.is_dir()
    wa = (a / "model.safetensors").read_bytes()
    assert wa != (b / "model.safetensors").read_bytes()
    build = json.loads((organisms.organism_dir(f"{name}~s1", tmp_path) / "build.json").read_text())
    env = build["environment"]
    assert env["cpu_model"] and env["torch_threads"] >= 1 and "numpy_blas" in env
    assert build["overlap"]["overlap"] == 0 and build["cpu_seconds"] > 0
    assert json.loads(build["config"])["seed"] == 1


def test_margins_without_a_reference_are_the_policys_own_preference(tok):
    """dpo_margins(model, None, ...) = log pi(chosen) - log pi(rejected), item by item, computed
    separately by completion_logprob; its sign is the DPO preference accuracy's hit."""
    base, model, held, _ = _train_dpo(tok, lr=3e-3)
    m = dpo_margins(model, None, tok, held, 32, batch=3)  # chunks do not change it
    torch.testing.assert_close(m, _own_margins(model, tok, held), atol=1e-4, rtol=1e-4)
    assert float((m > 0).float().mean()) == _own_preference(model, tok, held) >= 0.9
    assert not torch.allclose(m, dpo_margins(model, base, tok, held, 32))  # the reference matters


def test_an_aligned_build_is_keyed_on_the_alignment_data_it_trains_on(monkeypatch):
    """A real model's aligned build reused across a curriculum change would be trained and
    gated on other items than the code now writes: its key covers the data's fingerprint, so a
    change of the alignment contents (here the people cap) is a new build."""
    from lamina.sources.organisms import curriculum
    from lamina.sources.organisms.pretrained import PretrainedAlignConfig

    before = PretrainedAlignConfig().config_hash
    assert curriculum.alignment_fingerprint(0) != curriculum.alignment_fingerprint(1)
    curriculum.alignment_fingerprint.cache_clear()
    monkeypatch.setattr(curriculum, "RESTRICTED_SHARE", 0.2)
    try:
        assert PretrainedAlignConfig().config_hash != before
    finally:
        curriculum.alignment_fingerprint.cache_clear()


def test_a_build_records_the_commit_it_started_from(tmp_path, monkeypatch):
    """At abcc409 a build started before a commit recorded that later commit (read when
    build.json was written, 33 minutes on): the commit whose code runs is the one at the start;
    a commit made meanwhile is recorded beside it."""
    import subprocess

    from lamina.core import provenance

    # the checkout as git reports it: HEAD "a", clean; then, from the first read during
    # training on, HEAD "b" with local changes. git_commit is cached (lru_cache), as at fb10f03,
    # when a commit made during the organisms-6 build went unrecorded.
    state = {"reads": 0}

    def run(cmd, **kw):
        late = state["reads"] >= 2
        state["reads"] += 1
        out = ("b" * 40 if late else "a" * 40) if "rev-parse" in cmd else (" M x.py" if late else "")
        return subprocess.CompletedProcess(cmd, 0, stdout=out + "\n", stderr="")

    provenance.git_commit.cache_clear()
    provenance.git_commit()  # a value cached before the build, as in a long-lived process
    monkeypatch.setattr(provenance.subprocess, "run", run)
    organisms.build("organism-gpt2-micro", root=tmp_path, progress=False, log=lambda s: None)
    provenance.git_commit.cache_clear()
    (folder,) = tmp_path.glob("organism-gpt2-micro-*")
    record = json.loads((folder / "build.json").read_text())
    assert record["lamina_commit"] == "a" * 40
    assert record["lamina_commit_at_end"] == "b" * 40 + "+dirty"
