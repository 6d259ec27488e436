"""Where a run lands (issue 35): only the book's own build writes the book's slot; every other
run, however it was started, lands in the namespace of the parameters it varied, model lists
included; folder names never collide; results are written all or nothing. "BAD n" tests fail
on 2a683dc."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lamina.states.io import read_result_file, write_results

RUN_ENV = "LAMINA_RUN"

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
ROW = {"claim_id": "p1-curvature-gap", "claim": "c", "verdict": "reproduced", "measured": 0.5}


def _write(root: Path, model: str = "synthetic-null", config: dict | None = None) -> Path:
    return write_results("curvature", model, summary={"claims": [dict(ROW, model=model)]},
                         config=config or {}, tables={"t": pd.DataFrame({"a": [1.0, 2.0]})},
                         root=root)  # fmt: skip


def test_bad7_a_python_api_run_never_writes_the_books_slot(tmp_path, monkeypatch):
    monkeypatch.delenv(RUN_ENV, raising=False)
    monkeypatch.delenv("LAMINA_NOTEBOOKS", raising=False)
    path = _write(tmp_path, config={"model": "synthetic-null", "seed": 1, "quick": False})
    assert path.parent.parent == tmp_path / "synthetic-null"  # <model>/<namespace>/
    record = read_result_file(path)
    assert record["run"]["via"] == "python" and record["run"]["varied"] == {"model": "synthetic-null", "seed": 1}
    assert path.parent.name == record["run"]["namespace"]
    # the book's parameters outside make book: a namespace too, never the book's slot
    from lamina.states.runs import namespace_of

    same = _write(tmp_path, config={"model": "default", "seed": 0})
    assert same.parent.name == namespace_of({}) and not (tmp_path / "synthetic-null" / "curvature.json").exists()


@pytest.mark.parametrize(
    ("chapter", "name", "value"),
    [("reanalysis", "real_models", []), ("organisms", "reference_models", []),
     ("layer_anatomy", "corpus", "organism-gpt2"), ("weight_update_signature", "base", "step-100")],
)  # fmt: skip
def test_bad8_model_list_parameters_get_their_own_namespace(chapter, name, value):
    from lamina.book.execute import run_namespace

    varied, namespace = run_namespace(NOTEBOOKS / f"{chapter}.py", {name: value})
    assert varied == {name: value} and namespace is not None


def _book_run(monkeypatch) -> None:
    monkeypatch.setenv(RUN_ENV, json.dumps({"book": True, "namespace": None, "key": "k"}))


@pytest.mark.parametrize(
    ("a", "b"),
    [("/models/exp_1/model.gguf", "/models/exp/1/model.gguf"), ("/m/a b.gguf", "/m/a_b.gguf"),
     ("org/name", "org_name"), ("/a/model.gguf", "/b/model.gguf")],
)  # fmt: skip
def test_bad10_models_whose_names_differ_only_in_odd_characters_never_share_a_folder(
    tmp_path, monkeypatch, a, b
):
    _book_run(monkeypatch)
    first, second = _write(tmp_path, a), _write(tmp_path, b)
    assert first.parent != second.parent
    assert read_result_file(first)["model"] == a and read_result_file(second)["model"] == b
    from lamina.states.runs import model_folder, runs_folder_name

    assert model_folder(a) != model_folder(b) and runs_folder_name(a) != runs_folder_name(b)


def test_plain_names_keep_their_folder_and_paths_read_well():
    from lamina.states.runs import model_folder

    assert model_folder("smollm2-135m-instruct") == "smollm2-135m-instruct"
    assert model_folder("organism-gpt2~s1@sft") == "organism-gpt2~s1@sft"
    assert model_folder("/models/exp_1/model.gguf").startswith("model.gguf-")
    assert model_folder("..") != ".." and "/" not in model_folder("../x")


def test_poor_a_full_disk_leaves_no_half_written_results(tmp_path, monkeypatch):
    from lamina.states.io import ResultsWriteError

    _book_run(monkeypatch)
    real = pd.DataFrame.to_parquet
    calls = []

    def full(self, path, **kw):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(self, path, **kw)

    monkeypatch.setattr(pd.DataFrame, "to_parquet", full)
    tables = {"a": pd.DataFrame({"x": [1]}), "b": pd.DataFrame({"x": [2]}), "c": pd.DataFrame({"x": [3]})}
    with pytest.raises(ResultsWriteError, match=r"curvature results .* into .*m: No space left on device; nothing was written"):
        write_results("curvature", "m", summary={"claims": []}, config={}, tables=tables, root=tmp_path)
    assert list((tmp_path / "m").iterdir()) == []  # no table without its record, no temporary


def test_a_record_or_table_edited_after_writing_is_refused(tmp_path, monkeypatch):
    from lamina.states.io import ResultsFileError

    _book_run(monkeypatch)
    path = _write(tmp_path)
    path.write_text(path.read_text().replace('"measured": 0.5', '"measured": 0.9'))
    with pytest.raises(ResultsFileError, match="does not match its SHA-256 seal"):
        read_result_file(path)
    path = _write(tmp_path)
    pd.DataFrame({"a": [9.0]}).to_parquet(path.parent / "curvature.t.parquet")
    with pytest.raises(ResultsFileError, match=r"curvature\.t\.parquet: missing, or changed"):
        read_result_file(path)


def test_poor_a_run_killed_after_its_results_is_marked_unfinished(tmp_path, monkeypatch):
    from lamina.book.scorecard import claims_table, load_records
    from lamina.states.io import mark_run

    monkeypatch.setenv(RUN_ENV, json.dumps({"book": False, "namespace": "abc123abc123", "key": "k",
                                            "varied": {"seed": 1}}))  # fmt: skip
    path = _write(tmp_path)
    assert read_result_file(path)["run"]["status"] == "running"  # until the executor says more
    def label() -> str:
        table = claims_table(load_records(tmp_path))
        (model,) = set(table[table.chapter == "curvature"].model)
        return str(model)

    assert label().endswith("unfinished)") and "seed=1" in label()
    mark_run([path], "ok")
    assert "unfinished" not in label()


def test_poor_a_backup_copy_or_moved_record_is_left_out_of_the_scorecard(tmp_path, monkeypatch, capsys):
    import shutil

    from lamina.book.scorecard import load_records

    _book_run(monkeypatch)
    path = _write(tmp_path)
    (tmp_path / "synthetic-null" / "old").mkdir()
    shutil.copy(path, tmp_path / "synthetic-null" / "old" / "curvature.json")
    (tmp_path / "other-model").mkdir()
    shutil.copy(path, tmp_path / "other-model" / "curvature.json")
    assert len(load_records(tmp_path)) == 1
    err = capsys.readouterr().err
    assert "left out" in err and "old/curvature.json" in err and "other-model" in err
