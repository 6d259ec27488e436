"""Alignment speed: lamina's SFT step, DPO step and gate scoring against lean references.

Setting (issue 34): a real model (default ``smollm2-135m-instruct``; ``--model gemma-3-270m``),
the organisms' instruction data (:func:`lamina.sources.organisms.curriculum.generate_curriculum`),
batches of 8 training items, 1 torch thread, the tied embedding frozen as in ``make aligned``.
Each method runs ``--steps`` steps (or, for scoring, ``--items`` held-out triples) per repeat;
the repeats interleave the methods, and the table gives the median wall time of each and its
ratio to the lean reference measured in the same run (clocks read after
:func:`lamina.sources.organisms.loop.synchronize`).

* SFT step (forward, backward, AdamW): reference = the full logits at every position, masked
  cross-entropy on the answer tokens (``lamina.sources.organisms.objectives.sft_loss``); lamina
  = the head at answer positions only (``stages.sft_batch_loss``).
* DPO step: reference = four full forwards (policy and reference, chosen and rejected, each
  with its prompt); "answer head" = the same four with the head at answer positions; lamina =
  also each prompt once per model (``stages.dpo_batch_loss``).
* DPO with the reference scored once (#52 item 4): the step reads the reference's
  log-probabilities from one length-sorted pass over every training triple
  (``stages.reference_logprobs``), timed on its own; the stage's ratio at the aligned models'
  budget is printed from the two.
* Gate scoring (no grad): reference = unsorted batches of 64, chosen and rejected separately,
  full logits; lamina = length-sorted batches, a shared prompt, answer positions only
  (``stages.dpo_margins``).

Also printed: the share of answer tokens, of prompt tokens in a DPO batch, and of padding in
unsorted and sorted scoring batches. Run: ``python benchmarks/alignment.py [--model M]
[--repeats 3] [--steps 3] [--items 256]``.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from lamina.sources.models import load_model
from lamina.sources.organisms.curriculum import generate_curriculum
from lamina.sources.organisms.instructions import AlignmentData
from lamina.sources.organisms.loop import StageBudget, make_adamw, synchronize
from lamina.sources.organisms.objectives import dpo_loss, sequence_logprob, sft_loss
from lamina.sources.organisms.pretrained import PretrainedAlignConfig
from lamina.sources.organisms.qa import format_answer, format_prompt
from lamina.sources.organisms.scoring import model_device, qa_batch, sequence_logprobs
from lamina.sources.organisms.stages import (
    dpo_batch_loss,
    dpo_margins,
    reference_logprobs,
    sft_batch_loss,
)

MAX_LEN = 64


def _batch(tok: Any, prompts: list[str], comps: list[str], dev: torch.device) -> dict[str, torch.Tensor]:
    return qa_batch(tok, [format_prompt(p) for p in prompts], [format_answer(c) for c in comps], MAX_LEN, dev)


def _full_logprob(model: Any, b: dict[str, torch.Tensor]) -> torch.Tensor:
    """The lean reference: every position's logits, then the masked sum."""
    logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
    return sequence_logprob(logits, b["input_ids"], b["target_mask"])


def sft_reference(model: Any, tok: Any, items: list[tuple[str, str]]) -> torch.Tensor:
    b = _batch(tok, [q for q, _ in items], [a for _, a in items], model_device(model))
    logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
    return sft_loss(logits, b["input_ids"], b["target_mask"])


def dpo_four(model: Any, ref: Any, tok: Any, items: list[tuple[str, str, str]], head_only: bool) -> torch.Tensor:
    """DPO with four separate forwards: full logits (reference) or the head at answer
    positions (``head_only``)."""
    dev = model_device(model)
    score = sequence_logprobs if head_only else _full_logprob
    q = [p for p, _, _ in items]
    bc, br = _batch(tok, q, [c for _, c, _ in items], dev), _batch(tok, q, [r for _, _, r in items], dev)
    pc, pr = score(model, bc), score(model, br)
    with torch.no_grad():
        rc, rr = score(ref, bc), score(ref, br)
    return dpo_loss(pc, pr, rc, rr, 0.1)


