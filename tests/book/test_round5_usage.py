"""Issue 53: parameter values checked before any kernel, unknown chapter names refused, and
two runs of one chapter into one folder that cannot interleave (lamina.book.runlock)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import lamina.__main__ as lamina_cli
from lamina.book import execute as book
from lamina.book.runlock import RunLockedError, lock_path, run_lock


def _usage_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as info:
        lamina_cli.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [("n_bootstrap", "-5", "n_bootstrap must be a whole number >= 10; got -5"),
     ("pooling", "max", "got 'max'")],
)
def test_a_value_out_of_range_or_choices_is_refused_before_a_kernel(
    no_kernel, capsys, name, value, says
):
    """At 2a683dc+ these started a kernel and failed after 8-9 s with exit 1."""
    err = _usage_error(capsys, ["run", "curvature", "--model", "synthetic-null", "-p", name, value])
    assert says in err and "chapter 'curvature'" in err
    assert len(err.strip().splitlines()[-1]) < 400  # one line after the usage


def test_an_unknown_chapter_beside_all_is_an_error(no_kernel, capsys):
    err = _usage_error(capsys, ["run", "--all", "nosuch"])
    assert "unknown chapter 'nosuch'" in err
    err = _usage_error(capsys, ["run", "curvature", "nosuch"])
    assert "unknown chapter 'nosuch'" in err


@pytest.mark.parametrize(
    "argv",
    [["chapters", "nosuch"], ["chapters", "curvature", "nosuch"], ["run", "../lib/lamina/__init__"],
     ["run", "notebooks/curvature"], ["execute", "nosuch"], ["execute", "--all", "nosuch"]],
)  # fmt: skip
def test_every_command_that_takes_chapter_names_refuses_an_unknown_one(no_kernel, capsys, argv):
    """``lamina chapters nosuch`` listed every chapter; a path that leads to a Python file
    beside notebooks/ was taken for a chapter (``execute`` is ``python -m lamina.book
    execute``, what ``make chapter CH=...`` runs)."""
    from lamina.book.cli import main as book_main

    if argv[0] == "execute":
        with pytest.raises(SystemExit) as info:
            book_main(argv)
        assert info.value.code == 2
        err = capsys.readouterr().err
    else:
        err = _usage_error(capsys, argv)
    assert f"unknown chapter {argv[-1]!r}" in err


def test_lamina_chapters_shows_the_chapters_named_and_models_takes_no_argument(capsys):
    assert lamina_cli.main(["chapters", "curvature", "organisms"]) == 0
    shown = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert shown == ["curvature", "organisms"]
    assert "unrecognized arguments: curvature" in _usage_error(capsys, ["models", "curvature"])


_CHAPTER = """# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% tags=["parameters"]
quick = False
results_root = None
"""


@pytest.fixture
def slow_chapter(tmp_path, monkeypatch):
    """A one-chapter notebooks folder whose stand-in papermill takes 1.5 s."""
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "alpha.py").write_text(_CHAPTER)
    monkeypatch.setenv("LAMINA_NOTEBOOKS", str(notebooks))
    monkeypatch.setenv("LAMINA_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("LAMINA_RESULTS", str(tmp_path / "results"))
    calls: list[str] = []

    def fake_execute(src, out, parameters, **kwargs):
        calls.append(out)
        time.sleep(1.5)
        shutil.copy(src, out)
        folder = Path(parameters["results_root"]) / "m"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "alpha.json").write_text(json.dumps(parameters))

    import papermill

    monkeypatch.setattr(papermill, "execute_notebook", fake_execute)
    return {"out": tmp_path / "executed", "results": str(tmp_path / "results"), "calls": calls}


def test_two_runs_at_once_never_interleave(slow_chapter):
    """Two executions of one chapter into one folder, started together: one runs, the other
    refuses naming the first's process; the temporary notebooks carry the pid."""
    outcomes: list[object] = []

    def one() -> None:
        try:
            outcomes.append(book.execute_chapter(
                "alpha", slow_chapter["out"], {"results_root": slow_chapter["results"]},
                progress=False, book=True))  # fmt: skip
        except RunLockedError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    refused = [o for o in outcomes if isinstance(o, RunLockedError)]
    assert len(refused) == 1 and len(slow_chapter["calls"]) == 1, outcomes
    assert f"process {os.getpid()}" in str(refused[0])
    assert f".alpha.{os.getpid()}.running.ipynb" in slow_chapter["calls"][0]
    assert not lock_path(slow_chapter["out"], "alpha").exists()  # released
    report = json.loads((slow_chapter["out"] / "alpha.report.json").read_text())
    assert report["status"] == "ok"


def test_a_lock_held_by_another_live_process_refuses(tmp_path):
    code = (
        "import sys, time; from pathlib import Path; from lamina.book.runlock import run_lock\n"
        "with run_lock(Path(sys.argv[1]), 'alpha'):\n"
        "    print('held', flush=True); time.sleep(30)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(RunLockedError, match=f"process {holder.pid}"):
            with run_lock(tmp_path, "alpha"):
                pass
    finally:
        holder.kill()
        holder.wait()
    # killed (-9): its lock is stale now, and is taken over with a warning
    with run_lock(tmp_path, "alpha") as path:
        assert json.loads(path.read_text())["pid"] == os.getpid()
    assert not path.exists()
