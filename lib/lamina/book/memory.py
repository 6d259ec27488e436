"""Each chapter's peak memory, recorded so that the workflow can schedule within the machine's.

On the 2-core, 24 GiB reference machine the weight-update chapter reached 16 GiB on Gemma 3 (its
aligned stages, objectives and Adam state) and layer_anatomy 7.9 GiB on the same model: at
60b9c79 the two ran side by side and the kernel's OOM killer stopped the first after 43
minutes. So each chapter's run records its kernel's peak resident memory (:class:`PeakWatch`,
the report's ``peak_memory_gib``), and the workflow (the ``Snakefile``'s chapter rule) declares
:func:`last_peak` as the rule's ``mem_mb``: Snakemake starts a chapter only when the memory
declared by those running leaves room for it (``make book`` gives it 90% of the machine's).

Before a chapter has a report, its peak is :data:`TYPICAL_PEAK_GIB` (measured on the
reference machine, or :data:`DEFAULT_PEAK_GIB`).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from types import TracebackType

__all__ = ["DEFAULT_PEAK_GIB", "TYPICAL_PEAK_GIB", "PeakWatch", "last_peak"]

TYPICAL_PEAK_GIB: dict[str, float] = {
    # peak resident memory of the chapter's kernel (GiB) on its default models, 2 cores: the
    # kernels' resident memory sampled every 15 s during make book at 60b9c79 (the chapters
    # not listed stayed under DEFAULT_PEAK_GIB); weight_update_signature (its models one after
    # another): Gemma 3's part 11.4 GiB at 13423b3, SmolLM2's 11.2 GiB at 61577cc (22.3 GiB at
    # c3a1425, before the chunked gate forward and the memory work of issue 52): 12
    "weight_update_signature": 12.0,
    "layer_anatomy": 8.0,
}
DEFAULT_PEAK_GIB = 4.0
"""A chapter without a report or a :data:`TYPICAL_PEAK_GIB` entry (GiB)."""


def _recorded(path: Path) -> tuple[str, float] | None:
    """(finished, peak GiB) of a report that records a peak; None if absent or damaged."""
    try:
        r = json.loads(path.read_text())
        return (str(r.get("finished", "")), float(r["peak_memory_gib"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def last_peak(out: Path, chapter: str) -> float:
    """``chapter``'s kernel's expected peak memory (GiB) from its runs into ``out``.

    A completed run (``<chapter>.report.json``) measured its whole peak; a failed run
    (``.failed.report.json``) only a lower bound, since it stopped early (killed after 10 s
    it reads 0.4 GiB), so it can raise the estimate but never lower it: the completed run's
    peak, raised by a failure recorded after it; with no completed run that recorded one,
    :data:`TYPICAL_PEAK_GIB` (or :data:`DEFAULT_PEAK_GIB`) raised by any failure."""
    ok = _recorded(Path(out) / f"{chapter}.report.json")
    failed = _recorded(Path(out) / f"{chapter}.failed.report.json")
    if ok is not None:
        return max(ok[1], failed[1]) if failed is not None and failed[0] > ok[0] else ok[1]
    prior = float(TYPICAL_PEAK_GIB.get(chapter, DEFAULT_PEAK_GIB))
    return max(prior, failed[1]) if failed is not None else prior


def _peak_kib(pid: int) -> int:
    """``VmHWM`` of process ``pid`` (its peak resident memory, KiB); 0 if unreadable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (Linux ``/proc``; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").glob("[0-9]*"):
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


class PeakWatch:
    """Within ``with``: the largest peak resident memory of any process this one starts (a
    chapter's kernel), sampled every ``interval`` seconds from ``/proc/<pid>/status`` VmHWM
    (a high-water mark, so a sample catches a brief peak unless the process ends within
    ``interval`` of it). ``peak_gib``: GiB, None where nothing was read (not Linux)."""

    def __init__(self, interval: float = 2.0) -> None:
        self.interval = interval
        self._kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _sample(self) -> None:
        for pid in _descendants(os.getpid()):
            self._kib = max(self._kib, _peak_kib(pid))

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> PeakWatch:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak_gib(self) -> float | None:
        return self._kib / 2**20 if self._kib else None
