"""Leakage check: evaluation text of ``data/prompts/`` found in the training text.

**Normalisation** (:func:`words`): Unicode NFKC, lower case, curly quotes and apostrophes made
straight, every character that is not a letter, a digit or an apostrophe replaced by a space,
apostrophes at the edge of a word dropped, then split on whitespace. So ``"Rome is to Italy,"``
and ``"rome is to italy"`` have the same words. Matches never span two documents or two prompt
fields; a free-text file such as the README counts line by line; a training document is one
text, across its line breaks.

**Evaluation text** (:func:`eval_items`): every file of ``data/prompts/``. For a JSONL file,
each string field of each row except ``id``, ``family`` and ``pair_id`` (prompts, control
prompts, glosses, perturbed prompts, labels, answers), and for rows with an ``answer`` also
``prompt + " " + answer`` (the completed sentence); any other file line by line.

**Kinds of leak** (each counted over distinct evaluation items; :data:`KINDS`):

* ``exact_8gram``: an evaluation word 8-gram (:data:`N_GRAM`) occurs in a training document.
* ``near_8gram``: an evaluation 8-gram that does not occur exactly, but a training 8-gram
  differs from it in exactly one word (Hamming distance 1 over 8 word tokens). Found by
  masked-key hashing: each evaluation 8-gram is indexed 8 times, once with each position
  replaced by a wildcard; a training 8-gram is looked up under its 8 masked keys.
* ``whole_prompt``: a prompt-like string (:data:`PROMPT_FIELDS` and completed sentences) of
  5 to 7 words (:data:`WHOLE_MIN` to ``N_GRAM - 1``), which has no 8-gram, occurs whole as
  consecutive words of a training document.
* ``analogy_half``: for an analogy prompt ``"A is to B as C is to"`` with answer D, the
  completed second half ``"C is to D"`` or the first half ``"A is to B"`` occurs in a training
  document (the model would have seen the evaluated pair in the analogy form).

Prompt-like strings of 1 to :data:`SHORT_MAX` words ("cat", "a small cat") are common phrases:
their hits are reported (``short_prompt_hits``) but are not leakage.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lamina.sources.prompts import prompts_dir

__all__ = ["KINDS", "N_GRAM", "PROMPT_FIELDS", "SHORT_MAX", "WHOLE_MIN", "EvalIndex",
           "analogy_halves", "corpus_overlap", "eval_items", "eval_texts", "ngrams",
           "phrase_hits", "words"]  # fmt: skip

N_GRAM = 8
"""Length (in words) of the n-grams compared by :func:`corpus_overlap`."""
WHOLE_MIN = 5
"""Prompt-like strings of WHOLE_MIN to N_GRAM - 1 words are matched whole."""
SHORT_MAX = 4
"""Prompt-like strings of 1 to SHORT_MAX words are reported, not counted as leakage."""
PROMPT_FIELDS = frozenset({"prompt", "control_prompt", "perturbed", "gloss", "completed"})
"""Fields whose strings are matched whole (5-7 words) or reported (1-4 words); ``completed``
names the prompt + answer sentences."""
KINDS = ("exact_8gram", "near_8gram", "whole_prompt", "analogy_half")
"""The kinds of leak that :func:`corpus_overlap` counts (module docstring)."""

_SKIP_FIELDS = frozenset({"id", "family", "pair_id"})
_NON_WORD = re.compile(r"[^\w']+|_")
_ANALOGY = re.compile(r"(.+) is to (.+) as (.+) is to", re.IGNORECASE)
Gram = tuple[str, ...]
Masked = tuple[str | None, ...]


def words(text: str) -> list[str]:
    """Normalised words of ``text`` (see the module docstring)."""
    t = unicodedata.normalize("NFKC", text).lower().replace("\u2019", "'").replace("\u2018", "'")
    return [w.strip("'") for w in _NON_WORD.sub(" ", t).split() if w.strip("'")]


def ngrams(text: str, n: int = N_GRAM) -> set[Gram]:
    """The set of word n-grams of ``text`` (empty when it has fewer than n words)."""
    w = words(text)
    return {tuple(w[i : i + n]) for i in range(len(w) - n + 1)}


def _rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row: Any = json.loads(line)
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{i}: expected a JSON object")
        rows.append(row)
    return rows


def _files(folder: str | Path | None) -> list[Path]:
    root = Path(folder) if folder is not None else prompts_dir()
    files = sorted(p for p in root.iterdir() if p.is_file())
    if not files:
        raise ValueError(f"no evaluation files in {root}")
    return files


def eval_items(folder: str | Path | None = None) -> list[tuple[str, str, str]]:
    """Every evaluation string as (file name, field, text); field ``completed`` is prompt + " " +
    answer, field ``line`` a line of a non-JSONL file (module docstring).

    ``folder`` defaults to :func:`lamina.sources.prompts.prompts_dir`. Raises ValueError if the folder
    has no files or a JSONL line is not a JSON object.
    """
    out: list[tuple[str, str, str]] = []
    for path in _files(folder):
        if path.suffix != ".jsonl":
            out += [(path.name, "line", ln) for ln in path.read_text(encoding="utf-8").splitlines()
                    if ln.strip()]  # fmt: skip
            continue
        for row in _rows(path):
            out += [(path.name, k, v) for k, v in row.items()
                    if isinstance(v, str) and k not in _SKIP_FIELDS]  # fmt: skip
            if isinstance(row.get("answer"), str) and isinstance(row.get("prompt"), str):
                out.append((path.name, "completed", f"{row['prompt']} {row['answer']}"))
    return out


def eval_texts(folder: str | Path | None = None) -> dict[str, list[str]]:
    """{file name: evaluation strings} for every file of the prompts folder (:func:`eval_items`)."""
    out: dict[str, list[str]] = {p.name: [] for p in _files(folder)}
    for name, _, text in eval_items(folder):
        out[name].append(text)
    return out


def analogy_halves(folder: str | Path | None = None) -> set[Gram]:
    """Normalised ``"A is to B"`` and ``"C is to D"`` of every analogy prompt
    ``"A is to B as C is to"`` with answer D (rows with an ``answer`` whose prompt has that form)."""
    halves: set[Gram] = set()
    for path in _files(folder):
        if path.suffix != ".jsonl":
            continue
        for row in _rows(path):
            prompt, answer = row.get("prompt"), row.get("answer")
            m = _ANALOGY.fullmatch(prompt.strip()) if isinstance(prompt, str) else None
            if m and isinstance(answer, str):
                halves |= {
                    tuple(words(f"{m[1]} is to {m[2]}")),
                    tuple(words(f"{m[3]} is to {answer}")),
                }
    return halves


def _masks(gram: Gram) -> list[Masked]:
    """The len(gram) keys of ``gram`` with one position replaced by the wildcard None."""
    return [(*gram[:j], None, *gram[j + 1 :]) for j in range(len(gram))]


@dataclass
class EvalIndex:
    """The evaluation text, indexed for :func:`corpus_overlap`.

    grams: exact 8-grams. masked: {masked key: evaluation 8-grams it came from}.
    phrases: {kind: set of word tuples} for ``whole_prompt`` (5-7 words), ``analogy_half`` and
    ``short`` (1-4 words). first: {first word: lengths of phrases that start with it}.
    vocab: every word of an evaluation 8-gram (a training 8-gram with two or more words outside
    it cannot be within Hamming distance 1 of one).
    """

    grams: set[Gram]
    masked: dict[Masked, list[Gram]]
    phrases: dict[str, set[Gram]]
    by_file: dict[str, int]
    first: dict[str, set[int]] = field(default_factory=dict)
    vocab: frozenset[str] = frozenset()

    @classmethod
    def build(cls, folder: str | Path | None = None, n: int = N_GRAM) -> EvalIndex:
        """Index the prompts folder (default :func:`lamina.sources.prompts.prompts_dir`) for n-grams of n."""
        grams: set[Gram] = set()
        by_file: dict[str, set[Gram]] = {}
        phrases: dict[str, set[Gram]] = {
            "whole_prompt": set(),
            "analogy_half": set(),
            "short": set(),
        }
        for name, fld, text in eval_items(folder):
            g = ngrams(text, n)
            grams |= g
            by_file.setdefault(name, set()).update(g)
            w = tuple(words(text))
            if fld in PROMPT_FIELDS and WHOLE_MIN <= len(w) < n:
                phrases["whole_prompt"].add(w)
            elif fld in PROMPT_FIELDS and 1 <= len(w) <= SHORT_MAX:
                phrases["short"].add(w)
        phrases["analogy_half"] = analogy_halves(folder)
        masked: dict[Masked, list[Gram]] = {}
        for gram in grams:
            for key in _masks(gram):
                masked.setdefault(key, []).append(gram)
        first: dict[str, set[int]] = {}
        for ph in phrases.values():
            for p in ph:
                first.setdefault(p[0], set()).add(len(p))
        vocab = frozenset(w for g in grams for w in g)
        return cls(grams, masked, phrases, {k: len(v) for k, v in by_file.items()}, first, vocab)

    def scan(self, doc: str, n: int = N_GRAM) -> dict[str, set[Gram]]:
        """The evaluation items one training document leaks: {kind: items}, kinds :data:`KINDS`
        plus ``short`` (1-4-word prompts found, not leakage). ``near_8gram`` holds evaluation
        8-grams within Hamming distance 1 of a document 8-gram (exact ones included)."""
        w = words(doc)
        found: dict[str, set[Gram]] = {k: set() for k in (*KINDS, "short")}
        inside = [x in self.vocab for x in w]
        missing = sum(not b for b in inside[:n])
        for i in range(len(w) - n + 1):
            if i:
                missing += (not inside[i + n - 1]) - (not inside[i - 1])
            if missing > 1:
                continue
            g = tuple(w[i : i + n])
            if g in self.grams:
                found["exact_8gram"].add(g)
            for key in _masks(g):
                found["near_8gram"].update(self.masked.get(key, ()))
        for i, x in enumerate(w):
            for length in self.first.get(x, ()):
                p = tuple(w[i : i + length])
                for kind in ("whole_prompt", "analogy_half", "short"):
                    if p in self.phrases[kind]:
                        found[kind].add(p)
        return found


def _part_row(
    docs: Iterable[str], index: EvalIndex, n: int
) -> tuple[dict[str, Any], dict[str, set[Gram]]]:
    """Scan one part's documents: (its row of :func:`corpus_overlap`, {kind: items found})."""
    found: dict[str, set[Gram]] = {k: set() for k in (*KINDS, "short")}
    count = 0
    for doc in docs:
        count += 1
        for kind, items in index.scan(str(doc), n).items():
            found[kind] |= items
    found["near_8gram"] -= found["exact_8gram"]
    examples = [f"{kind}: {' '.join(g)}" for kind in KINDS for g in sorted(found[kind])[:5]]
    row = {"documents": count, "shared_ngrams": len(found["exact_8gram"]),
           "near_8grams": len(found["near_8gram"]), "whole_prompts": len(found["whole_prompt"]),
           "analogy_halves": len(found["analogy_half"]),
           "leaks": sum(len(found[k]) for k in KINDS),
           "short_prompts_found": len(found["short"]), "examples": examples[:5]}  # fmt: skip
    return row, found


