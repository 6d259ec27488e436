"""Issue 53, round-5 probe: each bad input gets a clear error or a correct result, and
nothing of an earlier good run is lost."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import lamina.__main__ as lamina_cli
from lamina.sources.prompts import PromptFileError, load_prompts
from lamina.states import io

_ROW = {"id": "m1", "family": "reasoning", "subtype": "comparison",
        "prompt": "An elephant is heavier than a rabbit, so the lighter is the", "answer": "rabbit"}  # fmt: skip


def _line(**change: str) -> str:
    return json.dumps({**_ROW, **change}, ensure_ascii=False)


@pytest.mark.parametrize(
    ("case", "data", "outcome"),
    [
        ("bom", ("\ufeff" + _line() + "\n").encode(), 1),
        ("crlf", (_line() + "\r\n" + _line(id="m2") + "\r\n").encode(), 2),
        ("blank", ("\n\n" + _line() + "\n  \n" + _line(id="m2") + "\n\n").encode(), 2),
        ("long", (_line(prompt="x" * 100_000) + "\n").encode(), 1),
        ("nul_byte", (_line()[:-1] + "\x00}\n").encode(), "malformed JSON"),
        ("nul_escaped", (json.dumps({**_ROW, "prompt": "a\x00b"}) + "\n").encode(), "control character"),
        ("latin1", (_line(prompt="un caf\xe9 noir") + "\n").encode("latin-1"), "not valid UTF-8"),
        ("empty", b"", "holds no prompts"),
        ("mixed", (_line() + "\n" + json.dumps({"id": "l1", "family": "lexical", "prompt": "x"})
                   + "\n").encode(), "one file holds one family"),  # fmt: skip
    ],
)
def test_a_prompts_file_of_each_odd_kind(tmp_path, case, data, outcome):
    path = tmp_path / f"{case}.jsonl"
    path.write_bytes(data)
    if isinstance(outcome, int):
        table = load_prompts(path)
        assert len(table) == outcome and table["prompt"][0] == json.loads(
            data.decode("utf-8-sig").strip().splitlines()[0])["prompt"]  # fmt: skip
    else:
        with pytest.raises(PromptFileError, match=outcome) as info:
            load_prompts(path)
        assert str(path) in str(info.value)


def _write(root: Path, x: float) -> Path:
    return io.write_results("curvature", "m", summary={"claims": []}, config={"x": x},
                            tables={"t": pd.DataFrame({"x": [x]})}, root=root)  # fmt: skip


def test_a_full_disk_keeps_the_old_results_and_says_so(tmp_path, monkeypatch):
    path = _write(tmp_path, 1.0)
    before = {p.name: p.read_bytes() for p in path.parent.iterdir()}

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(OSError, match="No space left on device") as info:
        _write(tmp_path, 2.0)
    assert "curvature" in str(info.value) and "nothing was written" in str(info.value)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in path.parent.iterdir()} == before


def test_a_results_file_edited_by_hand_is_caught_by_the_audit(tmp_path):
    from lamina.book.audit import audit_book

    path = _write(tmp_path, 1.0)
    path.write_text(path.read_text().replace('"x": 1.0', '"x": 3.0'))
    with pytest.raises(io.ResultsFileError, match="does not match its SHA-256 seal") as info:
        audit_book(tmp_path, tmp_path / "calibration.md")
    assert str(path) in str(info.value)


def test_an_out_folder_linking_outside_the_project_is_refused(tmp_path, capsys, monkeypatch):
    import papermill

    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: pytest.fail("kernel"))
    monkeypatch.setenv("LAMINA_RESULTS", str(tmp_path / "results"))
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(SystemExit) as info:
        lamina_cli.main(["run", "curvature", "--model", "synthetic-null", "--out", str(link)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err and str(target) in err and not any(target.iterdir())


def test_an_hf_config_whose_sizes_disagree_with_its_weights_is_refused(tmp_path):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    import lamina
    from lamina.sources.model_files import ModelFileError

    folder = tmp_path / "tiny"
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=16,
                               bos_token_id=0, eos_token_id=0)).save_pretrained(folder)  # fmt: skip
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "n_embd": 32}))
    with pytest.raises(ModelFileError, match=r"has shape \[16, 48\], the config's model needs \[32, 96\]"):
        lamina.load_model(str(folder))


_ROW_OF = {"claim_id": "p1-curvature-gap", "claim": "c", "verdict": "reproduced"}

_KILLED = """
import os, signal, sys, papermill
from lamina.book import execute
def die(src, out, parameters, **kw):
    from lamina.states.io import write_results
    row = {"claim_id": "p1-curvature-gap", "claim": "c", "verdict": "reproduced", "measured": 0.9}
    write_results("curvature", "m", summary={"claims": [row]}, config={},
                  root=parameters["results_root"])
    os.kill(os.getpid(), signal.SIGKILL)
papermill.execute_notebook = die
execute.preflight = lambda *a, **k: None  # no model of the stand-in chapter to check
execute.execute_chapter("curvature", sys.argv[1], {"results_root": sys.argv[2], "quick": True},
                        progress=False, book=True)
