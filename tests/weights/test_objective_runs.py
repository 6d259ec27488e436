"""Every objective applied to one checkpoint at one budget (issue 34: today LM ran 8 x 4 at lr
1e-4 with every parameter against SFT/DPO 120 x 8 at 3e-5 / 1e-5 with the embedding frozen)."""

from __future__ import annotations

import math

import pytest
import torch

from lamina.sources.organisms.configs import ORGANISMS
from lamina.sources.organisms.corpus import format_answer  # noqa: F401 (the corpus format)
from lamina.weights.objective_runs import run_objectives
from lamina.weights.settings import SignatureSettings
from lamina.weights.texts import pair_corpus
from tests.conftest import _byte_tokenizer, tiny_model


@pytest.fixture(scope="module")
def runs():
    base = tiny_model("llama", n_layers=2)
    tok = _byte_tokenizer()
    s = SignatureSettings(objective_steps=3, objective_batch=2, objective_lr=1e-3,
                          objective_eval=8, n_bootstrap=200)  # fmt: skip
    cfg = ORGANISMS["organism-llama"].replace(context=48, replay_batch_size=0)
    keep = {n for n, _ in base.named_parameters() if "layers.0" in n}
    before = {n: p.detach().clone() for n, p in base.named_parameters()}
    out = run_objectives(base, tok, pair_corpus()[0], cfg, s, keep)
    return base, before, out


def test_every_objective_gets_the_same_steps_examples_schedule_and_parameters(runs):
    base, before, out = runs
    assert set(out) == {"lm", "sft", "dpo"}
    curves = {o: r.curve for o, r in out.items()}
    assert {o: len(c) for o, c in curves.items()} == {"lm": 3, "sft": 3, "dpo": 3}
    assert len({tuple(round(r["lr"], 12) for r in c) for c in curves.values()}) == 1
    assert len({tuple(r["examples"] for r in c) for c in curves.values()}) == 1
    frozen = "model.embed_tokens.weight"
    for o, r in out.items():
        moved = {n for n, p in r.model.named_parameters() if not torch.equal(p, before[n])}
        assert frozen not in moved, o  # the unembedding's subspace stays the base's
        assert any("layers.1.self_attn.q_proj" in n for n in moved), o
        assert r.adam and all(int(st["step"]) == 3 for st in r.adam.values()), o
    for n, p in base.named_parameters():
        assert torch.equal(p, before[n]), n  # training works on copies


def test_dpo_starts_at_log_two_against_the_checkpoint_itself(runs):
    assert runs[2]["dpo"].curve[0]["loss"] == pytest.approx(math.log(2), abs=1e-5)


def test_each_run_has_a_gate_with_its_held_out_improvement(runs):
    for o, r in runs[2].items():
        passed, values = r.gate
        assert isinstance(passed, bool) and f"held-out {o} improvement" in values and "8 items" in values


def test_held_out_scores_do_not_depend_on_the_evaluation_chunk(monkeypatch):
    """The gates score held-out LM windows and SFT pairs in chunks (logit_rows) so that
    Gemma-3's 262,144-word logits fit in memory; a chunk of 1 gives the one-batch scores."""
    from lamina.weights import adaptation, objective_runs

    model = tiny_model("llama", n_layers=2).eval()
    tok = _byte_tokenizer()
    corpus = pair_corpus()[0]
    s = SignatureSettings(objective_eval=6)
    whole = {o: objective_runs._held_out_score(o, model, tok, corpus, s, 32) for o in ("lm", "sft")}
    monkeypatch.setattr(objective_runs, "logit_rows", lambda *a, **k: 1)
    monkeypatch.setattr(adaptation, "logit_rows", lambda *a, **k: 1)
    for o, scores in whole.items():
        one = objective_runs._held_out_score(o, model, tok, corpus, s, 32)
        assert scores.shape == (6,) and torch.allclose(torch.tensor(one), torch.tensor(scores), atol=1e-5)


