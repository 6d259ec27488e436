"""The ``lamina`` console command (issue 24): each verb reaches its implementation, and bad
input is refused with a message."""

from __future__ import annotations

import pytest

import lamina.__main__ as cli
from lamina.core.registry import names


def test_chapters_lists_every_registry_record(capsys):
    assert cli.main(["chapters"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()] == names()


def test_run_passes_model_and_parameters_to_the_executor(monkeypatch):
    seen = {}

    def fake(chapters, out, params, *, force=False, book=False):
        seen.update(chapters=chapters, params=params, book=book)
        return 0

    monkeypatch.setattr("lamina.book.execute._execute_many", fake)
    assert cli.main(["run", "curvature", "--model", "synthetic-null", "-p", "quick", "true"]) == 0
    assert seen["params"] == {"curvature": {"quick": True, "model": "synthetic-null"}}
    assert seen["book"] is False


def test_an_empty_model_is_refused(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["run", "curvature", "--model", " "])
    assert info.value.code == 2 and "--model is empty" in capsys.readouterr().err


def test_an_unknown_command_names_itself(capsys):
    assert cli.main(["bake"]) == 2
    assert "unknown command 'bake'" in capsys.readouterr().err


def test_calibrate_refuses_zero_seeds():
    with pytest.raises(SystemExit):
        cli.main(["calibrate", "0"])
