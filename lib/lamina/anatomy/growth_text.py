"""Growth Training's validation text: held-out passages that share no word 8-gram with the
training text.

The organism corpus splits documents, not text: its templated curriculum puts identical or
near-identical documents in both splits (measured: 380 of 1,003 val documents equal a train
document; 68% of the curriculum val documents' word 8-grams occur in train). Validation loss
on such text rewards memorisation, so :func:`clean_val_windows` cuts the val documents into
passages and keeps only those none of whose word 8-grams (whitespace-split words, exact
match) occurs anywhere in the train split.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import torch

from lamina.anatomy.heldout import passages
from lamina.anatomy.perplexity import chunk_tokens
from lamina.sources.organisms import ORGANISMS
from lamina.sources.organisms.corpus import load_corpus

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["NGRAM", "clean_passages", "clean_val_windows", "word_ngrams"]

NGRAM = 8
"""Word n-gram length of the overlap test."""


def word_ngrams(text: str, n: int = NGRAM) -> set[int]:
    """Hashes of the word n-grams of ``text`` (words: ``str.split``); empty below n words."""
    w = text.split()
    return {hash(tuple(w[i : i + n])) for i in range(len(w) - n + 1)}


def clean_passages(
    val_docs: list[str], train_docs: Iterable[str], seed: int, passage_chars: int
) -> tuple[list[str], dict[str, int]]:
    """Passages of ``val_docs`` (:func:`lamina.anatomy.heldout.passages`, seeded order,
    at most ``passage_chars`` characters) with no word 8-gram in ``train_docs``.

    -> (kept passages in the seeded order, info: passages, kept, dropped, kept_chars)."""
    seen: set[int] = set()
    for doc in train_docs:
        seen |= word_ngrams(doc)
    cut = [p for _, p in passages(val_docs, seed, passage_chars)]
    kept = [p for p in cut if not (word_ngrams(p) & seen)]
    return kept, {
        "passages": len(cut),
        "kept": len(kept),
        "dropped": len(cut) - len(kept),
        "kept_chars": sum(len(p) for p in kept),
    }


def clean_val_windows(
    organism: str, tokenizer: PreTrainedTokenizerBase, n_tokens: int, seq_len: int, seed: int
) -> tuple[torch.Tensor, dict[str, int]]:
    """(ceil(n_tokens / seq_len), seq_len) windows of the organism corpus's val split passages
    that share no word 8-gram with its train split (:func:`clean_passages`, passages of
    16 x seq_len characters), and the filter's counts. Raises if too few tokens remain."""
    name = organism.partition("@")[0]
    if name not in ORGANISMS:
        raise ValueError(f"corpus {organism!r} is not a registered organism: {sorted(ORGANISMS)}")
    corpus = load_corpus(ORGANISMS[name])
    kept, info = clean_passages(list(corpus.val), corpus.train, seed, 16 * seq_len)
    need = -(-n_tokens // seq_len)
    windows = chunk_tokens(tokenizer, kept, seq_len) if kept else torch.empty(0, seq_len)
    if windows.shape[0] < need:
        raise ValueError(
            f"{organism}: the val passages free of training 8-grams give {windows.numel()} "
            f"tokens; {n_tokens} were asked for"
        )
    return windows[:need].long(), info