"""

_CHAPTER = """# %% tags=["parameters"]
quick = False
results_root = None
"""


def _good_then_killed(tmp_path: Path, monkeypatch) -> tuple[dict, dict, Path, Path]:
    """One good run of a stand-in ``curvature`` chapter (its claim measured 0.5), then a rerun
    killed (SIGKILL) after it wrote its results (0.9): (the good run's notebook and report
    bytes, its results' bytes, out, results)."""
    from lamina.book import execute

    notebooks, out, results = tmp_path / "notebooks", tmp_path / "out", tmp_path / "results"
    notebooks.mkdir()
    (notebooks / "curvature.py").write_text(_CHAPTER)
    env = {**os.environ, "LAMINA_NOTEBOOKS": str(notebooks), "LAMINA_DATA": str(tmp_path / "d")}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    import papermill

    def good(src, out_nb, parameters, **kw):
        Path(out_nb).write_text(Path(src).read_text())
        io.write_results("curvature", "m", summary={"claims": [{**_ROW_OF, "measured": 0.5}]},
                         config={}, tables={"t": pd.DataFrame({"x": [0.5]})},
                         root=parameters["results_root"])  # fmt: skip

    monkeypatch.setattr(papermill, "execute_notebook", good)
    monkeypatch.setattr(execute, "preflight", lambda *a, **k: None)
    execute.execute_chapter("curvature", out, {"results_root": str(results)}, progress=False, book=True)
    kept = {p: p.read_bytes() for p in [out / "curvature.ipynb", out / "curvature.report.json"]}
    good_results = {p: p.read_bytes() for p in results.rglob("*") if p.is_file()}
    assert {p.name for p in good_results} == {"curvature.json", "curvature.t.parquet"}
    killed = subprocess.run([sys.executable, "-c", _KILLED, str(out), str(results)], env=env)
    assert killed.returncode == -signal.SIGKILL
    return kept, good_results, out, results


def _scorecard(results: Path) -> dict[str, float]:
    """{model column: measured} of the curvature claim on the scorecard of ``results``."""
    from lamina.book.scorecard import claims_table, load_records

    table = claims_table(load_records(results))
    rows = table[table.claim_id == _ROW_OF["claim_id"]]
    return dict(zip(rows.model, rows.measured, strict=True))


def test_kill_9_mid_run_keeps_the_last_good_run_and_marks_the_new_one_unfinished(tmp_path, monkeypatch):
    from lamina.book import execute
    from lamina.book.runlock import lock_path

    kept, _, out, results = _good_then_killed(tmp_path, monkeypatch)
    assert {p: p.read_bytes() for p in kept} == kept  # the last good notebook and report
    unfinished = results / "m" / "curvature.unfinished.json"
    assert io.read_result_file(unfinished)["run"]["status"] == "running"  # never finished
    assert io.read_result_file(results / "m" / "curvature.json")["run"]["status"] == "ok"
    assert _scorecard(results) == {"m": 0.5, "m (run: quick=True; unfinished)": 0.9}  # both
    assert lock_path(out, "curvature").exists()  # the dead run's lock: stale, taken over below
    execute.execute_chapter("curvature", out, {"results_root": str(results), "quick": True},
                            progress=False, book=True)  # fmt: skip
    assert not lock_path(out, "curvature").exists()
    assert _scorecard(results) == {"m (run: quick=True)": 0.5}  # ended well: in place, none unfinished
    record = io.read_result_file(results / "m" / "curvature.json")
    assert record["run"]["status"] == "ok" and record["run"]["quick"] is True
    assert sorted(p.name for p in (results / "m").iterdir()) == ["curvature.json", "curvature.t.parquet"]


def test_kill_9_mid_run_keeps_the_last_good_runs_results_file(tmp_path, monkeypatch):
    _, good, _, _ = _good_then_killed(tmp_path, monkeypatch)
    assert all(p.read_bytes() == b for p, b in good.items())


def test_a_failed_rerun_keeps_the_last_good_results_and_shows_the_failure(tmp_path, monkeypatch):
    import papermill

    from lamina.book import execute

    _, good, out, results = _good_then_killed(tmp_path, monkeypatch)

    def fail(src, out_nb, parameters, **kw):
        io.write_results("curvature", "m", summary={"claims": [{**_ROW_OF, "measured": 0.7}]},
                         config={}, root=parameters["results_root"])  # fmt: skip
        raise RuntimeError("a cell failed")

    monkeypatch.setattr(papermill, "execute_notebook", fail)
    with pytest.raises(RuntimeError, match="a cell failed"):
        execute.execute_chapter("curvature", out, {"results_root": str(results), "quick": True},
                                progress=False, book=True)  # fmt: skip
    assert all(p.read_bytes() == b for p, b in good.items())
    assert _scorecard(results) == {"m": 0.5, "m (run: quick=True; failed run)": 0.7}


def test_a_full_disk_as_a_run_ends_keeps_the_last_good_run(tmp_path, monkeypatch, capsys):
    """The results of a run that ended well are moved into place last; a full disk then (the
    moved record cannot be written) leaves the last good run's results, notebook and report
    as they were, and this run's results unfinished beside them: one line, exit 1."""
    import papermill

    kept, good, out, results = _good_then_killed(tmp_path, monkeypatch)

    def then_full(src, out_nb, parameters, **kw):
        Path(out_nb).write_text(Path(src).read_text())
        io.write_results("curvature", "m", summary={"claims": [{**_ROW_OF, "measured": 0.7}]},
                         config={}, root=parameters["results_root"])  # fmt: skip

        def full(*args, **kwargs):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(io, "temporary_beside", full)

    monkeypatch.setattr(papermill, "execute_notebook", then_full)
    code = lamina_cli.main(["run", "curvature", "--book", "--out", str(out), "-p", "results_root",
                            str(results), "-p", "quick", "true"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert "No space left on device; the last finished run's curvature.json is kept" in err
    assert all(p.read_bytes() == b for p, b in {**kept, **good}.items())
    assert _scorecard(results) == {"m": 0.5, "m (run: quick=True; unfinished)": 0.7}
