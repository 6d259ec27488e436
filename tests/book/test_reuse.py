"""Reusing an executed chapter whose inputs are unchanged (lamina.book.reuse, issue 10 §5).

Most tests replace papermill by a stand-in that copies the notebook and writes one results
file, counting its calls, so that they run in a second; one slow test runs a real kernel.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from lamina.book import execute as book
from lamina.book import reuse
from lamina.core.imports import LIB, import_closure

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

# %%
import json
import pathlib

folder = pathlib.Path(results_root) / "m"
folder.mkdir(parents=True, exist_ok=True)
(folder / "alpha.json").write_text(json.dumps({{"quick": quick}}))


def _never_called():
    import {module}  # the reuse key follows this import; the kernel never runs it
"""

IMPORTED = "lamina.evidence.stats"


@pytest.fixture
def chapter(tmp_path, monkeypatch):
    """A one-chapter notebooks folder, its results folder, and papermill replaced by a
    stand-in (``calls`` lists the parameters of each execution; ``fail`` makes it raise)."""
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "alpha.py").write_text(_CHAPTER.format(module=IMPORTED))
    monkeypatch.setenv("LAMINA_NOTEBOOKS", str(notebooks))
    monkeypatch.setenv("LAMINA_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("LAMINA_RESULTS", str(tmp_path / "results"))
    state: dict = {"calls": [], "fail": False}

    def fake_execute(src, out, parameters, **kwargs):
        state["calls"].append(dict(parameters))
        if state["fail"]:
            raise RuntimeError("cell failed")
        shutil.copy(src, out)
        folder = Path(parameters["results_root"]) / "m"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "alpha.json").write_text(json.dumps(parameters))

    import papermill

    monkeypatch.setattr(papermill, "execute_notebook", fake_execute)
    state["source"] = notebooks / "alpha.py"
    state["out"] = tmp_path / "executed"
    state["params"] = {"results_root": str(tmp_path / "results")}
    return state


def _run(state, params=None, **kw):
    return book.execute_chapter(  # the book's own build: results in the book's slot
        "alpha", state["out"], {**state["params"], **(params or {})}, progress=False, book=True, **kw
    )


def test_a_second_execution_with_the_same_inputs_is_reused(chapter, capsys):
    first = _run(chapter)
    report = json.loads((chapter["out"] / "alpha.report.json").read_text())
    assert report["status"] == "ok" and len(report["key"]) == 64
    assert set(report["key_components"]) >= {"notebook", "parameters", "lamina_code", "versions"}
    assert IMPORTED in report["key_detail"]["lamina_code"]
    assert list(report["results"]) == [str(Path(chapter["params"]["results_root"]) / "m" /
                                           "alpha.json")]  # fmt: skip
    capsys.readouterr()
    assert _run(chapter) == first
    assert len(chapter["calls"]) == 1
    err = capsys.readouterr().err
    assert f"alpha: inputs unchanged since {report['finished']}, reusing" in err


def test_force_reruns(chapter, capsys):
    _run(chapter)
    _run(chapter, force=True)
    assert len(chapter["calls"]) == 2
    assert "rerunning (--force)" in capsys.readouterr().err


def test_a_changed_parameter_reruns_and_says_so(chapter, capsys):
    _run(chapter)
    _run(chapter, {"quick": True})
    assert len(chapter["calls"]) == 2 and chapter["calls"][1]["quick"] is True
    assert "changed: parameters (quick changed)" in capsys.readouterr().err
    _run(chapter, {"quick": True})
    assert len(chapter["calls"]) == 2


def test_an_edited_notebook_reruns(chapter, capsys):
    _run(chapter)
    with chapter["source"].open("a") as f:
        f.write("\n# %%\nprint('one more cell')\n")
    _run(chapter)
    assert len(chapter["calls"]) == 2
    assert "changed: notebook" in capsys.readouterr().err


def test_a_failed_run_is_never_reused(chapter):
    chapter["fail"] = True
    with pytest.raises(RuntimeError, match="cell failed"):
        _run(chapter)
    report = json.loads((chapter["out"] / "alpha.failed.report.json").read_text())
    assert report["status"] == "failed" and not (chapter["out"] / "alpha.report.json").exists()
    chapter["fail"] = False
    # even beside a notebook left by an earlier success, with the same key
    shutil.copy(chapter["source"], chapter["out"] / "alpha.ipynb")
    assert reuse.reusable(chapter["out"] / "alpha.report.json", chapter["out"] / "alpha.ipynb",
                          report["key"])[0] is None  # fmt: skip
    _run(chapter)
    assert len(chapter["calls"]) == 2
    _run(chapter)
    assert len(chapter["calls"]) == 2  # the success is reused


