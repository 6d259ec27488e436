"""A deterministic, template-based curriculum in modern English for the model organisms.

It covers what the geometry chapters probe: the semantic categories of ``semantic.jsonl``,
the lexical variants of ``lexical.jsonl``, analogies, multi-step reasoning (comparisons,
transitive chains, syllogisms, small arithmetic with correct answers) and every homograph of
``ambiguous.jsonl`` in both senses, with its unambiguous control word in the same frames. The
prompt files (read through :mod:`lamina.prompts`) are the single source of the categories,
lexical bases and homographs; the fact tables below add relations and orderings.

Question -> answer pairs are raw strings; :func:`lamina.organisms.corpus.format_prompt` renders
them as ``"Question: {question}\\nAnswer:"`` and the answer follows after one space.
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lamina.prompts import load_prompts, prompts_dir

__all__ = ["EVAL_FRACTION", "MIXTURE", "Curriculum", "generate_curriculum", "homograph_rows"]

EVAL_FRACTION = 0.2
"""Fraction of each component's questions held out for ``sft_eval`` / ``dpo_eval``."""

MIXTURE: dict[str, float] = {
    "semantic": 0.18,
    "lexical": 0.08,
    "analogy": 0.14,
    "comparison": 0.10,
    "transitive": 0.10,
    "syllogism": 0.08,
    "arithmetic": 0.12,
    "homograph": 0.20,
}
"""Share of the sampled documents per component (after the coverage documents)."""

CATEGORY_NOUNS = {"animals": "animal", "vehicles": "vehicle", "emotions": "emotion",
                  "foods": "food", "tools": "tool", "instruments": "musical instrument"}  # fmt: skip
CATEGORY_SUPER = {"animals": "living things", "vehicles": "machines", "foods": "things people eat",
                  "tools": "objects", "instruments": "objects"}  # fmt: skip
MASS_NOUNS = frozenset("happiness anger fear sadness surprise disgust pride shame jealousy "
                       "loneliness bread rice cheese soup pasta yogurt".split())  # fmt: skip
IRREGULAR_PLURALS = {"sheep": "sheep"}
ANIMALS_BY_SIZE = ("ant", "frog", "rabbit", "fox", "sheep", "lion", "horse", "giraffe",
                   "elephant", "whale")  # fmt: skip
CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Italy": "Rome", "Spain": "Madrid",
            "Germany": "Berlin", "Portugal": "Lisbon", "Egypt": "Cairo", "Kenya": "Nairobi",
            "Canada": "Ottawa", "Peru": "Lima", "Norway": "Oslo", "Ireland": "Dublin",
            "Greece": "Athens", "Poland": "Warsaw", "Russia": "Moscow", "Sweden": "Stockholm",
            "Austria": "Vienna", "Thailand": "Bangkok", "Cuba": "Havana", "Finland": "Helsinki"}  # fmt: skip
OPPOSITES = {"hot": "cold", "big": "small", "tall": "short", "up": "down", "early": "late",
             "fast": "slow", "loud": "quiet", "wet": "dry", "full": "empty", "open": "closed",
             "rich": "poor", "young": "old", "strong": "weak", "happy": "sad", "hard": "soft",
             "day": "night", "clean": "dirty", "thick": "thin"}  # fmt: skip
YOUNG = {"dog": "puppy", "cat": "kitten", "cow": "calf", "sheep": "lamb", "duck": "duckling",
         "frog": "tadpole", "horse": "foal", "bear": "cub", "goat": "kid", "pig": "piglet",
         "deer": "fawn", "hen": "chick", "goose": "gosling"}  # fmt: skip
WORKER_TOOLS = {"painter": "brush", "writer": "pen", "chef": "knife", "carpenter": "hammer",
                "farmer": "tractor", "pilot": "airplane", "doctor": "stethoscope",
                "photographer": "camera", "gardener": "rake", "barber": "scissors",
                "baker": "oven", "tailor": "needle", "plumber": "wrench"}  # fmt: skip
PART_WHOLE = {"finger": "hand", "toe": "foot", "page": "book", "brick": "wall",
              "petal": "flower", "branch": "tree", "wheel": "car", "sail": "boat",
              "letter": "word", "word": "sentence", "day": "week", "month": "year"}  # fmt: skip
