"""What this machine offers lamina's parallel work (no torch import: the command lines read it
before they load anything heavy)."""

from __future__ import annotations

import os

__all__ = ["machine_cores"]


def machine_cores() -> int:
    """The CPUs this process may run on (its affinity where the OS reports it, else the count):
    the default of every ``--jobs``."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)