@pytest.mark.parametrize("damage", ["delete results", "edit results", "delete notebook"])
def test_missing_or_changed_outputs_rerun(chapter, damage):
    _run(chapter)
    results = Path(chapter["params"]["results_root"]) / "m" / "alpha.json"
    if damage == "delete results":
        results.unlink()
    elif damage == "edit results":
        results.write_text('{"quick": "edited"}')
    else:
        (chapter["out"] / "alpha.ipynb").unlink()
    _run(chapter)
    assert len(chapter["calls"]) == 2


@pytest.fixture
def lib_copy(tmp_path, monkeypatch):
    """A copy of lib/ that the reuse key reads instead of the checkout's."""
    copy = tmp_path / "lib"
    shutil.copytree(LIB / "lamina", copy / "lamina", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(reuse, "LIB", copy)
    return copy


def test_editing_an_imported_lamina_module_reruns(chapter, lib_copy, capsys):
    _run(chapter)
    path = lib_copy / "lamina" / "evidence" / "stats.py"
    path.write_text(path.read_text() + "\n# an edit\n")
    _run(chapter)
    assert len(chapter["calls"]) == 2
    assert "lamina_code (lamina.evidence.stats changed)" in capsys.readouterr().err


def test_editing_a_module_imported_transitively_reruns(chapter, lib_copy):
    closure = import_closure(chapter["source"], lib_copy)
    assert closure is not None and "lamina" in closure  # the package's __init__ runs too
    _run(chapter)
    path = lib_copy / "lamina" / "core" / "version.py"  # imported by lamina/__init__, not by the chapter
    assert "lamina.core.version" in closure
    path.write_text(path.read_text() + "\n# an edit\n")
    _run(chapter)
    assert len(chapter["calls"]) == 2


def test_editing_a_module_the_chapter_does_not_import_reuses(chapter, lib_copy):
    closure = import_closure(chapter["source"], lib_copy)
    assert closure is not None
    assert "lamina.book.scorecard" not in closure
    _run(chapter)
    path = lib_copy / "lamina" / "book" / "scorecard.py"
    path.write_text(path.read_text() + "\n# an edit\n")
    _run(chapter)
    assert len(chapter["calls"]) == 1


def test_a_rebuilt_organism_or_new_prompts_change_the_key(chapter, tmp_path, monkeypatch):
    params = {"results_root": chapter["params"]["results_root"]}
    key0, _ = reuse.input_key(chapter["source"], params)
    built = tmp_path / "data" / "organisms" / "organism-x-0123456789" / "build.json"
    built.parent.mkdir(parents=True)
    built.write_text('{"date": "1"}')
    key1, detail = reuse.input_key(chapter["source"], params)
    assert key1 != key0 and "organism-x-0123456789" in detail["organisms"]
    built.write_text('{"date": "2"}')
    key2, _ = reuse.input_key(chapter["source"], params)
    assert key2 != key1
    prompts = tmp_path / "data" / "prompts"
    prompts.mkdir()
    (prompts / "lexical.jsonl").write_text('{"text": "a"}\n')
    key3, detail = reuse.input_key(chapter["source"], params)
    assert key3 != key2 and list(detail["prompts"]) == ["lexical.jsonl"]
    assert reuse.input_key(chapter["source"], params)[0] == key3  # deterministic


def test_a_local_model_folder_is_part_of_the_key(chapter, tmp_path):
    model = tmp_path / "my-model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    params = {"model": str(model)}
    key0, detail = reuse.input_key(chapter["source"], params)
    assert detail["parameter_files"] == {
        f"model={model}": {"config.json": reuse.file_digest(model / "config.json")}
    }
    (model / "config.json").write_text('{"n_layer": 2}')
    assert reuse.input_key(chapter["source"], params)[0] != key0


def test_a_fresh_copy_of_the_peer_data_keeps_the_key_and_new_bytes_change_it(chapter, tmp_path):
    """The shared folder is copied afresh onto each machine (new mtimes, same bytes): at
    60b9c79 its stat-based key reran every chapter of the book in every session."""
    peer = tmp_path / "peer"
    (peer / "data").mkdir(parents=True)
    (peer / "data" / "states.pt").write_bytes(b"\x00" * 100)
    params = {**chapter["params"], "peer_root": str(peer)}
    key0, detail = reuse.input_key(chapter["source"], params)
    assert list(detail["peer_data"]["files"]) == ["data/states.pt"]
    copy = tmp_path / "copy"
    shutil.copytree(peer, copy, copy_function=shutil.copy)  # the same bytes, new mtimes
    shutil.rmtree(peer)
    copy.rename(peer)
    states = peer / "data" / "states.pt"
    os.utime(states, ns=(states.stat().st_atime_ns, states.stat().st_mtime_ns + 10**9))
    assert reuse.input_key(chapter["source"], params)[0] == key0
    (peer / "data" / "states.pt").write_bytes(b"\x01" + b"\x00" * 99)  # same size, new bytes
    assert reuse.input_key(chapter["source"], params)[0] != key0


def test_the_closure_follows_imports_by_name(tmp_path):
    """A module that imports by name (``importlib.import_module``) gets edges to the lamina
    modules its string constants name; a plain string in other code does not count."""
    pkg = tmp_path / "lamina"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import importlib\nNAMES = ['lamina.b.f']\n"
                              "def g():\n    return importlib.import_module('lamina.b')\n")  # fmt: skip
    (pkg / "b.py").write_text("def f():\n    return 1\n")
    (pkg / "c.py").write_text("NAME = 'lamina.d'\n")
    (pkg / "d.py").write_text("")
    script = tmp_path / "nb.py"
    script.write_text("from lamina.a import g\nimport lamina.c\n")
    closure = import_closure(script, tmp_path)
    assert closure is not None
    assert sorted(closure) == ["lamina", "lamina.a", "lamina.b", "lamina.c"]


