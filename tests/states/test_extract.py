"""The extraction engine against Hugging Face's own hidden states."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import lamina
from lamina.sources.models import get_adapter
from lamina.states.extract import Trajectories, extract
from tests.conftest import ADAPTER_ARCHS, SAMPLE_TEXT, _byte_tokenizer

MIXED = ["cat", "A river bank is muddy.", SAMPLE_TEXT[2], "Seven plus five", SAMPLE_TEXT[0], "dog"]


def _reference(model, tokenizer, text: str) -> np.ndarray:
    """HF hidden states of one text, unpadded: hidden_states[0..L-1] plus the last block's
    output before the final norm. (len(text_tokens), L+1, d)"""
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    adapter = get_adapter(model)
    blocks = adapter.block_list(model)
    captured = {}
    handle = blocks[-1].register_forward_hook(
        lambda m, a, out: captured.__setitem__("last", out[0] if isinstance(out, tuple) else out)
    )
    kwargs = {} if adapter.causal else {"token_type_ids": torch.zeros_like(ids)}
    with torch.no_grad():
        out = adapter.base(model)(input_ids=ids, output_hidden_states=True, **kwargs)
    handle.remove()
    hs = list(out.hidden_states[: len(blocks)]) + [captured["last"]]
    return torch.stack(hs, 0)[:, 0].transpose(0, 1).numpy()  # (T, L+1, d)


@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("pool", ["last", "mean"])
def test_states_equal_hf_hidden_states_in_mixed_batches(tiny_models, arch, pool, padding_side):
    model = tiny_models[arch]
    tok = _byte_tokenizer(padding_side)
    got = extract(model, tok, MIXED, pool=pool, batch_size=4, progress=False).states
    assert got.shape == (len(MIXED), 4, 32)
    for i, text in enumerate(MIXED):
        ref = _reference(model, tok, text)
        want = ref[-1] if pool == "last" else ref.mean(0)
        np.testing.assert_allclose(got[i], want, rtol=1e-5, atol=1e-5)


def test_every_model_type_of_every_adapter_row_has_a_tiny_model():
    """The table-driven fixture covers ADAPTERS: a new row without a tiny model fails here."""
    from lamina.sources.models import ADAPTERS

    named = {t for adapter in ADAPTERS.values() for t in adapter.model_types}
    assert named == set(ADAPTER_ARCHS)


@pytest.mark.parametrize("pool", ["last", "mean", "none"])
def test_every_adapter_row_gives_hf_hidden_states(adapter_model, pool):
    """Extraction through each adapter row (incl. Mistral, Qwen3, OLMo2) equals Hugging
    Face's hidden states, in one padded batch, and the read/write map lists every block."""
    from lamina.weights import linear_maps

    model_type, model = adapter_model
    assert model.config.model_type == model_type
    tok = _byte_tokenizer("left")
    got = extract(model, tok, MIXED, pool=pool, batch_size=4, progress=False).states
    for i, text in enumerate(MIXED):
        ref = _reference(model, tok, text)  # (T, L+1, d)
        want = {"last": ref[-1], "mean": ref.mean(0), "none": ref.transpose(1, 0, 2)}[pool]
        np.testing.assert_allclose(got[i], want, rtol=1e-5, atol=1e-5)
    n_layers = get_adapter(model).n_layers(model)
    layers = {m.layer for m in linear_maps(model, embeddings=False) if m.layer is not None}
    assert layers == set(range(n_layers))


