"""Device selection without a flag (issue 10 §5): ``device="auto"`` (the default of
:func:`lamina.load_model`) is CUDA when ``torch.cuda.is_available()``, else CPU, and
``$LAMINA_DEVICE`` overrides it. No GPU here: ``torch.cuda.is_available`` is monkeypatched and
``nn.Module.to`` records where each model is sent instead of moving it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import lamina
from lamina.sources.gguf_models import resolve_device
from tests.conftest import _byte_tokenizer, tiny_model
from tests.sources.gguf_writer import write_gguf


@pytest.fixture
def fake_cuda(monkeypatch) -> list[torch.device]:
    """CUDA reported available; every ``Module.to(<device>)`` recorded and not applied."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("LAMINA_DEVICE", raising=False)
    sent: list[torch.device] = []
    real_to = nn.Module.to

    def to(self, *args, **kwargs):
        target = kwargs.get("device", args[0] if args else None)
        if isinstance(target, str | torch.device) and torch.device(target).type == "cuda":
            sent.append(torch.device(target))
            return self
        return real_to(self, *args, **kwargs)

    monkeypatch.setattr(nn.Module, "to", to)
    return sent


def test_auto_is_cuda_when_available_else_cpu(monkeypatch):
    monkeypatch.delenv("LAMINA_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)  # cuda:1 needs two devices
    assert resolve_device("auto") == resolve_device(None) == torch.device("cuda")
    monkeypatch.setenv("LAMINA_DEVICE", "cpu")
    assert resolve_device("auto") == torch.device("cpu")  # the override wins
    assert resolve_device("cuda:1") == torch.device("cuda:1")  # an explicit device is kept
    monkeypatch.delenv("LAMINA_DEVICE")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")


def test_load_model_sends_a_folder_model_to_cuda_without_a_flag(tiny_model_dirs, fake_cuda):
    model, _ = lamina.load_model(str(tiny_model_dirs["llama"]))
    assert fake_cuda == [torch.device("cuda")]
    assert not model.training


def test_load_model_sends_a_gguf_model_to_cuda_without_a_flag(tmp_path, monkeypatch, fake_cuda):
    monkeypatch.setenv("LAMINA_GGUF_CACHE", str(tmp_path / "cache"))
    path = write_gguf(tiny_model("llama", n_layers=2), _byte_tokenizer(), tmp_path / "t.gguf")
    lamina.load_model(str(path))
    assert fake_cuda == [torch.device("cuda")]


def test_an_explicit_cpu_or_the_override_keeps_the_model_on_cpu(tiny_model_dirs, fake_cuda,
                                                                monkeypatch):  # fmt: skip
    lamina.load_model(str(tiny_model_dirs["gpt2"]), device="cpu")
    monkeypatch.setenv("LAMINA_DEVICE", "cpu")
    lamina.load_model(str(tiny_model_dirs["gpt2"]))
    assert fake_cuda == []


def test_growth_models_train_on_cuda_without_a_flag(fake_cuda):
    """Growth Training's freshly initialised models go to the GPU when one is present."""
    from lamina.anatomy.growth_runs import build_model
    from lamina.chapters.growth_training import GrowthConfig
    from tests.conftest import _byte_tokenizer

    model = build_model(GrowthConfig(quick=True), _byte_tokenizer(), seed=0)
    assert fake_cuda == [torch.device("cuda")]
    assert model.training
