"""Fixtures shared by the tests of ``lamina.book``."""

from __future__ import annotations

import pytest


@pytest.fixture
def no_kernel(monkeypatch, tmp_path):
    """Any kernel start fails the test (usage errors must come before one); lamina's data and
    results in ``tmp_path``, no device override, the hub offline. -> tmp_path."""
    import papermill

    def kernel(*args, **kwargs):
        raise AssertionError("a kernel was started")

    monkeypatch.setattr(papermill, "execute_notebook", kernel)
    monkeypatch.setenv("LAMINA_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("LAMINA_RESULTS", str(tmp_path / "results"))
    monkeypatch.delenv("LAMINA_DEVICE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path
