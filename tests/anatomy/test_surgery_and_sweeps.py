"""Layer surgery, perplexity, the ablation sweep and weight predictability (paper 3)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from lamina import anatomy as A
from lamina.anatomy.predictability import (
    delta_correlation,
    layer_structure,
    predicted_layer_state,
    ridge_depth_fit,
    singular_spectra,
    weight_predictability,
)
from lamina.sources.models import get_adapter

from ..conftest import tiny_model

SURGERY_OPTIONS = {
    "skip": {},
    "interpolate": {},
    "scale": {"alpha": 0.9},
    "noise": {"rel_scale": 0.5, "seed": 1},
    "reinit": {"seed": 2},
    "predicted": {},
}
LM_ARCHS = ["gpt2", "llama", "qwen2", "gemma3"]


def _ids(n: int = 6, t: int = 12, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 320, (n, t), generator=torch.Generator().manual_seed(seed))


def _snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _assert_same(model: torch.nn.Module, snap: dict[str, torch.Tensor]) -> None:
    for k, v in model.state_dict().items():
        assert torch.equal(v, snap[k]), f"{k} was not restored bit-exactly"


def _logits(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids, use_cache=False).logits


@pytest.fixture(scope="module")
def lm_models():
    return {a: tiny_model(a, n_layers=4) for a in LM_ARCHS}


@pytest.mark.parametrize("arch", ["gpt2", "llama", "gemma3"])
@pytest.mark.parametrize("surgery", sorted(SURGERY_OPTIONS))
def test_surgery_changes_output_inside_and_restores_weights_bit_exactly(lm_models, arch, surgery):
    model, ids = lm_models[arch], _ids()
    snap, clean = _snapshot(model), _logits(model, ids)
    with A.apply_surgery(model, surgery, 1, **SURGERY_OPTIONS[surgery]):
        assert not torch.equal(_logits(model, ids), clean), "surgery had no effect"
    _assert_same(model, snap)
    assert torch.equal(_logits(model, ids), clean)


@pytest.mark.parametrize("surgery", sorted(SURGERY_OPTIONS))
def test_surgery_restores_weights_after_an_exception(lm_models, surgery):
    model = lm_models["llama"]
    snap = _snapshot(model)
    with pytest.raises(RuntimeError, match="boom"):
        with A.apply_surgery(model, surgery, 2, **SURGERY_OPTIONS[surgery]):
            raise RuntimeError("boom")
    _assert_same(model, snap)
    assert all(len(b._forward_hooks) == 0 for b in get_adapter(model).block_list(model))


@pytest.mark.parametrize("arch", ["gpt2", "llama", "gemma3"])
def test_skip_equals_copy_with_attention_out_and_mlp_down_zeroed(lm_models, arch):
    model, ids = lm_models[arch], _ids()
    zeroed = copy.deepcopy(model)
    adapter = get_adapter(zeroed)
    with torch.no_grad():
        for role in ("attn_out", "mlp_out"):
            for p in adapter.block_part(zeroed, 2, adapter.write[role]).parameters():
                p.zero_()
    with A.skip_layers(model, [2]):
        skipped = _logits(model, ids)
    torch.testing.assert_close(skipped, _logits(zeroed, ids), rtol=0, atol=1e-6)
    assert not torch.allclose(skipped, _logits(model, ids), atol=1e-3)


def test_interpolate_sets_mean_of_neighbours_and_edges_copy_their_neighbour(lm_models):
    model = lm_models["llama"]
    blocks = get_adapter(model).block_list(model)
    w = [b.self_attn.q_proj.weight for b in blocks]
    with A.interpolate_neighbours(model, 1):
        assert torch.allclose(w[1], (w[0] + w[2]) / 2)
    with A.interpolate_neighbours(model, 3):
        assert torch.equal(w[3], w[2])
    with A.interpolate_neighbours(model, 0):
        assert torch.equal(w[0], w[1])


def test_noise_std_is_rel_scale_times_tensor_rms(lm_models):
    model = lm_models["llama"]
    w = get_adapter(model).block_list(model)[1].mlp.up_proj.weight
    before = w.detach().clone()
    with A.noise_layer(model, 1, rel_scale=0.5, seed=0):
        ratio = (w.detach() - before).pow(2).mean().sqrt() / before.pow(2).mean().sqrt()
    assert abs(float(ratio) - 0.5) < 0.05


def test_scale_multiplies_matrices_only_by_default(lm_models):
    model = lm_models["gpt2"]
    block = get_adapter(model).block_list(model)[0]
    w, ln = block.attn.c_attn.weight.detach().clone(), block.ln_1.weight.detach().clone()
    with A.scale_layer(model, 0, 0.5):
        assert torch.equal(block.attn.c_attn.weight, w * 0.5)
        assert torch.equal(block.ln_1.weight, ln)


@pytest.mark.parametrize("layer", [-1, 4, 99])
def test_out_of_range_layer_gives_a_clear_error(lm_models, layer):
    model = lm_models["gpt2"]
    with pytest.raises(ValueError, match="out of range.*4 layers"):
        A.apply_surgery(model, "scale", layer, alpha=0.5)
    with pytest.raises(ValueError, match="out of range"):
        with A.skip_layers(model, [layer]):
            pass
    with pytest.raises(ValueError, match="out of range"):
        A.ablation_sweep(model, _ids(), ["skip"], [layer])


def test_unknown_surgery_gives_a_clear_error(lm_models):
    with pytest.raises(ValueError, match="unknown surgery 'lobotomy'.*valid"):
        A.apply_surgery(lm_models["gpt2"], "lobotomy", 0)
    with pytest.raises(ValueError, match="unknown surgery"):
        A.ablation_sweep(lm_models["gpt2"], _ids(), ["skip", "lobotomy"])


def test_perplexity_equals_exp_of_hugging_face_loss(lm_models):
    model, ids = lm_models["llama"], _ids(8, 10)
    with torch.no_grad():
        hf = model(input_ids=ids, labels=ids).loss
    res = A.perplexity(model, ids, batch_size=3, n_bootstrap=200)
    assert res.nll == pytest.approx(float(hf), rel=1e-5)
    assert res.ci_low < res.ppl < res.ci_high
    assert res.nll_per_seq.shape == (8,) and res.n_tokens == 8 * 9


def test_perplexity_of_ragged_list_pools_tokens(lm_models):
    model = lm_models["gpt2"]
    seqs = [_ids(1, 12, 1)[0], _ids(1, 7, 2)[0], _ids(1, 12, 3)[0]]
    res = A.perplexity(model, seqs, n_bootstrap=0)
    alone = [A.perplexity(model, [s], n_bootstrap=0) for s in seqs]
    pooled = sum(r.nll * r.n_tokens for r in alone) / sum(r.n_tokens for r in alone)
    assert res.nll == pytest.approx(pooled, rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("arch", LM_ARCHS)
def test_prefix_reuse_sweep_equals_naive_sweep(lm_models, arch):
    model, ids = lm_models[arch], _ids(5, 12)
    surgeries = list(SURGERY_OPTIONS)
    opts = {k: v for k, v in SURGERY_OPTIONS.items() if v}
    clean1, counts1, fast = A.sweep_nll(model, ids, surgeries, batch_size=2, **opts)
    clean2, counts2, slow = A.sweep_nll(model, ids, surgeries, method="naive", batch_size=2, **opts)
    assert np.array_equal(clean1, clean2) and np.array_equal(counts1, counts2)
    assert fast.keys() == slow.keys() and len(fast) == len(surgeries) * 4
    for key in fast:
        assert np.array_equal(fast[key], slow[key]), key


def test_prefix_sweep_without_full_cache_equals_naive(lm_models):
    model, ids = lm_models["llama"], _ids(4, 10)
    _, _, advanced = A.sweep_nll(
        model, ids, ["skip", "scale"], [1, 3], cache_limit_mb=0, scale={"alpha": 0.5}
    )
    _, _, naive = A.sweep_nll(
        model, ids, ["skip", "scale"], [1, 3], method="naive", scale={"alpha": 0.5}
    )
    assert all(np.array_equal(advanced[k], naive[k]) for k in naive)


def test_ablation_sweep_frame(lm_models):
    model, ids = lm_models["gpt2"], _ids(8, 12)
    df = A.ablation_sweep(model, ids, ["skip"], n_bootstrap=300)
    assert list(df["layer"]) == [0, 1, 2, 3]
    base = df.attrs["baseline_ppl"]
    assert np.allclose(df["delta_pct"], 100 * (df["ppl"] / base - 1))
    assert (df["delta_ci_low"] <= df["delta_pct"]).all() and (
        df["delta_pct"] <= df["delta_ci_high"]
    ).all()


def test_options_for_a_surgery_not_in_the_sweep_are_rejected(lm_models):
    with pytest.raises(ValueError, match="not in the sweep"):
        A.ablation_sweep(lm_models["gpt2"], _ids(), ["skip"], scale={"alpha": 0.9})


def test_ridge_r2_is_one_for_weights_linear_in_depth():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=50), rng.normal(size=50)
    w = np.stack([a + l * b for l in range(8)])
    r2, per_layer, pred = ridge_depth_fit(w, alpha=1e-10, degree=2)
    assert r2 == pytest.approx(1.0, abs=1e-8)
    assert np.allclose(per_layer, 1.0, atol=1e-6) and np.allclose(pred, w, atol=1e-6)
    noise_r2, _, _ = ridge_depth_fit(rng.normal(size=(8, 50)), alpha=1e-10)
    assert noise_r2 < 0.5


def test_weight_predictability_of_a_model_linear_in_depth_is_one():
    model = tiny_model("llama", n_layers=6)
    torch.manual_seed(1)
    blocks = get_adapter(model).block_list(model)
    with torch.no_grad():
        for name, p0 in blocks[0].named_parameters():
            step = torch.randn_like(p0)
            for l, b in enumerate(blocks):
                dict(b.named_parameters())[name].copy_(p0 + l * step)
    df = weight_predictability(model, alpha=1e-9)
    assert set(df["matrix"]) == {"q", "k", "v", "mlp_gate", "mlp_up", "attn_out", "mlp_out"}
    assert np.allclose(df["r2"], 1.0, atol=1e-6)
    dc = delta_correlation(model)
    assert np.allclose(dc["corr"], 1.0, atol=1e-6)
    state = predicted_layer_state(model, 2, alpha=1e-9)
    torch.testing.assert_close(
        state["self_attn.q_proj.weight"], blocks[2].self_attn.q_proj.weight, atol=1e-4, rtol=0
    )


def test_delta_correlation_of_iid_weights_is_near_minus_half():
    model = tiny_model("gpt2", n_layers=6)
    dc = delta_correlation(model)
    assert abs(dc["corr"].mean() + 0.5) < 0.05


def test_stable_and_effective_rank_of_identity_are_full():
    model = tiny_model("llama", n_layers=2)
    with torch.no_grad():
        get_adapter(model).block_list(model)[0].self_attn.q_proj.weight.copy_(torch.eye(32) * 3)
    st = layer_structure(model).query("layer == 0 and matrix == 'q'").iloc[0]
    assert st["stable_rank"] == pytest.approx(32) and st["effective_rank"] == pytest.approx(32)
    assert st["frobenius"] == pytest.approx(3 * np.sqrt(32))
    spectra = singular_spectra(model)
    assert spectra["q"].shape == (2, 32) and spectra["mlp_up"].shape == (2, 32)


@pytest.mark.slow
def test_recovery_steps_counts_steps_and_restores_the_model():
    model = tiny_model("gpt2", n_layers=3)
    snap = _snapshot(model)
    train, ev = _ids(32, 12, 5), _ids(6, 12, 6)
    out = A.recovery_steps(
        model,
        train,
        ev,
        1,
        rel_noise=2.0,
        budget_steps=6,
        lr=1e-3,
        eval_every=3,
        tolerance_pct=1000.0,
        batch_size=4,
    )
    assert out["perturbed_ppl"] != out["baseline_ppl"]
    assert out["steps_to_recover"] == 0 and out["recovered"]
    strict = A.recovery_steps(
        model,
        train,
        ev,
        1,
        rel_noise=2.0,
        budget_steps=6,
        lr=1e-3,
        eval_every=3,
        tolerance_pct=-99.0,
        batch_size=4,
    )
    assert strict["steps_to_recover"] is None and [s for s, _ in strict["curve"]] == [0, 3, 6]
    _assert_same(model, snap)
    assert not model.training


def test_spearman_ci_brackets_rho():
    x = np.arange(12.0)
    res = A.spearman_ci(x, x + np.random.default_rng(0).normal(size=12), n_bootstrap=300)
    assert res["ci_low"] <= res["rho"] <= res["ci_high"] and res["rho"] > 0.8


def test_chunk_tokens_cuts_windows_with_eos_between_texts(byte_tokenizer):
    ids = A.chunk_tokens(byte_tokenizer, ["the cat sat", "a dog ran far away"], 4)
    assert ids.dim() == 2 and ids.shape[1] == 4 and ids.dtype == torch.long
    assert byte_tokenizer.eos_token_id in ids.reshape(-1).tolist()
