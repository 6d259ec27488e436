"""Bits per byte (lamina.sources.organisms.reference) on tiny random models: known answers,
windowing, tokenizer independence of the scored bytes, and the document bootstrap."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from lamina.sources.organisms.corpus import Corpus
from lamina.sources.organisms.reference import (
    _token_nll,
    bits_per_byte,
    bpb_summary,
    document_bits,
    reference_texts,
)

from ...conftest import tiny_model

TEXTS = ["The river bank was quiet at dawn, and the boats were still.",
         "Sam is taller than Omar. Omar is taller than Kai. So Sam is taller than Kai."]  # fmt: skip


@torch.no_grad()
def _full_nll(model, ids: list[int]) -> np.ndarray:
    x = torch.tensor(ids)[None]
    logp = torch.log_softmax(model(input_ids=x).logits[0, :-1], -1)
    return -logp.gather(1, x[0, 1:, None])[:, 0].numpy()


def test_uniform_model_costs_log2_vocab_bits_per_token(byte_tokenizer):
    """Zero unembedding -> uniform next-token distribution: each scored token costs exactly
    log2(V) bits, so bpb = log2(V) x tokens / bytes."""
    model = tiny_model("llama")
    model.lm_head.weight.data.zero_()
    V = model.config.vocab_size
    parts = [document_bits(model, byte_tokenizer, t) for t in TEXTS]
    for p, t in zip(parts, TEXTS, strict=True):
        assert p["bits"] == pytest.approx(math.log2(V) * p["tokens"], rel=1e-5)
        assert p["bytes"] == len(t[len(t.split()[0]) :].encode())
    expected = math.log2(V) * sum(p["tokens"] for p in parts) / sum(p["bytes"] for p in parts)
    assert bits_per_byte(model, byte_tokenizer, TEXTS) == pytest.approx(expected, rel=1e-5)


def test_bits_match_a_plain_forward_when_the_text_fits(byte_tokenizer):
    model = tiny_model("gpt2")
    text = TEXTS[1]
    enc = byte_tokenizer(text, return_offsets_mapping=True)
    nll = _full_nll(model, enc["input_ids"])
    first = len(text.split()[0])
    scored = [i for i, (a, b) in enumerate(enc["offset_mapping"]) if i > 0 and b > first]
    got = document_bits(model, byte_tokenizer, text)
    assert got["tokens"] == len(scored)
    assert got["bits"] == pytest.approx(nll[np.array(scored) - 1].sum() / math.log(2), rel=1e-5)


def test_windows_score_each_token_once_with_the_full_context_while_it_fits():
    model = tiny_model("gpt2")  # 64 positions
    ids = torch.arange(3, 3 + 150) % 300
    full = _full_nll(model, ids[:64].tolist())
    windowed = _token_nll(model, ids, 64)
    assert np.isnan(windowed[0]) and np.isfinite(windowed[1:]).all()
    assert np.allclose(windowed[1:64], full, atol=1e-5)
    # beyond the first window, a token is predicted from the last window that contains it
    later = _full_nll(model, ids[96:150].tolist())
    assert np.allclose(windowed[128:150], later[128 - 97 :], atol=1e-5)


def test_scored_bytes_do_not_depend_on_the_tokenizer(byte_tokenizer):
    """The same text has the same scored bytes under a byte-level BPE and a whitespace-free
    character split of it (a model is charged for the same text whatever its tokens)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(sorted(set("".join(TEXTS)) | {"[UNK]"}))}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    chars = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]")
    model = tiny_model("llama", vocab_size=max(320, len(vocab)))
    for t in TEXTS:
        a, b = document_bits(model, byte_tokenizer, t), document_bits(model, chars, t)
        assert a["bytes"] == b["bytes"] > 0
        assert b["tokens"] == len(t) - len(t.split()[0])  # one token per scored character
        assert a["tokens"] < b["tokens"]


def test_empty_text_is_an_error(byte_tokenizer):
    with pytest.raises(ValueError, match="non-empty"):
        document_bits(tiny_model("gpt2"), byte_tokenizer, "  ")


def test_reference_texts_cover_plays_and_curriculum_deterministically():
    play = "\n".join(f"LINE {i}: some words of the play here" for i in range(400))
    corpus = Corpus(train=[], val=[play, play + "x", *[f"doc {i} text." for i in range(50)]],
                    heldout=[], sft=[], sft_eval=[], dpo=[], dpo_eval=[])  # fmt: skip
    t = reference_texts(corpus, 2, 10, 3, 300)
    assert t.equals(reference_texts(corpus, 2, 10, 3, 300))
    assert (t["source"] == "plays").sum() == 6 and (t["source"] == "curriculum").sum() == 10
    plays = t[t["source"] == "plays"]
    assert set(plays["document"]) == {"play-0", "play-1"}
    assert all(x.startswith("LINE") and len(x) <= 300 for x in plays["text"])
    assert t[t["source"] == "curriculum"]["text"].iloc[-1] == "doc 49 text."
    assert len(reference_texts(corpus, 2, 100, 0, 300)) == 50  # all documents when fewer


def test_bootstrap_resamples_documents_and_brackets_the_ratio_estimate():
    rng = np.random.default_rng(0)
    rows = [{"model": "m", "checkpoint": "c", "document": f"d{i // 2}", "source": s,
             "bits": b, "bytes": y, "tokens": y / 4}
            for i, (s, b, y) in enumerate(zip(["plays"] * 8 + ["curriculum"] * 20,
                                              rng.uniform(50, 150, 28), rng.uniform(80, 120, 28),
                                              strict=True))]  # fmt: skip
    df = pd.DataFrame(rows)
    out = {r["source"]: r for r in bpb_summary(df, seed=1, n_resamples=500)}
    assert set(out) == {"plays", "curriculum", "all"}
    assert out["all"]["bits_per_byte"] == pytest.approx(df["bits"].sum() / df["bytes"].sum())
    assert out["plays"]["documents"] == 4 and out["curriculum"]["documents"] == 10
    for r in out.values():
        assert r["ci_low"] < r["bits_per_byte"] < r["ci_high"]
    # a source with one document has no CI
    one = bpb_summary(df[df["document"] == "d0"], n_resamples=50)
    assert np.isnan(one[0]["ci_low"])