@pytest.mark.slow
def test_a_real_kernel_run_is_reused_through_the_command_line(tmp_path, monkeypatch, capsys):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "alpha.py").write_text(_CHAPTER.format(module=IMPORTED))
    monkeypatch.setenv("LAMINA_NOTEBOOKS", str(notebooks))
    monkeypatch.setenv("LAMINA_DATA", str(tmp_path / "data"))
    results = tmp_path / "results"
    argv = ["execute", "alpha", "--book", "--out", str(tmp_path / "out"), "-p", "results_root", str(results)]
    assert _cli_main(argv) == 0
    notebook = tmp_path / "out" / "alpha.ipynb"
    stamp = notebook.stat().st_mtime_ns
    assert json.loads((results / "m" / "alpha.json").read_text()) == {"quick": False}
    assert _cli_main(argv) == 0
    assert notebook.stat().st_mtime_ns == stamp
    assert "alpha: inputs unchanged since" in capsys.readouterr().err
    assert _cli_main([*argv, "--force"]) == 0
    assert notebook.stat().st_mtime_ns != stamp


def _cli_main(argv):
    from lamina.book.cli import main

    return main(argv)


def test_every_file_of_a_comma_list_of_prompts_is_part_of_the_key(chapter, tmp_path):
    """Issue 53: ``-p prompts mine.jsonl,lexical,...`` hashed no file (only a whole-value path
    was), so replacing every prompt of mine.jsonl reused the stale run."""
    mine = tmp_path / "mine.jsonl"
    mine.write_text('{"id": "r1", "family": "reasoning", "prompt": "a"}\n')
    params = {"prompts": f"{mine},lexical,reasoning_short,lexical_framed"}
    key0, detail = reuse.input_key(chapter["source"], params)
    assert f"prompts={mine}" in detail["parameter_files"]
    mine.write_text('{"id": "r1", "family": "reasoning", "prompt": "b"}\n')
    key1, _ = reuse.input_key(chapter["source"], params)
    assert key1 != key0
    assert reuse.parameter_reads("prompts", params["prompts"])[0] == str(mine)


def test_a_family_resolves_to_the_file_the_run_reads(chapter, tmp_path):
    """The key and the run share one resolution (prompts.prompt_files)."""
    from lamina.sources.prompts import prompt_files, prompts_dir

    reads = reuse.parameter_reads("prompts", "lexical")
    assert reads == [str(prompt_files("lexical")[0])] == [str(prompts_dir() / "lexical.jsonl")]


@pytest.mark.parametrize("as_list", [False, True])
def test_every_folder_of_a_list_of_models_is_part_of_the_key(chapter, tmp_path, as_list):
    """Issue 53: a model list (``-p model a,b`` or ``["a", "b"]``) reads each folder; the
    second one's files changing must change the key as the first one's do."""
    folders = [tmp_path / "model-a", tmp_path / "model-b"]
    for folder in folders:
        folder.mkdir()
        (folder / "config.json").write_text("{}")
    value = [str(f) for f in folders] if as_list else ",".join(str(f) for f in folders)
    key0, detail = reuse.input_key(chapter["source"], {"model": value})
    assert sorted(detail["parameter_files"]) == [f"model={f}" for f in folders]
    (folders[1] / "model.safetensors").write_bytes(b"new weights")
    assert reuse.input_key(chapter["source"], {"model": value})[0] != key0
