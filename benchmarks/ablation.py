"""Prefix-reuse ablation sweep against the naive sweep (a full forward pass per ablation).

Random GPT-2-style models at a few shapes (``--settings``), random tokens, every layer, the
surgeries ``skip`` and ``interpolate``. Per setting and surgery, the two methods run
interleaved (naive, prefix, naive, prefix, ...) and the medians over ``--repeats`` are compared;
the ``all`` row is the median over repeats of the per-repeat sum over surgeries (each surgery
is its own sweep, so it pays one clean pass per surgery).

Why the ratio has a ceiling. Measure everything in blocks: a block costs 1, and the head
(final norm + unembedding + cross-entropy over the vocabulary) costs H = t_head / t_block, which
every ablation must pay. A naive ablation costs L + H (its ``skip`` still runs block l; a
hook discards the output). An ablation at layer l reruns L - l blocks (``skip``: L - l - 1, its
stream entering l is the one leaving it), so averaged over the layers the prefix sweep reruns
r = (L + 1) / 2 blocks per weight surgery and r = (L - 1) / 2 per ``skip``. Per ablation:

    ceiling = (L + H) / (r + H)        (L = 12, free head: 1.85x weight surgery, 2.18x skip)

and for a whole sweep of k = L ablations, whose one clean pass both methods pay in full:

    ceiling_sweep = (k + 1)(L + H) / ((L + H) + k (r + H))

A large vocabulary relative to d (a large H) pulls both towards 1; depth and width raise them.

    python benchmarks/ablation.py [--settings 12x128x8192:512,...] [--repeats 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from lamina.anatomy import sweep_nll
from lamina.anatomy.ablation import BlockCalls
from lamina.anatomy.perplexity import sequence_nll
from lamina.core.provenance import atomic_write_json, provenance

TARGET = 1.8
TARGET_MIN_LAYERS = 12
# (a) the organisms' shape (12 layers, d 128, vocab 8192) and the 12-layer d-256 case;
# (b) deeper and wider, where the "12 or more layers" also applies.
DEFAULT_SETTINGS = "12x128x8192:512,12x256x8192:512,24x512x8192:256"


@dataclass(frozen=True)
class Setting:
    """A model shape and the number of tokens (in sequences of ``context``) swept on it."""

    layers: int
    d: int
    vocab: int
    tokens: int

    @property
    def name(self) -> str:
        return f"L{self.layers} d{self.d} V{self.vocab}"

    @classmethod
    def parse(cls, spec: str) -> Setting:
        """``"LxDxV:TOKENS"``, e.g. ``"24x512x8192:128"``."""
        shape, _, tokens = spec.partition(":")
        layers, d, vocab = (int(x) for x in shape.split("x"))
        return cls(layers, d, vocab, int(tokens or 512))


def build(n_layers: int, d: int, vocab: int, context: int) -> torch.nn.Module:
    """A random GPT-2 LM with 4 heads (seed 0), in eval mode."""
    torch.manual_seed(0)
    cfg = GPT2Config(
        vocab_size=vocab,
        n_positions=context,
        n_embd=d,
        n_layer=n_layers,
        n_head=4,
        bos_token_id=0,
        eos_token_id=0,
    )
    return GPT2LMHeadModel(cfg).eval()


def _median_time(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def head_share(model: torch.nn.Module, ids: torch.Tensor, n: int = 3) -> tuple[float, float]:
    """Seconds of one block and of the head (final norm, unembedding and summed cross-entropy)
    on the (b, T) batch ``ids``, measured in situ: t_head on the final stream, and
    t_block = (t_pass - t_head) / L from a whole pass, so that each block's weights come from
    memory as they do in a sweep (timing one block in a loop keeps it in cache)."""
    with torch.no_grad():
        calls = BlockCalls(model, ids, keep_all=True)
        n_layers = len(calls.blocks)
        last = calls.block(n_layers - 1, calls.streams[-1])
        t_pass = _median_time(lambda: sequence_nll(calls.logits_from(0, calls.h0), ids), n)
        t_head = _median_time(lambda: sequence_nll(calls.head(calls.norm(last)), ids), n)
    return (t_pass - t_head) / n_layers, t_head


def mean_rerun(n_layers: int, surgery: str) -> float:
    """Blocks the prefix sweep reruns per ablation, averaged over all layers (see the module
    text): (L - 1) / 2 for ``skip``, (L + 1) / 2 for a weight surgery."""
    return (n_layers - 1) / 2 if surgery == "skip" else (n_layers + 1) / 2


def identical(a: tuple, b: tuple) -> bool:
    """Whether two ``sweep_nll`` results are bit-identical."""
    (c1, n1, a1), (c2, n2, a2) = a, b
    return bool(
        np.array_equal(c1, c2)
        and np.array_equal(n1, n2)
        and a1.keys() == a2.keys()
        and all(np.array_equal(a1[k], a2[k]) for k in a1)
    )


def run_setting(s: Setting, surgeries: list[str], args: argparse.Namespace) -> list[dict]:
    """Interleaved timings of both methods per surgery on setting ``s``: one row per surgery
    plus an ``all`` row."""
    model = build(s.layers, s.d, s.vocab, args.context)
    n_seq = max(1, s.tokens // args.context)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, s.vocab, (n_seq, args.context), generator=gen)
    first = ids[: args.batch_size]
    times = {(g, m): [] for g in surgeries for m in ("naive", "prefix")}
    same = dict.fromkeys(surgeries, True)
    shares = []
    for _ in range(args.repeats):
        shares.append(head_share(model, first))
        for g in surgeries:
            outputs = {}
            for method in ("naive", "prefix"):
                t0 = time.perf_counter()
                outputs[method] = sweep_nll(
                    model, ids, [g], method=method, batch_size=args.batch_size
                )
                times[(g, method)].append(time.perf_counter() - t0)
            same[g] &= identical(outputs["naive"], outputs["prefix"])
    t_block = statistics.median(b for b, _ in shares)
    t_head = statistics.median(h for _, h in shares)
    h = t_head / t_block
    rows = []
    for g in [*surgeries, "all"]:
        group = surgeries if g == "all" else [g]
        naive = [sum(times[(x, "naive")][i] for x in group) for i in range(args.repeats)]
        prefix = [sum(times[(x, "prefix")][i] for x in group) for i in range(args.repeats)]
        full, k = s.layers + h, s.layers * len(group)
        rerun = statistics.mean(mean_rerun(s.layers, x) for x in group)
        med_n, med_p = statistics.median(naive), statistics.median(prefix)
        rows.append(
            {
                **asdict(s),
                "surgery": g,
                "block_s": t_block,
                "head_s": t_head,
                "head_blocks": h,
                "mean_rerun_blocks": rerun,
                "ceiling_per_ablation": full / (rerun + h),
                "ceiling_sweep": (k + len(group)) * full / (len(group) * full + k * (rerun + h)),
                "naive_s": med_n,
                "prefix_s": med_p,
                "ratio": med_n / med_p,
                "identical": all(same[x] for x in group),
                "all_naive_s": naive,
                "all_prefix_s": prefix,
            }
        )
    return rows


def print_table(rows: list[dict]) -> None:
    head = (
        f"{'L':>3} {'d':>4} {'vocab':>6} {'tokens':>6} {'surgery':>12} {'H=head/blk':>10} "
        f"{'rerun':>5} {'ceil/abl':>8} {'ceil/sweep':>10} {'naive s':>8} {'prefix s':>8} "
        f"{'ratio':>6} {'identical':>9}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['layers']:>3} {r['d']:>4} {r['vocab']:>6} {r['tokens']:>6} {r['surgery']:>12} "
            f"{r['head_blocks']:>10.2f} {r['mean_rerun_blocks']:>5.1f} "
            f"{r['ceiling_per_ablation']:>7.2f}x {r['ceiling_sweep']:>9.2f}x "
            f"{r['naive_s']:>8.2f} {r['prefix_s']:>8.2f} {r['ratio']:>5.2f}x "
            f"{r['identical']!s:>9}"
        )
    print(f"\ntarget: >= {TARGET}x for {TARGET_MIN_LAYERS} or more layers")
    for r in rows:
        if r["layers"] >= TARGET_MIN_LAYERS:
            ok = r["ratio"] >= TARGET and r["identical"]
            print(
                f"  {'MEETS' if ok else 'misses':>6}: L{r['layers']} d{r['d']} V{r['vocab']} "
                f"{r['surgery']:<12} {r['ratio']:.2f}x (ceiling {r['ceiling_sweep']:.2f}x)"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--settings",
        default=DEFAULT_SETTINGS,
        help="comma-separated LAYERSxDxVOCAB:TOKENS (default: %(default)s)",
    )
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--surgeries", default="skip,interpolate")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    settings = [Setting.parse(x) for x in args.settings.split(",")]
    surgeries = args.surgeries.split(",")
    t0 = time.perf_counter()
    rows = []
    for s in settings:
        rows += run_setting(s, surgeries, args)
        print(f"[{s.name}: done at {time.perf_counter() - t0:.0f}s]", flush=True)
    print()
    print_table(rows)
    print(f"\ntotal {time.perf_counter() - t0:.0f}s, {args.threads} thread(s)")
    if args.out:
        atomic_write_json(
            args.out,
            {"config": vars(args), "rows": rows, "provenance": provenance(benchmark="ablation")},
        )


if __name__ == "__main__":
    main()