NAMES = ("Maya", "Leo", "Zoe", "Omar", "Priya", "Sam", "Nina", "Theo", "Ava", "Kai", "Lena",
         "Ravi", "Ella", "Noah", "Mia", "Jamal")  # fmt: skip
TRANSITIVE = (("taller", "tallest", "shortest"), ("older", "oldest", "youngest"),
              ("faster", "fastest", "slowest"), ("heavier", "heaviest", "lightest"))  # fmt: skip
OBJECTS = ("stickers", "apples", "marbles", "books", "pens", "shells", "coins", "cards")
N_TRANSITIVE = 160
N_WORD_PROBLEMS = 120
N_NUMBER_PAIRS = 80

QA = tuple[str, str, str, str]  # (component, question, answer, rejected answer)


@dataclass(repr=False)
class Curriculum:
    """Training text and instruction data generated from templates.

    text: documents of one to a few short sentences; components[i] names the component of text[i].
    sft / sft_eval: (question, answer); dpo / dpo_eval: (question, chosen, rejected). The eval
    splits share no question with the training pairs. Questions and answers are raw strings
    (see the module docstring for the rendering).
    """

    text: list[str]
    sft: list[tuple[str, str]]
    dpo: list[tuple[str, str, str]]
    sft_eval: list[tuple[str, str]]
    dpo_eval: list[tuple[str, str, str]]
    components: list[str] = field(default_factory=list)
    qa_components: dict[str, str] = field(default_factory=dict, repr=False)
    seed: int = 0
    n_coverage_docs: int = 0

    def __repr__(self) -> str:
        return (
            f"Curriculum(seed={self.seed}, docs={len(self.text)}, sft={len(self.sft)}, "
            f"sft_eval={len(self.sft_eval)}, dpo={len(self.dpo)}, dpo_eval={len(self.dpo_eval)})"
        )

    def stats(self) -> dict[str, Any]:
        """Counts per component: documents, words, and pairs in each split."""

        def per(items: list[Any]) -> dict[str, int]:
            return dict(sorted(Counter(self.qa_components[x[0]] for x in items).items()))

        return {
            "seed": self.seed,
            "n_docs": len(self.text),
            "n_coverage_docs": self.n_coverage_docs,
            "n_words": sum(len(t.split()) for t in self.text),
            "docs": dict(sorted(Counter(self.components).items())),
            "sft": per(self.sft),
            "sft_eval": per(self.sft_eval),
            "dpo": per(self.dpo),
            "dpo_eval": per(self.dpo_eval),
            "n_sft": len(self.sft),
            "n_sft_eval": len(self.sft_eval),
            "n_dpo": len(self.dpo),
            "n_dpo_eval": len(self.dpo_eval),
        }


@functools.lru_cache(maxsize=16)
def _rows(family: str, where: str) -> tuple[dict[str, Any], ...]:
    return tuple(load_prompts(family).to_dict("records"))


def _family(family: str) -> tuple[dict[str, Any], ...]:
    return _rows(family, str(prompts_dir()))


def homograph_rows() -> tuple[dict[str, Any], ...]:
    """The rows of ``ambiguous.jsonl`` (via :func:`lamina.prompts.load_prompts`)."""
    return _family("ambiguous")


def __getattr__(name: str) -> Any:
    if name == "HOMOGRAPHS":  # read lazily from ambiguous.jsonl, the single source of truth
        return tuple(dict.fromkeys(r["word"] for r in homograph_rows()))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


Pools = dict[str, list[str]]


def _semantic(rng: random.Random, text: Pools, qa: list[QA]) -> list[str]:
    rows = _family("semantic")
    members: dict[str, list[str]] = {}
    for r in rows:
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
            qa += [("semantic", f"Is {_np(item)} {_a(noun)}?", "yes", "no"),
                   ("semantic", f"Is {_np(item)} {_a(other)}?", "no", "yes"),
                   ("semantic", f"What kind of thing is {_np(item)}?", _a(noun), _a(other))]  # fmt: skip
    return [
        " ".join([f"{r['prompt']}." for r in rows if r["category"] == c]
                 + [f"{_cap(_np(i))} is {_a(CATEGORY_NOUNS[c])}." for i in items])
        for c, items in members.items()
    ]  # fmt: skip


