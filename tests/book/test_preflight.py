"""Usage errors are one line and exit 2, found before any kernel starts (issue 35, POOR):
model names, organisms, the device, prompt files, writable folders, the command line."""

from __future__ import annotations

import os

import pytest

import lamina.__main__ as lamina_cli


@pytest.fixture(autouse=True)
def _no_kernel(no_kernel):
    """Every test here: no kernel may start (tests/book/conftest.py)."""
    return no_kernel


def _usage_error(capsys, argv: list[str]) -> str:
    """The stderr of ``lamina ARGV``, which must exit with status 2 (before any kernel: see
    :func:`no_kernel`) and print no traceback."""
    with pytest.raises(SystemExit) as info:
        lamina_cli.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_poor_a_mistyped_model_is_refused_with_the_near_name(capsys):
    err = _usage_error(capsys, ["run", "curvature", "--model", "smollm2-135m-instrut"])
    assert "usage: lamina run" in err and "did you mean 'smollm2-135m-instruct'?" in err


def test_poor_an_organism_not_built_names_the_build_command(capsys):
    err = _usage_error(capsys, ["run", "curvature", "--model", "organism-gpt2", "-p", "quick", "true"])
    assert "organism 'organism-gpt2' is not built yet" in err and "make organisms" in err


def test_poor_an_unusable_device_is_refused_before_anything_runs(capsys, monkeypatch):
    monkeypatch.setenv("LAMINA_DEVICE", "gpu")
    err = _usage_error(capsys, ["run", "curvature", "--model", "synthetic-null"])
    assert "$LAMINA_DEVICE='gpu' is not a torch device" in err


def test_poor_a_missing_prompts_file_and_a_family_without_its_partner(capsys, tmp_path):
    err = _usage_error(capsys, ["run", "curvature", "-p", "prompts", str(tmp_path / "nope.jsonl")])
    assert "nope.jsonl" in err and "no such prompt file" in err
    err = _usage_error(capsys, ["run", "curvature", "-p", "prompts", "reasoning"])
    assert "compares ['reasoning', 'lexical', 'reasoning_short', 'lexical_framed']: add ['lexical'," in err


def test_poor_a_prompt_file_whose_name_holds_a_comma_is_one_file(monkeypatch, tmp_path):
    from lamina.book.execute import _notebooks_dir
    from lamina.book.params import cli_parameters

    src = (_notebooks_dir().parent / "data" / "prompts" / "reasoning.jsonl").read_text()
    (tmp_path / "my,prompts.jsonl").write_text(src)
    monkeypatch.chdir(tmp_path)
    params = cli_parameters(["curvature"], [["prompts", "my,prompts.jsonl"]], _notebooks_dir())
    assert params["curvature"]["prompts"] == str(tmp_path / "my,prompts.jsonl")


def test_poor_an_unwritable_results_folder_is_refused_before_the_run(capsys, monkeypatch, tmp_path):
    real, results = os.access, str(tmp_path / "results")
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == results else real(p, mode))
    err = _usage_error(capsys, ["run", "curvature", "--model", "synthetic-null"])
    assert "results folder" in err and "is not writable" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-p", "seed", "1", "-p", "seed", "2"], "parameter 'seed' is given twice: '1' and '2'"),
        (["--model", "minilm", "-p", "model", "synthetic-null"], "'model' is given twice (once by --model)"),
        (["--model", ""], "--model is empty"),
        (["-p", "sede", "1"], "did you mean 'seed'?"),
    ],
)
def test_poor_conflicting_or_bad_parameters_exit_2(capsys, argv, message):
    err = _usage_error(capsys, ["run", "curvature", *argv])
    assert message in err and "usage: lamina run" in err


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [("LAMINA_RESULTS", "", "$LAMINA_RESULTS is set but empty"),
     ("LAMINA_DATA", "/etc/passwd", "$LAMINA_DATA='/etc/passwd' names a file")],
)  # fmt: skip
def test_poor_a_bad_folder_variable_is_one_line(capsys, monkeypatch, variable, value, message):
    monkeypatch.setenv(variable, value)
    err = _usage_error(capsys, ["run", "curvature", "--model", "synthetic-null"])
    (line,) = [x for x in err.splitlines() if "error:" in x]  # after the usage, one line
    assert message in line


def test_poor_lamina_run_has_its_own_help_and_usage(capsys):
    with pytest.raises(SystemExit) as info:
        lamina_cli.main(["run", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: lamina run") and "--model" in out and "--book" in out
    err = _usage_error(capsys, ["run"])
    assert "name a chapter or pass --all" in err
    err = _usage_error(capsys, ["run", "curvatur"])
    assert "unknown chapter 'curvatur'" in err


def test_the_same_checks_hold_for_the_python_api(monkeypatch):
    from lamina.book import execute_chapter
    from lamina.book.preflight import PreflightError

    with pytest.raises(PreflightError, match="did you mean 'smollm2-135m-instruct'"):
        execute_chapter("curvature", None, {"model": "smollm2-135m-instrut"})


def test_lamina_pages_reaches_the_page_writer(capsys, tmp_path):
    err = _usage_error(capsys, ["pages", "--results", str(tmp_path / "nowhere")])
    assert "usage: lamina pages" in err and "no such results folder" in err
