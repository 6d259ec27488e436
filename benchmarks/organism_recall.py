"""Fact recall of the organisms: where their training budget comes from (issue 51).

The held-out gate questions can be answered only by an organism that learnt the curriculum's
facts in pretraining (:mod:`lamina.sources.organisms.recall`). Two measurements:

    python benchmarks/organism_recall.py build [NAME ...]
        recall along a built organism's checkpoints (step-*, then @lm, @sft, @dpo), plus the
        seen pretraining QA items answered (bare answer): how a build's budget served it
    python benchmarks/organism_recall.py passes [--steps 100 200 300 400] [--organism NAME]
        the organism's architecture pretrained on the curriculum documents alone (no plays),
        recall after each number of steps; passes = steps x batch x context / curriculum
        tokens. It fixes how many passes over the curriculum the budget must give.

One thread; the build mode takes about 1 CPU-minute per organism, the passes mode about
3.9 s per step (organism-gpt2, 2-core AMD EPYC, one process, at f213eae). In the build mode a
build's last step and @final are one checkpoint, listed (and measured) under both names.
"""

from __future__ import annotations

import argparse
import time

import torch

from lamina.sources.organisms import ORGANISMS, list_checkpoints, resolve
from lamina.sources.organisms.corpus import load_corpus
from lamina.sources.organisms.curriculum import generate_curriculum
from lamina.sources.organisms.evaluate import sft_hits
from lamina.sources.organisms.objectives import lm_loss
from lamina.sources.organisms.recall import fact_recall
from lamina.sources.organisms.tokenizer import encode_stream, train_tokenizer
from lamina.sources.organisms.train import (
    lr_at,
    make_model,
    make_optimizer,
    optimizer_step,
    random_windows,
)


def _row(label: str, recall: dict[str, float], extra: str = "") -> str:
    cells = " ".join(f"{k} {v:.3f}" for k, v in recall.items())
    return f"{label:>24}  {cells}  {extra}"


def along_build(names: list[str]) -> None:
    """Print recall at every checkpoint of each built organism in ``names``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    for name in names:
        cfg = ORGANISMS[name]
        seen = generate_curriculum(cfg.corpus_seed, 1).pretrain_qa
        for spec in list_checkpoints(name):
            folder = resolve(spec)
            tok = AutoTokenizer.from_pretrained(folder)
            model = AutoModelForCausalLM.from_pretrained(folder, use_safetensors=True)
            qa = float(sft_hits(model, tok, seen, cfg.context).float().mean())
            print(_row(spec, fact_recall(model, tok), f"seen QA {qa:.3f}"), flush=True)


def passes(name: str, steps: list[int]) -> None:
    """Pretrain ``name``'s architecture on its curriculum documents alone; print recall after
    each of ``steps``."""
    cfg = ORGANISMS[name].replace(steps=max(steps))
    corpus = load_corpus(cfg)
    tok = train_tokenizer(corpus.train, cfg.vocab_size)  # the build's tokenizer
    curriculum = set(generate_curriculum(cfg.corpus_seed, cfg.n_curriculum_docs).text)
    stream = encode_stream(tok, [d for d in corpus.train if d in curriculum])
    per_step = cfg.batch_size * cfg.context
    print(f"{name}: curriculum alone, {len(stream):,} tokens; {per_step:,} tokens per step")
    torch.manual_seed(cfg.seed)
    model = make_model(cfg, tok)
    opt = make_optimizer(model, cfg, cfg.lr)
    gen = torch.Generator().manual_seed(cfg.seed)
    t0 = time.perf_counter()
    for i in range(cfg.steps):
        model.train()
        x = random_windows(stream, cfg.batch_size, cfg.context, gen)
        lr = lr_at(i, cfg.steps, cfg.lr, cfg.warmup_steps, cfg.min_lr_ratio)
        loss = optimizer_step(model, opt, lm_loss(model(input_ids=x).logits, x), lr, cfg.grad_clip)
        if i + 1 in steps:
            label = f"step {i + 1} ({(i + 1) * per_step / len(stream):.1f} passes)"
            extra = f"loss {loss:.3f}, {time.perf_counter() - t0:.0f} s"
            print(_row(label, fact_recall(model, tok), extra), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    b = sub.add_parser("build", help="recall along built organisms' checkpoints")
    b.add_argument("names", nargs="*", default=["organism-gpt2", "organism-llama"])
    p = sub.add_parser("passes", help="recall against passes over the curriculum")
    p.add_argument("--organism", default="organism-gpt2", choices=sorted(ORGANISMS))
    p.add_argument("--steps", type=int, nargs="+", default=[100, 200, 300, 400])
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.mode == "build":
        along_build(args.names)
    else:
        if min(args.steps) < 1:
            ap.error(f"--steps must be positive, got {args.steps}")
        passes(args.organism, sorted(args.steps))


if __name__ == "__main__":
    main()
