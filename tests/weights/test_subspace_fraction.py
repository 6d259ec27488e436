"""lamina.weights: the read/write map, probe subspaces, the RSF and checkpoint deltas."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from transformers.pytorch_utils import Conv1D

from lamina.weights import (
    enrichment,
    input_second_moments,
    k_sweep,
    linear_maps,
    prediction_basis,
    principal_basis,
    probe_bases,
    random_matrix_baseline,
    random_matrix_null,
    random_orthonormal,
    random_subspace_baseline,
    random_subspace_null,
    relative_subspace_fraction,
    weight_deltas,
)
from tests.conftest import SAMPLE_TEXT, _byte_tokenizer, tiny_model

CAUSAL = ["gpt2", "llama", "qwen2", "gemma3"]


@pytest.fixture(scope="module")
def tok():
    return _byte_tokenizer()


@pytest.fixture(scope="module")
def models():
    return {a: tiny_model(a) for a in CAUSAL}


# -- the read/write map -------------------------------------------------------------------


@pytest.mark.parametrize("arch", CAUSAL)
def test_linear_maps_cover_every_linear_module_exactly_once(models, arch):
    model = models[arch]
    maps = linear_maps(model)
    linear_modules = {n for n, m in model.named_modules() if isinstance(m, (nn.Linear, Conv1D))}
    assert {m.module for m in maps if m.role != "embed"} == linear_modules
    assert len({m.key for m in maps}) == len(maps)
    for path in linear_modules:
        listed = [m for m in maps if m.module == path]
        module = model.get_submodule(path)
        d_out = module.weight.shape[1] if isinstance(module, Conv1D) else module.weight.shape[0]
        rows = sorted(m.rows or (0, d_out) for m in listed)
        assert rows[0][0] == 0 and rows[-1][1] == d_out  # fused c_attn: Q, K, V tile its outputs
        assert all(a[1] == b[0] for a, b in zip(rows, rows[1:], strict=False))
    n_layers = model.config.num_hidden_layers
    assert sum(m.kind == "read" and m.layer is not None for m in maps) == n_layers * (
        4 if arch == "gpt2" else 5
    )
    assert sum(m.kind == "write" and m.layer is not None for m in maps) == n_layers * 2


@pytest.mark.parametrize("arch", CAUSAL)
def test_linear_map_weights_reproduce_the_forward_pass(models, tok, arch):
    model = models[arch]
    maps = linear_maps(model)
    seen: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    hooks = [
        model.get_submodule(p).register_forward_hook(
            lambda mod, args, out, p=p: seen.__setitem__(p, (args[0], out))
        )
        for p in {m.module for m in maps}
    ]
    ids = tok(SAMPLE_TEXT[:2], return_tensors="pt", padding=True)["input_ids"]
    with torch.no_grad():
        model(input_ids=ids)
    for h in hooks:
        h.remove()
    for m in maps:
        x, y = seen[m.module]
        w = m.weight(model)
        if m.role == "embed":
            expected = (
                w @ nn.functional.one_hot(x, w.shape[1]).float().transpose(-1, -2)
            ).transpose(-1, -2)
            torch.testing.assert_close(y, expected)
            continue
        bias = getattr(model.get_submodule(m.module), "bias", None)
        expected = x @ w.T + (0 if bias is None else m.as_bias(bias))
        lo, hi = m.rows or (0, y.shape[-1])
        torch.testing.assert_close(y[..., lo:hi], expected, rtol=1e-5, atol=1e-5, msg=m.key)


def test_gqa_key_value_maps_have_kv_heads_rows(models):
    model = models["llama"]  # 4 query heads, 2 key/value heads, head_dim 8
    shapes = {m.role: tuple(m.weight(model).shape) for m in linear_maps(model) if m.layer == 0}
    assert shapes["q"] == (32, 32) and shapes["k"] == (16, 32) and shapes["v"] == (16, 32)
    assert shapes["mlp_up"] == (64, 32) and shapes["mlp_out"] == (32, 64)


def test_gpt2_conv1d_weights_are_transposed_into_y_equals_wx(models):
    model = models["gpt2"]
    by_key = {m.key: m for m in linear_maps(model)}
    c_fc = model.transformer.h[0].mlp.c_fc.weight  # stored (d_in=32, d_out=128)
    assert torch.equal(by_key["0.mlp_up"].weight(model), c_fc.T)
    c_attn = model.transformer.h[0].attn.c_attn.weight
    assert torch.equal(by_key["0.k"].weight(model), c_attn[:, 32:64].T)


def test_tied_embeddings_are_listed_once_and_untied_twice(models):
    gpt2_roles = [m.role for m in linear_maps(models["gpt2"]) if m.layer is None]
    assert gpt2_roles == ["unembed"]
    assert [m.tied for m in linear_maps(models["gpt2"]) if m.layer is None] == [True]
    llama = [m for m in linear_maps(models["llama"]) if m.layer is None]
    assert [(m.role, m.kind, m.tied) for m in llama] == [
        ("embed", "write", False),
        ("unembed", "read", False),
    ]
    assert llama[0].weight(models["llama"]).shape == (32, 320)


# -- subspaces ----------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
@pytest.mark.parametrize("centred", [False, True])
def test_streaming_second_moment_equals_batch_computation(models, tok, arch, centred):
    model = models[arch]
    maps = [m for m in linear_maps(model) if m.role != "embed"]
    streamed = input_second_moments(
        model, tok, SAMPLE_TEXT, maps=maps, centred=centred, batch_size=2
    )
    captured: dict[str, torch.Tensor] = {}
    hooks = [
        model.get_submodule(p).register_forward_pre_hook(
            lambda mod, args, p=p: captured.__setitem__(p, args[0])
        )
        for p in {m.module for m in maps}
    ]
    enc = tok(SAMPLE_TEXT, return_tensors="pt", padding=True)
    with torch.no_grad():
        model(**enc)
    for h in hooks:
        h.remove()
    keep = enc["attention_mask"].bool()
    assert set(streamed) == {m.key for m in maps}
    for m in maps:
        a = captured[m.module][keep].double()
        expected = a.T @ a / len(a)
        if centred:
            expected = expected - torch.outer(a.mean(0), a.mean(0))
        torch.testing.assert_close(streamed[m.key], expected, rtol=1e-6, atol=1e-6, msg=m.key)


def test_principal_basis_returns_top_eigenvectors_in_order():
    q = random_orthonormal(6, 6, torch.Generator().manual_seed(1))
    moment = q @ torch.diag(torch.tensor([1.0, 9.0, 3.0, 0.5, 7.0, 2.0], dtype=torch.float64)) @ q.T
    basis = principal_basis(moment, 3)
    torch.testing.assert_close(basis.T @ basis, torch.eye(3, dtype=torch.float64))
    for j, col in enumerate([1, 4, 2]):
        assert abs(float(basis[:, j] @ q[:, col])) == pytest.approx(1.0, abs=1e-10)


def test_prediction_basis_spans_top_right_singular_vectors_of_unembedding(models):
    model = models["llama"]
    basis = prediction_basis(model, 5)
    vh = torch.linalg.svd(model.lm_head.weight.double(), full_matrices=False).Vh[:5]
    torch.testing.assert_close(basis @ basis.T, vh.T @ vh, rtol=1e-8, atol=1e-8)


def test_probe_bases_pair_read_maps_with_inputs_and_write_maps_with_predictions(models, tok):
    model = models["llama"]
    maps = linear_maps(model, embeddings=False)
    moments = input_second_moments(
        model, tok, SAMPLE_TEXT[:2], maps=[m for m in maps if m.kind == "read"]
    )
    bases = probe_bases(model, maps, moments, k_max=8)
    assert bases["0.q"][1] == "input" and bases["0.mlp_out"][1] == "output"
    assert bases["1.mlp_up"][0].shape == (32, 8)


# -- the relative subspace fraction ---------------------------------------------------------


@pytest.mark.parametrize("side", ["input", "output"])
def test_isotropic_gaussian_delta_gives_rsf_near_k_over_d(side):
    gen = torch.Generator().manual_seed(0)
    delta = torch.randn(300, 200, generator=gen)
    d = 200 if side == "input" else 300
    for k in (5, 40, 150):
        rsf = relative_subspace_fraction(delta, random_orthonormal(d, k, gen), side)
        assert rsf == pytest.approx(k / d, rel=0.1)
        assert enrichment(rsf, k, d) == pytest.approx(1.0, rel=0.1)


@settings(max_examples=30, deadline=None)
@given(
    d_out=st.integers(2, 12),
    d_in=st.integers(2, 12),
    frac=st.floats(0.05, 0.95),
    seed=st.integers(0, 99),
)
def test_delta_inside_basis_gives_one_and_orthogonal_gives_zero(d_out, d_in, frac, seed):
    gen = torch.Generator().manual_seed(seed)
    for side, d, other in (("input", d_in, d_out), ("output", d_out, d_in)):
        k = max(1, min(d - 1, round(frac * d)))
        q = random_orthonormal(d, d, gen)
        inside, outside = q[:, :k], q[:, k:]
        coef = torch.randn(other, k, generator=gen, dtype=torch.float64)
        delta_in = coef @ inside.T if side == "input" else (coef @ inside.T).T
        coef_o = torch.randn(other, d - k, generator=gen, dtype=torch.float64)
        delta_out = coef_o @ outside.T if side == "input" else (coef_o @ outside.T).T
        assert relative_subspace_fraction(delta_in, inside, side) == pytest.approx(1.0, abs=1e-10)
        assert relative_subspace_fraction(delta_out, inside, side) == pytest.approx(0.0, abs=1e-10)
        mixed = relative_subspace_fraction(delta_in + delta_out, inside, side)
        assert 0.0 <= mixed <= 1.0
        assert relative_subspace_fraction(
            3.7 * (delta_in + delta_out), inside, side
        ) == pytest.approx(mixed)


def test_rsf_rejects_a_basis_of_the_wrong_side_and_gives_nan_for_zero_delta():
    basis = random_orthonormal(4, 2, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="input-side basis must have 6 rows"):
        relative_subspace_fraction(torch.ones(4, 6), basis, "input")
    assert relative_subspace_fraction(
        torch.zeros(4, 6), basis, "output"
    ) != relative_subspace_fraction(torch.zeros(4, 6), basis, "output")


def test_empirical_baselines_centre_on_k_over_d():
    gen = torch.Generator().manual_seed(3)
    delta = torch.randn(40, 30, generator=gen) * torch.linspace(0.1, 3, 30)  # anisotropic ΔW
    sub = random_subspace_baseline(delta, 6, "input", n=200, seed=1)
    assert sub.ci_low <= 6 / 30 <= sub.ci_high and sub.q025 < sub.mean < sub.q975
    mat = random_matrix_baseline((40, 30), random_orthonormal(40, 8, gen), "output", n=200, seed=2)
    assert mat.ci_low <= 8 / 40 <= mat.ci_high


def test_each_null_is_defined_once_its_baseline_is_the_same_draws():
    """random_subspace_baseline / random_matrix_baseline are single-matrix views of
    random_subspace_null / random_matrix_null: the same seed gives the same draws, so the same
    mean and percentiles, and each draw is the RSF of its frame (relative_subspace_fraction)."""
    gen = torch.Generator().manual_seed(4)
    delta = torch.randn(12, 20, generator=gen) * torch.linspace(0.1, 3, 20)
    for side, k in (("input", 5), ("output", 3)):
        table = random_subspace_null({"x": delta}, {"x": side}, [k], n=50, seed=7)
        base = random_subspace_baseline(delta, k, side, n=50, seed=7)
        assert table["null_mean"].iloc[0] == pytest.approx(base.mean, rel=1e-12)
        assert table["null_q975"].iloc[0] == pytest.approx(base.q975, rel=1e-12)
        frame = random_orthonormal(20 if side == "input" else 12, 20 if side == "input" else 12,
                                   torch.Generator().manual_seed(7))[:, :k]  # fmt: skip
        assert base.values[0] == pytest.approx(relative_subspace_fraction(delta, frame, side))
    basis = random_orthonormal(20, 6, gen)
    rmat = random_matrix_null({"x": (12, 20)}, {"x": (basis, "input")}, [6], n=50, seed=2)
    mat = random_matrix_baseline((12, 20), basis, "input", n=50, seed=2)
    assert rmat["rmat_mean"].iloc[0] == pytest.approx(mat.mean, rel=1e-12)


def test_k_sweep_is_tidy_and_enrichment_is_rsf_over_k_over_d():
    gen = torch.Generator().manual_seed(0)
    basis = random_orthonormal(16, 16, gen)
    deltas = {"0.q": torch.randn(8, 16, generator=gen)}
    df = k_sweep(deltas, {"0.q": (basis, "input")}, [1, 4, 16, 32], n_random=5)
    assert list(df["k"]) == [1, 4, 16]
    assert df.loc[df.k == 16, "rsf"].item() == pytest.approx(1.0)
    assert (df["enrichment"] == df["rsf"] / df["iso"]).all()
    assert {"null_mean", "null_ci_low", "null_ci_high"} <= set(df.columns)


# -- checkpoint deltas ----------------------------------------------------------------------


def test_weight_deltas_are_fp32_differences_in_y_equals_wx(models):
    base = models["gpt2"]
    other = tiny_model("gpt2")
    with torch.no_grad():
        other.transformer.h[1].attn.c_attn.weight[:, 64:].add_(1.0)  # V block only
    deltas = weight_deltas(base, other)
    assert all(d.dtype == torch.float32 for d in deltas.values())
    assert float(deltas["1.v"].abs().min()) == pytest.approx(1.0, abs=1e-5)
    assert float(deltas["1.q"].abs().max()) == 0.0 and float(deltas["unembed"].abs().max()) == 0.0
    assert "embed" not in deltas  # tied: counted once


def test_weight_deltas_name_what_does_not_match(models):
    with pytest.raises(ValueError, match="different architectures.*gpt2.*llama"):
        weight_deltas(models["gpt2"], models["llama"])
    with pytest.raises(
        ValueError, match=r"model\.layers\.2\.self_attn\.q_proj\.weight.*not in model_b"
    ):
        weight_deltas(models["llama"], tiny_model("llama", n_layers=2))
    with pytest.raises(
        ValueError, match=r"parameter .*embed_tokens\.weight.*\(320, 32\).*\(400, 32\)"
    ):
        weight_deltas(models["llama"], tiny_model("llama", vocab_size=400))
