"""The organisms' template curriculum: determinism, coverage, correct answers, disjoint splits."""

from __future__ import annotations

import re
import time

import pytest

from lamina.sources.organisms import curriculum as cur
from lamina.sources.organisms import curriculum_facts as facts
from lamina.sources.organisms import curriculum_templates as templates
from lamina.sources.organisms.curriculum import Curriculum, generate_curriculum
from lamina.sources.organisms.curriculum_templates import N_HOMOGRAPH_QA
from lamina.sources.prompts import load_prompts


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
def test_every_homograph_appears_in_both_senses_with_its_control_in_the_same_frame(
    n_docs: int,
) -> None:
    text = "\n".join(generate_curriculum(seed=2, n_docs=n_docs).text)
    for row in load_prompts("ambiguous").itertuples():
        c1, c2, _ = facts.HOMOGRAPH_CONTEXTS[(row.word, row.sense_label)]
        assert f"We talked about {c1}, {c2} and the {row.word}." in text, (row.word, row.sense)
        assert f"We talked about {c1}, {c2} and the {row.control_word}." in text, row.control_word


def test_no_evaluation_prompt_or_gloss_is_copied_into_the_curriculum(
    curriculum: Curriculum,
) -> None:
    """Whole prompts of three or more words, and every gloss, are absent (normalised text)."""
    from lamina.sources.organisms.overlap import phrase_hits

    docs = curriculum.text + [f"{q} {a}" for q, a in curriculum.sft + curriculum.sft_eval]
    phrases = [r.gloss for r in load_prompts("ambiguous").itertuples()]
    for family in ("semantic", "analogies", "reasoning", "ambiguous", "lexical"):
        phrases += [p for p in load_prompts(family)["prompt"] if len(p.split()) >= 3]
    phrases += [p for p in load_prompts("ambiguous")["control_prompt"]]
    assert phrase_hits(phrases, docs) == []


def test_the_check_finds_a_copied_prompt() -> None:
    """The same check on a curriculum with one prompt planted fails: the test above can fail."""
    from lamina.sources.organisms.overlap import phrase_hits

    prompt = load_prompts("reasoning")["prompt"].iloc[0]
    assert phrase_hits([prompt], ["Some text. " + prompt.upper() + ", and more."]) != []


def test_reasoning_names_are_disjoint_from_every_prompt_file() -> None:
    from lamina.sources.organisms.overlap import eval_texts, words

    vocab = {w for texts in eval_texts().values() for t in texts for w in words(t)}
    assert not {n.lower() for n in facts.NAMES} & vocab


def test_analogy_templates_skip_the_word_pairs_of_the_analogy_prompts(
    curriculum: Curriculum,
) -> None:
    banned = templates._analogy_pairs_of_prompts()
    assert len(banned) == len(load_prompts("analogies"))
    for doc in curriculum.text:
        for a, c in re.findall(r"(?:^|\. )(?:An? )?(\w+) is to (?:an? )?\w+ as (?:an? )?(\w+) is to",
                               doc):  # fmt: skip
            assert frozenset((a.lower(), c.lower())) not in banned, doc


def test_every_semantic_category_and_item_is_taught(curriculum: Curriculum) -> None:
    text = "\n".join(curriculum.text)
    for row in load_prompts("semantic").itertuples():
        noun = facts.CATEGORY_NOUNS[row.category]
        assert re.search(rf"\b{row.item} is an? {noun}\.", text, re.IGNORECASE), row.item


def test_eval_questions_are_disjoint_from_training_questions(curriculum: Curriculum) -> None:
    train = {q for q, _ in curriculum.sft} | {p for p, _, _ in curriculum.dpo}
    held = {q for q, _ in curriculum.sft_eval} | {p for p, _, _ in curriculum.dpo_eval}
    pre = {q for q, _ in curriculum.pretrain_qa}
    assert train and held and pre
    assert not train & held and not pre & held and not pre & train
    assert len(curriculum.sft) == len({q for q, _ in curriculum.sft})


def test_pretraining_text_holds_qa_documents_of_its_own_questions_only(
    curriculum: Curriculum,
) -> None:
    """The QA format is seen in pretraining, on questions that SFT and evaluation never use."""
    from lamina.sources.organisms.corpus import format_prompt

    qa_docs = [d for d, c in zip(curriculum.text, curriculum.components, strict=True) if c == "qa"]
    assert len(qa_docs) > 0.05 * len(curriculum.text)
    pre = {format_prompt(q) for q, _ in curriculum.pretrain_qa}
    others = {format_prompt(q) for q, _ in curriculum.sft + curriculum.sft_eval}
    for doc in qa_docs:
        prompt = doc.split("\nAnswer:")[0] + "\nAnswer:"
        assert prompt in pre and prompt not in others, doc
    text = "\n".join(curriculum.text)
    assert not [q for q in others if q in text]
    styles = {doc.split("\nAnswer: ")[1].startswith("The answer is ") for doc in qa_docs}
    assert styles == {True, False}


def test_every_component_has_held_out_questions(curriculum: Curriculum) -> None:
    stats = curriculum.stats()
    question_kinds = set(cur.MIXTURE) - {"qa"}  # "qa" documents are rendered questions
    assert set(stats["pretrain_qa"]) == question_kinds
    # comparisons and syllogisms ask only two-option questions (CHOICE_TEMPLATES): pretraining
    choice_only = {"comparison", "syllogism"}
    # every transitive question names people: their refusal is DPO's, so they are DPO-only
    people_only = {"transitive"}
    assert set(stats["sft_eval"]) == set(stats["sft"]) == question_kinds - choice_only - people_only
    assert set(stats["dpo_eval"]) == set(stats["dpo"]) == question_kinds - choice_only
    assert stats["n_sft_eval"] == len(curriculum.sft_eval)


