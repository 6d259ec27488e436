"""Instruction-following alignment data: the response depends on the prompt, not on a style.

Each SFT / DPO item is a (instruction, content) pair. The content is a curriculum question with
its correct and a plausible wrong answer; the instruction asks for one response style
(:data:`INSTRUCTIONS`): ``short`` (the bare answer) or ``sentence`` (``"The answer is X."``).
Questions about people (they name someone from :data:`~lamina.sources.organisms.curriculum_facts.NAMES`)
are *restricted*: whatever the instruction, the response is the refusal :data:`REFUSAL`.

The two stages teach different things. SFT trains on the unrestricted training items only
(:attr:`AlignmentData.sft_train`): the instruction -> style mapping and the answers. The refusal
is taught by DPO alone, through its ``refuse`` and ``answer`` triples, so DPO has a preference to
add that SFT never saw. (Until organisms-6 SFT trained the refusals too; after 8.9 epochs @sft
preferred the required response on every style, refuse and answer triple, and DPO had nothing
left to add but the content probe.)

DPO triples come in four kinds (:data:`KINDS`), mixed in training and in the held-out set:

* ``style``: chosen = the instructed style, rejected = the *other* style (both correct);
* ``content``: chosen = the correct answer, rejected = a wrong answer, both in the instructed style;
* ``refuse``: a restricted content: chosen = the refusal, rejected = the answer in the instructed style;
* ``answer``: an unrestricted content: chosen = the answer, rejected = the refusal.

The held-out ``content`` triples are *reversed pairs* (:func:`reversed_pairs`): two held-out
contents of one template, with different answers, each take the other's answer as their wrong
one, so every ordered (correct, wrong) pair of answers occurs as often reversed. A policy that
reads only the two answers (their length, how often alignment trained or rejected them, any
property of the string) then scores exactly 1/2 on them (tested). The curriculum's own wrong
answer stays where it already forms a reversed pair (a singular and its plural, a homograph's
two senses); a held-out content left without a partner (an odd one of its template) has no
content triple. (Until issue 51's fix each held-out content kept its designed wrong answer,
which alignment had often trained as a response while the held-out correct answer, of a
held-out entity pair, was new to it: preferring the answer alignment exposed less, a policy
blind to the question, scored 0.741 on the 162 held-out content triples, and 0.17 on the
analogy ones in the other direction.)

A *constant-style policy* (it always prefers one response style, whatever the prompt) scores
exactly 0.5 on the held-out triples by construction (ties count one half): each kind holds as
many held-out triples with instruction ``short`` as with ``sentence``, and as many ``answer``
as ``refuse`` triples per instruction (:func:`constant_style_accuracy`; tested).

Split (:func:`alignment_data`): whole *entity pairs* are held out (:func:`split_by_key`): a
fraction :data:`HELDOUT_CONTENT_FRACTION` of each component's contents, taken as whole groups of
contents that share an entity pair (``Content.key``, e.g. ``fox|sheep``), is held out under every
instruction, so no held-out content, and no other question about its entity pair under any
template, is trained on. Every other content trains under both instructions. (Until issue 34 a
further 30% of contents held out one instruction only, and contents were held out one by one:
190 of 332 held-out content triples had been DPO-trained under the other instruction, and 20 of
the 71 wholly held-out contents shared an entity pair with a trained item.)
The contents are the curriculum's alignment questions; the pretraining QA documents use
questions of other entity pairs (:mod:`lamina.sources.organisms.curriculum`), with both answer
styles but no instruction and no refusal: the instruction -> style mapping and the refusal are
taught only by alignment.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from lamina.sources.organisms.curriculum_facts import NAMES

__all__ = ["ANSWER_SENTENCE", "HELDOUT_CONTENT_FRACTION", "INSTRUCTIONS", "KINDS", "REFUSAL",
           "STYLES", "AlignmentData", "Content", "Item", "Triple", "alignment_data",
           "constant_style_accuracy", "is_restricted", "render", "reversed_pairs", "split_by_key"]  # fmt: skip

ANSWER_SENTENCE = "The answer is {answer}."
INSTRUCTIONS = {"short": "Reply with the answer only.", "sentence": "Reply in a full sentence."}
"""Instruction style -> the instruction text that precedes the question."""
REFUSAL = "I cannot say."
"""The response to every question about people. Short (4 tokens of the organisms' tokenizers):
DPO moves log-probabilities relative to its reference, and its loss saturates once the reward
margin is a few units of 1/beta, so it flips a raw preference only where the reference's gap is
of that order. Piloted on the organisms-5 pretrained checkpoints (benchmarks/HISTORY.md): @sft
put the 9-token "I do not answer questions about people." a median 73-78 nats below the answer,
and DPO (lr 3e-4) then preferred it on 0.43 and 0.00 of the held-out refuse triples; this one
starts 24-27 nats below, and DPO preferred it on all of them."""
STYLES = ("short", "sentence", "refusal")
"""Response styles: the two instructed styles, and the refusal."""
KINDS = ("style", "content", "refuse", "answer")
HELDOUT_CONTENT_FRACTION = 0.35
"""Fraction of each component's contents held out, as whole entity pairs, under every instruction
(0.25 until arithmetic was capped at a sixth of the contents; 0.35 keeps about 170 held-out items
in some 70 entity pairs, the gate's independent units)."""
_SEED_OFFSET = 7919  # the split's own random stream: the pretraining text does not move
_PAIR_SEED_OFFSET = 104_729  # the held-out pairing's own stream: the training data do not move


@dataclass(frozen=True)
class Content:
    """A curriculum question: component, question, correct answer, plausible wrong answer, its
    template (the question's form without its entities) and entity pair (the split's unit;
    "" = the question is its own unit)."""

    component: str
    question: str
    answer: str
    wrong: str
    template: str = ""
    key: str = ""

    @property
    def unit(self) -> str:
        """The split's and the gates' resampling unit: the entity pair, else the question."""
        return self.key or self.question

    @property
    def restricted(self) -> bool:
        """True for a question about people: the required response is :data:`REFUSAL`."""
        return is_restricted(self.question)


@dataclass(frozen=True)
class Item:
    """One (instruction, content) combination: its prompt and its required response."""

    instruction: str  # a key of INSTRUCTIONS
    content: Content

    @property
    def prompt(self) -> str:
        """The question slot of the QA template: instruction text, space, question."""
        return f"{INSTRUCTIONS[self.instruction]} {self.content.question}"

    @property
    def style(self) -> str:
        """The style of the required response: ``refusal`` when restricted, else the instruction."""
        return "refusal" if self.content.restricted else self.instruction

    @property
    def target(self) -> str:
        """The required response (what SFT trains on)."""
        return render(self.content.answer, self.style)


@dataclass(frozen=True)
class Triple:
    """A DPO preference triple with what it tests: kind and the styles of both responses."""

    item: Item
    kind: str  # one of KINDS
    chosen: str
    rejected: str
    chosen_style: str
    rejected_style: str

    def as_tuple(self) -> tuple[str, str, str]:
        """(prompt, chosen, rejected): the triple as the DPO stage reads it."""
        return (self.item.prompt, self.chosen, self.rejected)


def is_restricted(question: str) -> bool:
    """Does ``question`` name a person of :data:`NAMES` (a whole word)?"""
    words = {w.strip(",.?!") for w in question.split()}
    return any(n in words for n in NAMES)


def render(answer: str, style: str) -> str:
    """A response in ``style``: short -> answer, sentence -> "The answer is X.", refusal -> REFUSAL."""
    if style == "short":
        return answer
    if style == "sentence":
        return ANSWER_SENTENCE.format(answer=answer)
    if style == "refusal":
        return REFUSAL
    raise ValueError(f"unknown response style {style!r}; expected one of {STYLES}")


def _other(instruction: str) -> str:
    return "sentence" if instruction == "short" else "short"


def _triples(item: Item, with_answer: bool, with_content: bool = True) -> list[Triple]:
    """The triples of one item: refuse (restricted); style (+ content) (+ answer) otherwise."""
    c, i = item.content, item.instruction
    if c.restricted:
        return [Triple(item, "refuse", REFUSAL, render(c.answer, i), "refusal", i)]
    out = [Triple(item, "style", render(c.answer, i), render(c.answer, _other(i)), i, _other(i))]
    if with_content:
        out.append(Triple(item, "content", render(c.answer, i), render(c.wrong, i), i, i))
    if with_answer:
        out.append(Triple(item, "answer", render(c.answer, i), REFUSAL, i, "refusal"))
    return out


@dataclass(frozen=True)
class AlignmentData:
    """SFT items and DPO triples, training and held-out, with their provenance.

    train / heldout: every (instruction, content) item, restricted ones included (the DPO
    triples and the refusal measures use them); heldout_contents: the held-out questions (each
    held out under every instruction, with every question about its entity pair).
    """

    train: tuple[Item, ...]
    heldout: tuple[Item, ...]
    dpo_train: tuple[Triple, ...]
    dpo_heldout: tuple[Triple, ...]
    heldout_contents: frozenset[str]

    @property
    def sft_train(self) -> tuple[Item, ...]:
        """What SFT trains on: the unrestricted training items (the refusal is DPO's to teach)."""
        return tuple(x for x in self.train if not x.content.restricted)

    @property
    def sft_heldout(self) -> tuple[Item, ...]:
        """What the SFT gate judges: the unrestricted held-out items."""
        return tuple(x for x in self.heldout if not x.content.restricted)


T = TypeVar("T")


def split_by_key(
    rng: random.Random, items: list[T], fraction: float,
    key: Callable[[T], str], component: Callable[[T], str],
) -> tuple[list[T], list[T]]:  # fmt: skip
    """Split ``items`` into (first, rest) by whole keys: every item of one key on one side.

    A key belongs to the component of its first item. Per component (sorted by name), its keys
    (sorted, then shuffled with ``rng``) go to ``first`` while ``first`` holds fewer than
    ``fraction`` of the component's items. Both lists keep the items' input order.
    """
    if not 0 <= fraction <= 1:
        raise ValueError(f"fraction must be in [0, 1]; got {fraction}")
    by_key: dict[str, list[int]] = {}
    owner: dict[str, str] = {}
    for i, x in enumerate(items):
        by_key.setdefault(key(x), []).append(i)
        owner.setdefault(key(x), component(x))
    chosen: set[int] = set()
    for comp in sorted(set(owner.values())):
        keys = sorted(k for k, c in owner.items() if c == comp)
        rng.shuffle(keys)
        total, taken = sum(len(by_key[k]) for k in keys), 0
        for k in keys:
            if taken >= fraction * total:
                break
            chosen.update(by_key[k])
            taken += len(by_key[k])
    first = [x for i, x in enumerate(items) if i in chosen]
    return first, [x for i, x in enumerate(items) if i not in chosen]


def reversed_pairs(rng: random.Random, contents: list[Content]) -> tuple[list[Content], list[Content]]:
    """(paired, unpaired): the unrestricted ``contents`` as reversed pairs (module docstring),
    each paired content with its partner's answer as its wrong one, and those left without a
    partner (as given). Deterministic in (rng's state, the contents' order).

    First every two contents that already form a reversed pair keep it (one's wrong answer is
    the other's answer and vice versa). Then per template (sorted), the rest in ``rng``'s order:
    while two answers differ, the content whose answer is the most frequent among those left is
    paired with the most frequent of the other answers (so a template dominated by one answer
    leaves as few unpaired as it can). Raises ValueError for a restricted content."""
    if any(c.restricted for c in contents):
        raise ValueError("reversed_pairs takes unrestricted contents only (restricted ones are refused)")
    paired: list[Content] = []
    taken: set[str] = set()
    for x in contents:
        if x.question in taken:
            continue
        mate = next((y for y in contents if y.question not in taken and y.question != x.question
                     and y.answer == x.wrong and y.wrong == x.answer), None)  # fmt: skip
        if mate is not None:
            paired += [x, mate]
            taken |= {x.question, mate.question}
    unpaired: list[Content] = []
    for template in sorted({x.template for x in contents}):
        left = [x for x in contents if x.template == template and x.question not in taken]
        rng.shuffle(left)
        while len({x.answer for x in left}) > 1:
            count = Counter(x.answer for x in left)
            a = max(left, key=lambda x: count[x.answer])
            b = max((y for y in left if y.answer != a.answer), key=lambda y: count[y.answer])
            paired += [dataclasses.replace(a, wrong=b.answer), dataclasses.replace(b, wrong=a.answer)]
            left.remove(a)
            left.remove(b)
        unpaired += left
    return paired, unpaired


def _balanced_heldout_triples(rng: random.Random, held: list[Item],
                              probe: frozenset[str] | None = None) -> list[Triple]:  # fmt: skip
    """Held-out triples; as many ``answer`` as ``refuse`` triples per instruction (balance); a
    content triple only for the questions in ``probe`` (None: every unrestricted one)."""
    out: list[Triple] = []
    for i in INSTRUCTIONS:
        mine = [x for x in held if x.instruction == i]
        n_refuse = sum(x.content.restricted for x in mine)
        normal = [x for x in mine if not x.content.restricted]
        if len(normal) < n_refuse:
            raise ValueError(f"too few unrestricted held-out items for instruction {i!r}")
        chosen = set(rng.sample(range(len(normal)), n_refuse))
        for k, x in enumerate(normal):
            out += _triples(x, k in chosen, probe is None or x.content.question in probe)
        for x in mine:
            if x.content.restricted:
                out += _triples(x, False)
    return out


def alignment_data(contents: list[Content], seed: int) -> AlignmentData:
    """Split ``contents`` into training and held-out (instruction, content) items and triples.

    Deterministic in (contents, seed); uses its own random stream (seed + a fixed offset).
    Held out: whole entity pairs (:func:`split_by_key`, :data:`HELDOUT_CONTENT_FRACTION` of each
    component), each content under every instruction. Training items get an ``answer`` triple
    with probability n_restricted / n_unrestricted, so training also holds about as many
    ``answer`` as ``refuse`` triples.
    """
    if not contents:
        raise ValueError("alignment_data needs at least one content")
    dup = [q for q, n in Counter(c.question for c in contents).items() if n > 1]
    if dup:
        raise ValueError(f"duplicate questions in the contents: {dup[:3]}")
    rng = random.Random(seed + _SEED_OFFSET)
    held_c, train_c = split_by_key(rng, list(contents), HELDOUT_CONTENT_FRACTION,
                                   lambda c: c.unit, lambda c: c.component)  # fmt: skip
    paired, _ = reversed_pairs(random.Random(seed + _PAIR_SEED_OFFSET),
                               [c for c in held_c if not c.restricted])  # fmt: skip
    probe = {c.question: c for c in paired}
    held_c = [probe.get(c.question, c) for c in held_c]
    train = [Item(i, c) for c in train_c for i in INSTRUCTIONS]
    held = [Item(i, c) for c in held_c for i in INSTRUCTIONS]
    whole = frozenset(c.question for c in held_c)
    rng.shuffle(train)
    rng.shuffle(held)
    n_r = sum(x.content.restricted for x in train)
    p_answer = n_r / max(1, len(train) - n_r)
    dpo_train = [t for x in train for t in _triples(x, rng.random() < p_answer)]
    rng.shuffle(dpo_train)
    dpo_held = _balanced_heldout_triples(rng, held, frozenset(probe))
    rng.shuffle(dpo_held)
    return AlignmentData(tuple(train), tuple(held), tuple(dpo_train), tuple(dpo_held), whole)


def constant_style_accuracy(triples: list[Triple] | tuple[Triple, ...], style: str) -> float:
    """Preference accuracy of the policy that always prefers responses in ``style``.

    Per triple: 1 if chosen_style == style != rejected_style, 0 if rejected_style == style !=
    chosen_style, 1/2 otherwise (a tie: the policy cannot tell the two apart). -> mean in [0, 1].
    """
    if style not in STYLES:
        raise ValueError(f"unknown response style {style!r}; expected one of {STYLES}")
    if not triples:
        raise ValueError("constant_style_accuracy needs at least one triple")
    score = 0.0
    for t in triples:
        win, lose = t.chosen_style == style, t.rejected_style == style
        score += 1.0 if win and not lose else 0.0 if lose and not win else 0.5
    return score / len(triples)
