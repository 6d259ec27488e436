"""Bits per byte: the organisms and pretrained reference models on the same validation text.

Perplexity per token cannot be compared across tokenizers (a token is a different amount of
text for each). Bits per byte can: :func:`bits_per_byte` defines it once, and the organisms
chapter (``notebooks/organisms.py``) reports it for the organisms and for real pretrained
models (default ``smollm2-135m-instruct`` and ``gemma-3-270m``) on the organisms' validation
split, which no organism stage trains on (:func:`reference_texts`: passages of the validation
plays and validation curriculum documents). Confidence intervals resample documents
(:func:`bpb_summary`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from lamina.evidence.resampling import index_bootstrap
from lamina.sources.models import load_model
from lamina.sources.organisms.corpus import Corpus
from lamina.sources.organisms.probes import context_length

__all__ = [
    "DEFAULT_REFERENCE_MODELS",
    "MAX_WINDOW",
    "bits_per_byte",
    "bpb_by_source",
    "bpb_rows",
    "bpb_summary",
    "document_bits",
    "reference_texts",
    "score_references",
]

DEFAULT_REFERENCE_MODELS = ("smollm2-135m-instruct", "gemma-3-270m")
MAX_WINDOW = 1024
"""Longest window (tokens) scored in one forward pass, whatever the model's context."""


def reference_texts(
    corpus: Corpus, n_plays: int, n_docs: int, passages_per_play: int, passage_chars: int
) -> pd.DataFrame:
    """The validation text every model is scored on: deterministic, no randomness.

    ``corpus.val`` holds the ``n_plays`` validation plays first, then the validation curriculum
    documents. From each play, ``passages_per_play`` evenly spaced passages of about
    ``passage_chars`` characters, starting at a line start and ending at a line end; from the
    curriculum, ``n_docs`` evenly spaced whole documents (all when there are fewer).

    -> rows (document, source "plays" | "curriculum", text), one per passage or document;
    ``document`` is the resampling unit (a play, or one curriculum document).
    """
    if min(n_docs, passages_per_play, passage_chars) < 0:
        raise ValueError("n_docs, passages_per_play and passage_chars must be >= 0")
    rows = []
    for i, play in enumerate(corpus.val[:n_plays]):
        starts = np.linspace(0, max(0, len(play) - passage_chars), passages_per_play)
        for s in starts.astype(int):
            s = play.rfind("\n", 0, s) + 1  # back to a line start (0 when none)
            end = play.rfind("\n", s, s + passage_chars)
            text = play[s : end if end > s else s + passage_chars].strip()
            if text:
                rows.append({"document": f"play-{i}", "source": "plays", "text": text})
    docs = corpus.val[n_plays:]
    picks = sorted(set(np.linspace(0, len(docs) - 1, min(n_docs, len(docs))).round().astype(int)))
    for k in picks if docs and n_docs else []:
        if docs[k].strip():
            rows.append({"document": f"curriculum-{k}", "source": "curriculum",
                         "text": docs[k].strip()})  # fmt: skip
    return pd.DataFrame(rows, columns=["document", "source", "text"])


