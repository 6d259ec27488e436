"""Fact recall: does an organism complete a curriculum fact with its answer?

The gates (:mod:`lamina.sources.organisms.gates`) ask held-out *questions*. An organism can
answer most of them only if pretraining taught it the fact asked about, which the pretraining
text states as a sentence ("7 plus 5 is 12.", "The opposite of hot is cold."): only the
question is held out. Recall measures that precondition directly, on any checkpoint, the base
ones before any instruction data:

    recall(family) = (1 / n) sum_f 1[greedy decoding of prefix(f) reproduces answer(f)]

over the n facts f of a family whose sentence ends with its answer, cut before it
(:func:`fact_prompts`; "Paris is the capital of France." does not end with its answer, Paris,
and is left out). Teacher-forced as in :func:`lamina.sources.organisms.scoring.answer_hits`:
a hit is an argmax equal to the answer token at every answer position, the full stop excluded.
Chance is near 0 for an 8,192-token vocabulary. ``benchmarks/organism_recall.py`` measures it
along a build's checkpoints, and on curricula of several lengths (the organisms' budget).
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from lamina.sources.organisms.curriculum_templates import ARITHMETIC, RELATIONS, arithmetic_fact
from lamina.sources.organisms.scoring import answer_hits, model_device, qa_batch

__all__ = ["fact_prompts", "fact_recall"]


def _cut(sentence: str, answer: str) -> tuple[str, str] | None:
    """(prefix, " answer") of a sentence that ends with " answer.", else None."""
    tail = f" {answer}."
    return (sentence[: -len(tail)], f" {answer}") if sentence.endswith(tail) else None


def fact_prompts() -> dict[str, list[tuple[str, str]]]:
    """{family: [(prefix, completion)]}: every curriculum fact whose sentence ends with its
    answer, cut before it. Families: "arithmetic" (300 facts) and each relation of
    :data:`lamina.sources.organisms.curriculum_templates.RELATIONS` whose facts end with their
    answer (opposite, young, worker, part). Example: ("7 plus 5 is", " 12")."""
    out: dict[str, list[tuple[str, str]]] = {"arithmetic": []}
    for lhs, op, rhs, res in ARITHMETIC:
        cut = _cut(arithmetic_fact(lhs, op, rhs, res), str(res))
        if cut is None:  # pragma: no cover - the sentence form ends with its result
            raise AssertionError(f"arithmetic fact does not end with its result: {lhs} {op} {rhs}")
        out["arithmetic"].append(cut)
    for name, (table, fact, _ask, answer, _form) in RELATIONS.items():
        cuts = [_cut(fact(k, v), answer(v)) for k, v in table.items()]
        if all(c is not None for c in cuts):
            out[name] = [c for c in cuts if c is not None]
    return out


@torch.no_grad()
def fact_recall(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: dict[str, list[tuple[str, str]]] | None = None,
    batch: int = 64,
    max_len: int = 64,
) -> dict[str, float]:
    """{family: recall}, each in [0, 1] (module docstring), of ``prompts`` (default
    :func:`fact_prompts`); the model is put in eval mode."""
    model.eval()
    dev = model_device(model)
    out: dict[str, float] = {}
    for family, pairs in (fact_prompts() if prompts is None else prompts).items():
        if not pairs:
            raise ValueError(f"fact family {family!r} has no facts")
        hits = [
            answer_hits(model, qa_batch(tokenizer, [p for p, _ in chunk], [c for _, c in chunk],
                                        max_len, dev))  # fmt: skip
            for chunk in (pairs[i : i + batch] for i in range(0, len(pairs), batch))
        ]
        out[family] = float(torch.cat(hits).float().mean())
    return out