def _lexical(rng: random.Random, text: Pools, qa: list[QA]) -> list[str]:
    bases: dict[str, dict[str, str]] = {}
    for r in _family("lexical"):
        bases.setdefault(r["base"], {})[r["variant"]] = r["prompt"]
    out, coverage = text["lexical"], []
    for base, v in bases.items():
        phrases = [v[k] for k in ("indefinite", "definite", "adjective", "possessive") if k in v]
        for p in phrases:
            out += [f"I saw {p} today.", f"{_cap(p)} was next to the window.", f"Look at {p}."]
        plural = v.get("plural", _plural(base))
        out += [f"{_cap(plural)} were next to the window.", f"The word {base} names one thing."]
        coverage.append(" ".join([f"{_cap(p)}." for p in v.values()]))
        qa += [("lexical", f"What is the plural of {base}?", plural, base),
               ("lexical", f"What is the singular of {plural}?", base, plural),
               ("lexical", f"Which word is plural, {base} or {plural}?", plural, base)]  # fmt: skip
    return coverage


def _relation(rng: random.Random, text: list[str], qa: list[QA], table: dict[str, str],
              fact: Callable[[str, str], str], ask: Callable[[str], str],
              answer: Callable[[str], str], form: Callable[[str], str]) -> None:  # fmt: skip
    keys = list(table)
    for k in keys:
        other = rng.choice([x for x in keys if table[x] != table[k]])
        text.append(fact(k, table[k]))
        qa.append(("analogy", ask(k), answer(table[k]), answer(table[other])))
        src = rng.choice([x for x in keys if x != k])
        text.append(
            f"{_cap(form(src))} is to {form(table[src])} as {form(k)} is to {form(table[k])}."
        )
        qa.append(("analogy", f"{_cap(form(src))} is to {form(table[src])} as {form(k)} is to what?",
                   form(table[k]), form(table[other])))  # fmt: skip


def _analogy(rng: random.Random, text: Pools, qa: list[QA]) -> list[str]:
    out = text["analogy"]
    same: Callable[[str], str] = lambda s: s  # noqa: E731
    _relation(rng, out, qa, CAPITALS, lambda k, v: f"{v} is the capital of {k}.",
              lambda k: f"What is the capital of {k}?", same, same)  # fmt: skip
    _relation(rng, out, qa, OPPOSITES, lambda k, v: f"The opposite of {k} is {v}.",
              lambda k: f"What is the opposite of {k}?", same, same)  # fmt: skip
    _relation(rng, out, qa, YOUNG, lambda k, v: f"A young {k} is called {_a(v)}.",
              lambda k: f"What is a young {k} called?", _a, same)  # fmt: skip
    _relation(rng, out, qa, WORKER_TOOLS, lambda k, v: f"{_cap(_a(k))} works with {_a(v)}.",
              lambda k: f"What does {_a(k)} work with?", _a, same)  # fmt: skip
    _relation(rng, out, qa, PART_WHOLE, lambda k, v: f"{_cap(_a(k))} is part of {_a(v)}.",
              lambda k: f"What is {_a(k)} part of?", _a, same)  # fmt: skip
    rows = _family("analogies")
    for r in rows:
        wrong = rng.choice([x["answer"] for x in rows if x["subtype"] == r["subtype"]
                            and x["answer"] != r["answer"]])  # fmt: skip
        qa.append(("analogy", f"{r['prompt']} what?", r["answer"], wrong))
        out.append(f"{r['prompt']} {r['answer']}.")
    subtypes = dict.fromkeys(r["subtype"] for r in rows)
    return [" ".join(f"{r['prompt']} {r['answer']}." for r in rows if r["subtype"] == s)
            for s in subtypes]  # fmt: skip


