"""Where a run of ``lamina run`` / ``make chapter`` lands, what it prints, and what a failed or
interrupted run leaves (issue 35). The kernel is a stand-in (papermill replaced) so that the
executor's own behaviour is tested; "BAD 9" fails on 2a683dc, where a run without a model
replaced the book's own chapter page in ``book/executed/``."""

from __future__ import annotations

import json
import shutil

import pytest

_CHAPTER = """# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% tags=["parameters"]
model = "default"
quick = False
seed = 0
results_root = None

# %%
print(model, quick, seed)
"""


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A checkout with one stand-in chapter ``alpha`` and papermill replaced: the stand-in
    kernel copies the notebook and writes one results record (``state["raise"]``: what it
    raises after that)."""
    from lamina.book import execute
    from lamina.states.io import write_results

    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "alpha.py").write_text(_CHAPTER)
    monkeypatch.setenv("LAMINA_NOTEBOOKS", str(tmp_path / "notebooks"))
    monkeypatch.setenv("LAMINA_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("LAMINA_RESULTS", str(tmp_path / "results"))
    monkeypatch.delenv("LAMINA_DEVICE", raising=False)
    monkeypatch.setattr(execute, "repo_root", lambda: tmp_path)
    monkeypatch.chdir(tmp_path)
    state: dict = {"raise": None, "runs": 0}

    def kernel(src, out, parameters, **kwargs):
        state["runs"] += 1
        shutil.copy(src, out)
        row = {"claim_id": "p1-curvature-gap", "claim": "c", "verdict": "reproduced",
               "measured": float(state["runs"])}  # fmt: skip
        write_results("alpha", "m", summary={"claims": [row]}, config=dict(parameters))
        if state["raise"] is not None:
            raise state["raise"]

    import papermill

    monkeypatch.setattr(papermill, "execute_notebook", kernel)
    state["root"] = tmp_path
    return state


def _main(argv: list[str]) -> int:

    return _cli_main(["execute", *argv])


def test_bad9_a_run_without_a_model_never_replaces_the_books_page(checkout, capsys):
    root = checkout["root"]
    assert _main(["alpha", "-p", "quick", "true"]) == 0
    assert not (root / "book" / "executed").exists()
    (notebook,) = (root / "book" / "runs").rglob("alpha.ipynb")
    (record,) = (root / "results" / "m").rglob("alpha.json")
    assert record.parent.name == notebook.parent.name  # notebook and results: one namespace
    assert json.loads(record.read_text())["run"]["status"] == "ok"
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "done in" in last and str(notebook) in last and str(record.parent) in last


def test_only_the_books_build_writes_book_executed_and_the_books_slot(checkout):
    root = checkout["root"]
    assert _main(["alpha", "--book"]) == 0
    assert (root / "book" / "executed" / "alpha.ipynb").is_file()
    assert (root / "results" / "m" / "alpha.json").is_file()
    with pytest.raises(SystemExit) as info:
        _main(["alpha", "--out", str(root / "book" / "executed")])
    assert info.value.code == 2


def test_two_parameter_sets_get_two_run_folders(checkout):
    root = checkout["root"]
    assert _main(["alpha", "-p", "seed", "1"]) == 0
    folders = {p.parent for p in (root / "book" / "runs").rglob("alpha.ipynb")}
    assert _main(["alpha", "-p", "seed", "2"]) == 0
    assert len({p.parent for p in (root / "book" / "runs").rglob("alpha.ipynb")}) == len(folders) + 1


def test_poor_ctrl_c_keeps_the_last_good_run_and_marks_its_results(checkout, capsys):
    root = checkout["root"]
    assert _main(["alpha", "-p", "seed", "1"]) == 0
    (notebook,) = (root / "book" / "runs").rglob("alpha.ipynb")
    report = notebook.with_name("alpha.report.json")
    before = (notebook.read_bytes(), report.read_bytes())
    checkout["raise"] = KeyboardInterrupt()
    assert _main(["alpha", "-p", "seed", "1", "--force"]) == 130
    assert (notebook.read_bytes(), report.read_bytes()) == before  # a consistent pair
    failed = json.loads(notebook.with_name("alpha.failed.report.json").read_text())
    assert failed["status"] == "failed" and failed["parameters"] == {"seed": 1}
    (record,) = (root / "results" / "m").rglob("alpha.json")
    assert json.loads(record.read_text())["run"]["status"] == "failed"
    assert "interrupted" in capsys.readouterr().err


def test_poor_a_failing_cell_exits_1_with_one_line(checkout, capsys):
    from papermill.exceptions import PapermillExecutionError

    checkout["raise"] = PapermillExecutionError(3, 3, "x = 1/0", "ZeroDivisionError", "division by zero", [])
    assert _main(["alpha"]) == 1
    err = capsys.readouterr().err
    assert "ZeroDivisionError: division by zero" in err and "alpha.failed.ipynb" in err
    assert "Traceback" not in err


@pytest.mark.slow
def test_a_real_kernel_prints_progress_on_the_terminal_not_in_the_notebook(tmp_path, monkeypatch, capfd):
    """The kernel's lamina progress lines reach the terminal; the notebook holds none of them,
    and no "Kernel is running over TCP" warning is printed."""
    from lamina.book import execute

    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "alpha.py").write_text(
        _CHAPTER.replace('print(model, quick, seed)', "from lamina.core.progress import bar, say\n"
                         "say('hello from the kernel')\nfor _ in bar(range(3), desc='steps'):\n    pass")
    )  # fmt: skip
    monkeypatch.setenv("LAMINA_NOTEBOOKS", str(tmp_path / "notebooks"))
    monkeypatch.setenv("LAMINA_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("LAMINA_RESULTS", str(tmp_path / "results"))
    out = execute.execute_chapter("alpha", tmp_path / "out", {"quick": True})
    err = capfd.readouterr().err  # the kernel's own stderr too (file descriptor 2)
    assert "[lamina] alpha: hello from the kernel" in err and "steps: 100%" in err
    assert "without encryption" not in err
    outputs = json.dumps([c.get("outputs", []) for c in json.loads(out.read_text())["cells"]])
    assert "hello from the kernel" not in outputs and "steps" not in outputs


def _cli_main(argv):
    from lamina.book.cli import main

    return main(argv)


def test_poor_a_truncated_run_report_is_named_and_a_failed_one_left_out(tmp_path, monkeypatch):
    from lamina.book.scorecard import write_pages
    from lamina.states.io import ResultsFileError, write_results

    monkeypatch.setenv("LAMINA_RUN", json.dumps({"book": True, "namespace": None}))
    row = {"claim_id": "p1-curvature-gap", "claim": "c", "verdict": "reproduced", "measured": 0.5}
    write_results("curvature", "m", summary={"claims": [row]}, config={}, root=tmp_path / "results")
    executed = tmp_path / "book" / "executed"
    executed.mkdir(parents=True)
    (executed / "curvature.failed.report.json").write_text('{"status": "failed"}')
    write_pages(tmp_path, tmp_path / "results")  # the failed attempt is not the page's run
    (executed / "curvature.report.json").write_text('{"chapter": "curv')
    with pytest.raises(ResultsFileError, match=r"curvature\.report\.json: not a readable run report"):
        write_pages(tmp_path, tmp_path / "results")
