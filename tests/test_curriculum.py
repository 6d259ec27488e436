"""The organisms' template curriculum: determinism, coverage, correct answers, disjoint splits."""

from __future__ import annotations

import re
import time

import pytest

from lamina.organisms import curriculum as cur
from lamina.organisms.curriculum import Curriculum, generate_curriculum
from lamina.prompts import load_prompts


@pytest.fixture(scope="module")
def curriculum() -> Curriculum:
    return generate_curriculum(seed=0, n_docs=1000)


def test_same_seed_gives_identical_curriculum() -> None:
    a, b = generate_curriculum(seed=3, n_docs=500), generate_curriculum(seed=3, n_docs=500)
    assert (a.text, a.sft, a.dpo, a.sft_eval, a.dpo_eval) == (
        b.text,
        b.sft,
        b.dpo,
        b.sft_eval,
        b.dpo_eval,
    )


def test_different_seeds_give_different_curricula() -> None:
    a, b = generate_curriculum(seed=0, n_docs=300), generate_curriculum(seed=1, n_docs=300)
    assert a.text != b.text
    assert a.sft != b.sft


def test_generation_is_fast() -> None:
    generate_curriculum(seed=0, n_docs=10)  # warm the prompt-file cache
    start = time.perf_counter()
    generate_curriculum(seed=5, n_docs=4000)
    assert time.perf_counter() - start < 2.0


def test_document_count_is_n_docs_but_never_below_coverage() -> None:
    assert len(generate_curriculum(seed=0, n_docs=777).text) == 777
    tiny = generate_curriculum(seed=0, n_docs=5)
    assert len(tiny.text) == tiny.n_coverage_docs > 5
    assert len(tiny.components) == len(tiny.text)


def test_homographs_come_from_the_ambiguous_prompt_file() -> None:
    assert cur.HOMOGRAPHS == tuple(dict.fromkeys(load_prompts("ambiguous")["word"]))
    assert len(cur.HOMOGRAPHS) >= 15


@pytest.mark.parametrize("n_docs", [5, 1000])
def test_every_homograph_appears_in_both_senses_with_its_controls(n_docs: int) -> None:
    text = "\n".join(generate_curriculum(seed=2, n_docs=n_docs).text)
    for row in load_prompts("ambiguous").itertuples():
        assert row.prompt + "." in text, (row.word, row.sense)
        assert row.control_prompt + "." in text, (row.word, row.control_word)
        assert row.gloss in text


def test_every_probe_prompt_of_the_other_families_appears(curriculum: Curriculum) -> None:
    text = "\n".join(curriculum.text)
    for family in ("semantic", "lexical", "analogies", "reasoning"):
        for prompt in load_prompts(family)["prompt"]:
            assert prompt[:1].upper() + prompt[1:] in text, (family, prompt)
    for row in load_prompts("reasoning").itertuples():
        assert f"{row.prompt} {row.answer}." in text


def test_every_semantic_category_and_item_is_taught(curriculum: Curriculum) -> None:
    text = "\n".join(curriculum.text)
    for row in load_prompts("semantic").itertuples():
        noun = cur.CATEGORY_NOUNS[row.category]
        assert re.search(rf"\b{row.item} is an? {noun}\.", text, re.IGNORECASE), row.item


def test_eval_questions_are_disjoint_from_training_questions(curriculum: Curriculum) -> None:
    train = {q for q, _ in curriculum.sft} | {p for p, _, _ in curriculum.dpo}
    held = {q for q, _ in curriculum.sft_eval} | {p for p, _, _ in curriculum.dpo_eval}
    assert train and held and not train & held
    assert len(curriculum.sft) == len({q for q, _ in curriculum.sft})


def test_every_component_has_held_out_questions(curriculum: Curriculum) -> None:
    stats = curriculum.stats()
    assert set(stats["sft_eval"]) == set(cur.MIXTURE)
    assert set(stats["sft"]) == set(cur.MIXTURE)
    assert stats["n_sft_eval"] == len(curriculum.sft_eval)


def test_dpo_chosen_is_the_sft_answer_and_differs_from_rejected(curriculum: Curriculum) -> None:
    answers = dict(curriculum.sft + curriculum.sft_eval)
    for prompt, chosen, rejected in curriculum.dpo + curriculum.dpo_eval:
        assert chosen == answers[prompt]
        assert chosen != rejected and chosen.strip() and rejected.strip()


_OPS = {"plus": lambda a, b: a + b, "minus": lambda a, b: a - b, "times": lambda a, b: a * b}


def test_arithmetic_answers_are_correct(curriculum: Curriculum) -> None:
    checked = 0
    for question, answer in curriculum.sft + curriculum.sft_eval:
        m = re.fullmatch(r"What is (\d+) (plus|minus|times) (\d+)\?", question)
        if m:
            assert int(answer) == _OPS[m[2]](int(m[1]), int(m[3])), question
            checked += 1
        m = re.fullmatch(r"\w+ has (\d+) \w+ and (gets|gives away) (\d+)( more)?\..*", question)
        if m:
            expected = int(m[1]) + int(m[3]) if m[2] == "gets" else int(m[1]) - int(m[3])
            assert int(answer) == expected, question
            checked += 1
    assert checked > 200
    for doc in curriculum.text:
        for a, op, b, r in re.findall(r"\b(\d+) (plus|minus|times) (\d+) is (\d+)\.", doc):
            if not doc.startswith("If "):
                assert int(r) == _OPS[op](int(a), int(b)), doc


def test_comparison_answers_follow_the_size_order(curriculum: Curriculum) -> None:
    rank = {a: i for i, a in enumerate(cur.ANIMALS_BY_SIZE)}
    for question, answer in curriculum.sft + curriculum.sft_eval:
        m = re.fullmatch(r"Is an? (\w+) bigger than an? (\w+)\?", question)
        if m:
            assert answer == ("yes" if rank[m[1]] > rank[m[2]] else "no"), question
        m = re.fullmatch(r"Is (\d+) greater than (\d+)\?", question)
        if m:
            assert answer == ("yes" if int(m[1]) > int(m[2]) else "no"), question


def test_homograph_sense_questions_answer_with_the_right_gloss(curriculum: Curriculum) -> None:
    gloss = {r.prompt: r.gloss for r in load_prompts("ambiguous").itertuples()}
    seen = 0
    for question, answer in curriculum.sft + curriculum.sft_eval:
        m = re.fullmatch(r'In the sentence "(.+)", what does the word \w+ mean\?', question)
        if m:
            assert answer == gloss[m[1]]
            seen += 1
    assert seen == len(gloss)


def test_stats_count_every_document(curriculum: Curriculum) -> None:
    stats = curriculum.stats()
    assert sum(stats["docs"].values()) == stats["n_docs"] == len(curriculum.text)
    assert sum(stats["dpo"].values()) == len(curriculum.dpo)