def _reasoning(rng: random.Random, text: Pools, qa: list[QA]) -> list[str]:
    # comparisons: animal sizes and numbers
    for i, small in enumerate(ANIMALS_BY_SIZE):
        for big in ANIMALS_BY_SIZE[i + 1 :]:
            b, s = _a(big), _a(small)
            x, y = (b, s) if rng.random() < 0.5 else (s, b)
            text["comparison"] += [
                f"{_cap(b)} is bigger than {s}.",
                f"{_cap(s)} is smaller than {b}.",
            ]
            qa += [("comparison", f"Is {b} bigger than {s}?", "yes", "no"),
                   ("comparison", f"Is {s} bigger than {b}?", "no", "yes"),
                   ("comparison", f"Which is bigger, {x} or {y}?", b, s),
                   ("comparison", f"Which is smaller, {x} or {y}?", s, b)]  # fmt: skip
    for _ in range(N_NUMBER_PAIRS):
        m, n = rng.sample(range(21), 2)
        text["comparison"].append(f"{max(m, n)} is greater than {min(m, n)}.")
        qa += [("comparison", f"Is {m} greater than {n}?", "yes" if m > n else "no", "no" if m > n else "yes"),
               ("comparison", f"Which is larger, {m} or {n}?", str(max(m, n)), str(min(m, n)))]  # fmt: skip
    # transitive chains: a > b > c
    for _ in range(N_TRANSITIVE):
        a, b, c = rng.sample(NAMES, 3)
        rel, top, bottom = rng.choice(TRANSITIVE)
        premise = f"{a} is {rel} than {b}, and {b} is {rel} than {c}."
        text["transitive"].append(f"{a} is {rel} than {b}. {b} is {rel} than {c}. "
                                  f"So {a} is {rel} than {c}, and {a} is the {top}.")  # fmt: skip
        qa.append(rng.choice([("transitive", f"{premise} Who is the {top}?", a, c),
                              ("transitive", f"{premise} Who is the {bottom}?", c, a),
                              ("transitive", f"{premise} Is {c} {rel} than {a}?", "no", "yes"),
                              ("transitive", f"{premise} Is {a} {rel} than {c}?", "yes", "no")]))  # fmt: skip
    # syllogisms over the semantic categories (count nouns only)
    members: dict[str, list[str]] = {}
    for r in _family("semantic"):
        if r["category"] in CATEGORY_SUPER and r["item"] not in MASS_NOUNS:
            members.setdefault(r["category"], []).append(r["item"])
    for cat, items in members.items():
        cats, sup = _plural(CATEGORY_NOUNS[cat]), CATEGORY_SUPER[cat]
        for item in items:
            its = _plural(item)
            other = _plural(CATEGORY_NOUNS[rng.choice([c for c in members if c != cat])])
            text["syllogism"] += [f"All {its} are {cats}. All {cats} are {sup}. So all {its} are {sup}.",
                                  f"No {cats} are {other}. All {its} are {cats}. So no {its} are {other}."]  # fmt: skip
            qa += [("syllogism", f"All {its} are {cats}, and all {cats} are {sup}. Are all {its} {sup}?", "yes", "no"),
                   ("syllogism", f"All {its} are {cats}. Are all {cats} {its}?", "no", "yes"),
                   ("syllogism", f"No {cats} are {other}, and all {its} are {cats}. Are any {its} {other}?", "no", "yes")]  # fmt: skip
    # arithmetic, with the answers computed
    ops = [(a, "plus", b, a + b) for a in range(13) for b in range(13)]
    ops += [(a, "minus", b, a - b) for a in range(13) for b in range(a + 1)]
    ops += [(a, "times", b, a * b) for a in range(2, 6) for b in range(1, 11)]
    for a, op, b, r in ops:
        text["arithmetic"].append(f"{a} {op} {b} is {r}.")
        qa.append(("arithmetic", f"What is {a} {op} {b}?", str(r), _wrong_number(rng, r)))
    for _ in range(N_WORD_PROBLEMS):
        name, obj = rng.choice(NAMES), rng.choice(OBJECTS)
        a, b = rng.randint(2, 12), rng.randint(1, 9)
        gives = rng.random() < 0.5 and b <= a - 2
        verb, r = ("gives away", a - b) if gives else ("gets", a + b)
        more = "" if gives else " more"
        text["arithmetic"].append(
            f"{name} has {a} {obj} and {verb} {b}{more}. Now {name} has {r} {obj}."
        )
        qa.append(("arithmetic", f"{name} has {a} {obj} and {verb} {b}{more}. How many {obj} "
                   f"does {name} have now?", str(r), _wrong_number(rng, r)))  # fmt: skip
    rows = _family("reasoning")
    for r in rows:
        text[r["subtype"] if r["subtype"] in text else "comparison"].append(
            f"{r['prompt']} {r['answer']}."
        )
    subtypes = dict.fromkeys(r["subtype"] for r in rows)
    return [" ".join(f"{r['prompt']} {r['answer']}." for r in rows if r["subtype"] == s)
            for s in subtypes]  # fmt: skip


