"""Growth Training that must learn (issue 21 item 6): the claims need uniform training to end
at <= learn_gate x the unigram baseline's loss, the random-order control draws a fresh order
per seed, and the learning rate follows one warmup + cosine schedule across the phases."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from lamina.anatomy.growth import Phase, train_with_schedule, warmup_cosine
from lamina.chapters.growth_training import GrowthConfig, schedules_for
from lamina.chapters.growth_training.claims import gated_claims, growth_claims, learning_gate
from lamina.chapters.growth_training.run import random_order, unigram_loss

from .conftest import tiny_model

UNIGRAM = 6.5


def _cmp(uniform: list[float], ratio: float) -> pd.DataFrame:
    """compare_runs-like rows: uniform's final losses per seed, growth ``ratio`` x lower."""
    rows = []
    for seed, loss in enumerate(uniform):
        for run, final in (("uniform", loss), ("growth", loss / ratio)):
            rows.append({"run": run, "seed": seed, "final_val_loss": final,
                         "total_wall_s": 10.0 if run == "uniform" else 7.0 + 0.1 * seed,
                         "total_flops": 9.0 if run == "uniform" else 6.0,
                         "flops_saving": 0.5 + 0.01 * seed})  # fmt: skip
    return pd.DataFrame(rows)


def _budgets(ratio: float, n: int) -> pd.DataFrame:
    return pd.DataFrame([{"run": "growth", "seed": s, "budget": b,
                          "loss_ratio": ratio * (1 + 0.01 * s)}
                         for b in ("step", "flops", "wall_s") for s in range(n)])  # fmt: skip


def _claims(uniform: list[float]) -> pd.DataFrame:
    """Growth claims of a planted 6x effect (every tested verdict: reproduced), gated."""
    config = GrowthConfig(schedules=["uniform", "growth"])
    cmp = _cmp(uniform, 6.0)
    rows = growth_claims(config, cmp, _budgets(6.0, len(uniform)), 1000)
    return gated_claims(rows, learning_gate(cmp, UNIGRAM, config.learn_gate))


def test_claims_are_testable_only_when_uniform_training_learned():
    learned = _claims([5.0, 5.2, 5.4])  # every ratio <= 0.85 (5.525 nats)
    assert (learned["verdict"] == "reproduced").all(), learned[["claim_id", "verdict"]]
    assert (learned["note"] == "").all()
    # one seed at 0.86 x unigram: the worst seed decides; the planted effect cannot rescue it
    untrained = _claims([5.0, 5.2, 0.86 * UNIGRAM])
    assert (untrained["verdict"] == "not testable").all()
    note = untrained["note"].iloc[0]
    assert note.startswith("not testable: the uniform baseline did not learn (loss 5.590")
    assert "vs unigram 6.500" in note and "5.525" in note
    assert untrained["measured"].tolist() == learned["measured"].tolist()  # values kept


def test_learning_gate_fails_without_a_finite_uniform_loss():
    gate = learning_gate(_cmp([5.0, float("nan")], 2.0), UNIGRAM, 0.85)
    assert not gate["passed"]
    empty = learning_gate(pd.DataFrame(columns=["run", "seed", "final_val_loss"]), UNIGRAM, 0.85)
    assert not empty["passed"] and empty["n_seeds"] == 0


def test_unigram_loss_is_the_entropy_of_a_known_distribution():
    # train: tokens 0 and 1 in ratio 3:1 (add-one: counts 3001, 1001 of 4002 + 2 others)
    train = torch.tensor([0, 0, 0, 1] * 1000).reshape(-1, 4)
    val = torch.tensor([[0, 0, 0, 1]] * 10)  # targets 0, 0, 1
    p = np.array([3001, 1001]) / 4004
    expected = -(2 * np.log(p[0]) + np.log(p[1])) / 3
    assert unigram_loss(train, val, 4) == pytest.approx(expected)


