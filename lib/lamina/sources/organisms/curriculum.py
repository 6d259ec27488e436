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
them as ``"Question: {question}\\nAnswer:"`` and the answer follows after one space. The templates
live in :mod:`lamina.sources.organisms.curriculum_templates`; each question carries its template
and its entity pair. The unique questions are split by whole entity pairs
(:func:`lamina.sources.organisms.instructions.split_by_key`): :data:`PRETRAIN_QA_FRACTION` of
each component rendered as QA documents in the pretraining text (so the format is known before
SFT), the rest the alignment contents (the open templates, with at most
:data:`RESTRICTED_SHARE` questions about people: :func:`alignment_contents`), of which whole
entity pairs are
held out again
(``sft_eval`` / ``dpo_eval``; :data:`lamina.sources.organisms.instructions.HELDOUT_CONTENT_FRACTION`).
So no held-out question's entity pair appears in any trained question, under any template.

SFT and DPO data follow instructions (:mod:`lamina.sources.organisms.instructions`): the SFT/DPO and
held-out questions are the *contents* of (instruction, content) items whose required response
depends on the instruction (the bare answer or a sentence, :data:`ANSWER_SENTENCE`) and on the
content (a refusal for questions about people). SFT trains the answers only; the refusal is
taught by DPO alone. DPO's rejected response follows the other
instruction, gives a wrong answer in the same style, or refuses / fails to refuse. Both answer
styles occur in the pretraining QA documents (without instructions), so both are known before SFT.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lamina.sources.organisms.curriculum_templates import (
    CHOICE_TEMPLATES,
    GENERATORS,
    QA,
    Pools,
    homograph_rows,
)
from lamina.sources.organisms.instructions import (
    ANSWER_SENTENCE,
    AlignmentData,
    Content,
    alignment_data,
    is_restricted,
    render,
    split_by_key,
)
from lamina.sources.organisms.qa import QA_TEMPLATE, format_answer, format_prompt

__all__ = ["ANSWER_SENTENCE", "MIXTURE", "PRETRAIN_QA_FRACTION", "QA_TEMPLATE",
           "ARITHMETIC_SHARE", "RESTRICTED_SHARE", "Curriculum", "alignment_contents", "alignment_fingerprint", "curriculum_fingerprint", "format_answer",
           "format_prompt", "generate_curriculum", "homograph_rows", "sentence_answer"]  # fmt: skip

PRETRAIN_QA_FRACTION = 0.4
"""Fraction of each component's questions (whole entity pairs) shown as QA documents in
pretraining; the rest are the alignment contents (trained or held out)."""

MIXTURE: dict[str, float] = {
    "semantic": 0.13,
    "lexical": 0.05,
    "analogy": 0.11,
    "comparison": 0.07,
    "transitive": 0.07,
    "syllogism": 0.05,
    "arithmetic": 0.08,
    "homograph": 0.14,
    "qa": 0.30,
}
"""Share of the sampled documents per component (after the coverage documents); ``qa`` documents
are pretraining questions in the QA format, in either answer style. At ``qa`` 0.12 (f213eae)
each pretraining question was seen about 18 times in 600 steps, and organism-gpt2 answered only
0.12 of them: the QA share is now 0.30, the fact components scaled down in proportion (each
relation fact still occurs about 40 times in the 20,000 documents: "The opposite of hot is
cold." 43)."""

RESTRICTED_SHARE = 0.30
"""Largest share of questions about people (answered by the refusal) among the alignment
contents. The refusal is DPO's to teach (:mod:`lamina.sources.organisms.instructions`), so this
share sets how many ``refuse`` triples the DPO gate holds: at 0.30, 70 of the 436 held-out
triples at seed 0, in 23 entity pairs (uncapped the share is 0.355). The SFT gate judges the
unrestricted items only, so a policy that refuses on a name gains nothing there. (0.10 while SFT
trained the refusal and its gate counted it: such a policy then scored the share outright; 0.20
at 4992629.)"""
ARITHMETIC_SHARE = 0.15
"""Share of arithmetic questions kept among the open templates' questions, before the people
cap (:func:`alignment_contents`); that cap drops non-arithmetic questions too, so among the
alignment contents arithmetic ends at 0.14-0.17 (seeds 0-7). Uncapped they were 0.57
of the held-out items (104 of 184), and organism-gpt2 at f213eae recalled only 0.12 of the
arithmetic facts of its own pretraining text (:mod:`lamina.sources.organisms.recall`; 0.05-0.13
on the curriculum alone after 1-4 passes, benchmarks/HISTORY.md): the gate then measured mostly
a skill that no budget under an hour teaches, and not the relations that the base has learnt."""
_ALIGN_SEED_OFFSET = 104_729  # the cap's own random stream: the pretraining text does not move



def sentence_answer(answer: str) -> str:
    """The answer as a sentence, the DPO-preferred style: ``"The answer is {answer}."``."""
    return ANSWER_SENTENCE.format(answer=answer)


