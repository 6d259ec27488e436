"""Bad input gets a clear error, never a silent wrong answer (issue 14): chapter parameters on
the command line, parallel chapter execution, results, peer data and prompt files, labels.
Cases marked "BAD n" returned a silently wrong result before the fix."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import _byte_tokenizer, tiny_model

ROOT = Path(__file__).resolve().parents[2]


def _captured_main(monkeypatch, argv: list[str]) -> dict:
    """Run ``python -m lamina.book`` with ``argv`` up to the point of executing chapters, and
    return what would have been executed."""
    from lamina.book import execute as book

    seen: dict = {}

    def fake(chapters, out, params, *, force=False, book=False):
        from lamina.book.execute import default_out

        if out is None:  # each chapter's own folder under book/runs (issue 35)
            out = default_out(chapters[0], params[chapters[0]], book)
        seen.update(chapters=chapters, out=out, params=params, force=force)
        return 0

    monkeypatch.setattr(book, "_execute_many", fake)
    assert _cli_main(argv) == 0
    return seen


def _hash8(path) -> str:
    import hashlib

    return hashlib.sha256(str(path).encode()).hexdigest()[:8]


def _cli_error(capsys, argv: list[str]) -> str:

    with pytest.raises(SystemExit) as info:
        _cli_main(argv)
    assert info.value.code == 2
    return capsys.readouterr().err


# ------------------------------------------------------------------------- BAD 3: relative paths
def test_bad3_relative_paths_in_p_resolve_against_the_callers_directory(tmp_path, monkeypatch):
    (tmp_path / "my-model").mkdir()
    (tmp_path / "my.jsonl").write_text("")
    monkeypatch.chdir(tmp_path)
    seen = _captured_main(
        monkeypatch,
        [
            "execute",
            "convergence",
            "-p", "model", "./my-model",
            "-p", "results_root", "res",
            "-p", "prompts", "my.jsonl,semantic",
        ],
    )  # fmt: skip
    params = seen["params"]["convergence"]
    assert params["model"] == str(tmp_path / "my-model")
    assert params["results_root"] == str(tmp_path / "res")
    assert params["prompts"] == f"{tmp_path / 'my.jsonl'},semantic"
    assert seen["out"].parent == ROOT / "book" / "runs" / f"my-model-{_hash8(tmp_path / 'my-model')}"


def test_bad3_hub_names_and_organisms_are_left_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    seen = _captured_main(
        monkeypatch, ["execute", "curvature", "-p", "model", "HuggingFaceTB/SmolLM2-135M"]
    )
    assert seen["params"]["curvature"]["model"] == "HuggingFaceTB/SmolLM2-135M"
    seen = _captured_main(monkeypatch, ["execute", "layer_anatomy", "-p", "model", "organism-gpt2"])
    assert seen["params"]["layer_anatomy"]["model"] == "organism-gpt2"


# ------------------------------------------------------------------------- BAD 4: literals
@pytest.mark.parametrize(
    ("text", "expected"), [("False", False), ("false", False), ("True", True), ("true", True)]
)
def test_bad4_p_quick_false_is_the_boolean_false(monkeypatch, text, expected):
    seen = _captured_main(monkeypatch, ["execute", "convergence", "-p", "quick", text])
    assert seen["params"]["convergence"]["quick"] is expected


def test_bad4_values_are_literals_checked_against_their_defaults(monkeypatch):
    seen = _captured_main(
        monkeypatch,
        [
            "execute",
            "weight_update_signature",
            "-p", "k", "4",
            "-p", "k_sweep", "[1, 2]",
            "-p", "model", "7",
            "-p", "target", "None",
        ],
    )  # fmt: skip
    params = seen["params"]["weight_update_signature"]
    assert params["k"] == 4 and params["k_sweep"] == [1, 2]
    assert params["model"] == "7"  # a str parameter keeps the text
    assert params["target"] is None


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("quick", "yes", r"parameter 'quick' expects True or False .*got 'yes'"),
        ("n_bootstrap", "abc", r"parameter 'n_bootstrap' expects an integer .*got 'abc'"),
        ("n_bootstrap", "2.5", r"parameter 'n_bootstrap' expects an integer .*got 2.5"),
        ("seed", "True", r"parameter 'seed' expects an integer .*got True"),
    ],
)
def test_poor_wrong_parameter_types_are_refused_naming_name_and_value(capsys, name, value, message):
    err = _cli_error(capsys, ["execute", "convergence", "-p", name, value])
    assert re.search(message, err), err


def test_poor_unknown_parameter_is_refused_with_the_closest_name(capsys):
    err = _cli_error(capsys, ["execute", "convergence", "-p", "n_bootstraps", "3"])
    assert "'n_bootstraps'" in err and "did you mean 'n_bootstrap'?" in err
    err = _cli_error(capsys, ["execute", "convergence", "-p", "nosuchparam", "3"])
    assert "'nosuchparam'" in err


def test_poor_unknown_parameter_in_the_python_api_is_refused(tmp_path):
    from lamina.book import execute_chapter
    from lamina.book.params import ParameterError

    with pytest.raises(ParameterError, match="has no parameter 'qiuck'; did you mean 'quick'"):
        execute_chapter("trajectory_tour", tmp_path, {"qiuck": True})


@pytest.mark.parametrize("value", ["..", ".", "../..", "models/.."])
def test_poor_dot_and_dotdot_are_refused_as_model_names(capsys, value):
    err = _cli_error(capsys, ["execute", "curvature", "-p", "model", value])
    assert f"model {value!r} is not a usable model name" in err


# ------------------------------------------------------------------------- BAD 11: parallel
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

# %%
import os
import time

start = os.getcwd()
time.sleep(0.5)
assert os.getcwd() == start
print("{name}", quick)
"""


