"""Token windows of an organism's corpus (:func:`corpus_windows`): the text paper 3's
measurements read (layer anatomy's recovery fine-tunes, growth training's runs and importance)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from lamina.anatomy.heldout import passages
from lamina.anatomy.perplexity import chunk_tokens
from lamina.sources.organisms import ORGANISMS
from lamina.sources.organisms.corpus import load_corpus

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["corpus_windows", "shuffled_documents"]


def shuffled_documents(docs: list[str], seed: int, passage_chars: int) -> list[str]:
    """The passages of :func:`lamina.anatomy.heldout.passages` without their document index: a
    play becomes many passages that interleave with the curriculum's short documents, so the
    first n tokens mix both sources instead of being one play."""
    return [p for _, p in passages(docs, seed, passage_chars)]


def corpus_windows(
    organism: str,
    tokenizer: PreTrainedTokenizerBase,
    split: str,
    n_tokens: int | None,
    seq_len: int,
    shuffle_seed: int | None = None,
) -> torch.Tensor:
    """Non-overlapping windows (n, seq_len) of the ``split`` ("train", "val", "heldout") text
    of a registered organism's corpus, tokenised by ``tokenizer`` (EOS between documents);
    the first ceil(n_tokens / seq_len) windows (all with None). With ``shuffle_seed`` the
    documents are first cut into passages of about 4 windows and shuffled
    (:func:`shuffled_documents`), so the windows mix plays and curriculum. Raises if too few
    tokens."""
    name = organism.partition("@")[0]
    if name not in ORGANISMS:
        raise ValueError(f"corpus {organism!r} is not a registered organism: {sorted(ORGANISMS)}")
    docs = getattr(load_corpus(ORGANISMS[name]), split)
    if shuffle_seed is not None:
        docs = shuffled_documents(list(docs), shuffle_seed, 4 * 4 * seq_len)
    if n_tokens is None:
        return chunk_tokens(tokenizer, docs, seq_len)
    need = -(-n_tokens // seq_len)
    chars = np.cumsum([len(d) for d in docs])
    head = docs[: int(np.searchsorted(chars, 8 * need * seq_len)) + 1]  # >= 1 token / 8 chars
    windows = chunk_tokens(tokenizer, head, seq_len)
    if windows.shape[0] < need and len(head) < len(docs):
        windows = chunk_tokens(tokenizer, docs, seq_len)
    if windows.shape[0] < need:
        raise ValueError(
            f"{organism} {split} text gives {windows.numel()} tokens; {n_tokens} were asked for"
        )
    return windows[:need]
