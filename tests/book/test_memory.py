"""Chapters side by side within the machine's memory (lamina.book.memory).

At 60b9c79, make book on the 2-core, 24 GiB machine ran weight_update_signature (16.0 GiB on
Gemma 3 when it was killed) beside layer_anatomy (7.9 GiB): the OOM killer stopped the first
after 43 minutes."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from lamina.book import execute
from lamina.book.memory import (
    DEFAULT_PEAK_GIB,
    TYPICAL_PEAK_GIB,
    PeakWatch,
    last_peak,
    next_fitting,
    run_side_by_side,
    runs_alone,
)

PEAKS = {"weight_update_signature": 16.0, "growth_training": 1.5, "layer_anatomy": 7.9, "organisms": 1.0}
BUDGET = 0.9 * 24


def test_the_chapters_that_were_killed_together_never_start_together():
    running = ["weight_update_signature", "growth_training"]
    assert next_fitting(["layer_anatomy", "organisms"], running, PEAKS, BUDGET) == "organisms"
    assert next_fitting(["layer_anatomy"], running, PEAKS, BUDGET) is None
    assert next_fitting(["layer_anatomy"], ["growth_training"], PEAKS, BUDGET) == "layer_anatomy"


def test_a_chapter_over_the_budget_runs_alone_and_first_in_line():
    peaks = {**PEAKS, "weight_update_signature": 22.0}
    waiting = ["weight_update_signature", "layer_anatomy", "organisms"]
    assert next_fitting(waiting, [], peaks, BUDGET) == "weight_update_signature"
    assert runs_alone("weight_update_signature", waiting, peaks, BUDGET)
    assert not runs_alone("layer_anatomy", waiting, peaks, BUDGET)
    assert next_fitting(waiting[1:], ["weight_update_signature"], peaks, BUDGET) is None


def test_the_last_peak_comes_from_the_later_report_else_the_typical_one(tmp_path):
    ch = "weight_update_signature"
    assert last_peak(tmp_path, ch) == TYPICAL_PEAK_GIB[ch]
    assert last_peak(tmp_path, "curvature") == DEFAULT_PEAK_GIB
    (tmp_path / f"{ch}.report.json").write_text(json.dumps({"finished": "2026-12-02T10:00:00", "peak_memory_gib": 14.8}))
    assert last_peak(tmp_path, ch) == 14.8
    (tmp_path / f"{ch}.failed.report.json").write_text(json.dumps({"finished": "2026-12-03T11:31:23", "peak_memory_gib": 16.0}))
    assert last_peak(tmp_path, ch) == 16.0
    (tmp_path / f"{ch}.report.json").write_text("{damaged")
    assert last_peak(tmp_path, ch) == max(16.0, TYPICAL_PEAK_GIB[ch])  # no completed run


def test_a_failed_run_stopped_early_never_lowers_the_peak(tmp_path):
    """At 4a23a9d a build killed 10 s in left failed reports of 0.4 GiB (layer_anatomy) and
    7.0 GiB (weight_update_signature, stopped 18 min in): read as their peaks, they would have
    put the two side by side again, where they were OOM-killed at 60b9c79."""
    for ch, small in (("layer_anatomy", 0.4), ("weight_update_signature", 7.04)):
        (tmp_path / f"{ch}.failed.report.json").write_text(json.dumps({"finished": "2026-12-03T14:13:55", "peak_memory_gib": small}))
        assert last_peak(tmp_path, ch) == TYPICAL_PEAK_GIB[ch]
    (tmp_path / "layer_anatomy.report.json").write_text(json.dumps({"finished": "2026-12-03T12:00:00", "peak_memory_gib": 7.9}))
    assert last_peak(tmp_path, "layer_anatomy") == 7.9  # completed earlier, failed later lower
    (tmp_path / "curvature.report.json").write_text(json.dumps({"finished": "2026-12-03T15:00:00", "peak_memory_gib": 1.2}))
    (tmp_path / "curvature.failed.report.json").write_text(json.dumps({"finished": "2026-12-03T12:00:00", "peak_memory_gib": 9.0}))
    assert last_peak(tmp_path, "curvature") == 1.2  # a failure before the completed run: older code
    assert next_fitting(["weight_update_signature"], ["layer_anatomy"], {"weight_update_signature": last_peak(tmp_path, "weight_update_signature"), "layer_anatomy": 7.9}, 0.9 * 23.4) is None


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="VmHWM is read from /proc")
def test_the_watch_sees_a_child_process_peak():
    code = "import time; x = bytearray(400 * 2**20); x[::4096] = b'1' * len(x[::4096]); time.sleep(1.5)"
    with PeakWatch(interval=0.2) as watch:
        subprocess.run([sys.executable, "-c", code], check=True)
    assert watch.peak_gib is not None and 0.38 < watch.peak_gib < 1.0


def _record(folder: str, name: str, seconds: float, threads: int) -> str:
    """A task: writes its start, end and thread count (module level: the pool pickles it)."""
    start = time.time()
    if name == "broken":
        raise RuntimeError("broken chapter")
    time.sleep(seconds)
    Path(folder, f"{name}.json").write_text(json.dumps({"start": start, "end": time.time(), "threads": threads}))
    return name


def test_side_by_side_keeps_the_heavy_chapter_alone_and_goes_on_after_a_failure(tmp_path):
    peaks = {"heavy": 21.0, "broken": 1.0, "a": 8.0, "b": 1.0}  # heavy fits beside none
    tasks = {c: functools.partial(_record, str(tmp_path), c, 0.6) for c in peaks}
    failures = run_side_by_side(tasks, peaks, jobs=2, budget=BUDGET)
    assert [str(f) for f in failures] == ["broken chapter"]
    runs = {c: json.loads((tmp_path / f"{c}.json").read_text()) for c in ("heavy", "a", "b")}
    heavy = runs["heavy"]
    for c in ("a", "b"):  # nothing overlaps the heavy one
        assert runs[c]["start"] >= heavy["end"] or runs[c]["end"] <= heavy["start"]
    from lamina.core.machine import machine_cores

    cores = machine_cores()
    assert heavy["threads"] == cores
    assert runs["a"]["threads"] == runs["b"]["threads"] == max(1, cores // 2)


def test_the_book_build_schedules_by_each_chapters_last_peak(monkeypatch, tmp_path):
    (tmp_path / "layer_anatomy.report.json").write_text(json.dumps({"seconds": 10, "peak_memory_gib": 7.9}))
    monkeypatch.setattr(execute, "_prepare", lambda c, out, p, book: SimpleNamespace(out=tmp_path, parameters={}))
    monkeypatch.setattr(execute, "preflight", lambda c, p: None)
    monkeypatch.setattr(execute, "_reuse", lambda run, force: False)
    seen = {}

    def fake(tasks, peak, jobs):
        seen.update(order=list(tasks), peak=dict(peak), jobs=jobs)
        return [RuntimeError("a chapter failed")]

    monkeypatch.setattr(execute, "run_side_by_side", fake)
    chapters = ["weight_update_signature", "layer_anatomy", "curvature"]
    with pytest.raises(RuntimeError, match="a chapter failed"):
        execute._execute_many(chapters, tmp_path, {}, jobs=2)
    assert seen["peak"] == {"weight_update_signature": TYPICAL_PEAK_GIB["weight_update_signature"],
                            "layer_anatomy": 7.9, "curvature": DEFAULT_PEAK_GIB}  # fmt: skip
    assert seen["jobs"] == 2 and set(seen["order"]) == set(chapters)
