"""A deterministic, template-based curriculum in modern English for the model organisms.

It covers what the geometry chapters probe: the semantic categories of ``semantic.jsonl``,
the lexical bases of ``lexical.jsonl``, analogies, multi-step reasoning (comparisons,
transitive chains, syllogisms, small arithmetic with correct answers) and every homograph of
``ambiguous.jsonl`` in both senses, with its unambiguous control word in the same frames.

**No evaluation prompt is trained on.** The prompt files supply only vocabulary (category
members, lexical bases and plurals, homograph words, their sense labels and control words);
every sentence comes from lamina's own templates and fact tables
(:mod:`lamina.sources.organisms.curriculum_facts`). No prompt, control prompt or gloss of
``data/prompts/`` is copied; analogy templates skip the word pairs the analogy prompts use
(no training analogy contains either half of an analogy prompt, "A is to B" or the completed
"C is to D", or comes within one word of its 8-grams), and the reasoning templates use names
that no prompt file contains. :func:`lamina.sources.organisms.overlap.corpus_overlap` checks the result
(no exact or one-word-substituted 8-gram, whole 5-7-word prompt or analogy half).

Question -> answer pairs are raw strings; :func:`lamina.sources.organisms.qa.format_prompt` renders
them as ``"Question: {question}\\nAnswer:"`` and the answer follows after one space. The unique
questions of each component are split three ways: :data:`EVAL_FRACTION` held out
(``sft_eval`` / ``dpo_eval``), :data:`PRETRAIN_QA_FRACTION` rendered as QA documents in the
pretraining text (so the format is known before SFT), and the rest for SFT and DPO.

SFT and DPO data follow instructions (:mod:`lamina.sources.organisms.instructions`): the SFT/DPO and
held-out questions are the *contents* of (instruction, content) items whose required response
depends on the instruction (the bare answer or a sentence, :data:`ANSWER_SENTENCE`) and on the
content (a refusal for questions about people). DPO's rejected response follows the other
instruction, gives a wrong answer in the same style, or refuses / fails to refuse. Both answer
styles occur in the pretraining QA documents (without instructions), so both are known before SFT.
"""

from __future__ import annotations

import functools
import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
from lamina.sources.organisms.instructions import (
    ANSWER_SENTENCE,
    AlignmentData,
    Content,
    alignment_data,
    render,
)
from lamina.sources.organisms.qa import QA_TEMPLATE, format_answer, format_prompt
from lamina.sources.prompts import load_prompts, prompts_dir

__all__ = ["ANSWER_SENTENCE", "EVAL_FRACTION", "MIXTURE", "PRETRAIN_QA_FRACTION", "QA_TEMPLATE",
           "Curriculum", "format_answer", "format_prompt", "generate_curriculum", "homograph_rows",
           "sentence_answer"]  # fmt: skip

EVAL_FRACTION = 0.2
"""Fraction of each component's questions held out for ``sft_eval`` / ``dpo_eval``."""
PRETRAIN_QA_FRACTION = 0.4
"""Fraction of each component's questions shown as QA documents in pretraining (not SFT/eval)."""

MIXTURE: dict[str, float] = {
    "semantic": 0.16,
    "lexical": 0.07,
    "analogy": 0.13,
    "comparison": 0.09,
    "transitive": 0.09,
    "syllogism": 0.07,
    "arithmetic": 0.11,
    "homograph": 0.16,
    "qa": 0.12,
}
"""Share of the sampled documents per component (after the coverage documents); ``qa`` documents
are pretraining questions in the QA format, in either answer style."""

N_TRANSITIVE = 160
N_WORD_PROBLEMS = 120
N_NUMBER_PAIRS = 80

QA = tuple[str, str, str, str]  # (component, question, answer, wrong answer)


def sentence_answer(answer: str) -> str:
    """The answer as a sentence, the DPO-preferred style: ``"The answer is {answer}."``."""
    return ANSWER_SENTENCE.format(answer=answer)