@pytest.mark.slow
def test_bad11_two_chapters_into_a_relative_folder_repeatedly(tmp_path, monkeypatch):
    """``execute alpha beta --out <relative>``: papermill changes the working directory of the
    process that runs a chapter, which broke relative paths when two chapters ran at once (the
    ``--jobs`` of before Snakemake); one after another, the second must still find its folder."""

    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for name in ("alpha", "beta"):
        (notebooks / f"{name}.py").write_text(_CHAPTER.format(name=name))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("LAMINA_NOTEBOOKS", str(notebooks))
    monkeypatch.chdir(work)
    for attempt in range(2):
        out = f"run{attempt}/executed"
        assert _cli_main(["execute", "alpha", "beta", "--out", out, "-p", "quick", "true"]) == 0
        for name in ("alpha", "beta"):
            report = json.loads((work / out / f"{name}.report.json").read_text())
            assert report["status"] == "ok" and report["parameters"] == {"quick": True}
            assert (work / out / f"{name}.ipynb").is_file()
    assert sorted(p.name for p in notebooks.iterdir()) == ["alpha.py", "beta.py"]


# ------------------------------------------------------------------------- POOR: results
def test_poor_pages_with_a_missing_results_folder_is_an_error(capsys, tmp_path):
    missing = tmp_path / "no-such-results"
    err = _cli_error(capsys, ["pages", "--root", str(tmp_path), "--results", str(missing)])
    assert str(missing) in err
    assert not (tmp_path / "book").exists()  # nothing overwritten


def test_poor_corrupt_results_json_names_the_file(tmp_path):
    from lamina.states.io import read_results

    bad = tmp_path / "gpt2" / "curvature.json"
    bad.parent.mkdir()
    bad.write_text('{"chapter": "curvature", ')
    with pytest.raises(ValueError, match=re.escape(str(bad))):
        read_results(tmp_path)
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match=re.escape(str(bad)) + ".*not a lamina results record"):
        read_results(tmp_path)


# ------------------------------------------------------------------------- POOR: peer data
def _peer(tmp_path: Path, records: dict[str, dict], prompts: list[dict]) -> Path:
    root = tmp_path / "peer"
    (root / "data" / "prompts").mkdir(parents=True)
    (root / "data" / "prompts" / "prompts.jsonl").write_text(
        "\n".join(json.dumps(p) for p in prompts) + "\n"
    )
    folder = root / "data" / "trajectories" / "gpt2"
    folder.mkdir(parents=True)
    for name, record in records.items():
        torch.save(record, folder / f"{name}.pt")
    return root


def _good(pid: str, d: int = 8) -> dict:
    return {"prompt_id": pid, "embedding_state": torch.ones(d), "trajectory": torch.ones(3, d)}


PROMPTS = [{"id": "a", "prompt": "cat"}, {"id": "b", "prompt": "dog"}]


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"prompt_id": "b", "embedding_state": torch.ones(8)}, "missing field 'trajectory'"),
        (_good("b", d=6), r"states of shape \(4, 6\), unlike \(4, 8\)"),
        ({**_good("b"), "trajectory": "not an array"}, "field 'trajectory' is str"),
        ({**_good("b"), "trajectory": torch.ones(3, 4, 8)}, r"shape \(3, 4, 8\); expected"),
        ({**_good("b"), "embedding_state": torch.ones(7)}, "has width 7 but trajectory 8"),
        ({**_good("b"), "trajectory": torch.full((3, 8), float("nan"))}, "NaN or infinite"),
        (_good("zzz"), r"prompt_id 'zzz' is not in prompts.jsonl"),
    ],
)
def test_poor_malformed_peer_files_name_the_file(tmp_path, record, message):
    from lamina.states.peer_states import PeerDataError, read_latent_trajectories

    root = _peer(tmp_path, {"a": _good("a"), "b": record}, PROMPTS)
    bad = root / "data" / "trajectories" / "gpt2" / "b.pt"
    with pytest.raises(PeerDataError, match=re.escape(str(bad)) + ".*" + message):
        read_latent_trajectories(root)


