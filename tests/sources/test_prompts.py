"""The prompt families in data/prompts/ and their schema-checked loader."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from lamina.sources.prompts import (
    SCHEMAS,
    PromptFileError,
    list_families,
    load_prompts,
    prompts_dir,
)

GOOD_SEMANTIC = {
    "id": "s1",
    "family": "semantic",
    "category": "animals",
    "item": "fox",
    "prompt": "We saw a fox",
}


def _write(tmp_path: Path, lines: list[str], name: str = "semantic.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _row(**changes: object) -> str:
    row = {**GOOD_SEMANTIC, **changes}
    return json.dumps({k: v for k, v in row.items() if v is not ...})


@pytest.mark.parametrize("family", list_families())
def test_every_family_loads_with_at_least_30_prompts(family: str) -> None:
    frame = load_prompts(family)
    assert len(frame) >= 30
    assert frame.attrs["family"] == family
    assert list(frame.columns[: len(SCHEMAS[family].fields)]) == list(SCHEMAS[family].fields)
    assert frame["id"].is_unique
    assert (frame["family"] == family).all()


def test_family_list_matches_the_files_shipped() -> None:
    shipped = sorted(p.stem for p in prompts_dir().glob("*.jsonl"))
    assert shipped == sorted(list_families())


def test_loading_by_path_equals_loading_by_name() -> None:
    by_name = load_prompts("analogies")
    by_path = load_prompts(prompts_dir() / "analogies.jsonl")
    assert by_name.equals(by_path)


def test_lamina_data_env_var_relocates_the_prompts(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "prompts").mkdir()
    _write(tmp_path / "prompts", [_row()])
    monkeypatch.setenv("LAMINA_DATA", str(tmp_path))
    assert prompts_dir() == tmp_path / "prompts"
    assert load_prompts("semantic")["item"].tolist() == ["fox"]


def test_semantic_has_five_categories_of_eight_with_the_item_last() -> None:
    frame = load_prompts("semantic")
    counts = frame["category"].value_counts()
    assert len(counts) >= 5 and counts.min() >= 8 and len(frame) >= 40
    assert {"animals", "vehicles", "emotions", "foods", "tools"} <= set(counts.index)
    assert all(p.endswith(" " + i) for p, i in zip(frame["prompt"], frame["item"], strict=True))


def test_lexical_variants_contain_their_base_word() -> None:
    frame = load_prompts("lexical")
    assert all(b in p for b, p in zip(frame["base"], frame["prompt"], strict=True))
    assert (frame.groupby("base")["variant"].nunique() >= 4).all()
    assert set(frame.loc[frame["variant"] == "bare", "prompt"]) == set(frame["base"])


def test_reasoning_covers_the_four_subtypes() -> None:
    frame = load_prompts("reasoning")
    assert set(frame["subtype"]) == {"comparison", "transitive", "syllogism", "arithmetic"}
    assert (frame["subtype"].value_counts() >= 5).all()


def test_perturbations_differ_from_their_prompt() -> None:
    frame = load_prompts("perturbations")
    assert (frame["prompt"] != frame["perturbed"]).all()


def test_every_homograph_has_both_senses_and_controls_in_each_of_its_positions() -> None:
    """Every homograph has a last-word pair (what the bifurcation chapter reads under
    last-token pooling); the first 20 also a pair with the word inside the sentence."""
    frame = load_prompts("ambiguous")
    assert frame["word"].nunique() >= 120
    assert frame.loc[~frame["word_last"], "word"].nunique() >= 20
    for word, rows in frame.groupby("word"):
        assert rows["word_last"].any(), word
        for last in rows["word_last"].unique():
            pair = rows[rows["word_last"] == last]
            assert sorted(pair["sense"]) == ["ctx1", "ctx2"], (word, last)
            assert pair["sense_label"].nunique() == 2 and pair["gloss"].nunique() == 2
            assert pair["control_word"].nunique() == 1, "one control word across both frames"
            assert pair["prompt"].nunique() == 2
        assert not (rows["control_word"] == word).any()


def test_control_prompt_is_the_same_frame_with_the_word_replaced() -> None:
    frame = load_prompts("ambiguous")
    for row in frame.itertuples():
        pattern = rf"\b{re.escape(row.word)}\b"
        assert len(re.findall(pattern, row.prompt)) == 1
        assert row.control_prompt == re.sub(pattern, row.control_word, row.prompt, count=1)


def test_word_last_variants_end_with_the_homograph() -> None:
    frame = load_prompts("ambiguous")
    last = frame[frame["word_last"]]
    assert last["word"].nunique() == frame["word"].nunique()
    for row in last.itertuples():
        assert row.prompt.split()[-1] == row.word
        assert row.control_prompt.split()[-1] == row.control_word
    assert not any(r.prompt.split()[-1] == r.word for r in frame[~frame["word_last"]].itertuples())


@pytest.mark.parametrize(
    ("line", "field", "reason"),
    [
        ('{"id": "s2", "family": "semantic",', None, "malformed JSON"),
        (_row(id="s2", item=...), "item", "missing required field"),
        (_row(id="s2", item=3), "item", "expected str, got int"),
        (_row(id="s2", prompt="   "), "prompt", "empty string"),
        (_row(id="s2", prompt=""), "prompt", "empty string"),
        (_row(), "id", "duplicate id"),
        (_row(id="s2", family="lexical"), "family", "expected 'semantic'"),
        ("[1, 2]", None, "expected an object"),
    ],
)
def test_a_bad_line_names_the_file_line_and_field(
    tmp_path: Path, line: str, field: str | None, reason: str
) -> None:
    path = _write(tmp_path, [_row(), "", line])
    with pytest.raises(PromptFileError) as info:
        load_prompts(path)
    err = info.value
    assert (err.path, err.line, err.field) == (path, 3, field)
    message = str(err)
    assert str(path) in message and "line 3" in message and reason in message
    if field is not None:
        assert f"field '{field}'" in message


def test_a_bool_field_rejects_a_string(tmp_path: Path) -> None:
    rows = [
        json.loads(line) for line in (prompts_dir() / "ambiguous.jsonl").read_text().splitlines()
    ]
    rows[1]["word_last"] = "false"
    path = _write(tmp_path, [json.dumps(r) for r in rows], "ambiguous.jsonl")
    with pytest.raises(PromptFileError, match=r"line 2, field 'word_last': expected bool"):
        load_prompts(path)


def test_a_control_prompt_with_another_frame_is_rejected(tmp_path: Path) -> None:
    rows = [
        json.loads(line) for line in (prompts_dir() / "ambiguous.jsonl").read_text().splitlines()
    ]
    rows[4]["control_prompt"] += " today"
    path = _write(tmp_path, [json.dumps(r) for r in rows], "ambiguous.jsonl")
    with pytest.raises(PromptFileError, match=r"line 5, field 'control_prompt'"):
        load_prompts(path)


def test_a_homograph_missing_its_second_sense_is_rejected(tmp_path: Path) -> None:
    lines = (prompts_dir() / "ambiguous.jsonl").read_text().splitlines()
    path = _write(tmp_path, lines[:1] + lines[2:], "ambiguous.jsonl")
    with pytest.raises(PromptFileError, match=r"line 1, field 'pair_id'.*lacks a sense"):
        load_prompts(path)


def test_a_word_last_row_must_end_with_the_word(tmp_path: Path) -> None:
    rows = [
        json.loads(line) for line in (prompts_dir() / "ambiguous.jsonl").read_text().splitlines()
    ]
    first_mid = next(i for i, r in enumerate(rows) if not r["word_last"])
    rows[first_mid]["word_last"] = True
    path = _write(tmp_path, [json.dumps(r) for r in rows], "ambiguous.jsonl")
    with pytest.raises(PromptFileError, match=rf"line {first_mid + 1}, field 'word_last'"):
        load_prompts(path)


def test_unknown_family_or_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PromptFileError, match="not a family name"):
        load_prompts("no-such-family")
    with pytest.raises(PromptFileError, match="holds no prompts"):
        load_prompts(_write(tmp_path, [""]))
    other = _write(tmp_path, [_row(family="colours")], "mine.jsonl")
    with pytest.raises(PromptFileError, match="unknown family 'colours'"):
        load_prompts(other)


def test_a_custom_file_takes_its_schema_from_the_family_field(tmp_path: Path) -> None:
    path = _write(tmp_path, [_row(extra="kept")], "my_prompts.jsonl")
    frame = load_prompts(path)
    assert frame.attrs["family"] == "semantic"
    assert frame["extra"].tolist() == ["kept"]


def test_neutral_frames_make_thirty_per_category_with_no_topical_words() -> None:
    topical, neutral = load_prompts("semantic"), load_prompts("semantic_neutral")
    both = pd.concat([topical, neutral])
    assert (both["category"].value_counts() == 30).all()
    # every category uses the same frames: removing the member leaves identical text
    frames = {p.removesuffix(" " + i) for p, i in zip(neutral["prompt"], neutral["item"], strict=True)}
    assert len(frames) == neutral["frame"].nunique() == 2
    assert set(neutral["item"]) == set(topical["item"])


def test_the_two_senses_of_a_last_word_pair_end_at_different_positions() -> None:
    """On a model with learned positions (GPT-2, MiniLM, organism-gpt2) two prompts of equal
    token length ending in one word have identical layer-0 states, so delta(0) = 0 and the
    paper's ratio delta(L)/delta(0) is undefined for the pair (the chapter then reads it "not
    testable"). Of the 100 last-word pairs added for the bifurcation rows' power, 17 had
    equal lengths under organism-gpt2's tokenizer and 20 under MiniLM's; 35 sentences got a
    neutral opener ("Late last night, ..."). The organisms' tokenizer is checked where it is
    fitted (tests/trajectory/test_background.py: no zero pair on organism-gpt2)."""
    import lamina

    _, tok = lamina.load_model("minilm")
    frame = load_prompts("ambiguous")
    frame = frame[frame["word_last"]]
    equal = [pid for pid, rows in frame.groupby("pair_id")
             if len({len(tok(p)["input_ids"]) for p in rows["prompt"]}) == 1]  # fmt: skip
    assert not equal, equal
