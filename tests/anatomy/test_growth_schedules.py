"""Growth Training's pieces: the training loop across phases (carried optimiser, one learning
rate schedule), the learning gate, the unigram baseline, the validation text, and the real
models' importance mapped by depth."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from lamina.anatomy.growth import Phase, train_with_schedule, warmup_cosine
from lamina.anatomy.growth_compare import learning_gate, unigram_loss
from lamina.anatomy.growth_orders import depth_map, rank_correlations, real_importance
from lamina.anatomy.growth_text import clean_passages
from lamina.anatomy.paper import paper_layers

from ..conftest import _byte_tokenizer, lamina_env, tiny_model

MICRO = "organism-llama-micro"
UNIGRAM = 6.5


def _ids(n: int, t: int = 10, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 320, (n, t), generator=torch.Generator().manual_seed(seed))


def _train(phases: list[Phase], carry: bool) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    model = tiny_model("llama", n_layers=2)
    train_with_schedule(
        model,
        phases,
        _ids(16),
        _ids(4, seed=1),
        lr=1e-2,
        batch_size=4,
        eval_every=100,
        carry_optimizer=carry,
    )
    return {k: p.detach().clone() for k, p in model.named_parameters()}


def test_carried_optimizer_makes_two_phases_one_continuous_run():
    one = _train([Phase([0], 4, True)], carry=True)
    split = _train([Phase([0], 2, True), Phase([0], 2, True)], carry=True)
    fresh = _train([Phase([0], 2, True), Phase([0], 2, True)], carry=False)
    assert all(torch.allclose(one[k], split[k], atol=1e-6) for k in one)
    assert not all(torch.allclose(one[k], fresh[k], atol=1e-6) for k in one)


def _cmp(uniform: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"run": "uniform", "seed": s, "final_val_loss": v} for s, v in enumerate(uniform)]
    )


def test_the_learning_gate_passes_only_when_every_seed_learned():
    assert learning_gate(_cmp([5.0, 5.2, 5.4]), UNIGRAM, 0.85).passed  # <= 5.525 nats
    worst = learning_gate(_cmp([5.0, 5.2, 0.86 * UNIGRAM]), UNIGRAM, 0.85)
    assert not worst.passed and "5.590 vs unigram 6.500" in worst.values
    assert not learning_gate(_cmp([5.0, float("nan")]), UNIGRAM, 0.85).passed
    assert not learning_gate(
        pd.DataFrame(columns=["run", "seed", "final_val_loss"]), UNIGRAM, 0.85
    ).passed


def test_unigram_loss_is_the_entropy_of_a_known_distribution():
    # train: tokens 0 and 1 in ratio 3:1 (add-one: counts 3001, 1001 of 4002 + 2 others)
    train = torch.tensor([0, 0, 0, 1] * 1000).reshape(-1, 4)
    val = torch.tensor([[0, 0, 0, 1]] * 10)  # targets 0, 0, 1
    p = np.array([3001, 1001]) / 4004
    expected = -(2 * np.log(p[0]) + np.log(p[1])) / 3
    assert unigram_loss(train, val, 4) == pytest.approx(expected)


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
    train = ["the quick brown fox jumps over the lazy dog and runs far away"]
    copy = "so the quick brown fox jumps over the lazy dog and sleeps"  # one shared 8-gram
    near = "the quick brown fox leaps over the lazy dog and runs far away"  # one word changed
    fresh = "an entirely different line of verse that no training passage contains at all"
    kept, info = clean_passages([copy, near, fresh], train, seed=0, passage_chars=10_000)
    assert kept == [fresh]  # "near" still shares "over the lazy dog and runs far away"
    assert info == {"passages": 3, "kept": 1, "dropped": 2, "kept_chars": len(fresh)}
    short = "seven words here never seen in training"
    assert clean_passages([short], train, 0, 10_000)[0] == [short]  # under 8 words: no 8-gram


def test_depth_map_is_the_identity_at_equal_depth_and_averages_overlaps():
    v = np.array([5.0, -1.0, 300.0, 2.0])
    assert np.allclose(depth_map(v, 4), v)
    # 30 -> 12: trained layer 0 covers real layers 0, 1 and half of 2
    mapped = depth_map(np.arange(30.0), 12)
    assert mapped[0] == pytest.approx((0 + 1 + 0.5 * 2) / 2.5)
    assert np.all(np.diff(mapped) > 0)  # a monotone profile stays monotone
    # 18 -> 12: layer 1 covers the second half of real layer 1 and real layer 2
    assert depth_map(np.arange(18.0), 12)[1] == pytest.approx((0.5 * 1 + 2) / 1.5)


@pytest.mark.parametrize("n_real", [30, 18, 7])
def test_depth_map_uses_the_span_convention_of_the_anatomy_chapter(n_real):
    """Trained layer l draws on exactly the real layers whose spans overlap its own: the real
    layers that ``paper_layers`` maps onto l (the same depth convention, both directions)."""
    for r in range(n_real):
        spike = np.zeros(n_real)
        spike[r] = 1.0
        touched = set(np.flatnonzero(depth_map(spike, 12) > 1e-12))
        assert touched == set(paper_layers([r], 12, paper_l=n_real))


def test_depth_map_rejects_bad_input():
    with pytest.raises(ValueError, match="non-empty 1-D"):
        depth_map(np.array([]), 12)
    with pytest.raises(ValueError, match="n_layers"):
        depth_map(np.ones(3), 0)


def test_rank_correlations():
    a = np.arange(6.0)
    out = rank_correlations({"ref": a, "same": a**3, "flip": -a, "flat": np.ones(6)})
    rho = out.set_index(["a", "b"])["rho"]
    assert rho[("ref", "same")] == pytest.approx(1.0)
    assert rho[("ref", "flip")] == pytest.approx(-1.0)
    assert np.isnan(rho[("ref", "flat")])
    with pytest.raises(ValueError, match="differ in length"):
        rank_correlations({"a": a, "b": np.ones(4)})


def _save(arch: str, n_layers: int, folder, dead: int | None = None) -> str:
    """A tiny random causal LM folder with a tokenizer; layer ``dead`` writes nothing to the
    residual stream (its attention and MLP output projections are zero)."""
    model = tiny_model(arch, n_layers=n_layers)
    if dead is not None:
        layer = model.model.layers[dead]
        with torch.no_grad():
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    model.save_pretrained(folder)
    _byte_tokenizer().save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def micro_env(micro_organisms, tmp_path_factory):
    root = tmp_path_factory.mktemp("growth-real")
    with lamina_env(micro_organisms, root / "results"):
        yield root


@pytest.mark.parametrize("arch, n_layers", [("llama", 5), ("gemma3", 6)])
def test_real_importance_finds_a_layer_that_does_nothing(arch, n_layers, micro_env, tmp_path):
    folder = _save(arch, n_layers, tmp_path / arch, dead=2)
    delta, info = real_importance(folder, MICRO, 64, 32)
    assert delta.shape == (n_layers,) and info["n_layers"] == n_layers
    assert info["n_tokens"] == 64 and info["n_windows"] == 2
    assert abs(delta[2]) < 1e-6  # skipping a layer that writes nothing changes nothing
    assert np.all(np.abs(np.delete(delta, 2)) > 1e-3)  # the others do change the loss
