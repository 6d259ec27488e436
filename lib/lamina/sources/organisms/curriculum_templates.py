"""The curriculum's templates: fact sentences, coverage documents and question -> answer items.

Each generator appends its sentences to ``text[component]`` and its questions to ``qa`` as
:class:`QA` items, and returns the component's coverage documents. Every question names its
*template* (the question's form with its entities left out, e.g. ``comparison:which-bigger``:
what a content-blind policy may know) and its *entity pair* (:func:`pair_key`: the two
entities whose relation the answer states, e.g. ``fox|sheep`` for "Which is smaller, a fox or a
sheep?" and for "Is a sheep bigger than a fox?"). The splits (:mod:`lamina.sources.organisms.
curriculum`, :mod:`lamina.sources.organisms.instructions`) keep all questions of one entity
pair on one side, under every template. Vocabulary and facts come from
:mod:`lamina.sources.organisms.curriculum_facts` and the prompt files (vocabulary only; see
:mod:`lamina.sources.organisms.curriculum`).
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable
from typing import Any, NamedTuple

from lamina.sources.organisms.curriculum_facts import (
    ANIMALS_BY_SIZE,
    CAPITALS,
    CATEGORY_NOUNS,
    CATEGORY_SUPER,
    HOMOGRAPH_CONTEXTS,
    IRREGULAR_PLURALS,
    LEXICAL_ADJECTIVES,
    MASS_NOUNS,
    NAMES,
    OBJECTS,
    OPPOSITES,
    PART_WHOLE,
    TRANSITIVE,
    WORKER_TOOLS,
    YOUNG,
)  # fmt: skip
from lamina.sources.prompts import load_prompts, prompts_dir

__all__ = ["ARITHMETIC", "CHOICE_TEMPLATES", "GENERATORS", "N_HOMOGRAPH_QA", "N_NUMBER_PAIRS",
           "N_TRANSITIVE", "N_WORD_PROBLEMS", "QA", "RELATIONS", "Pools", "arithmetic_fact", "homograph_rows",
           "pair_key"]  # fmt: skip

N_TRANSITIVE = 160
N_WORD_PROBLEMS = 120
N_NUMBER_PAIRS = 80
N_HOMOGRAPH_QA = 20
"""Homographs whose senses are asked about (a seeded sample; the text covers every homograph in
both senses): the questions stay at their share of 20 homographs when the bifurcation chapter's
homographs grow. With all 120 asked, homograph questions were 0.43 of the SFT gate's held-out
items (108 of 250; 18 of 148 at 20), few of them answered, and organism-llama's @sft failed its
gate at +0.036 [-0.008, +0.088] over the base (seed 0)."""
CHOICE_TEMPLATES = frozenset({
    "semantic:is-a", "homograph:can-have", "syllogism:chain", "syllogism:converse",
    "syllogism:exclusion", "comparison:bigger", "comparison:greater",
    "comparison:which-bigger", "comparison:which-smaller", "comparison:which-larger",
    "lexical:which-plural",
})  # fmt: skip
"""Templates whose answer a content-blind policy can pick from a closed set of two: yes or no
(a template's majority answer scored 0.40-1.00 on them at 4992629), or one of the two options
the question names (copying a fixed position scored 0.29-1.00). They stay pretraining QA; the
alignment contents (SFT, DPO, the held-out gate items) are the open templates
(:func:`lamina.sources.organisms.curriculum.alignment_contents`; issue 51)."""


class QA(NamedTuple):
    """One curriculum question: its component, text, correct and plausible wrong answer, its
    template (the form without its entities) and its entity pair (:func:`pair_key`)."""

    component: str
    question: str
    answer: str
    wrong: str
    template: str
    key: str


def pair_key(*entities: str) -> str:
    """The entity pair of a question: its distinct entities, lower case, sorted, joined by "|"
    (order-free: "Is a sheep bigger than a fox?" and "Which is smaller, a fox or a sheep?"
    share ``fox|sheep``)."""
    return "|".join(sorted({e.strip().lower() for e in entities}))


Pools = dict[str, list[str]]


@functools.lru_cache(maxsize=16)
def _rows(family: str, where: str) -> tuple[dict[str, Any], ...]:
    return tuple(load_prompts(family).to_dict("records"))


def _family(family: str) -> tuple[dict[str, Any], ...]:
    return _rows(family, str(prompts_dir()))


def homograph_rows() -> tuple[dict[str, Any], ...]:
    """The rows of ``ambiguous.jsonl`` (via :func:`lamina.sources.prompts.load_prompts`)."""
    return _family("ambiguous")


def _a(noun: str) -> str:
    return ("an " if noun[0].lower() in "aeiou" else "a ") + noun


def _np(item: str) -> str:
    return item if item in MASS_NOUNS else _a(item)


def _plural(noun: str) -> str:
    if noun in IRREGULAR_PLURALS:
        return IRREGULAR_PLURALS[noun]
    return noun + ("es" if noun.endswith(("s", "x", "ch", "sh")) else "s")


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _wrong_number(rng: random.Random, x: int) -> str:
    return str(rng.choice([v for v in (x + 1, x - 1, x + 2, x - 2, x + 10) if v >= 0 and v != x]))


def _semantic(rng: random.Random, text: Pools, qa: list[QA]) -> list[str]:
    members: dict[str, list[str]] = {}
    for r in _family("semantic"):
        members.setdefault(r["category"], []).append(r["item"])
    unknown = sorted(set(members) - set(CATEGORY_NOUNS))
    if unknown:
        raise ValueError(f"semantic.jsonl categories without a CATEGORY_NOUNS entry: {unknown}")
    out = text["semantic"]
    for cat, items in members.items():
        noun, others = CATEGORY_NOUNS[cat], [c for c in members if c != cat]
        out.append(f"{_cap(_plural(noun))} include {', '.join(items[:-1])} and {items[-1]}.")
        for item in items:
            other = CATEGORY_NOUNS[rng.choice(others)]
            mate = rng.choice([i for i in items if i != item])
            out += [f"{_cap(_np(item))} is {_a(noun)}.", f"{_cap(_np(item))} is a kind of {noun}.",
                    f"{_cap(_np(item))} and {_np(mate)} are both {_plural(noun)}.",
                    f"{_cap(_np(item))} is not {_a(other)}."]  # fmt: skip
            if item not in MASS_NOUNS:
                out.append(f"{_cap(_plural(item))} are {_plural(noun)}.")
            qa += [QA("semantic", f"Is {_np(item)} {_a(noun)}?", "yes", "no", "semantic:is-a",
                      pair_key(item, noun)),
                   QA("semantic", f"Is {_np(item)} {_a(other)}?", "no", "yes", "semantic:is-a",
                      pair_key(item, other)),
                   QA("semantic", f"What kind of thing is {_np(item)}?", _a(noun), _a(other),
                      "semantic:kind-of", pair_key(item, noun))]  # fmt: skip
    return [" ".join([f"{_cap(_plural(CATEGORY_NOUNS[c]))} include {', '.join(items)}."]
                     + [f"{_cap(_np(i))} is {_a(CATEGORY_NOUNS[c])}." for i in items])
            for c, items in members.items()]  # fmt: skip


def _lexical(rng: random.Random, text: Pools, qa: list[QA]) -> list[str]:
    plurals: dict[str, str] = {}
    for r in _family("lexical"):
        plurals.setdefault(r["base"], _plural(r["base"]))
        if r["variant"] == "plural":
            plurals[r["base"]] = r["prompt"]
    out, coverage = text["lexical"], []
    for base, plural in plurals.items():
        for adj in LEXICAL_ADJECTIVES:
            out += [f"We found {_a(adj + ' ' + base)} there.", f"Her {adj} {base} was by the gate.",
                    f"Two {adj} {plural} were by the gate."]  # fmt: skip
        out += [f"One {base}, two {plural}.", f"The word {base} names one thing.",
                f"The word {plural} names more than one {base}."]  # fmt: skip
        coverage.append(f"One {base}, two {plural}. Her {base} and our {plural}.")
        key = pair_key(base, plural)
        qa += [QA("lexical", f"What is the plural of {base}?", plural, base, "lexical:plural-of", key),
               QA("lexical", f"What is the singular of {plural}?", base, plural, "lexical:singular-of", key),
               QA("lexical", f"Which word is plural, {base} or {plural}?", plural, base,
                  "lexical:which-plural", key)]  # fmt: skip
    return coverage


def _analogy_pairs_of_prompts() -> frozenset[frozenset[str]]:
    """{A, C} of every ``"A is to B as C is to"`` prompt of analogies.jsonl, lower case."""
    pairs = set()
    for r in _family("analogies"):
        m = re.fullmatch(r"(.+) is to (.+) as (.+) is to", r["prompt"].strip())
        if m:
            pairs.add(frozenset((m[1].lower(), m[3].lower())))
    return frozenset(pairs)


@functools.lru_cache(maxsize=4)
def _prompt_analogies(where: str) -> tuple[tuple[str, str, str, str], ...]:
    """(A, B, C, D), lower case, of every ``"A is to B as C is to"`` prompt with answer D."""
    out = []
    for r in _family("analogies"):
        m = re.fullmatch(r"(.+) is to (.+) as (.+) is to", r["prompt"].strip())
        if m:
            out.append((m[1].lower(), m[2].lower(), m[3].lower(), str(r["answer"]).lower()))
    return tuple(out)


def _analogy_allowed(w: str, x: str, y: str, z: str) -> bool:
    """Whether the training analogy "W is to X as Y is to Z" leaks no analogy prompt.

    It must not contain either half ("A is to B", "C is to D") of a prompt "A is to B as C is
    to" with answer D, and neither of its 8-grams may be within one substituted word of the
    prompt's 8-grams: (W, X, Y) must differ from (A, B, C), and (X, Y, Z) from (B, C, D), in at
    least two places (:mod:`lamina.sources.organisms.overlap`, kinds near_8gram and analogy_half).
    """
    mine = (w.lower(), x.lower(), y.lower(), z.lower())
    for a, b, c, d in _prompt_analogies(str(prompts_dir())):
        halves = {(a, b), (c, d)}
        if mine[:2] in halves or mine[2:] in halves:
            return False
        for got, want in ((mine[:3], (a, b, c)), (mine[1:], (b, c, d))):
            if sum(g != t for g, t in zip(got, want, strict=True)) < 2:
                return False
    return True


def _relation(rng: random.Random, text: list[str], qa: list[QA], name: str, table: dict[str, str],
              fact: Callable[[str, str], str], ask: Callable[[str], str],
              answer: Callable[[str], str], form: Callable[[str], str]) -> None:  # fmt: skip
    """Facts and questions of one relation (templates ``analogy:<name>`` and
    ``analogy:<name>-analogy``), and analogies "src is to table[src] as k is to table[k]" whose
    words leak no analogy prompt (:func:`_analogy_allowed`); a key with no allowed source (its
    pair is a prompt's half) gets no analogy sentence or question. Both questions about k have
    the entity pair (k, table[k]); the analogy's source pair is stated in its question."""
    keys, banned = list(table), _analogy_pairs_of_prompts()
    for k in keys:
        other = rng.choice([x for x in keys if table[x] != table[k]])
        text.append(fact(k, table[k]))
        qa.append(QA("analogy", ask(k), answer(table[k]), answer(table[other]), f"analogy:{name}",
                     pair_key(k, table[k])))
        sources = [x for x in keys if x != k and frozenset((x.lower(), k.lower())) not in banned
                   and _analogy_allowed(form(x), form(table[x]), form(k), form(table[k]))]  # fmt: skip
        if not sources:
            continue
        src = rng.choice(sources)
        text.append(
            f"{_cap(form(src))} is to {form(table[src])} as {form(k)} is to {form(table[k])}."
        )
        qa.append(QA("analogy", f"If {form(src)} goes with {form(table[src])}, what goes with "
                     f"{form(k)}?", form(table[k]), form(table[other]), f"analogy:{name}-analogy",
                     pair_key(k, table[k])))  # fmt: skip


def _same(s: str) -> str:
    return s


Relation = tuple[dict[str, str], Callable[[str, str], str], Callable[[str], str],
                 Callable[[str], str], Callable[[str], str]]  # fmt: skip
RELATIONS: dict[str, Relation] = {
    "capital": (CAPITALS, lambda k, v: f"{v} is the capital of {k}.",
                lambda k: f"What is the capital of {k}?", _same, _same),
    "opposite": (OPPOSITES, lambda k, v: f"The opposite of {k} is {v}.",
                 lambda k: f"What is the opposite of {k}?", _same, _same),
    "young": (YOUNG, lambda k, v: f"A young {k} is called {_a(v)}.",
              lambda k: f"What is a young {k} called?", _a, _same),
    "worker": (WORKER_TOOLS, lambda k, v: f"{_cap(_a(k))} works with {_a(v)}.",
               lambda k: f"What does {_a(k)} work with?", _a, _same),
    "part": (PART_WHOLE, lambda k, v: f"{_cap(_a(k))} is part of {_a(v)}.",
             lambda k: f"What is {_a(k)} part of?", _a, _same),
}  # fmt: skip
"""The analogy component's relations, in generation order: name -> (table key -> value, the
fact sentence of (key, value), the question about a key, the answer form of a value, the
analogy form of a word) (:func:`_relation`)."""


def _analogy(rng: random.Random, text: Pools, qa: list[QA]) -> list[str]:
    for name, (table, fact, ask, answer, form) in RELATIONS.items():
        _relation(rng, text["analogy"], qa, name, table, fact, ask, answer, form)
    return []


def _comparisons(rng: random.Random, text: Pools, qa: list[QA]) -> None:
    """Comparisons: animal sizes and numbers."""
    for i, small in enumerate(ANIMALS_BY_SIZE):
        for big in ANIMALS_BY_SIZE[i + 1 :]:
            b, s = _a(big), _a(small)
            x, y = (b, s) if rng.random() < 0.5 else (s, b)
            text["comparison"] += [
                f"{_cap(b)} is bigger than {s}.",
                f"{_cap(s)} is smaller than {b}.",
            ]
            key = pair_key(big, small)
            qa += [QA("comparison", f"Is {b} bigger than {s}?", "yes", "no", "comparison:bigger", key),
                   QA("comparison", f"Is {s} bigger than {b}?", "no", "yes", "comparison:bigger", key),
                   QA("comparison", f"Which is bigger, {x} or {y}?", b, s, "comparison:which-bigger", key),
                   QA("comparison", f"Which is smaller, {x} or {y}?", s, b, "comparison:which-smaller",
                      key)]  # fmt: skip
    for _ in range(N_NUMBER_PAIRS):
        m, n = rng.sample(range(21), 2)
        text["comparison"].append(f"{max(m, n)} is greater than {min(m, n)}.")
        key = pair_key(str(m), str(n))
        qa += [QA("comparison", f"Is {m} greater than {n}?", "yes" if m > n else "no",
                  "no" if m > n else "yes", "comparison:greater", key),
               QA("comparison", f"Which is larger, {m} or {n}?", str(max(m, n)), str(min(m, n)),
                  "comparison:which-larger", key)]  # fmt: skip


def _transitive(rng: random.Random, text: Pools, qa: list[QA]) -> None:
    """Transitive chains: a > b > c."""
    for _ in range(N_TRANSITIVE):
        a, b, c = rng.sample(NAMES, 3)
        rel, top, bottom = rng.choice(TRANSITIVE)
        premise = f"{a} is {rel} than {b}, and {b} is {rel} than {c}."
        text["transitive"].append(f"{a} is {rel} than {b}. {b} is {rel} than {c}. "
                                  f"So {a} is {rel} than {c}, and {a} is the {top}.")  # fmt: skip
        key = pair_key(a, c)
        qa.append(rng.choice([QA("transitive", f"{premise} Who is the {top}?", a, c, "transitive:who-top", key),
                              QA("transitive", f"{premise} Who is the {bottom}?", c, a,
                                 "transitive:who-bottom", key),
                              QA("transitive", f"{premise} Is {c} {rel} than {a}?", "no", "yes",
                                 "transitive:yes-no", key),
                              QA("transitive", f"{premise} Is {a} {rel} than {c}?", "yes", "no",
                                 "transitive:yes-no", key)]))  # fmt: skip


def _syllogisms(rng: random.Random, text: Pools, qa: list[QA]) -> None:
    """Syllogisms over the semantic categories (count nouns only)."""
    members: dict[str, list[str]] = {}
    for r in _family("semantic"):
        if r["category"] in CATEGORY_SUPER and r["item"] not in MASS_NOUNS:
            members.setdefault(r["category"], []).append(r["item"])
    for cat, items in members.items():
        noun, sup = CATEGORY_NOUNS[cat], CATEGORY_SUPER[cat]
        cats = _plural(noun)
        for item in items:
            its = _plural(item)
            other_noun = CATEGORY_NOUNS[rng.choice([c for c in members if c != cat])]
            other = _plural(other_noun)
            text["syllogism"] += [f"All {its} are {cats}. All {cats} are {sup}. So all {its} are {sup}.",
                                  f"No {cats} are {other}. All {its} are {cats}. So no {its} are {other}."]  # fmt: skip
            qa += [QA("syllogism", f"All {its} are {cats}, and all {cats} are {sup}. Are all {its} {sup}?",
                      "yes", "no", "syllogism:chain", pair_key(item, sup)),
                   QA("syllogism", f"All {its} are {cats}. Are all {cats} {its}?", "no", "yes",
                      "syllogism:converse", pair_key(item, noun)),
                   QA("syllogism", f"No {cats} are {other}, and all {its} are {cats}. Are any {its} {other}?",
                      "no", "yes", "syllogism:exclusion", pair_key(item, other_noun))]  # fmt: skip


ARITHMETIC: tuple[tuple[int, str, int, int], ...] = (
    *((a, "plus", b, a + b) for a in range(13) for b in range(13)),
    *((a, "minus", b, a - b) for a in range(13) for b in range(a + 1)),
    *((a, "times", b, a * b) for a in range(2, 6) for b in range(1, 11)),
)
"""The arithmetic facts, (left operand, operation, right operand, result), in generation order."""


def arithmetic_fact(lhs: int, op: str, rhs: int, res: int) -> str:
    """The curriculum's sentence of one arithmetic fact: ``"7 plus 5 is 12."``."""
    return f"{lhs} {op} {rhs} is {res}."


def _arithmetic(rng: random.Random, text: Pools, qa: list[QA]) -> None:
    """Arithmetic, with the answers computed."""
    for lhs, op, rhs, res in ARITHMETIC:
        text["arithmetic"].append(arithmetic_fact(lhs, op, rhs, res))
        qa.append(QA("arithmetic", f"What is {lhs} {op} {rhs}?", str(res), _wrong_number(rng, res),
                     f"arithmetic:{op}", pair_key(str(lhs), str(rhs))))
    for _ in range(N_WORD_PROBLEMS):
        name, obj = rng.choice(NAMES), rng.choice(OBJECTS)
        lhs, rhs = rng.randint(2, 12), rng.randint(1, 9)
        gives = rng.random() < 0.5 and rhs <= lhs - 2
        verb, res = ("gives away", lhs - rhs) if gives else ("gets", lhs + rhs)
        more = "" if gives else " more"
        text["arithmetic"].append(
            f"{name} has {lhs} {obj} and {verb} {rhs}{more}. Now {name} has {res} {obj}."
        )
        qa.append(QA("arithmetic", f"{name} has {lhs} {obj} and {verb} {rhs}{more}. How many {obj} "
                     f"does {name} have now?", str(res), _wrong_number(rng, res),
                     "arithmetic:gives" if gives else "arithmetic:gets",
                     pair_key(str(lhs), str(rhs))))  # fmt: skip


def _reasoning(rng: random.Random, text: Pools, qa: list[QA]) -> list[str]:
    for part in (_comparisons, _transitive, _syllogisms, _arithmetic):  # this order: one rng
        part(rng, text, qa)
    return []


def _homograph(rng: random.Random, text: Pools, qa: list[QA]) -> list[str]:
    rows = homograph_rows()
    senses = {(r["word"], r["sense"]): r for r in rows}
    missing = sorted({(r["word"], r["sense_label"]) for r in rows} - set(HOMOGRAPH_CONTEXTS))
    if missing:
        raise ValueError(f"ambiguous.jsonl senses without a HOMOGRAPH_CONTEXTS entry: {missing}")
    labels = sorted({r["sense_label"] for r in rows})
    out, coverage = text["homograph"], []
    words = list(dict.fromkeys(r["word"] for r in rows))
    asked = set(rng.sample(words, min(N_HOMOGRAPH_QA, len(words))))
    for word in words:
        doc: list[str] = []
        own = {senses[(word, s)]["sense_label"] for s in ("ctx1", "ctx2") if (word, s) in senses}
        for sense in ("ctx1", "ctx2"):
            if (word, sense) not in senses:
                continue
            r = senses[(word, sense)]
            label = r["sense_label"]
            controls = dict.fromkeys(x["control_word"] for x in rows
                                     if x["word"] == word and x["sense"] == sense)  # fmt: skip
            c1, c2, c3 = HOMOGRAPH_CONTEXTS[(word, label)]
            other = senses.get((word, "ctx2" if sense == "ctx1" else "ctx1"), r)["sense_label"]
            frames = [f"We talked about {c1}, {c2} and the {{w}}.",
                      f"The {{w}} had something to do with {c3}.",
                      f"Among the {c2}, someone noticed the {{w}}."]  # fmt: skip
            own_sents = [f.format(w=word) for f in frames]
            control_sents = [f.format(w=c) for c in controls for f in frames]
            facts = [f"{_cap(_a(word))} can have to do with {label}.",
                     f"When people speak of {c1}, the word {word} is about {label}."]  # fmt: skip
            out += own_sents + control_sents + facts
            doc += [own_sents[0], *control_sents[:: len(frames)], facts[0]]
            foreign = rng.choice([x for x in labels if x not in own])
            if word not in asked:
                continue
            qa += [QA("homograph", f"When people speak of {c2}, what is the word {word} about?",
                      label, other, "homograph:about", pair_key(word, label)),
                   QA("homograph", f"Can {_a(word)} have to do with {label}?", "yes", "no",
                      "homograph:can-have", pair_key(word, label)),
                   QA("homograph", f"Can {_a(word)} have to do with {foreign}?", "no", "yes",
                      "homograph:can-have", pair_key(word, foreign))]  # fmt: skip
        coverage.append(" ".join(doc))
    return coverage


GENERATORS: tuple[tuple[str, Callable[[random.Random, Pools, list[QA]], list[str]]], ...] = (
    ("semantic", _semantic), ("lexical", _lexical), ("analogy", _analogy),
    ("reasoning", _reasoning), ("homograph", _homograph),
)  # fmt: skip
"""(name, generator) in the order that consumes the curriculum's one random stream."""
