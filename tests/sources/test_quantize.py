"""GGUF quantisation control on tiny models: Q8_0 error small, Q4_1 larger, copies untouched."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lamina.sources.quantize import dequantize_roundtrip, quantize_model
from tests.conftest import tiny_model

IDS = torch.tensor([[5, 17, 200, 33, 8, 90, 91, 12, 250, 3]])


def _logits(model):
    with torch.no_grad():
        return model(input_ids=IDS).logits


def test_roundtrip_error_grows_as_bits_fall():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 128)).astype(np.float32)
    err = {
        q: np.linalg.norm(dequantize_roundtrip(w, q) - w) / np.linalg.norm(w)
        for q in ("Q8_0", "Q4_1", "Q4_0")
    }
    assert 0 < err["Q8_0"] < 0.01
    assert err["Q8_0"] * 5 < err["Q4_1"] < 0.2
    q8 = dequantize_roundtrip(w, "Q8_0")  # idempotent: already on the grid
    np.testing.assert_allclose(dequantize_roundtrip(q8, "Q8_0"), q8, atol=1e-6)


@pytest.mark.parametrize("arch", ["llama", "gpt2", "gemma3"])
def test_quantized_copy_moves_logits_a_little_for_q8_more_for_q4(arch):
    model = tiny_model(arch)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    clean = _logits(model)
    shift = {}
    for q in ("Q8_0", "Q4_1"):
        qm = quantize_model(model, q, embedding_qtype=None)
        assert qm is not model and qm.lamina_name.endswith(f"+{q}")
        rep = qm.lamina_quantization
        assert rep["tensors"] and all(e > 0 for e in rep["tensors"].values())
        shift[q] = (_logits(qm) - clean).norm().item() / clean.norm().item()
    for k, v in model.state_dict().items():  # the source is untouched
        assert torch.equal(v, before[k]), k
    assert 0 < shift["Q8_0"] < 0.05
    assert shift["Q4_1"] > 3 * shift["Q8_0"]


def test_gpt2_conv1d_is_quantised_along_its_input_dimension():
    model = tiny_model("gpt2")
    qm = quantize_model(model, "Q4_1")
    w = model.transformer.h[0].mlp.c_fc.weight.detach().numpy()  # (d_in=32, d_out=128)
    want = dequantize_roundtrip(w.T.copy(), "Q4_1").T
    np.testing.assert_array_equal(qm.transformer.h[0].mlp.c_fc.weight.detach().numpy(), want)


def test_inplace_tied_embedding_rounded_once_and_stays_tied():
    model = tiny_model("gpt2")
    emb = model.transformer.wte.weight.detach().clone()
    out = quantize_model(model, "Q8_0", inplace=True)
    assert out is model
    assert model.lm_head.weight is model.transformer.wte.weight
    np.testing.assert_array_equal(
        model.transformer.wte.weight.detach().numpy(), dequantize_roundtrip(emb.numpy(), "Q8_0")
    )
    assert "transformer.wpe.weight" not in out.lamina_quantization["tensors"]


def test_embeddings_false_leaves_tied_tables_alone():
    model = tiny_model("gpt2")
    qm = quantize_model(model, "Q4_1", embeddings=False)
    assert torch.equal(qm.transformer.wte.weight, model.transformer.wte.weight)


def test_bad_qtype_and_shape():
    with pytest.raises(ValueError, match="Q2_K.*Q8_0"):
        quantize_model(tiny_model("llama"), "Q2_K")
    with pytest.raises(ValueError, match="multiple of 32"):
        dequantize_roundtrip(np.zeros((4, 30), np.float32), "Q8_0")


def test_quantised_name_suffix_loads_a_rounded_model(tiny_model_dirs):
    import lamina
    from lamina.sources.quantize import split_quantized_name

    folder = str(tiny_model_dirs["llama"])
    base, _ = lamina.load_model(folder, device="cpu")
    q, _ = lamina.load_model(f"{folder}+Q4_1", device="cpu")
    assert q.lamina_name == f"{folder}+Q4_1" and q.lamina_quantization["qtype"] == "Q4_1"
    assert not torch.equal(
        q.model.layers[0].mlp.up_proj.weight, base.model.layers[0].mlp.up_proj.weight
    )
    assert split_quantized_name("organism-llama@sft") == ("organism-llama@sft", None)
    assert split_quantized_name("a/b+c") == ("a/b+c", None)
    with pytest.raises(ValueError, match="Q3_K"):
        lamina.load_model(f"{folder}+Q3_K")


def test_requantising_dequantised_weights_is_a_control_only_in_another_type():
    """The real-model control (lamina.states.quant_control): weights dequantised from a 4-bit
    file, rounded once more. The file's own type returns them unchanged (they lie on its
    grid); Q4_0 moves them by a 4-bit error (5-20% per matrix), Q8_0 by a small one (< 1%)."""
    model = quantize_model(tiny_model("llama"), "Q4_1", embedding_qtype=None)  # a Q4_1 file
    base = {k: v.clone() for k, v in model.state_dict().items()}

    def errors(q: str) -> dict[str, float]:
        qm = quantize_model(model, q, embedding_qtype=q)
        return {
            k: (qm.state_dict()[k] - base[k]).norm().item() / base[k].norm().item()
            for k in qm.lamina_quantization["tensors"]
        }

    same = errors("Q4_1")
    assert same and max(same.values()) == 0.0
    q4, q8 = errors("Q4_0"), errors("Q8_0")
    assert all(0.05 < e < 0.2 for e in q4.values()), q4
    assert all(0 < e < 0.01 for e in q8.values()), q8
    assert all(q8[k] * 5 < q4[k] for k in q4)