def corpus_overlap(
    parts: dict[str, Iterable[str]], folder: str | Path | None = None, n: int = N_GRAM
) -> dict[str, Any]:
    """Count evaluation items that leak into training documents, by kind (module docstring).

    parts: {part name: documents}, e.g. {"plays+curriculum (train)": corpus.train, ...}.
    -> {"n", "normalisation", "eval_ngrams" (distinct evaluation n-grams), "eval_ngrams_by_file",
    "eval_phrases" ({"whole_prompt", "analogy_half", "short"}: counts), "by_kind" ({kind: distinct
    leaked items over all parts} for :data:`KINDS`, plus "short_prompt_hits", not leakage),
    "overlap" (total leaks: the sum of by_kind over :data:`KINDS`), "by_part" ({part:
    {"documents", "shared_ngrams" (exact 8-grams), "near_8grams", "whole_prompts",
    "analogy_halves", "leaks", "short_prompts_found", "examples" (up to 5, "kind: words")}})}.
    """
    index = EvalIndex.build(folder, n)
    by_part: dict[str, Any] = {}
    total: dict[str, set[Gram]] = {k: set() for k in (*KINDS, "short")}
    for part, docs in parts.items():
        by_part[part], found = _part_row(docs, index, n)
        for kind, items in found.items():
            total[kind] |= items
    total["near_8gram"] -= total["exact_8gram"]
    by_kind = {k: len(total[k]) for k in KINDS}
    return {
        "n": n,
        "normalisation": "NFKC, lower case, non-word characters to spaces; word n-grams",
        "eval_ngrams": len(index.grams),
        "eval_ngrams_by_file": index.by_file,
        "eval_phrases": {k: len(v) for k, v in index.phrases.items()},
        "by_kind": {**by_kind, "short_prompt_hits": len(total["short"])},
        "overlap": sum(by_kind.values()),
        "by_part": by_part,
    }


def phrase_hits(phrases: Iterable[str], docs: Iterable[str]) -> list[str]:
    """The phrases (normalised, at word boundaries) found in any document; for short texts such
    as glosses, which have fewer than :data:`N_GRAM` words."""
    wanted = {" ".join(words(p)) for p in phrases if words(p)}
    joined = " " + " | ".join(" ".join(words(d)) for d in docs) + " "
    return sorted(p for p in wanted if f" {p} " in joined)
