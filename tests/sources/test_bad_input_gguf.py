"""Bad input round 3 (issue 23), the loaders: GGUF files with missing, misshapen or no
tokenizer tensors, a damaged or interrupted fp32 cache, environment variables and devices.
Each test names its case ("BAD n" returned a silent wrong answer before the fix, "POOR" failed
unclearly); each fails against the code before issue 23."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
import torch

import lamina
from lamina.sources import gguf_cache, gguf_models
from lamina.sources.gguf_models import GGUFError
from tests.conftest import _byte_tokenizer, tiny_model
from tests.sources.gguf_writer import write_gguf

IDS = torch.tensor([[5, 17, 200, 33, 8, 90, 91, 12]])


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "gguf-cache"
    monkeypatch.setenv("LAMINA_GGUF_CACHE", str(root))
    monkeypatch.delenv("LAMINA_DEVICE", raising=False)
    return root


@pytest.fixture(scope="module")
def llama() -> torch.nn.Module:
    return tiny_model("llama", n_layers=2)


def _entries(cache: Path) -> list[Path]:
    return [p for p in cache.iterdir() if not p.name.startswith(".")] if cache.is_dir() else []


# ---------------------------------------------------------------- BAD 1: a missing tensor
def test_bad1_gguf_missing_a_tensor_is_refused_before_caching(llama, cache, tmp_path):
    path = write_gguf(
        llama, _byte_tokenizer(), tmp_path / "holed.gguf", drop=("blk.1.ffn_down.weight",)
    )
    with pytest.raises(GGUFError, match=r"holed\.gguf.*missing tensor 'blk\.1\.ffn_down\.weight'"):
        lamina.load_model(str(path), device="cpu")
    assert _entries(cache) == []  # nothing cached, so no later silent load


# ---------------------------------------------------------------- BAD 2: bit damage in the cache
def test_bad2_bit_damage_in_the_fp32_cache_is_reported_and_rebuilt(llama, cache, tmp_path):
    path = write_gguf(llama, _byte_tokenizer(), tmp_path / "ok.gguf")
    first, _ = lamina.load_model(str(path), device="cpu")
    (folder,) = _entries(cache)
    weights = folder / "model.safetensors"
    size = weights.stat().st_size
    with open(weights, "r+b") as f:  # flip bits in the middle of the tensor data, size unchanged
        f.seek(size // 2)
        byte = f.read(1)
        f.seek(size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert weights.stat().st_size == size
    with pytest.warns(
        UserWarning, match=r"model\.safetensors: its bytes do not match the SHA-256.*rebuilding"
    ):
        again, _ = lamina.load_model(str(path), device="cpu")
    assert again.lamina_source["cold"] is True
    with torch.no_grad():
        torch.testing.assert_close(again(IDS).logits, first(IDS).logits, rtol=0, atol=0)


def test_poor_damaged_safetensors_header_names_the_cache_and_rebuilds(llama, cache, tmp_path):
    path = write_gguf(llama, _byte_tokenizer(), tmp_path / "hdr.gguf")
    lamina.load_model(str(path), device="cpu")
    (folder,) = _entries(cache)
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[8:16] = b"{garbage"  # the JSON header, size unchanged
    weights.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match=str(folder.name)):
        model, _ = lamina.load_model(str(path), device="cpu")
    assert model.lamina_source["cold"] is True


def test_manifest_records_each_files_sha256(llama, cache, tmp_path):
    import hashlib
    import json

    path = write_gguf(llama, _byte_tokenizer(), tmp_path / "m.gguf")
    lamina.load_model(str(path), device="cpu")
    (folder,) = _entries(cache)
    files = json.loads((folder / gguf_cache.MANIFEST).read_text())["files"]
    for name, entry in files.items():
        assert entry["sha256"] == hashlib.sha256((folder / name).read_bytes()).hexdigest()


# ---------------------------------------------------------------- POOR: GGUF files
def test_poor_misshapen_tensor_names_tensor_and_file(llama, cache, tmp_path):
    path = write_gguf(
        llama, _byte_tokenizer(), tmp_path / "bent.gguf", reshape={"blk.0.attn_v.weight": (8, 24)}
    )
    with pytest.raises(GGUFError, match=r"bent\.gguf.*'blk\.0\.attn_v\.weight'.*shape \[8, 24\]"):
        lamina.load_model(str(path), device="cpu")
    assert _entries(cache) == []


def test_poor_gguf_without_tokenizer_names_the_file(llama, cache, tmp_path):
    path = write_gguf(llama, _byte_tokenizer(), tmp_path / "notok.gguf", tokenizer_keys=False)
    with pytest.raises(GGUFError, match=r"notok\.gguf has no tokenizer"):
        lamina.load_model(str(path), device="cpu")


def test_poor_a_folder_named_x_gguf_is_called_a_folder(cache, tmp_path):
    (tmp_path / "x.gguf").mkdir()
    with pytest.raises(GGUFError, match=r"x\.gguf is a folder, not a GGUF file"):
        lamina.load_model(str(tmp_path / "x.gguf"), device="cpu")


def test_poor_interrupted_cold_builds_leave_nothing_past_the_next_load(llama, cache, tmp_path):
    path = write_gguf(llama, _byte_tokenizer(), tmp_path / "cut.gguf")
    sha = gguf_models.sha256_files([path])
    target = cache / f"{path.stem}-{gguf_cache.cache_key(sha)}"
    cache.mkdir(parents=True, exist_ok=True)
    # what SIGKILL leaves: a half build folder and a half assembled chunked GGUF
    (cache / f".{target.name}.abc123.tmp").mkdir()
    (cache / f".{target.name}.abc123.tmp" / "model.safetensors").write_bytes(b"\0" * 1000)
    (cache / f".assemble-{target.name}-xyz").mkdir()
    lamina.load_model(str(path), device="cpu")
    left = sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock"))
    assert left == [target.name]


# ---------------------------------------------------------------- POOR: environment, devices
def test_poor_gguf_cache_variable_naming_a_file_is_refused(llama, tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("LAMINA_GGUF_CACHE", str(tmp_path / "afile"))
    path = write_gguf(llama, _byte_tokenizer(), tmp_path / "e.gguf")
    with pytest.raises(ValueError, match=r"\$LAMINA_GGUF_CACHE=.*afile.*names a file"):
        lamina.load_model(str(path), device="cpu")


@pytest.mark.parametrize("value", ["gpu", "cuda"])
def test_poor_lamina_device_unusable_names_the_variable(monkeypatch, value):
    monkeypatch.setenv("LAMINA_DEVICE", value)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises((ValueError, RuntimeError), match=rf"\$LAMINA_DEVICE='{value}'"):
        lamina.load_model("organism-llama")


def test_poor_cuda_device_fails_before_dequantising_a_gguf(llama, cache, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    path = write_gguf(llama, _byte_tokenizer(), tmp_path / "d.gguf")
    called = []
    monkeypatch.setattr(gguf_models, "_dequantise", lambda *a, **k: called.append(1))
    with pytest.raises(RuntimeError, match="device='cuda'.*CUDA is not available"):
        lamina.load_model(str(path), device="cuda")
    assert called == []


def test_poor_local_folder_with_plus_is_not_a_quantisation(tmp_path, monkeypatch):
    from lamina.sources.quantize import split_quantized_name

    folder = tmp_path / "tiny+Qwen"
    folder.mkdir()
    assert split_quantized_name(str(folder)) == (str(folder), None)
    monkeypatch.chdir(tmp_path)
    assert split_quantized_name("tiny+Qwen") == ("tiny+Qwen", None)
    with pytest.raises(ValueError, match="unknown quantisation suffix 'Qwen'"):
        split_quantized_name("absent+Qwen")


def test_relative_env_paths_are_made_absolute_against_the_cwd(tmp_path, monkeypatch):
    from lamina.core.provenance import absolute_env_paths, env_dir

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LAMINA_DATA", "rel/data")
    assert env_dir("LAMINA_DATA") == tmp_path / "rel" / "data"
    assert (tmp_path / "rel" / "data").is_dir()
    monkeypatch.setenv("LAMINA_RESULTS", "res")
    assert absolute_env_paths()["LAMINA_RESULTS"] == str(tmp_path / "res")
    assert os.environ["LAMINA_RESULTS"] == str(tmp_path / "res")
    with pytest.raises(ValueError, match=r"\$LAMINA_RESULTS=.*does not exist"):
        env_dir("LAMINA_RESULTS", create=False)
    monkeypatch.setenv("LAMINA_DATA", "/proc/no-such/dir")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"\$LAMINA_DATA='/proc/no-such/dir': cannot create"):
            env_dir("LAMINA_DATA")


def test_warm_loads_skip_the_hash_until_a_file_changes(llama, cache, tmp_path, monkeypatch):
    path = write_gguf(llama, _byte_tokenizer(), tmp_path / "w.gguf")
    lamina.load_model(str(path), device="cpu")
    lamina.load_model(str(path), device="cpu")  # verified once, signature recorded
    from lamina.core import manifest

    hashed: list[Path] = []
    real = manifest.sha256_file
    monkeypatch.setattr(manifest, "sha256_file", lambda p: (hashed.append(p), real(p))[1])
    assert lamina.load_model(str(path), device="cpu")[0].lamina_source["cold"] is False
    assert hashed == []
    (folder,) = _entries(cache)
    os.utime(folder / "config.json")  # any write changes the stat signature
    assert lamina.load_model(str(path), device="cpu")[0].lamina_source["cold"] is False
    assert len(hashed) >= 2