@dataclass(repr=False)
class Curriculum:
    """Training text and instruction data generated from templates.

    text: documents of one to a few short sentences; components[i] names the component of text[i].
    pretrain_qa: (question, answer) pairs rendered into ``text`` as QA documents.
    sft / sft_eval: (prompt, response); dpo / dpo_eval: (prompt, chosen, rejected), where a prompt
    is an instruction followed by a question (see :mod:`lamina.sources.organisms.instructions`;
    ``alignment`` holds the items with their instruction, content, kind and styles). The
    pretraining questions are disjoint from the SFT / held-out contents; no (instruction,
    question) prompt is in both training and held-out data. ``wrong`` maps every question and
    prompt to a plausible wrong answer (for a prompt: in its required style).
    """

    text: list[str]
    sft: list[tuple[str, str]]
    dpo: list[tuple[str, str, str]]
    sft_eval: list[tuple[str, str]]
    dpo_eval: list[tuple[str, str, str]]
    pretrain_qa: list[tuple[str, str]] = field(default_factory=list)
    components: list[str] = field(default_factory=list)
    qa_components: dict[str, str] = field(default_factory=dict, repr=False)
    wrong: dict[str, str] = field(default_factory=dict, repr=False)
    seed: int = 0
    n_coverage_docs: int = 0
    alignment: AlignmentData | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return (
            f"Curriculum(seed={self.seed}, docs={len(self.text)}, pretrain_qa="
            f"{len(self.pretrain_qa)}, sft={len(self.sft)}, sft_eval={len(self.sft_eval)})"
        )

    def stats(self) -> dict[str, Any]:
        """Counts per component: documents, words, and pairs in each split."""

        def per(items: list[Any]) -> dict[str, int]:
            return dict(sorted(Counter(self.qa_components[x[0]] for x in items).items()))

        return {
            "seed": self.seed, "n_docs": len(self.text), "n_coverage_docs": self.n_coverage_docs,
            "n_words": sum(len(t.split()) for t in self.text),
            "docs": dict(sorted(Counter(self.components).items())),
            "pretrain_qa": per(self.pretrain_qa), "sft": per(self.sft),
            "sft_eval": per(self.sft_eval), "dpo": per(self.dpo), "dpo_eval": per(self.dpo_eval),
            "n_pretrain_qa": len(self.pretrain_qa), "n_sft": len(self.sft),
            "n_sft_eval": len(self.sft_eval), "n_dpo": len(self.dpo),
            "n_dpo_eval": len(self.dpo_eval),
        }  # fmt: skip


@functools.lru_cache(maxsize=16)
def _rows(family: str, where: str) -> tuple[dict[str, Any], ...]:
    return tuple(load_prompts(family).to_dict("records"))


def _family(family: str) -> tuple[dict[str, Any], ...]:
    return _rows(family, str(prompts_dir()))


def homograph_rows() -> tuple[dict[str, Any], ...]:
    """The rows of ``ambiguous.jsonl`` (via :func:`lamina.sources.prompts.load_prompts`)."""
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
            qa += [("semantic", f"Is {_np(item)} {_a(noun)}?", "yes", "no"),
                   ("semantic", f"Is {_np(item)} {_a(other)}?", "no", "yes"),
                   ("semantic", f"What kind of thing is {_np(item)}?", _a(noun), _a(other))]  # fmt: skip
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
        qa += [("lexical", f"What is the plural of {base}?", plural, base),
               ("lexical", f"What is the singular of {plural}?", base, plural),
               ("lexical", f"Which word is plural, {base} or {plural}?", plural, base)]  # fmt: skip
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


