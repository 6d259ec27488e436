"""Held-out text that mixes sources, and bootstraps whose unit is the source document.

Issue 12 item 4: the held-out text of the anatomy chapter is made of passages cut from the
held-out plays and curriculum documents of an organism corpus, in a seeded order that takes
the sources in turn and, within a source, the documents in turn (:func:`round_robin`), so
that the first n tokens mix both sources and span as many documents as a small budget
allows; every CI resamples *documents* (a play or a curriculum document), not token
windows: windows cut from one play are not independent.

With windows of equal length, perplexity is a ratio estimator. For document g let
S_g = sum of the NLL (nats) of its windows' predicted tokens and C_g their number; then

    nll = sum_g S_g / sum_g C_g,   ppl = exp(nll),

and a bootstrap over documents resamples the (S_g, C_g) pairs (a cluster bootstrap).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from lamina.chapters.runtime import tagged_passages
from lamina.evidence.stats import paired_bootstrap_ci
from lamina.sources.organisms import ORGANISMS
from lamina.sources.organisms.corpus import load_corpus

__all__ = [
    "HeldoutText",
    "document_sums",
    "document_delta_ci",
    "document_ppl_ci",
    "mixed_heldout",
    "organism_heldout",
    "regroup_sweep",
    "round_robin",
]


@dataclass
class HeldoutText:
    """Token windows and their source documents.

    windows: (n_windows, seq_len) token ids; doc_ids: (n_windows,) index of the source
    document that contributes most tokens to each window; sources: (n_documents,) "play" or
    "curriculum", by document index."""

    windows: torch.Tensor
    doc_ids: np.ndarray
    sources: list[str]

    def summary(self) -> dict[str, Any]:
        """Counts for the chapter's note: windows, tokens, documents used, by source."""
        used = np.unique(self.doc_ids)
        kinds = pd.Series([self.sources[d] for d in used]).value_counts().to_dict()
        per_window = pd.Series([self.sources[d] for d in self.doc_ids]).value_counts()
        return {
            "n_windows": int(self.windows.shape[0]),
            "n_tokens": int(self.windows.numel()),
            "n_documents": len(used),
            "documents_by_source": {k: int(v) for k, v in kinds.items()},
            "windows_by_source": {k: int(v) for k, v in per_window.items()},
        }


def round_robin(
    passages: list[tuple[int, str]], sources: list[str]
) -> dict[str, list[tuple[int, str]]]:
    """{source: [(document index, passage)]}: per source, its documents in turn, each
    document giving its passages in the order of ``passages`` (a seeded shuffle); documents
    and sources in order of first appearance there. So the k-th passage of a document comes
    after the (k-1)-th of every document of its source, and n passages of a source span
    about n of its documents, whatever their lengths."""
    by_doc: dict[int, list[str]] = {}
    for doc, text in passages:
        by_doc.setdefault(doc, []).append(text)
    queues: dict[str, list[tuple[int, str]]] = {}
    depth = max((len(v) for v in by_doc.values()), default=0)
    for k in range(depth):  # every document's k-th passage, then the (k+1)-th
        for doc, texts in by_doc.items():
            if k < len(texts):
                queues.setdefault(sources[doc], []).append((doc, texts[k]))
    return queues


