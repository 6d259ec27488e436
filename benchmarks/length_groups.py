"""Training batches grouped by length (issue 52 item 4) against unsorted batches.

Setting: a real model (default ``smollm2-135m-instruct``; ``--model gemma-3-270m``) with its
tied embedding frozen, as in ``make aligned``; the organisms' alignment data at corpus seed 0
(266 SFT items, 741 DPO triples); batches of 8 at 64 tokens; 1 torch thread. For each stage
the two batch orders of :mod:`lamina.sources.organisms.loop` are drawn from the same seed for the
aligned build's 322 steps (:func:`~lamina.sources.organisms.loop.batch_indices` and
:func:`~lamina.sources.organisms.loop.length_grouped_batches` on
:func:`lamina.sources.organisms.stages.training_lengths`), and every ``322 // --steps``-th
batch of each is timed (forward, backward, AdamW step), so the timed batches follow each
order's mix of lengths. Repeats interleave the two orders; the medians and their ratio are
printed, with each order's padding share over all 322 batches (the padded tokens of the rows
each loss runs: SFT's prompt + answer rows; DPO's prompt rows and its chosen + rejected rows).

Run: ``python benchmarks/length_groups.py [--model M] [--repeats 3] [--steps 16]``.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from alignment import aligned_setting  # benchmarks/alignment.py, beside this script

from lamina.sources.organisms.loop import (
    StageBudget,
    batch_indices,
    length_grouped_batches,
    make_adamw,
    synchronize,
)
from lamina.sources.organisms.qa import format_answer, format_prompt
from lamina.sources.organisms.scoring import encode_qa, model_device
from lamina.sources.organisms.stages import (
    dpo_batch_loss,
    reference_logprobs,
    sft_batch_loss,
    training_lengths,
)

MAX_LEN, BATCH, STEPS = 64, 8, 322


def padding_share(stage: str, tok: Any, items: list[Any], batches: list[list[int]]) -> float:
    """Padded tokens / all tokens of the tensors the stage's loss pads (see the docstring)."""
    if stage == "sft":
        rows = encode_qa(tok, [format_prompt(q) for q, _ in items], [format_answer(a) for _, a in items], MAX_LEN)
        groups = [[[len(rows[i][0]) + len(rows[i][1]) for i in b]] for b in batches]
    else:
        prompts = [format_prompt(q) for q, _, _ in items]
        c = [len(x) for _, x in encode_qa(tok, prompts, [format_answer(x[1]) for x in items], MAX_LEN)]
        r = [len(x) for _, x in encode_qa(tok, prompts, [format_answer(x[2]) for x in items], MAX_LEN)]
        full = [len(p) for p in tok(prompts, add_special_tokens=False)["input_ids"]]
        p = [min(f, MAX_LEN - max(a, b)) for f, a, b in zip(full, c, r, strict=True)]
        groups = [[[p[i] for i in b], [c[i] for i in b] + [r[i] for i in b]] for b in batches]
    real = sum(sum(t) for g in groups for t in g)
    padded = sum(len(t) * max(t) for g in groups for t in g)
    return 1 - real / padded


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=16, help="batches timed per order and stage")
    args = ap.parse_args()
    base, tok, data = aligned_setting(args.model)
    items = {"sft": [(x.prompt, x.target) for x in data.sft_train], "dpo": [t.as_tuple() for t in data.dpo_train]}
    ref = copy.deepcopy(base).eval().requires_grad_(False)
    ref_lp = reference_logprobs(ref, tok, items["dpo"], MAX_LEN)
    dev = model_device(base)

    def loss(stage: str, model: Any, idx: list[int]) -> torch.Tensor:
        batch = [items[stage][j] for j in idx]
        if stage == "sft":
            return sft_batch_loss(model, tok, batch, MAX_LEN)
        return dpo_batch_loss(model, None, tok, batch, MAX_LEN, 0.1, ref_lp[idx])

    orders: dict[tuple[str, str], list[list[int]]] = {}
    for stage, seed in (("sft", 1), ("dpo", 2)):
        lengths = training_lengths(stage, tok, items[stage], MAX_LEN)
        draws = {"unsorted": batch_indices(len(lengths), BATCH, torch.Generator().manual_seed(seed)),
                 "length-grouped": length_grouped_batches(lengths, BATCH, torch.Generator().manual_seed(seed))}
        for name, it in draws.items():
            orders[(stage, name)] = [next(it) for _ in range(STEPS)]
    every = max(1, STEPS // args.steps)

    def timed(stage: str, batches: list[list[int]]) -> Callable[[], float]:
        def run() -> float:
            model = copy.deepcopy(base).train()
            opt = make_adamw(model, StageBudget(len(batches), BATCH, 1e-5))
            synchronize(dev)
            t0 = time.perf_counter()
            for idx in batches[::every][: args.steps]:
                value = loss(stage, model, idx)
                opt.zero_grad(set_to_none=True)
                value.backward()
                opt.step()
            synchronize(dev)
            return time.perf_counter() - t0

        return run

    times: dict[tuple[str, str], list[float]] = {k: [] for k in orders}
    for _ in range(args.repeats):
        for key, batches in orders.items():
            times[key].append(timed(key[0], batches)())
    print(f"{args.model}: {args.steps} of the {STEPS} batches of 8 per order, {args.repeats} interleaved "
          f"repeats, 1 thread; medians")  # fmt: skip
    for stage in ("sft", "dpo"):
        t_u = statistics.median(times[(stage, "unsorted")])
        for name in ("unsorted", "length-grouped"):
            t = statistics.median(times[(stage, name)])
            pad = padding_share(stage, tok, items[stage], orders[(stage, name)])
            print(f"{stage} {name:15s} padding {100 * pad:5.1f}%  {t:7.2f} s  {t_u / t:5.2f}x")


if __name__ == "__main__":
    main()
