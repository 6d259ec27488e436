"""lamina.sources.gguf_dequant: bit-identical to gguf-py's dequantisation on random blocks."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, quants

from lamina.sources import gguf_dequant
from lamina.sources.gguf_dequant import FAST_TYPES, fast_dequantize, patched_dequantize


def _random_rows(qtype: GGMLQuantizationType, rows: int, blocks_per_row: int, seed: int) -> np.ndarray:
    """(rows, bytes per row) uint8: random bytes, with every fp16 field a finite value of
    either sign (random bytes may spell NaN, whose payload need not survive a product)."""
    block, size = GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, size=(rows * blocks_per_row, size), dtype=np.uint8)
    fp16_at = {"Q8_0": [0], "Q5_0": [0], "Q4_K": [0, 2], "Q6_K": [208]}[qtype.name]
    for start in fp16_at:
        values = rng.normal(0.0, 0.05, size=data.shape[0]).astype(np.float16)
        values[:3] = [0.0, -0.0, 6.1e-5]  # zero, negative zero, a subnormal-adjacent scale
        data[:, start : start + 2] = values.view(np.uint8).reshape(-1, 2)
    return data.reshape(rows, blocks_per_row * size)


@pytest.mark.parametrize("name", FAST_TYPES)
@pytest.mark.parametrize("seed", [0, 1])
def test_bit_identical_to_gguf_py(name: str, seed: int) -> None:
    qtype = GGMLQuantizationType[name]
    rows = _random_rows(qtype, rows=37, blocks_per_row=3, seed=seed)
    ref = quants.dequantize(rows, qtype)
    new = fast_dequantize(rows, qtype)
    assert new.dtype == np.float32 and new.shape == ref.shape
    assert np.array_equal(new.view(np.uint32), ref.view(np.uint32))  # every bit, -0.0 included


@pytest.mark.parametrize("name", FAST_TYPES)
def test_chunk_boundaries(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tensor longer than one chunk (and not a multiple of it) gives the same values."""
    qtype = GGMLQuantizationType[name]
    rows = _random_rows(qtype, rows=5, blocks_per_row=7, seed=2)
    monkeypatch.setattr(gguf_dequant, "CHUNK_BLOCKS", 4)
    assert np.array_equal(fast_dequantize(rows, qtype), quants.dequantize(rows, qtype))


def test_unknown_types_fall_back_to_gguf_py() -> None:
    qtype = GGMLQuantizationType.Q4_1
    rows = np.random.default_rng(3).integers(0, 256, size=(4, 20 * 2), dtype=np.uint8)
    np.testing.assert_array_equal(fast_dequantize(rows, qtype), quants.dequantize(rows, qtype))


def test_a_truncated_row_is_refused() -> None:
    with pytest.raises(ValueError, match="multiple of the 144-byte block"):
        fast_dequantize(np.zeros((2, 143), dtype=np.uint8), GGMLQuantizationType.Q4_K)


def test_patch_is_restored_and_silences_the_loaders_bar(capsys) -> None:
    import gguf
    import transformers.modeling_gguf_pytorch_utils as hf_gguf

    original, bar = gguf.dequantize, hf_gguf.tqdm
    with patched_dequantize():
        assert gguf.dequantize is fast_dequantize
        list(hf_gguf.tqdm(range(3), desc="Converting and de-quantizing GGUF tensors..."))
    assert "Converting" not in capsys.readouterr().err  # lamina reports the step itself
    assert gguf.dequantize is original and hf_gguf.tqdm is bar


def _small_gguf(path) -> None:
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_array("tokenizer.ggml.tokens", ["a", "b", "c"])
    writer.add_tensor("w", np.arange(64, dtype=np.float32).reshape(2, 32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_a_shared_reader_parses_each_unchanged_file_once(tmp_path):
    import os

    import gguf

    from lamina.sources.gguf_dequant import shared_gguf_reader

    path, other = tmp_path / "a.gguf", tmp_path / "b.gguf"
    _small_gguf(path)
    _small_gguf(other)
    original = gguf.GGUFReader
    with shared_gguf_reader():
        first = gguf.GGUFReader(path)
        assert gguf.GGUFReader(str(path)) is first  # the same file, by any spelling
        assert gguf.GGUFReader(other) is not first
        assert gguf.GGUFReader(path, "c") is not first  # a writable mapping is never shared
        with shared_gguf_reader():  # nested: the outer block's readers
            assert gguf.GGUFReader(path) is first
        os.utime(path, ns=(1, 1))  # the file changed: parsed again
        assert gguf.GGUFReader(path) is not first
        assert [t.name for t in gguf.GGUFReader(path).tensors] == ["w"]
    assert gguf.GGUFReader is original
