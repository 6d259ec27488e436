"""Bad input round 3 (issue 23), results: provenance and namespaces of runs, the pages'
validation of results files, and the command line's checks of --out, results_root and
LAMINA_RESULTS. "BAD n" cases returned a silent wrong answer before the fix, "POOR" failed
unclearly; each test fails against the code before issue 23."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.book.test_bad_input_files import _cli_error

# a stand-in for the convergence chapter: its claim's measured value is the seed
_CHAPTER = """# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% tags=["parameters"]
model = "synthetic-null"
quick = False
seed = 0
results_root = None

# %%
from lamina.states.io import write_results

row = {"claim_id": "p1-conv", "claim": "c", "verdict": "reproduced", "measured": 0.5 + seed,
       "model": model}
write_results("convergence", model, summary={"claims": [row]}, config={"seed": seed},
              root=results_root)
"""


@pytest.fixture
def book(tmp_path, monkeypatch):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "convergence.py").write_text(_CHAPTER)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("LAMINA_NOTEBOOKS", str(notebooks))
    monkeypatch.delenv("LAMINA_RUN", raising=False)
    monkeypatch.chdir(work)
    return work


@pytest.mark.slow
def test_bad3_bad4_other_runs_get_their_own_namespace_and_marked_cells(book, tmp_path, monkeypatch):
    from lamina.book.scorecard import claims_table, load_records

    monkeypatch.setenv("LAMINA_RESULTS", "res")  # relative: the caller's directory (BAD 4)
    assert _cli_main(["execute", "convergence", "--out", "a", "--book"]) == 0  # the book's build
    book_file = book / "res" / "synthetic-null" / "convergence.json"
    before = book_file.read_bytes()
    assert _cli_main(["execute", "convergence", "--out", "b", "-p", "seed", "1",
                     "-p", "quick", "true"]) == 0  # fmt: skip
    assert book_file.read_bytes() == before  # the book's results are not replaced (BAD 3)
    assert not (tmp_path / "notebooks" / "res").exists()
    (other,) = (book / "res" / "synthetic-null").glob("*/convergence.json")
    record = json.loads(other.read_text())
    assert record["run"]["parameters"] == {"seed": 1, "quick": True}
    assert record["run"]["namespace"] == other.parent.name and record["run"]["key"]
    assert json.loads(before)["run"]["namespace"] is None
    table = claims_table(load_records(book / "res"))
    table = table[table.chapter == "convergence"]
    cells = dict(zip(table.model, table.measured, strict=True))
    assert cells["synthetic-null"] == 0.5
    (label,) = [m for m in cells if m != "synthetic-null"]
    assert "quick=True" in label and "seed=1" in label and cells[label] == 1.5
    assert _cli_main(["pages", "--root", str(tmp_path)]) == 0  # the relative variable again
    page = (tmp_path / "book" / "generated" / "scorecard.md").read_text()
    assert "seed=1" in page


def test_bad5_pages_with_a_mistyped_results_variable_is_an_error(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("LAMINA_RESULTS", str(tmp_path / "reslts"))
    err = _cli_error(capsys, ["pages", "--root", str(tmp_path)])
    assert "LAMINA_RESULTS" in err and "reslts" in err
    assert not (tmp_path / "book").exists()


def test_pages_with_an_empty_results_folder_is_an_error(capsys, tmp_path):
    (tmp_path / "res").mkdir()
    err = _cli_error(capsys, ["pages", "--root", str(tmp_path), "--results", str(tmp_path / "res")])
    assert "holds no results record" in err


def _write(root: Path, chapter: str, claims, model: str = "m") -> Path:
    path = root / model / f"{chapter}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"chapter": chapter, "model": model, "summary": {"claims": claims}}))
    return path


_ROW = {"claim_id": "p1-x", "verdict": "reproduced", "measured": 0.1}


@pytest.mark.parametrize(
    ("chapter", "claims", "message"),
    [
        ("convergence", [{**_ROW, "verdict": "Reproduced"}], r"claims\[0\].*verdict 'Reproduced'"),
        ("convergence", [_ROW, {**_ROW, "verdict": "yes"}], r"claims\[1\].*verdict 'yes'"),
        (
            "convergence",
            [{"verdict": "reproduced", "measured": 1.0}],
            r"claims\[0\] has no claim_id",
        ),
        ("convergence", [{**_ROW, "measured": "0.3"}], r"measured must be a number or null"),
        ("convergance", [_ROW], r"chapter 'convergance' is not a chapter of the book"),
    ],
)
def test_bad6_claim_rows_are_validated_naming_file_and_row(tmp_path, chapter, claims, message):
    from lamina.book.scorecard import load_records
    from lamina.states.io import ResultsFileError

    _write(tmp_path, chapter, claims)
    with pytest.raises(ResultsFileError, match=rf"{chapter}\.json.*{message}"):
        load_records(tmp_path)


@pytest.mark.parametrize(
    ("summary", "message"),
    [
        ({"claims": "oops"}, r"summary\.claims must be a list"),
        ({"claims": [3.5]}, r"claims\[0\] must be an object"),
        ([], r"'summary' must be an object"),
    ],
)
def test_poor_malformed_summary_names_the_file(tmp_path, summary, message):
    from lamina.book.scorecard import load_records
    from lamina.states.io import ResultsFileError

    path = tmp_path / "m" / "convergence.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"chapter": "convergence", "model": "m", "summary": summary}))
    with pytest.raises(ResultsFileError, match=rf"convergence\.json.*{message}"):
        load_records(tmp_path)


def test_poor_out_that_is_a_file_or_unwritable_is_refused(capsys, book):
    (book / "afile").write_text("x")
    err = _cli_error(capsys, ["execute", "convergence", "--out", "afile"])
    assert "afile" in err and "is a file" in err
    err = _cli_error(capsys, ["execute", "convergence", "--out", "/proc/nope/out"])
    assert "/proc/nope/out" in err and "cannot be created" in err


def test_poor_results_root_that_is_a_file_is_refused_before_running(capsys, book):
    (book / "afile").write_text("x")
    err = _cli_error(capsys, ["execute", "convergence", "-p", "results_root", "afile"])
    assert "results_root" in err and "is a file" in err


def test_poor_relative_gguf_model_is_resolved(tmp_path, monkeypatch):
    from lamina.book.params import _resolve_model

    monkeypatch.chdir(tmp_path)
    assert _resolve_model("c", "model", "tiny.gguf", tmp_path) == str(tmp_path / "tiny.gguf")
    assert (
        _resolve_model("c", "model", "m.gguf+Q4_1", tmp_path) == str(tmp_path / "m.gguf") + "+Q4_1"
    )
    assert (
        _resolve_model("c", "model", "smollm2-135m-instruct", tmp_path) == "smollm2-135m-instruct"
    )


def test_direct_python_writes_say_so(tmp_path, monkeypatch):
    from lamina.states.io import write_results

    monkeypatch.delenv("LAMINA_RUN", raising=False)
    path = write_results("convergence", "m", summary={"claims": []}, config={}, root=tmp_path)
    assert json.loads(path.read_text())["run"]["via"] == "python"


def test_poor_negative_seed_is_refused_naming_it(capsys, book):
    err = _cli_error(capsys, ["execute", "convergence", "-p", "seed", "-1"])
    assert "seed -1" in err and "[0, 2**32)" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["x.md", "0"], "N_SEEDS must be at least 1; got 0"),
        (["x.md", "-3"], "N_SEEDS must be at least 1; got -3"),
        (["x.md", "abc"], "N_SEEDS must be a whole number; got 'abc'"),
        (["x.md", "3", "--jobs", "0"], "--jobs must be at least 1; got 0"),
        (["x.md"], "the following arguments are required: N_SEEDS"),
        (["/proc/nope/x.md", "3"], "cannot write a file there"),
    ],
)
def test_poor_calibration_arguments_are_checked_before_computing(capsys, argv, message):
    from lamina.book.calibration import _parse_main

    with pytest.raises(SystemExit) as info:
        _parse_main(argv)
    assert info.value.code == 2 and message in capsys.readouterr().err


def test_poor_calibration_help_exits_cleanly(capsys):
    from lamina.book.calibration import _parse_main

    with pytest.raises(SystemExit) as info:
        _parse_main(["--help"])
    assert info.value.code == 0 and "N_SEEDS" in capsys.readouterr().out


def test_poor_organism_with_an_unknown_checkpoint_word_says_so():
    import lamina

    with pytest.raises(ValueError, match=r"'nonexistent' is not a checkpoint.*step-N, final"):
        lamina.load_model("organism-llama@nonexistent")


def test_poor_available_offline_lists_peer_and_synthetic_sources():
    from lamina.sources.models import SYNTHETIC_SOURCES, available_offline
    from lamina.trajectory.synthetic import SYNTHETIC

    assert tuple(SYNTHETIC_SOURCES) == tuple(SYNTHETIC)
    names = " ".join(available_offline())
    assert "synthetic-null" in names and "synthetic-planted" in names


def _cli_main(argv):
    from lamina.book.cli import main

    return main(argv)
