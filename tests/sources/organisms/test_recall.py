"""Fact recall probes the sentences the curriculum trains on, and reads greedy decoding."""

from __future__ import annotations

import random

import pytest
import torch

from lamina.sources.organisms.curriculum import MIXTURE
from lamina.sources.organisms.curriculum_templates import GENERATORS
from lamina.sources.organisms.recall import fact_prompts, fact_recall
from tests.conftest import tiny_model


def test_every_recall_prompt_is_a_training_sentence_cut_before_its_answer() -> None:
    text: dict[str, list[str]] = {comp: [] for comp in MIXTURE}
    for _, make in GENERATORS:
        make(random.Random(0), text, [])
    sentences = set(text["analogy"]) | set(text["arithmetic"])
    prompts = fact_prompts()
    assert set(prompts) == {"arithmetic", "opposite", "young", "worker", "part"}
    assert len(prompts["arithmetic"]) == 300
    for family, pairs in prompts.items():
        assert pairs, family
        for prefix, completion in pairs:
            assert completion.startswith(" ") and not completion.endswith(".")
            assert f"{prefix}{completion}." in sentences, (family, prefix, completion)


def test_recall_is_one_for_the_models_own_greedy_answer_and_zero_for_another(byte_tokenizer) -> None:
    model = tiny_model("gpt2", len(byte_tokenizer))
    prefixes = ["The opposite of hot is", "7 plus 5 is", "A young dog is called"]
    own, other = [], []
    with torch.no_grad():
        for p in prefixes:
            ids = torch.tensor([byte_tokenizer(p)["input_ids"]])
            top2 = model(input_ids=ids).logits[0, -1].topk(2).indices
            own.append((p, byte_tokenizer.decode(top2[:1])))
            other.append((p, byte_tokenizer.decode(top2[1:])))
    got = fact_recall(model, byte_tokenizer, {"own": own, "other": other})
    assert got == {"own": 1.0, "other": 0.0}


def test_an_empty_family_is_an_error(byte_tokenizer) -> None:
    with pytest.raises(ValueError, match="no facts"):
        fact_recall(tiny_model("gpt2", len(byte_tokenizer)), byte_tokenizer, {"opposite": []})
