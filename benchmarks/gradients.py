"""Benchmark: factorised per-token gradient geometry against materialised outer products.

One SmolLM2-shaped layer (d = 576, 9 query / 3 key-value heads of 64, SwiGLU 1536), random
init, 4,096 tokens. Gradient factors (a_t, δ_t) of all seven maps of the layer come from one
backward pass (:func:`lamina.weights.gradients.gradient_factors`); then, for every map, the RSF of the
summed gradient, the mean and pooled per-token RSF and the cancellation are computed

* by :func:`lamina.weights.gradients.gradient_geometry` (factorised, O(T·d·k)), and
* by :func:`lamina.weights.gradients.gradient_geometry_reference` (every g_t = δ_t a_tᵀ formed,
  ``--chunk`` tokens at a time).

Read maps use a random k-frame of their input space, write maps the prediction subspace.
Targets: ≥ 10× faster, max relative difference ≤ 1e-5.

    python benchmarks/gradients.py [--tokens 4096] [--k 32] [--threads 1]

The materialised side is slow by design: about 5 minutes on one (shared) core.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import fields

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from lamina.sources.organisms.objectives import lm_loss
from lamina.weights import linear_maps, prediction_basis, random_orthonormal
from lamina.weights.gradients import (
    gradient_factors,
    gradient_geometry,
    gradient_geometry_reference,
)


class RandomTokens:
    """A stand-in tokenizer: each text is a string of space-separated token ids."""

    def __call__(self, texts: list[str], **_: object) -> dict[str, torch.Tensor]:
        ids = torch.tensor([[int(w) for w in t.split()] for t in texts])
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def smollm2_layer(vocab: int) -> LlamaForCausalLM:
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=1,
        num_attention_heads=9,
        num_key_value_heads=3,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        rms_norm_eps=1e-5,
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).eval()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--vocab", type=int, default=2048)
    parser.add_argument("--chunk", type=int, default=32, help="tokens per materialised chunk")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    model = smollm2_layer(args.vocab)
    gen = torch.Generator().manual_seed(1)
    n_seq = args.tokens // args.seq_len
    ids = torch.randint(0, args.vocab, (n_seq, args.seq_len), generator=gen)
    texts = [" ".join(map(str, row.tolist())) for row in ids]
    maps = linear_maps(model, embeddings=False)
    t0 = time.perf_counter()
    factors = gradient_factors(model, RandomTokens(), texts, maps, lm_loss, max_length=None)
    t_factors = time.perf_counter() - t0

    pred = prediction_basis(model, args.k)
    bases = {
        m.key: (random_orthonormal(factors[m.key].acts.shape[1], args.k, gen), "input")
        if m.kind == "read"
        else (pred, "output")
        for m in maps
    }

    t0 = time.perf_counter()
    fast = {
        m.key: gradient_geometry(factors[m.key].deltas, factors[m.key].acts, *bases[m.key])
        for m in maps
    }
    t_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    slow = {
        m.key: gradient_geometry_reference(
            factors[m.key].deltas, factors[m.key].acts, *bases[m.key], chunk=args.chunk
        )
        for m in maps
    }
    t_slow = time.perf_counter() - t0

    worst, where = 0.0, ""
    print(f"{'map':<12}{'side':<8}{'rsf_summed':>12}{'rsf_token':>12}{'cancel':>10}")
    for m in maps:
        f, s = fast[m.key], slow[m.key]
        assert f.n_tokens == s.n_tokens
        for field in fields(f):
            a, b = float(getattr(f, field.name)), float(getattr(s, field.name))
            rel = abs(a - b) / max(abs(b), 1e-300)
            if rel > worst:
                worst, where = rel, f"{m.key}.{field.name}"
        print(
            f"{m.key:<12}{bases[m.key][1]:<8}{f.rsf_summed:>12.5f}{f.rsf_token_mean:>12.5f}{f.cancellation:>10.5f}"
        )
    print(
        f"\nSmolLM2-shaped layer, {n_seq * args.seq_len} tokens ({fast[maps[0].key].n_tokens} with g_t != 0), "
        f"k = {args.k}, {len(maps)} maps, {args.threads} thread(s), float64"
    )
    print(f"gradient factors (one forward + backward): {t_factors:.2f} s")
    print(f"factorised  gradient_geometry:            {t_fast:.3f} s")
    print(f"materialised gradient_geometry_reference: {t_slow:.3f} s")
    print(f"speed-up: {t_slow / t_fast:.1f}x (target >= 10x)")
    print(f"max relative difference: {worst:.2e} at {where} (target <= 1e-5)")


if __name__ == "__main__":
    main()