@torch.no_grad()
def _token_nll(model: Any, ids: torch.Tensor, window: int) -> np.ndarray:
    """Next-token NLL (nats) of every position 1..n-1 of ``ids`` (n,): (n,), entry 0 is NaN.

    Sequences longer than ``window`` are read in windows of ``window`` tokens moving by
    ``window // 2``: each token is predicted once, with at least ``window // 2`` tokens of
    context (all of it while the sequence fits)."""
    n, stride = len(ids), max(1, window // 2)
    out = np.full(n, np.nan)
    device = next(model.parameters()).device
    begin, done = 0, 1  # positions < done are scored (position 0 never is)
    while done < n:
        end = min(begin + window, n)
        x = ids[begin:end].to(device)[None]
        logp = torch.log_softmax(model(input_ids=x).logits[0, :-1].float(), dim=-1)
        nll = -logp.gather(1, x[0, 1:, None])[:, 0].cpu().numpy()  # predicts begin+1..end-1
        out[done:end] = nll[done - begin - 1 :]
        done, begin = end, begin + stride
    return out


def document_bits(model: Any, tokenizer: Any, text: str) -> dict[str, float]:
    """Bits and UTF-8 bytes of one text under one model (the parts of :func:`bits_per_byte`).

    The text is tokenised as the tokenizer does by default (with whatever special tokens it
    adds itself, e.g. Gemma's ``<bos>``). Its first word (up to the first whitespace) is
    context, not scored: the scored tokens are those that cover any character after it (never
    position 0), and the bytes are the UTF-8 bytes after it. Every model is thus scored on the
    same bytes whatever its tokenizer, and none is charged for a first word it has no context
    for. -> {bits: sum of -log2 p over the scored tokens, bytes, tokens: scored tokens}.
    """
    if not text.strip():
        raise ValueError("document_bits needs a non-empty text")
    try:
        enc = tokenizer(text, return_offsets_mapping=True)
    except NotImplementedError as exc:
        raise ValueError("bits per byte needs a fast tokenizer (character offsets)") from exc
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    first = len(text) - len(text.lstrip()) + len(text.split(maxsplit=1)[0])  # end of word 1
    scored = [i for i, (a, b) in enumerate(offsets) if i > 0 and b > max(a, first)]
    if not scored:
        return {"bits": 0.0, "bytes": 0.0, "tokens": 0.0}
    window = min(context_length(model), MAX_WINDOW)
    nll = _token_nll(model, torch.tensor(ids, dtype=torch.long), window)
    return {
        "bits": float(nll[scored].sum() / math.log(2)),
        "bytes": float(len(text[first:].encode("utf-8"))),
        "tokens": float(len(scored)),
    }


def bits_per_byte(model: Any, tokenizer: Any, texts: Sequence[str]) -> float:
    """Bits per byte of ``texts`` under a causal LM: tokenizer-independent cross-entropy.

        bpb = sum_d sum_{t in S_d} -log2 p(x_t | x_<t)  /  sum_d B_d

    where S_d are the scored tokens of text d and B_d the UTF-8 bytes they cover (everything
    after the text's first word, see :func:`document_bits`). Units: bits per UTF-8 byte; a
    uniform guess over V tokens gives log2(V) x tokens / bytes; lower is better. Equivalent to
    (mean next-token loss in nats / ln 2) x (scored tokens / scored bytes).
    """
    parts = [document_bits(model, tokenizer, t) for t in texts]
    total = sum(p["bytes"] for p in parts)
    if total == 0:
        raise ValueError("bits_per_byte: no scored bytes (every text is a single word?)")
    return sum(p["bits"] for p in parts) / total


def bpb_summary(docs: pd.DataFrame, seed: int = 0, n_resamples: int = 2000) -> list[dict]:
    """Bits per byte with 95% CIs, per model and source ("plays", "curriculum", "all").

    ``docs``: rows (model, document, source, bits, bytes, tokens), one per passage or document.
    The estimate is sum(bits) / sum(bytes); the CI is a percentile bootstrap that resamples
    documents (all passages of a play together) within each source, keeping each source's
    number of documents (:func:`lamina.evidence.resampling.index_bootstrap`). With one document in a
    source, its CI is NaN (nothing to resample).
    """
    rows = []
    for (model, *rest), g in docs.groupby(["model", "checkpoint"], sort=False, dropna=False):
        for source in ("plays", "curriculum", "all"):
            part = g if source == "all" else g[g["source"] == source]
            if part.empty:
                continue
            bits, nbytes = part["bits"].to_numpy(), part["bytes"].to_numpy()
            n_doc = part["document"].nunique()
            if n_doc >= 2:

                def ratio(i: np.ndarray, b: np.ndarray = bits, y: np.ndarray = nbytes) -> float:
                    return float(b[i].sum() / y[i].sum())

                ci = index_bootstrap(ratio, len(part), n_resamples, seed,
                                     strata=part["source"].to_numpy(),
                                     clusters=part["document"].to_numpy())  # fmt: skip
                lo, hi = ci["ci_low"], ci["ci_high"]
            else:
                lo = hi = float("nan")
            rows.append({
                "model": model, "checkpoint": rest[0], "source": source,
                "bits_per_byte": bits.sum() / nbytes.sum(), "ci_low": lo, "ci_high": hi,
                "documents": n_doc, "passages": len(part), "bytes": int(nbytes.sum()),
                "tokens": int(part["tokens"].sum()),
                "bytes_per_token": nbytes.sum() / part["tokens"].sum(),
            })  # fmt: skip
    return rows


def bpb_rows(name: str, ck: str, model: Any, tok: Any, texts: pd.DataFrame) -> list[dict]:
    """One row per text of :func:`reference_texts` (model ``name``, checkpoint ``ck``): its
    document, source, passage index, bits, bytes and scored tokens (:func:`document_bits`)."""
    return [{"model": name, "checkpoint": ck, "document": r.document, "source": r.source,
             "passage": i, **document_bits(model, tok, str(r.text))}
            for i, r in enumerate(texts.itertuples())]  # fmt: skip


def bpb_by_source(rows: list[dict], ck: str) -> dict[str, list[float]]:
    """{source: [bits per byte, ci_low, ci_high]} of checkpoint ``ck`` in :func:`bpb_summary`
    rows."""
    return {r["source"]: [r["bits_per_byte"], r["ci_low"], r["ci_high"]]
            for r in rows if r["checkpoint"] == ck}  # fmt: skip


def score_references(
    models: Sequence[str], texts: pd.DataFrame, seed: int, texts_from: str
) -> tuple[list[dict], dict[str, dict[str, Any]]]:
    """Bits per byte of each pretrained model (loaded one at a time with
    :func:`lamina.sources.models.load_model`; checkpoint "pretrained") on ``texts`` (those of the
    organism ``texts_from``). -> (rows of :func:`bpb_rows`, {model: summary})."""
    rows: list[dict] = []
    summaries: dict[str, dict[str, Any]] = {}
    for ref in models:
        model, tok = load_model(ref)
        mine = bpb_rows(ref, "pretrained", model, tok, texts)
        del model
        rows += mine
        by_source = bpb_by_source(bpb_summary(pd.DataFrame(mine), seed), "pretrained")
        summaries[ref] = {"bits_per_byte": by_source, "texts_from": texts_from}
    return rows, summaries