def test_final_state_is_before_the_final_norm(tiny_models):
    model = tiny_models["gpt2"]
    tok = _byte_tokenizer()
    ids = tok(MIXED[1], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        post_norm = model(ids, output_hidden_states=True).hidden_states[-1][0, -1].numpy()
    got = extract(model, tok, [MIXED[1]], progress=False).states[0, -1]
    assert not np.allclose(got, post_norm, atol=1e-3)
    normed = model.transformer.ln_f(torch.from_numpy(got)).detach().numpy()
    np.testing.assert_allclose(normed, post_norm, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_left_padding_gives_same_states_as_alone(tiny_models, arch, padding_side):
    model = tiny_models[arch]
    tok = _byte_tokenizer(padding_side)
    batched = extract(model, tok, MIXED, pool="none", batch_size=6, progress=False).states
    for i, text in enumerate(MIXED):
        alone = extract(model, tok, [text], pool="none", progress=False).states[0]
        assert batched[i].shape == alone.shape
        np.testing.assert_allclose(batched[i], alone, rtol=1e-5, atol=1e-5)


def test_requested_layers_subset_and_order(tiny_models):
    model = tiny_models["llama"]
    tok = _byte_tokenizer()
    full = extract(model, tok, MIXED, progress=False)
    part = extract(model, tok, MIXED, layers=[2, 0], progress=False)
    assert part.layers == [2, 0]
    np.testing.assert_allclose(part.states[:, 0], full.states[:, 2], atol=1e-6)
    np.testing.assert_allclose(part.states[:, 1], full.states[:, 0], atol=1e-6)


def test_stops_after_the_deepest_requested_layer(tiny_models):
    model = tiny_models["llama"]
    tok = _byte_tokenizer()
    called = []
    handle = model.model.layers[2].register_forward_hook(lambda *a: called.append(1))
    extract(model, tok, MIXED, layers=[0, 1], progress=False)
    handle.remove()
    assert called == []


def test_meta_records_provenance(tiny_models):
    t = extract(tiny_models["gpt2"], _byte_tokenizer(), MIXED[:2], progress=False)
    for key in ("model", "revision", "dtype", "pool", "lamina_version", "lamina_commit"):
        assert key in t.meta
    assert t.meta["pool"] == "last" and t.meta["dtype"] == "float32"


def test_save_load_round_trip(tmp_path, tiny_models):
    tok = _byte_tokenizer()
    for pool in ("last", "none"):
        t = extract(tiny_models["qwen2"], tok, MIXED, pool=pool, progress=False)
        path = t.save(tmp_path / f"{pool}.safetensors")
        back = Trajectories.load(path)
        assert back.texts == t.texts and back.layers == t.layers and back.meta == t.meta
        if pool == "none":
            for a, b in zip(back.states, t.states, strict=True):
                np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_array_equal(back.states, t.states)


def test_cache_hit_on_repeat_skips_the_forward_pass(tmp_path, tiny_models):
    model, tok = tiny_models["gpt2"], _byte_tokenizer()
    first = extract(model, tok, MIXED, cache=tmp_path, progress=False)
    assert len(list(tmp_path.glob("*.safetensors"))) == 1
    calls = []
    handle = model.transformer.h[0].register_forward_hook(lambda *a: calls.append(1))
    second = extract(model, tok, MIXED, cache=tmp_path, progress=False)
    handle.remove()
    assert calls == []
    np.testing.assert_array_equal(first.states, second.states)
    # a different model must not hit the same entry
    other = extract(tiny_models["llama"], tok, MIXED, cache=tmp_path, progress=False)
    assert other.states.shape == first.states.shape
    assert len(list(tmp_path.glob("*.safetensors"))) == 2


@pytest.mark.parametrize(
    ("texts", "kwargs", "message"),
    [
        ([], {}, "empty"),
        (["fine", ""], {}, r"texts\[1\] is an empty"),
        (["fine", "   "], {}, r"texts\[1\] is an empty or blank"),
        (["word " * 200], {}, r"texts\[0\] has \d+ tokens, more than the model's context of 64"),
        (["fine"], {"pool": "max"}, "unknown pool 'max'"),
        (["fine"], {"layers": [9]}, "layers must lie in 0..3"),
    ],
)
def test_bad_input_gives_a_clear_error(tiny_models, texts, kwargs, message):
    with pytest.raises(ValueError, match=message):
        extract(tiny_models["gpt2"], _byte_tokenizer(), texts, progress=False, **kwargs)


def test_max_length_truncates_and_records_it(tiny_models):
    t = extract(
        tiny_models["gpt2"],
        _byte_tokenizer(),
        ["word " * 200, "cat"],
        max_length=16,
        progress=False,
    )
    assert t.meta["truncated"] == [0]


def test_unknown_model_offline_names_it_and_lists_what_is_available():
    with pytest.raises(
        lamina.ModelNotFoundError, match=r"'no-such-org/no-such-model'.*Available offline: .*minilm"
    ):
        lamina.load_model("no-such-org/no-such-model")


def test_minilm_loads_offline_with_seven_states_of_width_384():
    model, tok = lamina.load_model("minilm")
    t = extract(model, tok, ["a cat sat on the mat", "the bank of the river"], progress=False)
    assert t.states.shape == (2, 7, 384)
    assert np.isfinite(t.states).all()
