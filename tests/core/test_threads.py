"""The one thread setting (lamina.core.threads)."""

from __future__ import annotations

import pytest
import torch

from lamina.core.threads import configured_threads, threads


def test_threads_applies_and_restores(monkeypatch) -> None:
    monkeypatch.delenv("LAMINA_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    with threads(1) as n:
        assert n == 1 == torch.get_num_threads()
    assert torch.get_num_threads() == before
    monkeypatch.setenv("LAMINA_NUM_THREADS", "1")
    assert configured_threads() == 1
    with threads() as n:
        assert n == 1
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_bad_thread_count_names_the_variable(monkeypatch, value: str) -> None:
    monkeypatch.setenv("LAMINA_NUM_THREADS", value)
    with pytest.raises(ValueError, match="LAMINA_NUM_THREADS"):
        configured_threads()
