"""Caches are checked when read, and a damaged entry is rebuilt with a warning, never used
(issue 35). "BAD n" tests fail on 2a683dc, where the damaged entry was used."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from lamina.states.extract import extract
from tests.conftest import _byte_tokenizer, tiny_model

TEXTS = ["The cat sat on the mat.", "A river bank", "Seven plus five is twelve."]


# ------------------------------------------------------------------ the extraction cache
def test_bad4_a_flipped_mantissa_bit_in_an_extraction_entry_is_recomputed(tmp_path):
    from safetensors import safe_open

    model, tok = tiny_model("gpt2"), _byte_tokenizer()
    first = extract(model, tok, TEXTS, pool="mean", cache=tmp_path, progress=False)
    (entry,) = tmp_path.glob("*.safetensors")
    with safe_open(str(entry), framework="numpy") as f:
        start = 8 + int.from_bytes(entry.read_bytes()[:8], "little")  # the data after the header
        assert f.get_tensor("states").dtype == np.float32
    raw = bytearray(entry.read_bytes())
    raw[start + 4 * 7] ^= 0x01  # the lowest mantissa bit of one float
    entry.write_bytes(bytes(raw))
    with pytest.warns(RuntimeWarning, match=re.escape(str(entry)) + r".*do not match the SHA-256"):
        again = extract(model, tok, TEXTS, pool="mean", cache=tmp_path, progress=False)
    np.testing.assert_array_equal(again.states, first.states)  # recomputed, not the damaged bytes
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        extract(model, tok, TEXTS, pool="mean", cache=tmp_path, progress=False)  # sound again


def test_an_extraction_entry_without_a_recorded_hash_is_recomputed(tmp_path):
    from safetensors.numpy import save_file

    from lamina.states.trajectories import Trajectories

    model, tok = tiny_model("gpt2"), _byte_tokenizer()
    extract(model, tok, TEXTS, pool="mean", cache=tmp_path, progress=False)
    (entry,) = tmp_path.glob("*.safetensors")
    old = Trajectories.load(entry)
    header = {"texts": old.texts, "layers": old.layers, "meta": old.meta, "ids": None,
              "prompts": None, "ragged": False}  # an entry written before the hash
    save_file({"states": old.states}, str(entry), metadata={"lamina": json.dumps(header)})
    with pytest.warns(RuntimeWarning, match="records no SHA-256"):
        extract(model, tok, TEXTS, pool="mean", cache=tmp_path, progress=False)


# ------------------------------------------------------------------ the calibration caches
def test_sealed_json_round_trip_and_damage(tmp_path):
    from lamina.core.manifest import ManifestError, read_sealed_json, write_sealed_json

    path = write_sealed_json(tmp_path / "e.json", {"p": np.float64(0.1), "rows": (1, 2), "x": None})
    assert read_sealed_json(path) == {"p": 0.1, "rows": [1, 2], "x": None}
    path.write_text(path.read_text().replace("0.1", "0.2"))
    with pytest.raises(ManifestError, match="does not match its SHA-256 seal"):
        read_sealed_json(path)
    Path(tmp_path / "plain.json").write_text('{"p": 0.1}')
    with pytest.raises(ManifestError, match="carries no SHA-256 seal"):
        read_sealed_json(tmp_path / "plain.json")
