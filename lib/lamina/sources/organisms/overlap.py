"""Contamination check: word n-grams shared by the evaluation prompts and the training text.

**Normalisation** (:func:`words`): Unicode NFKC, lower case, curly quotes and apostrophes made
straight, every character that is not a letter, a digit or an apostrophe replaced by a space,
apostrophes at the edge of a word dropped, then split on whitespace. So ``"Rome is to Italy,"``
and ``"rome is to italy"`` have the same words. An n-gram is n consecutive words of one
document (n-grams never span two documents or two prompt fields; a free-text file such as the
README counts line by line; a training document is one text, across its line breaks).

**Evaluation text** (:func:`eval_texts`): every file of ``data/prompts/``. For a JSONL file,
each string field of each row except ``id``, ``family`` and ``pair_id`` (prompts, control
prompts, glosses, perturbed prompts, labels, answers), and for rows with an ``answer`` also
``prompt + " " + answer`` (the completed sentence); any other file line by line.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lamina.sources.prompts import prompts_dir

__all__ = ["N_GRAM", "corpus_overlap", "eval_texts", "ngrams", "phrase_hits", "words"]

N_GRAM = 8
"""Length (in words) of the n-grams compared by :func:`corpus_overlap`."""

_SKIP_FIELDS = frozenset({"id", "family", "pair_id"})
_NON_WORD = re.compile(r"[^\w']+|_")


def words(text: str) -> list[str]:
    """Normalised words of ``text`` (see the module docstring)."""
    t = unicodedata.normalize("NFKC", text).lower().replace("\u2019", "'").replace("\u2018", "'")
    return [w.strip("'") for w in _NON_WORD.sub(" ", t).split() if w.strip("'")]


def ngrams(text: str, n: int = N_GRAM) -> set[tuple[str, ...]]:
    """The set of word n-grams of ``text`` (empty when it has fewer than n words)."""
    w = words(text)
    return {tuple(w[i : i + n]) for i in range(len(w) - n + 1)}


def eval_texts(folder: str | Path | None = None) -> dict[str, list[str]]:
    """{file name: evaluation strings} for every file of the prompts folder (module docstring).

    ``folder`` defaults to :func:`lamina.sources.prompts.prompts_dir`. Raises ValueError if the folder
    has no files or a JSONL line is not a JSON object.
    """
    root = Path(folder) if folder is not None else prompts_dir()
    out: dict[str, list[str]] = {}
    for path in sorted(p for p in root.iterdir() if p.is_file()):
        texts: list[str] = []
        if path.suffix == ".jsonl":
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                row: Any = json.loads(line)
                if not isinstance(row, dict):
                    raise ValueError(f"{path}:{i}: expected a JSON object")
                texts += [v for k, v in row.items() if isinstance(v, str) and k not in _SKIP_FIELDS]
                if isinstance(row.get("answer"), str) and isinstance(row.get("prompt"), str):
                    texts.append(f"{row['prompt']} {row['answer']}")
        else:
            texts = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        out[path.name] = texts
    if not out:
        raise ValueError(f"no evaluation files in {root}")
    return out


def corpus_overlap(
    parts: dict[str, Iterable[str]], folder: str | Path | None = None, n: int = N_GRAM
) -> dict[str, Any]:
    """Count evaluation n-grams that occur in training documents.

    parts: {part name: documents}, e.g. {"plays+curriculum (train)": corpus.train, ...}.
    -> {"n": n, "normalisation": ..., "eval_ngrams": number of distinct evaluation n-grams,
    "eval_ngrams_by_file": {file: count}, "overlap": total distinct shared n-grams,
    "by_part": {part: {"documents", "shared_ngrams", "examples" (up to 5, joined words)}}}.
    """
    ev = {name: set().union(*(ngrams(t, n) for t in texts)) for name, texts in
          eval_texts(folder).items()}  # fmt: skip
    grams: set[tuple[str, ...]] = set().union(*ev.values())
    by_part: dict[str, Any] = {}
    shared_all: set[tuple[str, ...]] = set()
    for part, docs in parts.items():
        shared: set[tuple[str, ...]] = set()
        count = 0
        for doc in docs:
            count += 1
            w = words(str(doc))
            shared |= {g for i in range(len(w) - n + 1) if (g := tuple(w[i : i + n])) in grams}
        shared_all |= shared
        by_part[part] = {"documents": count, "shared_ngrams": len(shared),
                         "examples": [" ".join(g) for g in sorted(shared)[:5]]}  # fmt: skip
    return {
        "n": n,
        "normalisation": "NFKC, lower case, non-word characters to spaces; word n-grams",
        "eval_ngrams": len(grams),
        "eval_ngrams_by_file": {k: len(v) for k, v in ev.items()},
        "overlap": len(shared_all),
        "by_part": by_part,
    }


def phrase_hits(phrases: Iterable[str], docs: Iterable[str]) -> list[str]:
    """The phrases (normalised, at word boundaries) found in any document; for short texts such
    as glosses, which have fewer than :data:`N_GRAM` words."""
    wanted = {" ".join(words(p)) for p in phrases if words(p)}
    joined = " " + " | ".join(" ".join(words(d)) for d in docs) + " "
    return sorted(p for p in wanted if f" {p} " in joined)