def mixed_heldout(
    docs: list[str],
    sources: list[str],
    tokenizer: Any,
    n_tokens: int,
    seq_len: int,
    seed: int,
) -> HeldoutText:
    """The first ceil(n_tokens / seq_len) windows of the passages of ``docs``
    (:func:`lamina.chapters.runtime.tagged_passages`, at most about one window of characters
    (4 x seq_len) per passage), tokenised with EOS after each passage, with each window's
    majority source document. The next passage always comes from the source that has given
    the fewest tokens so far (equal shares of tokens by source), and within a source in
    :func:`round_robin` order (documents in turn), so that a small budget still draws its
    windows from many documents rather than a few long plays. Raises ValueError if the
    text is too short."""
    if len(docs) != len(sources):
        raise ValueError(f"{len(docs)} documents but {len(sources)} source labels")
    if seq_len < 2 or n_tokens < seq_len:
        raise ValueError(f"need seq_len >= 2 and n_tokens >= seq_len, got {seq_len}, {n_tokens}")
    need = -(-n_tokens // seq_len)
    eos = tokenizer.eos_token_id
    ids: list[int] = []
    owner: list[int] = []
    queues = round_robin(tagged_passages(docs, seed, 4 * seq_len), list(sources))
    given = dict.fromkeys(queues, 0)  # tokens so far, by source
    nxt = dict.fromkeys(queues, 0)  # next passage, by source
    while len(ids) < need * seq_len:
        left = [k for k in queues if nxt[k] < len(queues[k])]
        if not left:
            break
        src = min(left, key=lambda k: given[k])  # ties: first source first
        doc, text = queues[src][nxt[src]]
        nxt[src] += 1
        toks = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        toks += [int(eos)] if eos is not None else []
        ids += toks
        owner += [doc] * len(toks)
        given[src] += len(toks)
    if len(ids) < need * seq_len:
        raise ValueError(f"held-out text gives {len(ids)} tokens; {n_tokens} were asked for")
    n = need * seq_len
    windows = torch.tensor(ids[:n], dtype=torch.long).view(need, seq_len)
    own = np.asarray(owner[:n]).reshape(need, seq_len)
    doc_ids = np.array([np.bincount(row).argmax() for row in own])
    return HeldoutText(windows, doc_ids, list(sources))


def organism_heldout(
    corpus: str, tokenizer: Any, n_tokens: int, seq_len: int, seed: int
) -> HeldoutText:
    """:func:`mixed_heldout` of a registered organism corpus's held-out split (its plays
    first, then its curriculum documents, as ``lamina.sources.organisms.corpus.load_corpus`` lists
    them)."""
    name = corpus.partition("@")[0]
    if name not in ORGANISMS:
        raise ValueError(f"corpus {corpus!r} is not a registered organism: {sorted(ORGANISMS)}")
    c = load_corpus(ORGANISMS[name])
    n_plays = len(c.card.get("natural_text", {}).get("plays_heldout", []))
    sources = ["play"] * n_plays + ["curriculum"] * (len(c.heldout) - n_plays)
    return mixed_heldout(list(c.heldout), sources, tokenizer, n_tokens, seq_len, seed)


def document_sums(
    per_window: np.ndarray, counts: np.ndarray, doc_ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(S, C): per-document NLL sums (nats) and predicted-token counts, each
    (n_documents_present,), from per-window mean NLL ``per_window`` (n_windows,) and
    ``counts`` (n_windows,), in order of ascending document id."""
    per_window, counts = np.asarray(per_window, float), np.asarray(counts, float)
    if per_window.shape != counts.shape or per_window.shape != np.shape(doc_ids):
        raise ValueError("per_window, counts and doc_ids must have one value per window")
    _, g = np.unique(doc_ids, return_inverse=True)
    return np.bincount(g, per_window * counts), np.bincount(g, counts)


def document_ppl_ci(
    per_window: np.ndarray, counts: np.ndarray, doc_ids: np.ndarray, n_bootstrap: int, seed: int
) -> tuple[float, float, float]:
    """(ppl, ci_low, ci_high): perplexity and its 95% percentile bootstrap CI over documents
    (NaN CI with fewer than 3 documents or ``n_bootstrap`` 0). With S_g the NLL sum (nats)
    and C_g the predicted tokens of document g: ppl = exp(sum_g S_g / sum_g C_g); each
    resample draws documents with replacement (a cluster bootstrap of the windows).
    per_window, counts, doc_ids: (n_windows,)."""
    s, c = document_sums(per_window, counts, doc_ids)
    lo, hi = paired_bootstrap_ci(
        (s, c), lambda s_, c_, axis: s_.sum(axis) / c_.sum(axis), n_bootstrap, seed, min_size=3
    )
    return float(np.exp(s.sum() / c.sum())), float(np.exp(lo)), float(np.exp(hi))


def document_delta_ci(
    ablated: np.ndarray,
    clean: np.ndarray,
    counts: np.ndarray,
    doc_ids: np.ndarray,
    n_bootstrap: int,
    seed: int,
) -> tuple[float, float]:
    """95% percentile CI, resampling documents (paired), of delta_pct =
    100 (exp(nll_ablated - nll_clean) - 1); per-window mean NLLs in, (low, high) out."""
    sa, c = document_sums(ablated, counts, doc_ids)
    sb, _ = document_sums(clean, counts, doc_ids)
    lo, hi = paired_bootstrap_ci(
        (sa, sb, c),
        lambda a, b, c_, axis: (a.sum(axis) - b.sum(axis)) / c_.sum(axis),
        n_bootstrap,
        seed,
        min_size=3,
    )
    return 100.0 * float(np.expm1(lo)), 100.0 * float(np.expm1(hi))


def regroup_sweep(
    sweep: pd.DataFrame, doc_ids: np.ndarray, seq_len: int, n_bootstrap: int, seed: int
) -> pd.DataFrame:
    """The sweep with delta_ci_low/high recomputed by :func:`document_delta_ci` (each
    surgery's rows on the first ``len(nll_per_seq)`` windows) and ``n_documents`` added.
    Needs the columns nll_per_seq and base_nll_per_seq (per-window mean NLL arrays)."""
    out = sweep.copy()
    lows, highs, ndocs = [], [], []
    for _, row in out.iterrows():
        a = np.asarray(row["nll_per_seq"], float)
        b = np.asarray(row["base_nll_per_seq"], float)
        d = np.asarray(doc_ids)[: len(a)]
        counts = np.full(len(a), seq_len - 1, float)
        lo, hi = document_delta_ci(a, b, counts, d, n_bootstrap, seed)
        lows.append(lo)
        highs.append(hi)
        ndocs.append(len(np.unique(d)))
    out["delta_ci_low"], out["delta_ci_high"], out["n_documents"] = lows, highs, ndocs
    return out
