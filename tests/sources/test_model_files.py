"""Every weight file lamina reads is checked (issue 35): a Hugging Face folder, an organism
checkpoint, a GGUF file under any name. "BAD n" tests fail on 2a683dc, where the model loaded
with a random or recast tensor."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import lamina
from tests.conftest import MICRO_ORGANISMS, _byte_tokenizer, lamina_env, tiny_model
from tests.sources.gguf_writer import write_gguf

IDS = torch.tensor([[5, 17, 200, 33, 8, 90, 91, 12]])
TENSOR = "model.layers.0.mlp.down_proj.weight"


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hf")
    tiny_model("llama", n_layers=2).save_pretrained(root / "ok")
    _byte_tokenizer().save_pretrained(root / "ok")
    return root / "ok"


def _damaged(folder: Path, tmp_path: Path, edit) -> Path:
    copy = tmp_path / "damaged"
    shutil.copytree(folder, copy)
    state = load_file(copy / "model.safetensors")
    save_file(edit(state), copy / "model.safetensors", metadata={"format": "pt"})
    return copy


def test_bad1_a_folder_missing_a_tensor_is_refused_naming_it(folder, tmp_path):
    def drop(state):
        del state[TENSOR]
        return state

    with pytest.raises(ValueError, match=rf"model\.safetensors.*{TENSOR}.*random weights"):
        lamina.load_model(str(_damaged(folder, tmp_path, drop)), device="cpu")


def test_bad3_integer_tensors_under_a_float32_config_are_refused(folder, tmp_path):
    def to_int8(state):
        return {k: (v * 100).to(torch.int8) for k, v in state.items()}

    with pytest.raises(ValueError, match=r"model\.safetensors: tensor '.*' is stored as I8"):
        lamina.load_model(str(_damaged(folder, tmp_path, to_int8)), device="cpu")


def test_a_float_dtype_other_than_the_configs_is_refused(folder, tmp_path):
    def to_bf16(state):
        return {k: v.to(torch.bfloat16) for k, v in state.items()}

    with pytest.raises(ValueError, match=r"stored as BF16, but config\.json says dtype float32"):
        lamina.load_model(str(_damaged(folder, tmp_path, to_bf16)), device="cpu")


def test_a_misshapen_tensor_is_named_with_both_shapes(folder, tmp_path):
    def cut(state):
        state[TENSOR] = state[TENSOR][:-1].clone()
        return state

    with pytest.raises(ValueError, match=rf"{TENSOR}' has shape \[31, 64\].*needs \[32, 64\]"):
        lamina.load_model(str(_damaged(folder, tmp_path, cut)), device="cpu")


def test_poor_an_unknown_config_dtype_names_file_and_field(folder, tmp_path):
    copy = tmp_path / "f128"
    shutil.copytree(folder, copy)
    config = json.loads((copy / "config.json").read_text())
    config["dtype"] = "float128"
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"f128/config\.json: field 'dtype' is 'float128'"):
        lamina.load_model(str(copy), device="cpu")


def test_an_intact_folder_loads_as_before(folder):
    model, _ = lamina.load_model(str(folder), device="cpu")
    assert model(IDS).logits.shape == (1, 8, 320)


# ------------------------------------------------------------------ organism checkpoints
@pytest.fixture
def organism_data(micro_organisms, tmp_path):
    """A private copy of the micro organisms' data folder (these tests damage it)."""
    data = tmp_path / "data"
    shutil.copytree(micro_organisms / "organisms", data / "organisms")
    with lamina_env(data, tmp_path / "results"):
        yield data


def _checkpoint(data: Path, name: str = MICRO_ORGANISMS[1], ck: str = "sft") -> Path:
    from lamina.sources import organisms

    with lamina_env(data, data / "results"):
        return organisms.resolve(f"{name}@{ck}")


def test_organism_checkpoints_carry_a_manifest_of_their_tensors(organism_data):
    folder = _checkpoint(organism_data)
    files = json.loads((folder / "lamina-manifest.json").read_text())["files"]
    assert {"model.safetensors", "optimizer.safetensors", "config.json"} <= set(files)
    assert files["model.safetensors"]["tensors"][TENSOR]["dtype"] == "F32"


