"""The one thread setting of lamina: how many CPU threads torch and the BLAS libraries use.

``$LAMINA_NUM_THREADS`` (a positive integer) sets it for everything lamina runs; unset, torch
keeps its own default (the machine's cores). :func:`threads` applies a count for a block and
restores the previous one; :func:`one_thread_process` pins a worker process (calibration
seeds, parallel builds) to one thread before it computes, so that workers do not oversubscribe
the cores.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from threadpoolctl import threadpool_limits

__all__ = ["ENV", "configured_threads", "one_thread_process", "threads"]

ENV = "LAMINA_NUM_THREADS"
_BLAS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def configured_threads() -> int | None:
    """``$LAMINA_NUM_THREADS`` as a positive integer, or None when unset; ValueError naming the
    variable and its value otherwise."""
    value = os.environ.get(ENV)
    if value is None or value == "":
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"${ENV} must be a positive integer; got {value!r}")
    return int(value)


@contextmanager
def threads(n: int | None = None) -> Iterator[int]:
    """Run the block with ``n`` torch threads (None: :func:`configured_threads`, and when that
    is unset too, the current count); the previous count is restored after. Yields the count."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"threads must be a positive integer or None; got {n!r}")
    old = torch.get_num_threads()
    want = n if n is not None else configured_threads()
    if want:
        torch.set_num_threads(want)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(old)


def one_thread_process() -> None:
    """Pin this (worker) process to one thread: torch, the BLAS and OpenMP libraries already
    loaded (numpy's OpenBLAS reads its variable only when it loads, which in a worker is
    before this runs), and the variables its children read."""
    for name in _BLAS:
        os.environ[name] = "1"
    torch.set_num_threads(1)
    threadpool_limits(1)  # for the rest of the process
