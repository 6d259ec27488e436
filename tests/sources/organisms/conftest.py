"""The organisms' tests: micro models on one thread."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Micro models are fastest on one thread (and do not thrash when CPUs are shared)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