def gate_reference(model: Any, tok: Any, items: list[tuple[str, str, str]]) -> torch.Tensor:
    """The 2a683dc gate scoring: unsorted batches of 64, chosen and rejected separately."""
    dev, out = model_device(model), []
    with torch.no_grad():
        for i in range(0, len(items), 64):
            chunk = items[i : i + 64]
            q = [p for p, _, _ in chunk]
            out.append(_full_logprob(model, _batch(tok, q, [c for _, c, _ in chunk], dev))
                       - _full_logprob(model, _batch(tok, q, [r for _, _, r in chunk], dev)))  # fmt: skip
    return torch.cat(out)


def _steps(model: Any, loss: Callable[[list[int]], torch.Tensor], n_items: int, steps: int) -> float:
    """Wall seconds of ``steps`` AdamW steps on batches of 8 (after a sync)."""
    opt = make_adamw(model, StageBudget(steps, 8, 1e-5))
    synchronize(model_device(model))
    t0 = time.perf_counter()
    for i in range(steps):
        value = loss([(8 * i + k) % n_items for k in range(8)])
        opt.zero_grad(set_to_none=True)
        value.backward()
        opt.step()
    synchronize(model_device(model))
    return time.perf_counter() - t0


def _timed(fn: Callable[[], Any], dev: torch.device) -> float:
    synchronize(dev)
    t0 = time.perf_counter()
    fn()
    synchronize(dev)
    return time.perf_counter() - t0


def token_shares(tok: Any, sft: list[tuple[str, str]], dpo: list[tuple[str, str, str]],
                 held: list[tuple[str, str, str]]) -> dict[str, float]:  # fmt: skip
    """Answer-token share of SFT rows; prompt share of a DPO batch's tokens (chosen and
    rejected rows, each with its prompt); padding share of unsorted vs sorted batches of 64."""
    b = qa_batch(tok, [format_prompt(q) for q, _ in sft], [format_answer(a) for _, a in sft], MAX_LEN)
    answer = float(b["target_mask"].sum() / b["attention_mask"].sum())
    rows = [(format_prompt(p), format_answer(c)) for p, c, _ in dpo] + [(format_prompt(p), format_answer(r)) for p, _, r in dpo]
    d = qa_batch(tok, [p for p, _ in rows], [c for _, c in rows], MAX_LEN)
    prompt = 1 - float(d["target_mask"].sum() / d["attention_mask"].sum())
    lengths = [len(tok(format_prompt(p) + format_answer(c), add_special_tokens=False)["input_ids"]) + 1
               for p, c, _ in held]  # fmt: skip

    def padding(ls: list[int]) -> float:
        chunks = [ls[i : i + 64] for i in range(0, len(ls), 64)]
        return 1 - sum(ls) / sum(max(c) * len(c) for c in chunks)

    return {"answer tokens / SFT tokens": answer, "prompt tokens / DPO tokens": prompt,
            "padding, unsorted batches": padding(lengths), "padding, sorted batches": padding(sorted(lengths))}  # fmt: skip


