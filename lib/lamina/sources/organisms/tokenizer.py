"""Byte-level BPE tokenizer for the organisms, trained with ``tokenizers``, saved in HF format.

GPT-2-style byte-level BPE: every byte is a base symbol (no unknown tokens), merges learnt on
the training split only. One special token, ``<|endoftext|>``, serves as BOS, EOS and pad.
Training is deterministic for a given corpus and vocabulary size (single-pass BPE counting,
ties broken by the library deterministically; a test checks two runs give the same vocab).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from lamina.sources.organisms.qa import EOS


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on ``texts`` with ``vocab_size`` entries (incl. 256 bytes + EOS)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=EOS,
        eos_token=EOS,
        unk_token=EOS,
        pad_token=EOS,
        model_max_length=1_000_000,
    )
    return fast


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, folder: Path) -> None:
    """Write the tokenizer files (tokenizer.json, tokenizer_config.json, ...) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(folder))


def encode_stream(tokenizer: PreTrainedTokenizerFast, docs: list[str]) -> torch.Tensor:
    """Token ids of ``docs`` concatenated, each followed by EOS: (n_tokens,) int64."""
    eos = tokenizer.eos_token_id
    out: list[int] = []
    for ids in tokenizer(docs, add_special_tokens=False)["input_ids"]:
        out.extend(ids)
        out.append(eos)
    return torch.tensor(out, dtype=torch.long)
