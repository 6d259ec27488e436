"""``--jobs`` defaults to the machine's cores everywhere (lamina.core.machine), and a run of
fewer chapters than jobs does not split the cores among kernels that never start."""

import os
from types import SimpleNamespace

from lamina.book import execute
from lamina.book.cli import _parser
from lamina.core.machine import machine_cores


def test_machine_cores_is_this_process_affinity():
    assert machine_cores() == len(os.sched_getaffinity(0)) >= 1


def test_execute_jobs_default_to_the_cores():
    parser, _ = _parser("lamina run")
    args = parser.parse_args(["execute", "curvature"])
    assert args.jobs == machine_cores()


def test_one_chapter_runs_in_this_process_whatever_jobs_says(monkeypatch):
    """With one chapter, --jobs 8 must not start a process pool (whose kernels would get
    cores // 8 threads): it takes the sequential path."""
    ran = []
    monkeypatch.setattr(execute, "_prepare", lambda c, out, p, book: SimpleNamespace(name=c, parameters={}))
    monkeypatch.setattr(execute, "preflight", lambda c, p: None)
    monkeypatch.setattr(execute, "_run_chapter", lambda run, *a: ran.append(run))

    def no_pool(*a, **k):
        raise AssertionError("a process pool was started for one chapter")

    monkeypatch.setattr("concurrent.futures.ProcessPoolExecutor", no_pool)
    monkeypatch.delenv("LAMINA_NUM_THREADS", raising=False)
    assert execute._execute_many(["curvature"], None, {}, jobs=8) == 0
    assert [r.name for r in ran] == ["curvature"] and "LAMINA_NUM_THREADS" not in os.environ


def test_calibrate_jobs_default_to_the_cores(monkeypatch):
    import lamina.__main__ as cli
    import lamina.book.calibration as page

    seen = {}
    monkeypatch.setattr(page, "main", lambda a: seen.update(argv=a) or 0)
    cli._calibrate([])
    assert seen["argv"][-2:] == ["--jobs", str(machine_cores())]


def test_paper1_calibration_jobs_default_to_the_cores():
    from lamina.trajectory.calibration import _parse_main

    assert _parse_main(["3"])[1] == machine_cores()