def aligned_setting(model: str) -> tuple[Any, Any, AlignmentData]:
    """(model, tokenizer, alignment data) as ``make aligned`` trains them: the model on the
    CPU with its tied embedding frozen, the curriculum's data at corpus seed 0, 1 torch thread
    (also used by ``benchmarks/length_groups.py``)."""
    torch.set_num_threads(1)
    base, tok = load_model(model, device="cpu")
    base.get_input_embeddings().weight.requires_grad_(False)
    data = generate_curriculum(0, 1).alignment
    assert data is not None
    return base, tok, data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--items", type=int, default=256, help="held-out triples scored (batches of 64)")
    args = ap.parse_args()
    base, tok, data = aligned_setting(args.model)
    sft = [(x.prompt, x.target) for x in data.sft_train]  # what make aligned's SFT trains on
    dpo = [t.as_tuple() for t in data.dpo_train]
    held = [t.as_tuple() for t in data.dpo_heldout[: args.items]]
    ref = copy.deepcopy(base).eval().requires_grad_(False)
    dev = model_device(base)
    every_held = [t.as_tuple() for t in data.dpo_heldout]  # padding: every held-out triple
    ref_lp = reference_logprobs(ref, tok, dpo, MAX_LEN)  # the stage's one reference pass
    for k, v in token_shares(tok, sft, dpo[:512], every_held).items():
        print(f"{k}: {100 * v:.1f}%")
    Loss = Callable[[Any, list[int]], torch.Tensor]  # (the model being trained, item indices)

    def train(loss: Loss, n_items: int) -> Callable[[], float]:
        def run() -> float:
            model = copy.deepcopy(base).train()
            return _steps(model, lambda idx: loss(model, idx), n_items, args.steps)

        return run

    methods: dict[str, dict[str, Callable[[], float]]] = {
        "SFT step": {
            "reference (full logits)": train(lambda m, i: sft_reference(m, tok, [sft[j] for j in i]), len(sft)),
            "lamina (answer positions)": train(lambda m, i: sft_batch_loss(m, tok, [sft[j] for j in i], MAX_LEN), len(sft)),
        },
        "DPO step": {
            "reference (4 full forwards)": train(lambda m, i: dpo_four(m, ref, tok, [dpo[j] for j in i], False), len(dpo)),
            "answer positions, 4 forwards": train(lambda m, i: dpo_four(m, ref, tok, [dpo[j] for j in i], True), len(dpo)),
            "lamina (+ shared prompt)": train(lambda m, i: dpo_batch_loss(m, ref, tok, [dpo[j] for j in i], MAX_LEN, 0.1), len(dpo)),
            "lamina, reference scored once (step)": train(lambda m, i: dpo_batch_loss(m, None, tok, [dpo[j] for j in i], MAX_LEN, 0.1, ref_lp[i]), len(dpo)),
        },
        "reference pass": {
            "every DPO triple once, sorted": lambda: _timed(lambda: reference_logprobs(ref, tok, dpo, MAX_LEN), dev),
        },
        "gate scoring": {
            "reference (unsorted, full logits)": lambda: _timed(lambda: gate_reference(base.eval(), tok, held), dev),
            "lamina (sorted, shared, answer positions)": lambda: _timed(lambda: dpo_margins(base.eval(), None, tok, held, MAX_LEN), dev),
        },
    }  # fmt: skip
    times: dict[tuple[str, str], list[float]] = {(g, n): [] for g, ms in methods.items() for n in ms}
    for _ in range(args.repeats):
        for group, ms in methods.items():
            for name, run in ms.items():
                times[(group, name)].append(run())
    print(f"\n{args.model}, {args.repeats} interleaved repeats, 1 thread; medians")
    for group, ms in methods.items():
        ref_t = statistics.median(times[(group, next(iter(ms)))])
        for name in ms:
            t = statistics.median(times[(group, name)])
            print(f"{group:14s} {name:44s} {t:8.2f} s  {ref_t / t:5.2f}x faster than the reference")
    # the DPO stage at the aligned models' budget: every step scores its batch with the
    # reference, or the reference scores every triple once and the steps read it
    steps = PretrainedAlignConfig().dpo_steps
    per_step = {n: statistics.median(times[("DPO step", n)]) / args.steps
                for n in ("lamina (+ shared prompt)", "lamina, reference scored once (step)")}  # fmt: skip
    once = statistics.median(times[("reference pass", "every DPO triple once, sorted")])
    before, after = steps * per_step["lamina (+ shared prompt)"], once + steps * per_step[
        "lamina, reference scored once (step)"]
    print(f"DPO stage, {steps} steps of 8 over {len(dpo)} triples: {before:.0f} s per batch -> "
          f"{after:.0f} s with one reference pass ({once:.0f} s): {before / after:.2f}x")


if __name__ == "__main__":
    main()