def test_random_control_draws_a_fresh_order_per_seed():
    config = GrowthConfig(n_layers=12, n_groups=3, total_steps=30, seeds=[0, 1, 2])
    imp = np.arange(12.0)
    plans = {s: schedules_for(config, imp, seed=s) for s in config.seeds}
    groups = {s: [tuple(p.layers) for p in plans[s]["random"][:-1]] for s in config.seeds}
    assert len(set(map(tuple, groups.values()))) == 3, groups  # three different orders
    for s in config.seeds:  # growth and reverse do not depend on the seed
        assert plans[s]["growth"] == plans[0]["growth"]
        assert plans[s]["reverse"] == plans[0]["reverse"]
        assert sorted(sum(map(list, groups[s]), [])) == list(range(12))
    again = schedules_for(config, imp, seed=1)["random"]
    assert again == plans[1]["random"]  # seeded: reproducible
    assert np.array_equal(np.sort(random_order(12, 5)), np.arange(12.0))


def test_warmup_cosine_rises_then_decays_to_the_floor():
    m = warmup_cosine(100, 10, 0.1)
    assert [m(s) for s in (0, 4, 9)] == pytest.approx([0.1, 0.5, 1.0])
    assert m(10) == pytest.approx(1.0)
    assert m(55) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert m(100) == pytest.approx(0.1) and m(500) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="warmup_steps"):
        warmup_cosine(10, 11)


def test_lr_scale_sets_the_rate_of_every_step_across_phases():
    ids = torch.randint(0, 320, (16, 10), generator=torch.Generator().manual_seed(0))
    rates: list[float] = []
    model = tiny_model("llama", n_layers=2)
    before = {k: p.detach().clone() for k, p in model.named_parameters()}

    def zero_after_two(s: int) -> float:
        rates.append(s)
        return 1.0 if s < 2 else 0.0

    seen: list[list[torch.Tensor]] = []
    train_with_schedule(model, [Phase([0], 2, True), Phase(None, 3, True)], ids, ids[:4],
                        lr=1e-2, batch_size=4, eval_every=100, lr_scale=zero_after_two,
                        on_step=lambda s, m: seen.append([p.detach().clone()
                                                          for p in m.parameters()]))  # fmt: skip
    assert rates == [0, 1, 2, 3, 4]  # the global step, not the step within a phase
    assert not all(torch.equal(a, b) for a, b in zip(seen[0], before.values(), strict=True))
    for later in seen[2:]:  # lr 0 from step 2 on (no weight decay): nothing moves
        assert all(torch.equal(a, b) for a, b in zip(later, seen[1], strict=True))


def test_validation_passages_sharing_a_word_8gram_with_training_are_dropped():
    from lamina.chapters.growth_training.data import clean_passages

    train = ["the quick brown fox jumps over the lazy dog and runs far away"]
    copy = "so the quick brown fox jumps over the lazy dog and sleeps"  # one shared 8-gram
    near = "the quick brown fox leaps over the lazy dog and runs far away"  # one word changed
    fresh = "an entirely different line of verse that no training passage contains at all"
    kept, info = clean_passages([copy, near, fresh], train, seed=0, passage_chars=10_000)
    assert kept == [fresh]  # "near" still shares "over the lazy dog and runs far away"
    assert info == {"passages": 3, "kept": 1, "dropped": 2, "kept_chars": len(fresh)}
    short = "seven words here never seen in training"
    assert clean_passages([short], train, 0, 10_000)[0] == [short]  # under 8 words: no 8-gram


def test_training_tokenizer_is_a_bpe_of_the_asked_size_or_rejected():
    from lamina.chapters.growth_training.run import training_tokenizer

    tok = training_tokenizer(GrowthConfig(organism="organism-llama-micro", vocab_size=300))
    assert len(tok) == 300 and tok.eos_token_id is not None
    with pytest.raises(ValueError, match="vocab_size"):
        GrowthConfig(vocab_size=100)
    with pytest.raises(ValueError, match="registered organism"):
        training_tokenizer(GrowthConfig(organism="organism-nope", vocab_size=300))
