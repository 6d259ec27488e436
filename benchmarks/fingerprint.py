"""Cost of the extraction cache's key: a hash of every byte of the weights (issue 14).

Setting: a SmolLM2-135M-shaped Llama (30 layers, d=576, vocab 49,152, tied embeddings; random
weights, fp32, about 135M parameters). Prints medians over repeats of the wall time of
``model_fingerprint`` and ``tokenizer_fingerprint``, and of one uncached ``extract`` of 64
short texts, with the ratio fingerprint / extract. Run: python benchmarks/fingerprint.py
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

import lamina
from lamina.states.extract_cache import model_fingerprint, tokenizer_fingerprint


def make_tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<pad>": 0, **{f"w{i}": i for i in range(1, vocab_size)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>")


def median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cfg = LlamaConfig(
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    n_params = sum(p.numel() for p in model.parameters())
    tok = make_tokenizer(cfg.vocab_size)
    texts = [" ".join(f"w{(7 * i + j) % 4000 + 1}" for j in range(16)) for i in range(64)]
    fp = median_seconds(lambda: model_fingerprint(model), args.repeats)
    tk = median_seconds(lambda: tokenizer_fingerprint(tok), args.repeats)
    ex = median_seconds(
        lambda: lamina.extract(model, tok, texts, pool="mean", progress=False), args.repeats
    )
    print(f"parameters: {n_params / 1e6:.1f}M ({n_params * 4 / 2**20:.0f} MiB fp32)")
    print(f"model_fingerprint:     {fp:.3f} s ({n_params * 4 / 2**30 / fp:.2f} GiB/s)")
    print(f"tokenizer_fingerprint: {tk:.3f} s")
    print(f"extract, 64 texts x 16 tokens, uncached: {ex:.3f} s")
    print(f"ratio fingerprint / extract: {fp / ex:.2f}")


if __name__ == "__main__":
    main()
