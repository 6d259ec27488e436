"""Prompt files (issue 35): an id is a resampling unit, so it is unique across every file a
run reads; malformed lines name file and line. "BAD 11" fails on 2a683dc, where 40 prompts
under 20 repeated ids counted as 20 units."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lamina.sources.prompts import PromptFileError, load_prompts

PROMPTS = Path(__file__).resolve().parents[2] / "data" / "prompts"


def _copy(tmp_path: Path, name: str, family: str = "reasoning") -> Path:
    path = tmp_path / name
    path.write_text((PROMPTS / f"{family}.jsonl").read_text())
    return path


def test_bad11_an_id_in_two_prompt_files_is_refused(tmp_path):
    from lamina.trajectory.chapter_prompts import load_chapter_prompts

    a, b = _copy(tmp_path, "a.jsonl"), _copy(tmp_path, "b.jsonl")
    with pytest.raises(PromptFileError, match=r"b\.jsonl.*id '.*' \(row 1\) is also in .*a\.jsonl"):
        load_chapter_prompts(f"{a},{b},lexical", ["reasoning", "lexical"], ["family"])


def test_distinct_ids_across_files_load_together(tmp_path):
    from lamina.sources.prompts import load_prompt_files

    a = _copy(tmp_path, "a.jsonl")
    rows = [json.loads(line) for line in a.read_text().splitlines() if line.strip()]
    b = tmp_path / "b.jsonl"
    b.write_text("".join(json.dumps({**r, "id": r["id"] + "-b"}) + "\n" for r in rows))
    table = load_prompt_files([str(a), str(b)])
    assert len(table) == 2 * len(rows) and table["id"].is_unique
    with pytest.raises(PromptFileError, match="named twice"):
        load_prompt_files([str(a), str(a)])


def test_poor_deeply_nested_json_names_the_line(tmp_path):
    path = _copy(tmp_path, "reasoning.jsonl")
    path.write_text(path.read_text() + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(PromptFileError, match=r"line \d+: JSON nested too deeply"):
        load_prompts(path)


def test_poor_a_file_mixing_families_says_one_file_holds_one_family(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text((PROMPTS / "reasoning.jsonl").read_text() + (PROMPTS / "lexical.jsonl").read_text())
    with pytest.raises(PromptFileError, match="one file holds one family"):
        load_prompts(path)


def test_a_file_name_with_a_comma_is_one_source(tmp_path):
    from lamina.sources.prompts import prompt_sources

    path = _copy(tmp_path, "my,prompts.jsonl")
    assert prompt_sources(str(path)) == [str(path)]
    assert prompt_sources("reasoning, lexical") == ["reasoning", "lexical"]