def _relation(rng: random.Random, text: list[str], qa: list[QA], table: dict[str, str],
              fact: Callable[[str, str], str], ask: Callable[[str], str],
              answer: Callable[[str], str], form: Callable[[str], str]) -> None:  # fmt: skip
    """Facts and questions of one relation, and analogies "src is to table[src] as k is to
    table[k]" whose words leak no analogy prompt (:func:`_analogy_allowed`); a key with no
    allowed source (its pair is a prompt's half) gets no analogy sentence or question."""
    keys, banned = list(table), _analogy_pairs_of_prompts()
    for k in keys:
        other = rng.choice([x for x in keys if table[x] != table[k]])
        text.append(fact(k, table[k]))
        qa.append(("analogy", ask(k), answer(table[k]), answer(table[other])))
        sources = [x for x in keys if x != k and frozenset((x.lower(), k.lower())) not in banned
                   and _analogy_allowed(form(x), form(table[x]), form(k), form(table[k]))]  # fmt: skip
        if not sources:
            continue
        src = rng.choice(sources)
        text.append(
            f"{_cap(form(src))} is to {form(table[src])} as {form(k)} is to {form(table[k])}."
        )
        qa.append(("analogy", f"If {form(src)} goes with {form(table[src])}, what goes with "
                   f"{form(k)}?", form(table[k]), form(table[other])))  # fmt: skip


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
            qa += [("comparison", f"Is {b} bigger than {s}?", "yes", "no"),
                   ("comparison", f"Is {s} bigger than {b}?", "no", "yes"),
                   ("comparison", f"Which is bigger, {x} or {y}?", b, s),
                   ("comparison", f"Which is smaller, {x} or {y}?", s, b)]  # fmt: skip
    for _ in range(N_NUMBER_PAIRS):
        m, n = rng.sample(range(21), 2)
        text["comparison"].append(f"{max(m, n)} is greater than {min(m, n)}.")
        qa += [("comparison", f"Is {m} greater than {n}?", "yes" if m > n else "no", "no" if m > n else "yes"),
               ("comparison", f"Which is larger, {m} or {n}?", str(max(m, n)), str(min(m, n)))]  # fmt: skip


def _transitive(rng: random.Random, text: Pools, qa: list[QA]) -> None:
    """Transitive chains: a > b > c."""
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


def _syllogisms(rng: random.Random, text: Pools, qa: list[QA]) -> None:
    """Syllogisms over the semantic categories (count nouns only)."""
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


def _arithmetic(rng: random.Random, text: Pools, qa: list[QA]) -> None:
    """Arithmetic, with the answers computed."""
    ops = [(a, "plus", b, a + b) for a in range(13) for b in range(13)]
    ops += [(a, "minus", b, a - b) for a in range(13) for b in range(a + 1)]
    ops += [(a, "times", b, a * b) for a in range(2, 6) for b in range(1, 11)]
    for lhs, op, rhs, res in ops:
        text["arithmetic"].append(f"{lhs} {op} {rhs} is {res}.")
        qa.append(("arithmetic", f"What is {lhs} {op} {rhs}?", str(res), _wrong_number(rng, res)))
    for _ in range(N_WORD_PROBLEMS):
        name, obj = rng.choice(NAMES), rng.choice(OBJECTS)
        lhs, rhs = rng.randint(2, 12), rng.randint(1, 9)
        gives = rng.random() < 0.5 and rhs <= lhs - 2
        verb, res = ("gives away", lhs - rhs) if gives else ("gets", lhs + rhs)
        more = "" if gives else " more"
        text["arithmetic"].append(
            f"{name} has {lhs} {obj} and {verb} {rhs}{more}. Now {name} has {res} {obj}."
        )
        qa.append(("arithmetic", f"{name} has {lhs} {obj} and {verb} {rhs}{more}. How many {obj} "
                   f"does {name} have now?", str(res), _wrong_number(rng, res)))  # fmt: skip


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
    for word in dict.fromkeys(r["word"] for r in rows):
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
            qa += [("homograph", f"When people speak of {c2}, what is the word {word} about?",
                    label, other),
                   ("homograph", f"Can {_a(word)} have to do with {label}?", "yes", "no"),
                   ("homograph", f"Can {_a(word)} have to do with {foreign}?", "no", "yes")]  # fmt: skip
        coverage.append(" ".join(doc))
    return coverage