def test_poor_peer_numpy_values_are_read(tmp_path):
    from lamina.states.peer_states import read_latent_trajectories

    numpy_record = {
        "prompt_id": "b",
        "embedding_state": np.zeros(8, np.float32),
        "trajectory": np.zeros((3, 8), np.float32),
    }
    t = read_latent_trajectories(_peer(tmp_path, {"a": _good("a"), "b": numpy_record}, PROMPTS))
    assert t.states.shape == (2, 4, 8) and t.texts == ["cat", "dog"]


# ------------------------------------------------------------------------- POOR: prompt files
def test_poor_invalid_utf8_prompt_file_names_file_and_line(tmp_path):
    from lamina.sources.prompts import PromptFileError, load_prompts

    path = tmp_path / "mine.jsonl"
    good = {"id": "s1", "family": "semantic", "prompt": "A cat", "category": "x", "item": "cat"}
    path.write_bytes(json.dumps(good).encode() + b"\n" + b'{"id": "s2", "prompt": "caf\xe9"}\n')
    with pytest.raises(PromptFileError, match=re.escape(str(path)) + ", line 2: not valid UTF-8"):
        load_prompts(path)


def test_poor_wrong_family_line_says_family_not_missing_field(tmp_path):
    from lamina.sources.prompts import PromptFileError, load_prompts

    path = tmp_path / "semantic.jsonl"
    row = {"id": "r1", "family": "reasoning", "prompt": "2+2", "subtype": "a", "answer": "4"}
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(
        PromptFileError, match=r"line 1, field 'family': expected 'semantic', got 'reasoning'"
    ):
        load_prompts(path)


# ------------------------------------------------------------------------- POOR: labels, NaN
@pytest.mark.parametrize(
    ("labels", "error", "message"),
    [
        ([0, 0, "0", "0"], TypeError, r"labels mix types \['number', 'str'\]"),
        (["a", None, "b", "b"], ValueError, r"labels\[1\] is None"),
        ([0.0, float("nan"), 1.0, 1.0], ValueError, r"labels\[1\] is nan"),
    ],
)
def test_poor_none_nan_or_mixed_labels_are_refused(labels, error, message):
    from lamina.trajectory import convergence_index

    x = np.random.default_rng(0).normal(size=(4, 3, 5))
    with pytest.raises(error, match=message):
        convergence_index(x, labels)


def test_poor_one_nan_prompt_warns_naming_it():
    from lamina.trajectory import convergence_index

    x = np.random.default_rng(0).normal(size=(6, 3, 5))
    x[4, 2] = np.nan
    with pytest.warns(
        RuntimeWarning, match=r"prompt\(s\) \[4\] are NaN or infinite at layer\(s\) \[2\]"
    ):
        convergence_index(x, [0, 0, 0, 1, 1, 1])


# ------------------------------------------------------------------------- POOR: 2-layer model
@pytest.mark.slow
def test_poor_two_layer_model_in_the_curvature_chapter_names_the_convention(tmp_path):
    from lamina.chapters.curvature import Config, run

    folder = tmp_path / "two-layer"
    tiny_model("llama", n_layers=2).save_pretrained(folder)
    _byte_tokenizer().save_pretrained(folder)
    config = Config(model=str(folder), quick=True, n_bootstrap=10)
    with pytest.raises(ValueError, match=r"two-layer.*'released code' convention drops layer 0"):
        run(config)


def test_bad4_a_model_parameter_takes_a_list_of_names(monkeypatch):
    seen = _captured_main(
        monkeypatch, ["execute", "organisms", "-p", "model", '["organism-gpt2", "organism-llama"]']
    )
    assert seen["params"]["organisms"]["model"] == ["organism-gpt2", "organism-llama"]
    assert seen["out"].parent.name == "organism-gpt2+organism-llama"
    seen = _captured_main(monkeypatch, ["execute", "convergence", "-p", "pooling", "[1]"])
    assert seen["params"]["convergence"]["pooling"] == "[1]"  # not a model: the text itself


def _cli_main(argv):
    from lamina.book.cli import main

    return main(argv)