@dataclass(repr=False)
class Curriculum:
    """Training text and instruction data generated from templates.

    text: documents of one to a few short sentences; components[i] names the component of text[i].
    pretrain_qa: (question, answer) pairs rendered into ``text`` as QA documents.
    sft / sft_eval: (prompt, response) of the unrestricted items (SFT never sees a refusal);
    dpo / dpo_eval: (prompt, chosen, rejected) of every item, where a prompt
    is an instruction followed by a question (see :mod:`lamina.sources.organisms.instructions`;
    ``alignment`` holds the items with their instruction, content, kind and styles). The
    pretraining questions' entity pairs are disjoint from those of the SFT / held-out contents,
    and the held-out contents' entity pairs from those of every trained question. ``wrong`` maps every question and
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


def __getattr__(name: str) -> Any:
    if name == "HOMOGRAPHS":  # read lazily from ambiguous.jsonl, the single source of truth
        return tuple(dict.fromkeys(r["word"] for r in homograph_rows()))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _split_qa(rng: random.Random, qa: list[QA]) -> tuple[list[QA], list[QA]]:
    """Deduplicate by question (the first item of a question wins), then split by whole entity
    pairs: (pretraining QA, alignment contents), :data:`PRETRAIN_QA_FRACTION` of each component
    in the first, each part shuffled."""
    first: dict[str, QA] = {}
    for q in qa:
        first.setdefault(q.question, q)
    pre, align = split_by_key(rng, list(first.values()), PRETRAIN_QA_FRACTION,
                              lambda q: q.key or q.question, lambda q: q.component)  # fmt: skip
    rng.shuffle(pre)
    rng.shuffle(align)
    return pre, align


def _capped(rng: random.Random, items: list[QA], chosen: Callable[[QA], bool],
            share: float) -> list[QA]:
    """``items`` (in their order) less a random subset of those ``chosen`` picks, so that these
    are at most ``share`` of the result."""
    picked = [i for i, q in enumerate(items) if chosen(q)]
    room = int(share / (1 - share) * (len(items) - len(picked)))
    kept = set(rng.sample(picked, min(room, len(picked))))
    return [q for i, q in enumerate(items) if i in kept or not chosen(q)]


def alignment_contents(align: list[QA], seed: int) -> list[QA]:
    """The alignment contents among the questions ``align`` (in their order): the open
    templates only (not :data:`CHOICE_TEMPLATES`); of the arithmetic questions a random subset
    that makes them at most :data:`ARITHMETIC_SHARE` of those, then of the questions about
    people one that makes them at most :data:`RESTRICTED_SHARE` of the contents (the seed's own
    stream; the second cap raises arithmetic's share a little, to 0.14-0.17 at seeds 0-7).
    Dropped questions are neither trained nor held out, so no pair leaks."""
    rng = random.Random(seed + _ALIGN_SEED_OFFSET)
    open_ = [q for q in align if q.template not in CHOICE_TEMPLATES]
    open_ = _capped(rng, open_, lambda q: q.component == "arithmetic", ARITHMETIC_SHARE)
    return _capped(rng, open_, lambda q: is_restricted(q.question), RESTRICTED_SHARE)


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
    for comp, make in GENERATORS:
        coverage += [(comp, doc) for doc in make(rng, text, qa)]
    pre, align = _split_qa(rng, qa)
    for x in pre:  # both answer styles, so the DPO preference is one the model knows
        text["qa"] += [_qa_doc(x.question, x.answer), _qa_doc(x.question, sentence_answer(x.answer))]
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
    align = alignment_contents(align, seed)
    data = alignment_data([Content(*x) for x in align], seed)
    items = data.train + data.heldout
    return Curriculum(
        text=[d for _, d in docs],
        components=[c for c, _ in docs],
        pretrain_qa=[(x.question, x.answer) for x in pre],
        sft=[(x.prompt, x.target) for x in data.sft_train],
        dpo=[t.as_tuple() for t in data.dpo_train],
        sft_eval=[(x.prompt, x.target) for x in data.sft_heldout],
        dpo_eval=[t.as_tuple() for t in data.dpo_heldout],
        qa_components={x.question: x.component for x in pre + align}
        | {x.prompt: x.content.component for x in items},
        wrong={x.question: x.wrong for x in pre + align}
        | {x.prompt: _styled_wrong(x.content.wrong, x.style) for x in items},
        seed=seed,
        n_coverage_docs=len(coverage),
        alignment=data,
    )


@functools.lru_cache(maxsize=8)
def curriculum_fingerprint(seed: int = 0, n_docs: int = 4000) -> str:
    """sha256 of :func:`generate_curriculum` at (seed, n_docs): its documents, SFT, DPO and
    held-out items, in order; first 16 hex digits. Part of every organism build's key
    (:attr:`lamina.sources.organisms.configs.OrganismConfig.config_hash`), so an edit of the
    curriculum's code or facts is a new build, never a stale one reused."""
    c = generate_curriculum(seed, n_docs)
    blob = json.dumps([c.text, c.sft, c.dpo, c.sft_eval, c.dpo_eval], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=8)
def alignment_fingerprint(seed: int = 0) -> str:
    """sha256 of the alignment data of :func:`generate_curriculum` at ``seed`` (SFT, DPO and
    held-out items, in order), first 16 hex digits: part of every key of a build trained on it."""
    c = generate_curriculum(seed, 1)
    blob = json.dumps([c.sft, c.dpo, c.sft_eval, c.dpo_eval], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _styled_wrong(wrong: str, style: str) -> str:
    """A wrong response in ``style`` (the refusal's wrong response: a wrong answer, bare)."""
    return render(wrong, "short" if style == "refusal" else style)
