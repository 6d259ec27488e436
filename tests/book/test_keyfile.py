"""lamina.book.keyfile: reuse keys as files that change only when the key does."""

from __future__ import annotations

import json
import os

import pytest

from lamina.book import keyfile
from lamina.book.keyfile import calibration_key, chapter_key, write_key


def test_write_key_keeps_the_file_when_the_key_is_the_same(tmp_path):
    path = tmp_path / "keys" / "k.json"
    assert write_key({"key": "a", "x": 1}, path)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))  # an old file: a rewrite would show
    assert not write_key({"key": "a", "x": 2}, path)  # same key, other detail: kept
    assert path.stat().st_mtime_ns == 1_000_000_000
    assert write_key({"key": "b"}, path)
    assert json.loads(path.read_text())["key"] == "b"


def test_write_key_replaces_a_damaged_file(tmp_path):
    path = tmp_path / "k.json"
    path.write_text("{not json")
    assert write_key({"key": "a"}, path)
    assert json.loads(path.read_text()) == {"key": "a"}


def test_a_chapter_key_leaves_out_what_other_rules_build():
    record = chapter_key("curvature", book=True)
    assert record["chapter"] == "curvature" and len(record["key"]) == 64
    assert "organisms" not in record["components"]
    assert {"notebook", "parameters", "lamina_code", "versions"} <= set(record["components"])
    assert chapter_key("curvature", book=True)["key"] == record["key"]  # deterministic


def test_a_chapter_key_changes_with_a_parameter_and_the_book_slot():
    book = chapter_key("curvature", book=True)["key"]
    assert chapter_key("curvature", book=False)["key"] != book
    assert chapter_key("curvature", {"seed": 12345}, book=True)["key"] != book


def test_a_chapter_key_ignores_the_organisms_builds(monkeypatch):
    from lamina.book import reuse

    before = chapter_key("curvature")["key"]
    monkeypatch.setattr(reuse, "_organisms", lambda: {"organism-gpt2-x": "f" * 64})
    assert chapter_key("curvature")["key"] == before


def test_calibration_keys_differ_by_paper_and_seeds():
    keys = {calibration_key(p, n)["key"] for p in (1, 2, 3) for n in (1, 130)}
    assert len(keys) == 6
    with pytest.raises(ValueError, match="paper must be"):
        calibration_key(4, 1)
    with pytest.raises(ValueError, match="n_seeds"):
        calibration_key(1, 0)


def test_the_command_line_writes_the_key(tmp_path, capsys):
    out = tmp_path / "cal.json"
    assert keyfile.main(["calibration", "3", "2", str(out)]) == 0
    assert json.loads(out.read_text())["key"] == calibration_key(3, 2)["key"]
    assert "changed" in capsys.readouterr().err
    assert keyfile.main(["calibration", "3", "2", str(out)]) == 0
    assert "unchanged" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        keyfile.main(["chapter", "nosuch", str(out)])
    assert exc.value.code == 2