def _contents(curriculum: Curriculum) -> list[tuple[str, str]]:
    """(question, correct answer) of every SFT / held-out content, once each."""
    assert curriculum.alignment is not None
    items = curriculum.alignment.train + curriculum.alignment.heldout
    return list(dict.fromkeys((x.content.question, x.content.answer) for x in items))


def test_dpo_chosen_is_the_required_response_and_rejected_another(curriculum: Curriculum) -> None:
    """chosen: the required response of the prompt (its SFT target, or the refusal that only DPO
    teaches); rejected: anything else."""
    assert curriculum.alignment is not None
    items = curriculum.alignment.train + curriculum.alignment.heldout
    required = {x.prompt: x.target for x in items}
    assert dict(curriculum.sft + curriculum.sft_eval).items() <= required.items()
    for prompt, chosen, rejected in curriculum.dpo + curriculum.dpo_eval:
        assert chosen == required[prompt] != rejected
        assert curriculum.wrong[prompt] != required[prompt]
    styles = {r.startswith("The answer is ") for _, _, r in curriculum.dpo_eval}
    assert styles == {True, False}  # rejected is not one constant style


_OPS = {"plus": lambda a, b: a + b, "minus": lambda a, b: a - b, "times": lambda a, b: a * b}


def test_arithmetic_answers_are_correct(curriculum: Curriculum) -> None:
    checked = 0
    for question, answer in _contents(curriculum) + curriculum.pretrain_qa:  # every question
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
    rank = {a: i for i, a in enumerate(facts.ANIMALS_BY_SIZE)}
    checked = 0
    for question, answer in _contents(curriculum) + curriculum.pretrain_qa:  # every question
        m = re.fullmatch(r"Is an? (\w+) bigger than an? (\w+)\?", question)
        if m:
            assert answer == ("yes" if rank[m[1]] > rank[m[2]] else "no"), question
            checked += 1
        m = re.fullmatch(r"Is (\d+) greater than (\d+)\?", question)
        if m:
            assert answer == ("yes" if int(m[1]) > int(m[2]) else "no"), question
            checked += 1
    assert checked > 50


def test_homograph_sense_questions_answer_with_the_right_sense(curriculum: Curriculum) -> None:
    label = {(w, c): lab for (w, lab), cs in facts.HOMOGRAPH_CONTEXTS.items() for c in cs}
    seen = 0
    for question, answer in _contents(curriculum) + curriculum.pretrain_qa:
        m = re.fullmatch(r"When people speak of (.+), what is the word (\w+) about\?", question)
        if m:
            assert answer == label[(m[2], m[1])], question
            seen += 1
    # one question per sense of each homograph asked about (every one has two senses)
    assert seen == 2 * min(N_HOMOGRAPH_QA, load_prompts("ambiguous")["word"].nunique())


def test_every_homograph_is_in_the_text_in_both_senses_and_a_sample_is_asked_about(
    curriculum: Curriculum,
) -> None:
    """The text covers each of ambiguous.jsonl's homographs in both senses (the bifurcation
    chapter reads the organisms on them); the questions ask about N_HOMOGRAPH_QA of them, so
    that homograph questions do not crowd the alignment contents (with every one of 120
    asked they were 108 of the SFT gate's 250 held-out items)."""
    text = " ".join(curriculum.text)  # the coverage documents: each sense's fact
    for word, label in facts.HOMOGRAPH_CONTEXTS:
        assert f" {word} can have to do with {label}." in text, (word, label)
    asked = {re.fullmatch(r"When people speak of .+, what is the word (\w+) about\?", q)[1]
             for q, _ in _contents(curriculum) + curriculum.pretrain_qa
             if q.startswith("When people speak of")}  # fmt: skip
    assert len(asked) == N_HOMOGRAPH_QA
    held = [x for x in curriculum.alignment.sft_heldout if x.content.component == "homograph"]
    assert len(held) <= 0.15 * len(curriculum.alignment.sft_heldout)


def test_stats_count_every_document(curriculum: Curriculum) -> None:
    stats = curriculum.stats()
    assert sum(stats["docs"].values()) == stats["n_docs"] == len(curriculum.text)
    assert sum(stats["dpo"].values()) == len(curriculum.dpo)


def test_no_validation_or_heldout_document_is_a_training_document():
    """Splitting by distinct text: the curriculum repeats documents, and a per-document split
    put copies of one text in train and validation (fails with split_documents)."""
    from lamina.sources.organisms.corpus import split_distinct

    docs = [f"doc {i % 37}" for i in range(400)]
    val, held, train = split_distinct(docs, (0.05, 0.10))
    assert not (set(val) | set(held)) & set(train)
    assert sorted(val + held + train) == sorted(docs)
    assert val and held


def test_the_organism_corpus_splits_share_no_document():
    from lamina.sources.organisms import ORGANISMS
    from lamina.sources.organisms.corpus import load_corpus

    corpus = load_corpus(ORGANISMS["organism-gpt2"])
    train = set(corpus.train)
    assert not train & set(corpus.val)
    assert not train & set(corpus.heldout)
