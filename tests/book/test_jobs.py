"""``--jobs`` defaults to the machine's cores where lamina still runs work side by side (the
calibration's worker processes; lamina.core.machine); chapters side by side are Snakemake's
(``make book``), so ``lamina run`` executes its chapters one after another and refuses
``--jobs`` with a pointer to ``make book``."""

import os
from types import SimpleNamespace

import pytest

from lamina.book import execute
from lamina.book.cli import _parser
from lamina.core.machine import machine_cores


def test_machine_cores_is_this_process_affinity():
    assert machine_cores() == len(os.sched_getaffinity(0)) >= 1


def test_run_refuses_jobs_and_names_make_book(capsys):
    from lamina.book.cli import run_main

    with pytest.raises(SystemExit) as info:
        run_main(["curvature", "--jobs", "2"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--jobs" in err and "make book" in err and "one after another" in err


def test_chapters_run_one_after_another_in_this_process(monkeypatch):
    """No process pool, whatever the number of chapters: each chapter's kernel keeps the
    threads the environment gives it (Snakemake's rule sets them)."""
    ran = []
    monkeypatch.setattr(execute, "_prepare", lambda c, out, p, book: SimpleNamespace(name=c, parameters={}))
    monkeypatch.setattr(execute, "preflight", lambda c, p: None)
    monkeypatch.setattr(execute, "_run_chapter", lambda run, *a: ran.append(run))

    def no_pool(*a, **k):
        raise AssertionError("a process pool was started")

    monkeypatch.setattr("concurrent.futures.ProcessPoolExecutor", no_pool)
    monkeypatch.delenv("LAMINA_NUM_THREADS", raising=False)
    assert execute._execute_many(["curvature", "convergence"], None, {}) == 0
    assert [r.name for r in ran] == ["curvature", "convergence"] and "LAMINA_NUM_THREADS" not in os.environ
    assert _parser("lamina run")[0].parse_args(["execute", "curvature"]).jobs is None


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
