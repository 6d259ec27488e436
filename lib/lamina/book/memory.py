"""Chapters side by side within the machine's memory.

``make book`` runs chapters ``--jobs`` at a time. On the 2-core, 24 GiB reference machine the
weight-update chapter reaches 16 GiB on Gemma 3 (its aligned stages, objectives and Adam
state) and layer_anatomy 7.9 GiB on the same model: at 60b9c79 the two ran side by side and the
kernel's OOM killer stopped the first after 43 minutes. So each chapter's run records its
kernel's peak resident memory (:class:`PeakWatch`, the report's ``peak_memory_gib``), and the
scheduler starts a chapter only when its last peak, added to those of the chapters running,
fits the budget (:func:`memory_budget_gib`); a chapter that fits beside no other runs alone,
with every core (:func:`next_fitting`, :func:`runs_alone`).

Before a chapter has a report, its peak is :data:`TYPICAL_PEAK_GIB` (measured on the
reference machine, or :data:`DEFAULT_PEAK_GIB`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from lamina.core.machine import machine_cores

__all__ = [
    "DEFAULT_PEAK_GIB",
    "TYPICAL_PEAK_GIB",
    "PeakWatch",
    "last_peak",
    "machine_memory_gib",
    "memory_budget_gib",
    "next_fitting",
    "run_side_by_side",
    "runs_alone",
]

TYPICAL_PEAK_GIB: dict[str, float] = {
    # peak resident memory of the chapter's kernel (GiB) on its default models, 2 cores: the
    # kernels' resident memory sampled every 15 s during make book at 60b9c79 (the chapters
    # not listed stayed under DEFAULT_PEAK_GIB); weight_update_signature was killed at 16.0 GiB
    # before its end, and reached 22.3 GiB at c3a1425 before the chunked gate forward: 20
    "weight_update_signature": 20.0,
    "layer_anatomy": 8.0,
}
DEFAULT_PEAK_GIB = 4.0
"""A chapter without a report or a :data:`TYPICAL_PEAK_GIB` entry (GiB)."""
BUDGET_FRACTION = 0.9
"""Of the machine's memory, what the chapters running at once may use together."""


def machine_memory_gib() -> float | None:
    """The machine's physical memory (GiB); None where the OS does not report it."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (AttributeError, ValueError, OSError):
        return None


def memory_budget_gib(total_gib: float | None = None) -> float:
    """What chapters running at once may hold together (GiB): :data:`BUDGET_FRACTION` of
    ``total_gib`` (default: :func:`machine_memory_gib`); infinite where it is unknown."""
    total = machine_memory_gib() if total_gib is None else total_gib
    return float("inf") if total is None else BUDGET_FRACTION * total


def next_fitting(
    waiting: Sequence[str], running: Sequence[str], peak: Mapping[str, float], budget: float
) -> str | None:
    """The first chapter of ``waiting`` (in order: longest first) whose peak, added to the
    peaks of ``running``, fits ``budget`` (GiB); with nothing running, the first of
    ``waiting`` whatever its peak (it runs alone); None when nothing fits now."""
    if not waiting:
        return None
    if not running:
        return waiting[0]
    held = sum(peak[c] for c in running)
    return next((c for c in waiting if held + peak[c] <= budget), None)


def runs_alone(chapter: str, others: Sequence[str], peak: Mapping[str, float], budget: float) -> bool:
    """Whether ``chapter`` fits beside none of ``others`` (so it gets every core)."""
    return all(peak[chapter] + peak[o] > budget for o in others if o != chapter)


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


def run_side_by_side(
    tasks: Mapping[str, Callable[[int], object]],
    peak: Mapping[str, float],
    jobs: int,
    budget: float | None = None,
) -> list[BaseException]:
    """Run ``tasks`` (chapter -> picklable callable of its thread count, in the order to
    start them) in up to ``jobs`` worker processes (spawned), starting each when
    :func:`next_fitting` finds its ``peak`` (GiB) fits beside those running within
    ``budget`` (default :func:`memory_budget_gib`). A chapter started with nothing running
    that :func:`runs_alone` gets every core, the others cores // jobs. A failure does not stop the others.
    -> the failures, in the order they ended."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

    budget = memory_budget_gib() if budget is None else budget
    cores = machine_cores()
    waiting: list[str] = list(tasks)
    running: dict[Future[object], str] = {}
    failures: list[BaseException] = []
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        while waiting or running:
            while len(running) < jobs:
                c = next_fitting(waiting, list(running.values()), peak, budget)
                if c is None:
                    break
                alone = not running and runs_alone(c, waiting, peak, budget)
                if alone and len(waiting) > 1:
                    print(f"[lamina] {c}: peak memory {peak[c]:.1f} GiB last time; none of the "
                          f"other chapters fits beside it within {budget:.1f} GiB: it runs "
                          f"alone, on {cores} cores", file=sys.stderr, flush=True)  # fmt: skip
                threads = cores if alone else max(1, cores // jobs)
                running[pool.submit(tasks[c], threads)] = c
                waiting.remove(c)
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in done:
                running.pop(future)
                if future.exception() is not None:
                    failures.append(future.exception())  # type: ignore[arg-type]  # checked above
    return failures


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
