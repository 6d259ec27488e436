"""lamina.weights.edits: rank-1 write edits and single-group adaptation."""

from __future__ import annotations

import pytest
import torch

from lamina.weights import linear_maps, norm_gain, post_norm_gain
from lamina.weights.edits import rank1_write_edit, single_group_parameters, unembedding_direction
from tests.conftest import SAMPLE_TEXT, _byte_tokenizer, tiny_model


@pytest.fixture(scope="module")
def tok():
    return _byte_tokenizer()


@pytest.mark.parametrize("arch", ["gpt2", "llama", "gemma3"])
def test_rank1_write_edit_changes_predictions_and_restores_bit_exactly(tok, arch):
    model = tiny_model(arch)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    enc = tok(SAMPLE_TEXT[:2], return_tensors="pt", padding=True)
    with torch.no_grad():
        logits0 = model(**enc).logits
    direction = unembedding_direction(model, 42)
    with rank1_write_edit(model, direction, 0.5) as edits:
        with torch.no_grad():
            logits1 = model(**enc).logits
        write = [m for m in linear_maps(model) if m.kind == "write" and m.layer is not None]
        assert set(edits) == {m.key for m in write}
        for m in write:
            delta = m.weight(model) - m.as_matrix(before[m.parameter]).float()
            torch.testing.assert_close(delta, edits[m.key], rtol=1e-4, atol=1e-5)
            assert torch.linalg.matrix_rank(edits[m.key]) == 1
            u = direction / direction.norm()
            gain = post_norm_gain(model, m)  # Gemma writes before a post-norm of gain 1 + γ
            assert (gain is not None) == (arch == "gemma3")
            assert float((edits[m.key] - torch.outer(u, u @ edits[m.key])).abs().max()) < 1e-5
    assert not torch.allclose(logits0, logits1)
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())


def test_rank1_write_edit_restores_after_an_error():
    model = tiny_model("llama")
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with pytest.raises(RuntimeError, match="boom"):
        with rank1_write_edit(model, torch.randn(32), 1.0):
            raise RuntimeError("boom")
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())
    with pytest.raises(ValueError, match="writes 32 dims but direction has 7"):
        with rank1_write_edit(model, torch.randn(7), 1.0):
            pass
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())


def test_unembedding_direction_is_the_token_row():
    model = tiny_model("llama")
    torch.testing.assert_close(unembedding_direction(model, 5), model.lm_head.weight[5])
    gamma = unembedding_direction(model, 5, through_final_norm=True)
    torch.testing.assert_close(gamma, model.lm_head.weight[5] * model.model.norm.weight)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        unembedding_direction(model, 320)


@pytest.mark.parametrize("arch", ["gpt2", "llama", "gemma3"])
@pytest.mark.parametrize("group", ["qk", "vo", "mlp_in", "mlp_out"])
def test_single_group_parameters_train_only_that_group(tok, arch, group):
    model = tiny_model(arch, n_layers=2)
    params = single_group_parameters(model, group)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert {id(p) for p in params} == {id(p) for p in model.parameters() if p.requires_grad}
    roles = {
        "qk": {"q", "k"},
        "vo": {"v", "attn_out"},
        "mlp_in": {"mlp_gate", "mlp_up"},
        "mlp_out": {"mlp_out"},
    }[group]
    maps = [m for m in linear_maps(model, embeddings=False)]
    assert {m.parameter for m in maps if m.role in roles} <= trainable
    assert (
        not (
            {m.parameter for m in maps if m.role not in roles}
            - {m.parameter for m in maps if m.role in roles}
        )
        & trainable
    )
    enc = tok(SAMPLE_TEXT[:2], return_tensors="pt", padding=True)
    model.train()
    model(**enc, labels=enc["input_ids"]).loss.backward()
    for m in maps:  # GPT-2's fused c_attn: rows outside the group get no gradient
        grad = model.get_submodule(m.module).weight.grad
        if grad is not None:
            assert (float(m.as_matrix(grad).abs().max()) > 0) == (m.role in roles), m.key


def test_norm_gain_is_one_plus_weight_for_gemma_and_the_weight_elsewhere():
    gemma, llama = tiny_model("gemma3"), tiny_model("llama")
    g_norm, l_norm = gemma.model.norm, llama.model.norm
    torch.testing.assert_close(norm_gain(g_norm), 1 + g_norm.weight.detach())
    torch.testing.assert_close(norm_gain(l_norm), l_norm.weight.detach())
    x = torch.randn(3, g_norm.weight.shape[0])
    # the gain is what the module multiplies by: x / rms(x) * gain
    rms = x.pow(2).mean(-1, keepdim=True).add(g_norm.eps).sqrt()
    torch.testing.assert_close(g_norm(x), x / rms * norm_gain(g_norm), rtol=1e-4, atol=1e-5)


def test_unembedding_direction_through_final_norm_uses_gemmas_gain():
    model = tiny_model("gemma3")
    row = unembedding_direction(model, 7)
    folded = unembedding_direction(model, 7, through_final_norm=True)
    torch.testing.assert_close(folded, row * (1 + model.model.norm.weight.detach()))