def test_logit_rows_fit_the_budget():
    from types import SimpleNamespace

    from lamina.core.arrays import logit_rows

    def lm(vocab):
        return SimpleNamespace(config=SimpleNamespace(vocab_size=vocab))

    assert logit_rows(lm(262_144), 128) == 4  # Gemma-3 (64 windows at once: 8 GiB of logits)
    assert logit_rows(lm(49_152), 128) == 21  # SmolLM2
    assert logit_rows(lm(256), 32) == 64  # a tiny model: the cap
    assert logit_rows(lm(262_144), 100_000) == 1  # never 0


def test_the_lm_objective_reads_text_the_checkpoint_has_not_trained_on():
    """Until organisms-6 the LM run read the training split, which an organism's ``final`` had
    seen 4.5 times: its gate failed on both organisms (held-out improvement -0.016 nats)."""
    from types import SimpleNamespace

    from lamina.weights import objective_runs

    tok = _byte_tokenizer()
    corpus = SimpleNamespace(train=["z" * 400] * 8, val=["a" * 400] * 8, heldout=["q" * 400] * 8)
    s = SignatureSettings(objective_steps=2, objective_batch=2)
    batches = objective_runs._batches("lm", corpus, tok, s, 16)
    seen = {int(t) for batch in batches for w in batch for t in w}
    val = set(tok("a")["input_ids"]) | {tok.eos_token_id}
    assert len(batches) == 2 and seen <= val and not seen & set(tok("z")["input_ids"])


def test_each_objective_copies_the_checkpoint_once(monkeypatch):
    """DPO's reference is the checkpoint itself (it scores under no_grad and is never stepped):
    one copy per objective, the trained one. A reference copy was one model more of memory
    (1 GiB on Gemma 3) while the chapter held its targets and objective runs."""
    import copy

    from lamina.weights import objective_runs

    base, tok = tiny_model("llama", n_layers=2), _byte_tokenizer()
    s = SignatureSettings(objective_steps=2, objective_batch=2, objective_lr=1e-3,
                          objective_eval=4, n_bootstrap=50)  # fmt: skip
    cfg = ORGANISMS["organism-llama"].replace(context=48, replay_batch_size=0)
    copied: list[type] = []
    deepcopy = copy.deepcopy

    def counting(x, *args):
        if isinstance(x, torch.nn.Module):
            copied.append(type(x))
        return deepcopy(x, *args)

    monkeypatch.setattr(objective_runs.copy, "deepcopy", counting)
    out = run_objectives(base, tok, pair_corpus()[0], cfg, s, set())
    assert len(copied) == len(out) == 3, copied
    assert out["dpo"].curve[0]["loss"] == pytest.approx(math.log(2), abs=1e-5)


def test_each_run_shares_the_frozen_embedding_and_leaves_the_checkpoints_flags():
    """The frozen input embedding is the checkpoint's own tensor in every run (a copy was
    0.63 GiB per objective on Gemma 3, three held at once); every trained tensor is the run's
    own, and the checkpoint's values and requires_grad flags leave as they came."""
    base, tok = tiny_model("llama", n_layers=2), _byte_tokenizer()
    emb = base.get_input_embeddings().weight
    base.requires_grad_(False)
    emb.requires_grad_(True)  # a flag the run must turn off while it trains, then restore
    flags = {n: p.requires_grad for n, p in base.named_parameters()}
    before = {n: p.detach().clone() for n, p in base.named_parameters()}
    s = SignatureSettings(objective_steps=2, objective_batch=2, objective_lr=1e-3,
                          objective_eval=4, n_bootstrap=50)  # fmt: skip
    cfg = ORGANISMS["organism-llama"].replace(context=48, replay_batch_size=0)
    out = run_objectives(base, tok, pair_corpus()[0], cfg, s, set(), objectives=("lm", "dpo"))
    for o, r in out.items():
        shared = {id(p) for p in base.parameters()} & {id(p) for p in r.model.parameters()}
        assert r.model.get_input_embeddings().weight is emb and shared == {id(emb)}, o
        assert not any(p.requires_grad for p in r.model.parameters() if p is not emb), o
        assert any(not torch.equal(p, before[n]) for n, p in r.model.named_parameters()), o
    assert {n: p.requires_grad for n, p in base.named_parameters()} == flags
    for n, p in base.named_parameters():
        assert torch.equal(p, before[n]), n
