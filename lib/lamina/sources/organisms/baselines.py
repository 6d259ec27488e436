"""Content-blind policies: what an SFT'd model must beat to show that it answers from the content.

A content-blind policy reads an item's instruction, its question's template
(:attr:`lamina.sources.organisms.instructions.Content.template`: the form, without the
entities), whether the question names a person, and the question's words as positions; it never
uses what the entities are. Each policy of :data:`POLICIES` is fit on the training items and
answers a held-out item with one response; a hit is an exact match with the required response
(:attr:`~lamina.sources.organisms.instructions.Item.target`), as for the model's greedy answer.

* ``always refuse``: the refusal, whatever the item.
* ``instruction majority``: refuse when the question names a person, else the most common
  training answer, in the instructed style (the referee's policy of issue 34: 0.395 on the
  2a683dc held-out items).
* ``template majority``: refuse on a name, else the most common training answer of the item's
  template, in the instructed style.
* ``copy from the question``: refuse on a name, else the span of the question's words (1 to
  :data:`MAX_SPAN` words, at a fixed position counted from the start or from the end) that most
  often equals the training answer of the item's template ("Which word is plural, cat or
  cats?" -> the last word); the template majority where copying hits less often in training.

:func:`fit_policies` fits them; :func:`policy_hits` scores them. The SFT gate
(:func:`lamina.sources.organisms.gates.sft_gate`) requires the model to beat every one of them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from lamina.sources.organisms.instructions import REFUSAL, Item, is_restricted, render

__all__ = ["MAX_SPAN", "POLICIES", "Policy", "fit_policies", "policy_hits", "question_words"]

MAX_SPAN = 3
"""Longest span of question words the copy policy may return."""
POLICIES = ("always refuse", "instruction majority", "template majority", "copy from the question")
"""The declared family of content-blind policies, in the order they are reported."""

Policy = Callable[[Item], str]
Rule = tuple[int, int]  # (start, length); a negative start counts from the end


def question_words(question: str) -> list[str]:
    """The question's words, with the punctuation at their edges removed."""
    return [w.strip(",.?!;:") for w in question.split() if w.strip(",.?!;:")]


def _span(words: list[str], rule: Rule) -> str | None:
    start, length = rule
    i = start if start >= 0 else len(words) + start
    if i < 0 or i + length > len(words):
        return None
    return " ".join(words[i : i + length])


def _rules(n_words: int) -> list[Rule]:
    return [(s, k) for k in range(1, MAX_SPAN + 1) for s in (*range(n_words), *range(-n_words, 0))]


def _majority(answers: Counter[str]) -> str:
    """The most common answer (ties: the alphabetically first, so fits are order-free)."""
    top = max(answers.values())
    return min(a for a, n in answers.items() if n == top)


def _copy_rule(items: list[Item], fallback_hits: int) -> Rule | None:
    """The span rule with the most training hits on ``items`` (ties: the first in
    :func:`_rules` order), or None when it hits no more often than ``fallback_hits``."""
    hits: Counter[Rule] = Counter()
    for x in items:
        words = question_words(x.content.question)
        for rule in _rules(len(words)):
            if _span(words, rule) == x.content.answer:
                hits[rule] += 1
    if not hits:
        return None
    best = max(hits.values())
    rule = next(r for r in sorted(hits, key=lambda r: (r[1], r[0] < 0, abs(r[0]))) if hits[r] == best)
    return rule if best > fallback_hits else None


def fit_policies(train: Sequence[Item]) -> dict[str, Policy]:
    """The :data:`POLICIES`, fit on the training items: {name: policy(item) -> response}."""
    open_items = [x for x in train if not x.content.restricted]
    if not open_items:
        raise ValueError("fit_policies needs training items that do not name a person")
    overall = _majority(Counter(x.content.answer for x in open_items))
    by_template: dict[str, list[Item]] = {}
    for x in open_items:
        by_template.setdefault(x.content.template, []).append(x)
    majority = {t: _majority(Counter(x.content.answer for x in xs)) for t, xs in by_template.items()}
    copy = {t: _copy_rule(xs, sum(x.content.answer == majority[t] for x in xs))
            for t, xs in by_template.items()}  # fmt: skip

    def guarded(answer: Callable[[Item], str]) -> Policy:
        return lambda x: REFUSAL if is_restricted(x.content.question) else render(answer(x), x.instruction)

    def copied(x: Item) -> str:
        rule = copy.get(x.content.template)
        span = _span(question_words(x.content.question), rule) if rule is not None else None
        return span if span is not None else majority.get(x.content.template, overall)

    return {
        "always refuse": lambda x: REFUSAL,
        "instruction majority": guarded(lambda x: overall),
        "template majority": guarded(lambda x: majority.get(x.content.template, overall)),
        "copy from the question": guarded(copied),
    }


def policy_hits(policies: dict[str, Policy], items: Sequence[Item]) -> dict[str, np.ndarray]:
    """{policy name: (N,) float 0/1}: whether each policy's response is the item's required
    response (:attr:`Item.target`), in the items' order."""
    return {name: np.array([float(p(x) == x.target) for x in items]) for name, p in policies.items()}
