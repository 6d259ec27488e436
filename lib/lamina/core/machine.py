"""What this machine offers lamina's parallel work (no torch import: the command lines read it
before they load anything heavy)."""

from __future__ import annotations

import os
import sys

__all__ = ["machine_cores", "peak_memory_gib"]


def machine_cores() -> int:
    """The CPUs this process may run on (its affinity where the OS reports it, else the count):
    the default of every ``--jobs``."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def peak_memory_gib() -> float | None:
    """This process's peak resident memory so far, GiB (``getrusage``'s ``ru_maxrss``: KiB on
    Linux, bytes on macOS); None where the OS does not report it (Windows)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (2**30 if sys.platform == "darwin" else 2**20)
