"""The one thread setting (lamina.core.threads)."""

from __future__ import annotations

import os
import subprocess
import sys

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


def test_a_worker_pins_the_blas_that_numpy_already_loaded() -> None:
    """A calibration worker imports numpy (and its OpenBLAS) before its initializer runs;
    setting OPENBLAS_NUM_THREADS then changes nothing, and two workers of two BLAS threads
    each oversubscribed two cores (1.8x the CPU time of one convergence calibration run)."""
    code = (
        "import numpy, threadpoolctl\n"
        "from lamina.core.threads import one_thread_process\n"
        "one_thread_process()\n"
        "print(max(i['num_threads'] for i in threadpoolctl.threadpool_info()"
        " if i['user_api'] == 'blas'))\n"
    )
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)  # fmt: skip
    assert out.stdout.split()[-1] == "1"