def test_bad2_an_organism_checkpoint_missing_a_tensor_is_refused(organism_data):
    folder = _checkpoint(organism_data)
    state = load_file(folder / "model.safetensors")
    del state[TENSOR]
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    spec = f"{MICRO_ORGANISMS[1]}@sft"
    with pytest.raises(ValueError, match=r"model\.safetensors.*(SHA-256|manifest|bytes)"):
        lamina.load_model(spec, device="cpu")  # its manifest sees the change
    (folder / "lamina-manifest.json").unlink()  # an organism built before manifests
    with pytest.warns(RuntimeWarning, match="no lamina-manifest.json"), pytest.raises(
        ValueError, match=rf"{TENSOR}.*random weights"
    ):  # fmt: skip
        lamina.load_model(spec, device="cpu")


def test_one_flipped_bit_in_a_checkpoint_is_refused(organism_data):
    folder = _checkpoint(organism_data, ck="final")
    raw = bytearray((folder / "optimizer.safetensors").read_bytes())
    raw[-3] ^= 0x01  # a mantissa bit of the last moment
    (folder / "optimizer.safetensors").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"optimizer\.safetensors: its bytes do not match"):
        lamina.load_model(f"{MICRO_ORGANISMS[1]}@final", device="cpu")


# ------------------------------------------------------------------------------- GGUF files
@pytest.fixture
def gguf(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("LAMINA_GGUF_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LAMINA_DEVICE", raising=False)
    return write_gguf(tiny_model("llama", n_layers=2), _byte_tokenizer(), tmp_path / "m.gguf")


def test_poor_the_same_gguf_under_another_name_reuses_its_cache(gguf, tmp_path):
    first = lamina.load_model(str(gguf), device="cpu")[0]
    assert first.lamina_source["cold"] is True
    copy, link = tmp_path / "renamed.gguf", tmp_path / "elsewhere" / "link.gguf"
    shutil.copy(gguf, copy)
    link.parent.mkdir()
    os.symlink(gguf, link)
    for other in (copy, link):
        model = lamina.load_model(str(other), device="cpu")[0]
        assert model.lamina_source["cold"] is False  # found by its SHA-256, not its name
        assert model.lamina_source["cache"] == first.lamina_source["cache"]
    assert len([p for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".")]) == 1


def test_poor_a_gguf_without_the_suffix_loads_and_another_file_is_named(gguf, tmp_path):
    bare = tmp_path / "model-file"
    shutil.copy(gguf, bare)
    model, _ = lamina.load_model(str(bare), device="cpu")
    assert model(IDS).logits.shape == (1, 8, 320)
    text = tmp_path / "notes.txt"
    text.write_text("not a model")
    with pytest.raises(ValueError, match=r"notes\.txt' is a file but not a GGUF model"):
        lamina.load_model(str(text), device="cpu")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_poor_a_read_only_gguf_cache_names_the_folder(gguf, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o555)
    try:
        with pytest.raises(PermissionError, match=r"GGUF cache folder .*cache is not writable"):
            lamina.load_model(str(gguf), device="cpu")
    finally:
        cache.chmod(0o755)


def test_poor_a_gguf_cache_that_cannot_take_its_lock_names_the_folder(gguf, tmp_path):
    from lamina.core.manifest import sha256_file
    from lamina.sources.gguf_cache import cache_key

    cache = tmp_path / "cache"
    (cache / f".m-{cache_key(sha256_file(gguf))}.lock").mkdir(parents=True)  # cannot be opened
    with pytest.raises(PermissionError, match=r"GGUF cache folder .*cache is not writable.*LAMINA_GGUF_CACHE"):
        lamina.load_model(str(gguf), device="cpu")


def test_an_edited_organism_evaluation_is_refused(organism_data):
    from lamina.sources import organisms

    with lamina_env(organism_data, organism_data / "results"):
        path = organisms.organism_dir(MICRO_ORGANISMS[1]) / "evaluation.json"
        path.write_text(path.read_text().replace("0.", "1.", 1))  # one digit of a gate's value
        with pytest.raises(ValueError, match=r"evaluation\.json: its bytes do not match"):
            lamina.load_model(f"{MICRO_ORGANISMS[1]}@dpo", device="cpu")
