"""Extraction speed: lamina.extract against the floor and the usual alternatives.

Setting (issue 2): a GPT-2-small-shaped model (12 layers, d=768, random weights), 230 texts
of 2-16 tokens, batch 64. Prints medians over repeats of wall time, the ratio of each method
to the floor (a bare base-model forward over the same texts in the same unsorted batches),
and peak RSS growth. Run: python benchmarks/extract.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

import lamina

WORDS = (
    "the cat dog bank river money light heavy spring summer bat ball match fire game tie "
    "present gift wind storm tear paper bowl soup live music bass fish date fruit bark tree"
).split()


def make_tokenizer() -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(["<pad>", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>")


def texts(n: int = 230, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 16))) for _ in range(n)]


def batches(tok, items: list[str], size: int):
    for i in range(0, len(items), size):
        yield tok(items[i : i + size], padding=True, return_tensors="pt")


def floor(model, tok, items, bs):
    with torch.inference_mode():
        for b in batches(tok, items, bs):
            model.transformer(**b, use_cache=False)


def hf_hidden_states(model, tok, items, bs):
    with torch.inference_mode():
        for b in batches(tok, items, bs):
            model(**b, output_hidden_states=True, use_cache=False)


def one_at_a_time(model, tok, items, bs):
    with torch.inference_mode():
        for t in items:
            model(**tok(t, return_tensors="pt"), output_hidden_states=True, use_cache=False)


def lamina_last(model, tok, items, bs):
    lamina.extract(model, tok, items, pool="last", batch_size=bs, progress=False)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    # GPT-2 small's shape, vocabulary included (the LM head is part of what (b) and (c) pay for)
    cfg = GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=64)
    model = GPT2LMHeadModel(cfg).eval()
    model.lamina_name = "random-gpt2-small"
    tok = make_tokenizer()
    items = texts()
    methods = {
        "floor (bare forward)": floor,
        "lamina.extract(pool='last')": lamina_last,
        "HF output_hidden_states": hf_hidden_states,
        "one text at a time (paper 1)": one_at_a_time,
    }
    times: dict[str, list[float]] = {m: [] for m in methods}
    for fn in methods.values():  # warm-up
        fn(model, tok, items[:64], 64)
    for _ in range(args.repeats):  # interleaved, so drift hits every method alike
        for name, fn in methods.items():
            t0 = time.perf_counter()
            fn(model, tok, items, 64)
            times[name].append(time.perf_counter() - t0)
    base = statistics.median(times["floor (bare forward)"])
    print(f"torch threads: {torch.get_num_threads()}, repeats: {args.repeats}, texts: {len(items)}")
    print(f"{'method':34s} {'median s':>9s} {'ratio':>7s}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:34s} {med:9.3f} {med / base:6.2f}x")
    print(f"peak RSS of the process: {peak_rss_mb():.0f} MB")
    print(
        "target: lamina <= 1.05x the floor (reference here: HF hidden states 1.84x, one at a time 5.07x)"
    )


if __name__ == "__main__":
    main()
