"""lamina.states.controls: each null control keeps what it should and destroys what it should."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from lamina import trajectory as geometry
from lamina.states import controls


def test_shuffle_layers_permutes_each_trajectory_independently() -> None:
    x = np.random.default_rng(0).standard_normal((50, 8, 3)).astype(np.float32)
    out = controls.shuffle_layers(x, seed=1)
    assert out.shape == x.shape and out.dtype == x.dtype
    for i in range(50):  # same states, possibly new order
        np.testing.assert_array_equal(np.sort(out[i], axis=0), np.sort(x[i], axis=0))
    orders = {tuple(np.argsort(out[i, :, 0])) for i in range(50)}
    assert len(orders) > 40  # independent permutations per prompt
    np.testing.assert_array_equal(out, controls.shuffle_layers(x, seed=1))
    assert not np.array_equal(out, controls.shuffle_layers(x, seed=2))


def test_shuffle_layers_destroys_smooth_trajectory_similarity() -> None:
    rng = np.random.default_rng(3)
    x = np.cumsum(
        rng.standard_normal((100, 12, 16)), axis=1
    )  # random walks: adjacent states similar
    real = geometry.layerwise_cosine(x).mean()
    shuffled = geometry.layerwise_cosine(controls.shuffle_layers(x, seed=0)).mean()
    assert real > shuffled + 0.1


def tiny_gpt2() -> GPT2LMHeadModel:
    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=16)
    torch.manual_seed(0)
    return GPT2LMHeadModel(config).eval()


def test_random_init_like_rebuilds_the_same_architecture_with_new_weights() -> None:
    model = tiny_gpt2()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)  # "trained" weights differ from any fresh init
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    fresh = controls.random_init_like(model, seed=7)
    assert torch.equal(torch.rand(3), expected_next)  # caller's RNG untouched
    assert type(fresh) is type(model) and not fresh.training
    assert fresh.config.to_dict() == model.config.to_dict() and fresh.config is not model.config
    own, new = dict(model.named_parameters()), dict(fresh.named_parameters())
    assert own.keys() == new.keys()
    assert all(own[k].shape == new[k].shape for k in own)
    assert not torch.allclose(
        own["transformer.h.0.attn.c_attn.weight"], new["transformer.h.0.attn.c_attn.weight"]
    )
    again = controls.random_init_like(model, seed=7)
    assert all(torch.equal(new[k], p) for k, p in again.named_parameters())


def test_permute_labels_keeps_category_sizes() -> None:
    labels = np.repeat(["a", "b", "c"], [5, 10, 15])
    out = controls.permute_labels(labels, seed=0)
    assert sorted(out.tolist()) == sorted(labels.tolist())
    assert not np.array_equal(out, labels)
    np.testing.assert_array_equal(out, controls.permute_labels(labels, seed=0))
    with pytest.raises(ValueError, match="one-dimensional"):
        controls.permute_labels(np.zeros((2, 2)))


@pytest.mark.parametrize("arch_name", ["gpt2", "llama", "bert"])
def test_random_input_states_run_random_embeddings_through_the_model(arch_name) -> None:
    from tests.conftest import tiny_model

    model = tiny_model(arch_name)
    ids = [[5, 7, 9], [3], [1, 2, 3, 4, 5]]
    out = controls.random_input_states(model, ids, seed=4)
    n_layers = model.config.num_hidden_layers
    assert [a.shape[:2] for a in out] == [(n_layers + 1, 3), (n_layers + 1, 1), (n_layers + 1, 5)]
    again = controls.random_input_states(model, ids, seed=4)
    assert all(np.array_equal(a, b) for a, b in zip(out, again, strict=True))
    other = controls.random_input_states(model, ids, seed=5)
    assert not np.array_equal(out[0], other[0])
    # the blocks act on the random inputs: deeper states differ from layer 0
    assert not np.allclose(out[0][0], out[0][-1])
    with pytest.raises(ValueError, match="positive"):
        controls.random_input_states(model, [[]], seed=0)
    with pytest.raises(ValueError, match="sequence of token ids"):
        controls.random_input_states(model, [3, 1, 5], seed=0)  # lengths: the old interface


@pytest.mark.parametrize("arch_name", ["gpt2", "llama", "qwen2", "gemma3", "bert"])
def test_random_input_states_do_not_depend_on_the_batch(arch_name) -> None:
    """Prompts of different lengths run together, right-padded and masked, give the states
    that each prompt gives alone (the same draws, the same forward up to float rounding)."""
    from tests.conftest import tiny_model

    model = tiny_model(arch_name)
    ids = [[4, 8, 15], [16], [23, 42, 4, 8, 15, 16], [23, 42]]
    alone = controls.random_input_states(model, ids, seed=2, batch_size=1)
    together = controls.random_input_states(model, ids, seed=2, batch_size=4)
    for a, b in zip(alone, together, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("arch_name", ["gpt2", "llama"])
def test_random_input_states_share_one_random_vocabulary(arch_name) -> None:
    """Defect 6 (issue 22): the draws were independent per prompt, so two prompts of one
    category never shared an input and every category or pair effect vanished by
    construction. Now a token gets the same random input in every prompt that holds it."""
    from tests.conftest import tiny_model

    model = tiny_model(arch_name)
    ids = [[7, 3, 9], [7, 3, 9], [7, 11]]
    inputs = controls.random_vocabulary(model, ids, seed=1)
    assert torch.equal(inputs[0], inputs[1])  # identical prompts, the same random inputs
    out = controls.random_input_states(model, ids, seed=1)
    # and the same states, up to the rounding of batched matmuls (rows of one padded batch
    # may differ in the last bits: 7.5e-8 on a 2-core machine); per-prompt draws differ by O(1)
    np.testing.assert_allclose(out[0], out[1], rtol=1e-5, atol=1e-6)
    # causal: position 0 sees only itself, so a shared first token has one state at every layer
    np.testing.assert_allclose(out[0][:, 0], out[2][:, 0], rtol=1e-5, atol=1e-6)
    assert not np.allclose(out[0][:, 1], out[2][:, 1])  # different tokens, different states
    emb = controls.random_vocabulary(model, [[7, 3], [3]], seed=1)
    assert torch.equal(emb[0][1], emb[1][0]) and not torch.equal(emb[0][0], emb[0][1])


def _category_ci(states: list[np.ndarray], labels: np.ndarray) -> float:
    """Convergence index at the last layer of mean-pooled states (L+1, T, d) per prompt."""
    x = np.stack([a.mean(axis=1) for a in states])  # (n, L+1, d)
    return float(np.nanmean(geometry.convergence_index_per_prompt(x, labels)[:, -1]))


def test_random_embedding_control_keeps_a_category_effect_carried_by_shared_tokens() -> None:
    """The control can fail: when a category's prompts share a token (its effect lives in
    token overlap, not in learned embeddings) the category structure survives the random
    vocabulary, where per-prompt draws (every token new) remove it."""
    from tests.conftest import tiny_model

    model = tiny_model("gpt2")
    rng = np.random.default_rng(0)
    labels = np.repeat(["a", "b", "c"], 8)
    marker = {"a": 300, "b": 301, "c": 302}
    shared = [[marker[k], *rng.integers(0, 290, 3).tolist()] for k in labels]
    unique = [[1000 + 10 * i + j for j in range(4)] for i in range(len(labels))]  # no overlap
    kept = _category_ci(controls.random_input_states(model, shared, seed=0), labels)
    gone = _category_ci(controls.random_input_states(model, unique, seed=0), labels)
    assert kept > 0.2 and abs(gone) < 0.1, (kept, gone)