def _split_qa(rng: random.Random, qa: list[QA]) -> tuple[list[QA], list[QA], list[QA]]:
    """Deduplicate by question, then split each component: (pretrain QA, SFT/DPO, held out)."""
    first: dict[str, QA] = {}
    for q in qa:
        first.setdefault(q[1], q)
    unique = list(first.values())
    pre: list[QA] = []
    train: list[QA] = []
    held: list[QA] = []
    for comp in MIXTURE:
        items = [q for q in unique if q[0] == comp]
        rng.shuffle(items)
        n_eval = max(1, round(EVAL_FRACTION * len(items))) if len(items) >= 3 else 0
        n_pre = round(PRETRAIN_QA_FRACTION * len(items)) if len(items) >= 3 else 0
        held += items[:n_eval]
        pre += items[n_eval : n_eval + n_pre]
        train += items[n_eval + n_pre :]
    for part in (pre, train, held):
        rng.shuffle(part)
    return pre, train, held


def _qa_doc(question: str, answer: str) -> str:
    return format_prompt(question) + format_answer(answer)


def generate_curriculum(seed: int = 0, n_docs: int = 4000) -> Curriculum:
    """Generate the curriculum deterministically from ``seed``.

    Returns max(n_docs, n_coverage) documents: first the coverage documents (each semantic
    category with its members, each lexical base with its plural, each homograph in both senses
    with its control word), then documents sampled by :data:`MIXTURE`, shuffled together.
    The question pairs do not depend on ``n_docs``.
    """
    rng = random.Random(seed)
    text: Pools = {comp: [] for comp in MIXTURE}
    qa: list[QA] = []
    coverage: list[tuple[str, str]] = []
    for comp, make in (("semantic", _semantic), ("lexical", _lexical), ("analogy", _analogy),
                       ("reasoning", _reasoning), ("homograph", _homograph)):  # fmt: skip
        coverage += [(comp, doc) for doc in make(rng, text, qa)]
    pre, train, held = _split_qa(rng, qa)
    for _, q, a, _ in pre:  # both answer styles, so the DPO preference is one the model knows
        text["qa"] += [_qa_doc(q, a), _qa_doc(q, sentence_answer(a))]
    n_fill = max(0, n_docs - len(coverage))
    quota = {c: int(w * n_fill) for c, w in MIXTURE.items()}
    for comp in sorted(MIXTURE, key=lambda c: -((MIXTURE[c] * n_fill) % 1))[
        : n_fill - sum(quota.values())
    ]:
        quota[comp] += 1
    docs = list(coverage)
    for comp, n in quota.items():
        pool = text[comp]
        k = (lambda: 1) if comp == "qa" else (lambda: rng.randint(1, 3))
        docs += [(comp, " ".join(rng.sample(pool, k()))) for _ in range(n)]
    rng.shuffle(docs)
    data = alignment_data([Content(*x) for x in train + held], seed)
    items = data.train + data.heldout
    return Curriculum(
        text=[d for _, d in docs],
        components=[c for c, _ in docs],
        pretrain_qa=[(q, a) for _, q, a, _ in pre],
        sft=[(x.prompt, x.target) for x in data.train],
        dpo=[t.as_tuple() for t in data.dpo_train],
        sft_eval=[(x.prompt, x.target) for x in data.heldout],
        dpo_eval=[t.as_tuple() for t in data.dpo_heldout],
        qa_components={q: c for c, q, _, _ in pre + train + held}
        | {x.prompt: x.content.component for x in items},
        wrong={q: w for _, q, _, w in pre + train + held}
        | {x.prompt: _styled_wrong(x.content.wrong, x.style) for x in items},
        seed=seed,
        n_coverage_docs=len(coverage),
        alignment=data,
    )


def _styled_wrong(wrong: str, style: str) -> str:
    """A wrong response in ``style`` (the refusal's wrong response: a wrong answer, bare)."""
    return render(wrong, "short" if style == "refusal" else style)