def _homograph(rng: random.Random, text: Pools, qa: list[QA]) -> list[str]:
    rows = homograph_rows()
    out, coverage = text["homograph"], []
    glosses = {(r["word"], r["sense"]): r["gloss"] for r in rows}
    for word in dict.fromkeys(r["word"] for r in rows):
        doc: list[str] = []
        for r in (x for x in rows if x["word"] == word):
            other = glosses[(word, "ctx2" if r["sense"] == "ctx1" else "ctx1")]
            foreign = [g for (w, _), g in glosses.items() if w != word]
            sents = [f"{r['prompt']}.", f"{r['control_prompt']}.",
                     f"{r['prompt']}. Here the word {word} means {r['gloss']}.",
                     f"One meaning of {word} is {r['gloss']}.", f"{_cap(_a(word))} can be {r['gloss']}."]  # fmt: skip
            out += sents
            doc += [s for s in sents[:3] if s not in doc]
            qa += [("homograph", f'In the sentence "{r["prompt"]}", what does the word {word} mean?',
                    r["gloss"], other),
                   ("homograph", f"Can {_a(word)} be {r['gloss']}?", "yes", "no"),
                   ("homograph", f"Can {_a(word)} be {rng.choice(foreign)}?", "no", "yes")]  # fmt: skip
        coverage.append(" ".join(doc))
    return coverage


def _split_qa(rng: random.Random, qa: list[QA]) -> tuple[list[QA], list[QA]]:
    """Deduplicate by question, then hold out EVAL_FRACTION of each component."""
    first: dict[str, QA] = {}
    for q in qa:
        first.setdefault(q[1], q)
    unique = list(first.values())
    train: list[QA] = []
    held: list[QA] = []
    for comp in MIXTURE:
        items = [q for q in unique if q[0] == comp]
        rng.shuffle(items)
        n_eval = max(1, round(EVAL_FRACTION * len(items))) if len(items) >= 2 else 0
        held += items[:n_eval]
        train += items[n_eval:]
    rng.shuffle(train)
    rng.shuffle(held)
    return train, held


def generate_curriculum(seed: int = 0, n_docs: int = 4000) -> Curriculum:
    """Generate the curriculum deterministically from ``seed``.

    Returns max(n_docs, n_coverage) documents: first the coverage documents (every prompt of
    ``semantic``, ``lexical``, ``analogies`` and ``reasoning``, and each homograph with both
    senses and its controls), then documents sampled by :data:`MIXTURE`, shuffled together.
    The question pairs do not depend on ``n_docs``.
    """
    rng = random.Random(seed)
    text: Pools = {comp: [] for comp in MIXTURE}
    qa: list[QA] = []
    coverage: list[tuple[str, str]] = []
    for comp, make in (("semantic", _semantic), ("lexical", _lexical), ("analogy", _analogy),
                       ("reasoning", _reasoning), ("homograph", _homograph)):  # fmt: skip
        coverage += [(comp, doc) for doc in make(rng, text, qa)]
    n_fill = max(0, n_docs - len(coverage))
    quota = {c: int(w * n_fill) for c, w in MIXTURE.items()}
    for comp in sorted(MIXTURE, key=lambda c: -((MIXTURE[c] * n_fill) % 1))[
        : n_fill - sum(quota.values())
    ]:
        quota[comp] += 1
    docs = list(coverage)
    for comp, n in quota.items():
        pool = text[comp]
        docs += [(comp, " ".join(rng.sample(pool, rng.randint(1, 3)))) for _ in range(n)]
    rng.shuffle(docs)
    train, held = _split_qa(rng, qa)
    return Curriculum(
        text=[d for _, d in docs],
        components=[c for c, _ in docs],
        sft=[(q, a) for _, q, a, _ in train],
        dpo=[(q, a, r) for _, q, a, r in train],
        sft_eval=[(q, a) for _, q, a, _ in held],
        dpo_eval=[(q, a, r) for _, q, a, r in held],
        qa_components={q: c for c, q, _, _ in train + held},
        seed=seed,
        n_coverage_docs=len(coverage),
    )
