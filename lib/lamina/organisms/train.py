"""Seeded training loops: pretraining with log-spaced checkpoints, then three alignment stages.

Optimiser: AdamW (weight decay on matrices only), gradient clipping, learning rate
lr(t) = peak * t / warmup for t < warmup, then
lr(t) = peak * (r + (1 - r) * 0.5 * (1 + cos(pi * (t - warmup) / (total - warmup)))), r = min_lr_ratio.

Pretraining samples random ``context``-token windows from the training token stream with a
seeded ``torch.Generator``; validation uses fixed, evenly spaced windows of the validation
stream. Alignment stages start from the final pretraining weights with a fresh AdamW and run
the same number of steps with the same number of examples per step:

* ``lm``: continued LM on windows of the held-out text;
* ``sft``: masked SFT (loss on answer tokens + EOS) on curriculum question -> answer pairs;
* ``dpo``: DPO on (prompt, chosen, rejected) triples, reference = the frozen base model.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerBase

from lamina.organisms.checkpoints import save_checkpoint, write_curve
from lamina.organisms.configs import OrganismConfig, hf_config
from lamina.organisms.corpus import Corpus, format_answer, format_prompt
from lamina.organisms.objectives import dpo_loss, lm_loss, sequence_logprob, sft_loss

STAGES = ("lm", "sft", "dpo")


def lr_at(step: int, total: int, peak: float, warmup: int, min_ratio: float) -> float:
    """Learning rate of the optimiser update taken at ``step`` (0-based); see module docstring."""
    if step < warmup:
        return peak * (step + 1) / warmup
    frac = (step - warmup) / max(1, total - warmup)
    return peak * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))


def checkpoint_steps(total: int, n: int) -> list[int]:
    """Step 0 plus at least ``n`` log-spaced steps in [1, total], ending at ``total``.

    Dense early, sparse late, e.g. total=500, n=10 -> [0, 1, 2, 4, 8, 16, 31, 63, 125, 250, 500].
    """
    k = n
    while True:
        steps = sorted({int(round(x)) for x in np.geomspace(1, total, k)})
        if len(steps) >= min(n, total) or k > 10 * n:
            return [0, *steps]
        k += 1


def make_model(cfg: OrganismConfig, tokenizer: PreTrainedTokenizerBase) -> PreTrainedModel:
    """Freshly initialised HF model for ``cfg`` (seeded by ``cfg.seed``), float32, CPU."""
    torch.manual_seed(cfg.seed)
    conf = hf_config(cfg, len(tokenizer), tokenizer.eos_token_id)
    return AutoModelForCausalLM.from_config(conf, dtype=torch.float32)


def make_optimizer(model: torch.nn.Module, cfg: OrganismConfig, lr: float) -> torch.optim.AdamW:
    """AdamW with weight decay on parameters of rank >= 2 only (not on norms and biases)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    rest = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": rest, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=cfg.betas, eps=1e-8)


def random_windows(
    stream: torch.Tensor, batch: int, length: int, gen: torch.Generator
) -> torch.Tensor:
    """``batch`` random windows of ``length`` tokens from a 1-D stream: (batch, length) int64."""
    starts = torch.randint(0, len(stream) - length, (batch,), generator=gen)
    return torch.stack([stream[s : s + length] for s in starts.tolist()])


def fixed_windows(stream: torch.Tensor, n: int, length: int) -> torch.Tensor:
    """``n`` evenly spaced windows of ``length`` tokens (the validation set): (n, length)."""
    starts = torch.linspace(0, len(stream) - length - 1, n).long()
    return torch.stack([stream[s : s + length] for s in starts.tolist()])


@torch.no_grad()
def eval_lm(model: PreTrainedModel, windows: torch.Tensor, batch: int = 32) -> float:
    """Mean next-token loss over ``windows`` (n, T), nats per token."""
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(windows), batch):
        x = windows[i : i + batch]
        loss = lm_loss(model(input_ids=x).logits, x)
        n = x.numel() - len(x)
        total, count = total + float(loss) * n, count + n
    model.train()
    return total / max(count, 1)


def _step(
    model: PreTrainedModel, opt: torch.optim.Optimizer, loss: torch.Tensor, lr: float, clip: float
) -> float:
    for g in opt.param_groups:
        g["lr"] = lr
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    return float(loss.detach())


def pretrain(
    cfg: OrganismConfig,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    train_stream: torch.Tensor,
    val_windows: torch.Tensor,
    out: Path,
    progress: bool = True,
    steps: int | None = None,
) -> list[dict[str, Any]]:
    """Pretrain ``model`` in place for ``steps`` (default ``cfg.steps``) steps.

    Saves ``out/checkpoints/step-N`` at :func:`checkpoint_steps` (when ``out`` is not None) and
    returns the curve: one row per step (train loss, lr, tokens), val loss at eval steps.
    """
    total = cfg.steps if steps is None else steps
    gen = torch.Generator().manual_seed(cfg.seed)
    opt = make_optimizer(model, cfg, cfg.lr)
    ckpts = set(checkpoint_steps(cfg.steps, cfg.n_checkpoints))
    rows: list[dict[str, Any]] = []
    model.train()

    def maybe_save(step: int, row: dict[str, Any]) -> None:
        if step % cfg.eval_every == 0 or step in ckpts or step == total:
            row["val_loss"] = eval_lm(model, val_windows)
        if out is not None and step in ckpts:
            info = {"organism": cfg.name, "stage": "pretrain", "step": step, **row}
            save_checkpoint(out / "checkpoints" / f"step-{step}", model, tokenizer, opt, info)

    row0: dict[str, Any] = {"step": 0, "tokens": 0}
    maybe_save(0, row0)
    rows.append(row0)
    bar = tqdm(range(total), desc=f"{cfg.name} pretrain", disable=not progress, leave=False)
    for i in bar:
        x = random_windows(train_stream, cfg.batch_size, cfg.context, gen)
        lr = lr_at(i, cfg.steps, cfg.lr, cfg.warmup_steps, cfg.min_lr_ratio)
        loss = _step(model, opt, lm_loss(model(input_ids=x).logits, x), lr, cfg.grad_clip)
        row = {"step": i + 1, "tokens": (i + 1) * x.numel(), "lr": lr, "train_loss": loss}
        maybe_save(i + 1, row)
        rows.append(row)
        bar.set_postfix(loss=f"{loss:.3f}", val=f"{row.get('val_loss', float('nan')):.3f}")
    if out is not None:
        write_curve(out / "curves", "pretrain", rows)
    return rows


def qa_batch(
    tokenizer: PreTrainedTokenizerBase, prompts: list[str], completions: list[str], max_len: int
) -> dict[str, torch.Tensor]:
    """Tokenise prompt + completion + EOS, right-padded; target mask on completion + EOS.

    -> {"input_ids", "attention_mask", "target_mask"}: each (B, T) int64, T <= max_len.
    Over-long rows lose prompt tokens from the left (the completion is kept).
    """
    eos = tokenizer.eos_token_id
    p_ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    c_ids = tokenizer(completions, add_special_tokens=False)["input_ids"]
    rows, masks = [], []
    for p, c in zip(p_ids, c_ids, strict=True):
        c = (c + [eos])[: max_len - 1]
        p = p[-(max_len - len(c)) :]
        rows.append(p + c)
        masks.append([0] * len(p) + [1] * len(c))
    T = max(len(r) for r in rows)
    ids = torch.full((len(rows), T), eos, dtype=torch.long)
    att = torch.zeros((len(rows), T), dtype=torch.long)
    tgt = torch.zeros((len(rows), T), dtype=torch.long)
    for i, (r, m) in enumerate(zip(rows, masks, strict=True)):
        ids[i, : len(r)] = torch.tensor(r)
        att[i, : len(r)] = 1
        tgt[i, : len(r)] = torch.tensor(m)
    return {"input_ids": ids, "attention_mask": att, "target_mask": tgt}


def completion_logprob(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    completions: list[str],
    max_len: int,
) -> torch.Tensor:
    """log pi(completion + EOS | prompt) per row: (B,), nats (with grad if enabled)."""
    b = qa_batch(tokenizer, prompts, completions, max_len)
    logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
    return sequence_logprob(logits, b["input_ids"], b["target_mask"])


def stage_loss(
    stage: str,
    model: PreTrainedModel,
    ref: PreTrainedModel | None,
    tokenizer: PreTrainedTokenizerBase,
    items: list[Any],
    cfg: OrganismConfig,
) -> torch.Tensor:
    """The objective of an alignment stage on one batch of ``items``; scalar, nats.

    lm: items are (T,) token windows; sft: (question, answer); dpo: (prompt, chosen, rejected).
    """
    if stage == "lm":
        x = torch.stack(items)
        return lm_loss(model(input_ids=x).logits, x)
    if stage == "sft":
        b = qa_batch(
            tokenizer,
            [format_prompt(q) for q, _ in items],
            [format_answer(a) for _, a in items],
            cfg.context,
        )
        logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
        return sft_loss(logits, b["input_ids"], b["target_mask"])
    if stage == "dpo":
        prompts = [format_prompt(p) for p, _, _ in items] * 2
        comps = [format_answer(c) for _, c, _ in items] + [format_answer(r) for _, _, r in items]
        pol = completion_logprob(model, tokenizer, prompts, comps, cfg.context)
        assert ref is not None
        with torch.no_grad():
            rlp = completion_logprob(ref, tokenizer, prompts, comps, cfg.context)
        n = len(items)
        return dpo_loss(pol[:n], pol[n:], rlp[:n], rlp[n:], cfg.dpo_beta)
    raise ValueError(f"unknown alignment stage {stage!r}; expected one of {STAGES}")


def align(
    stage: str,
    cfg: OrganismConfig,
    base: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    corpus: Corpus,
    heldout_stream: torch.Tensor,
    out: Path | None,
    progress: bool = True,
) -> tuple[PreTrainedModel, list[dict[str, Any]]]:
    """Run one alignment stage from a copy of ``base`` (left unchanged); save ``out/stages/<stage>``.

    Returns (aligned model, curve rows: step, lr, train_loss, eval_loss every align_eval_every).
    """
    model = copy.deepcopy(base).train()
    ref = copy.deepcopy(base).eval() if stage == "dpo" else None
    if ref is not None:
        ref.requires_grad_(False)
    gen = torch.Generator().manual_seed(cfg.seed * 1000 + 1 + STAGES.index(stage))
    train_items: list[Any]
    if stage == "lm":
        n_win = max(1, (len(heldout_stream) - 1) // cfg.context)
        train_items = list(heldout_stream[: n_win * cfg.context].view(n_win, cfg.context))
        eval_items = train_items[-min(32, len(train_items)) :]
        train_items = train_items[: len(train_items) - len(eval_items)] or eval_items
    else:
        train_items = corpus.sft if stage == "sft" else corpus.dpo
        eval_items = (corpus.sft_eval if stage == "sft" else corpus.dpo_eval)[:64]
    opt = make_optimizer(model, cfg, cfg.align_lr)
    order: list[int] = []
    rows: list[dict[str, Any]] = []

    def evaluate() -> float:
        model.eval()
        with torch.no_grad():
            v = float(stage_loss(stage, model, ref, tokenizer, eval_items, cfg))
        model.train()
        return v

    rows.append({"step": 0, "examples": 0, "eval_loss": evaluate()})
    bar = tqdm(
        range(cfg.align_steps), desc=f"{cfg.name} {stage}", disable=not progress, leave=False
    )
    for i in bar:
        while len(order) < cfg.align_batch_size:
            order += torch.randperm(len(train_items), generator=gen).tolist()
        idx, order = order[: cfg.align_batch_size], order[cfg.align_batch_size :]
        lr = lr_at(i, cfg.align_steps, cfg.align_lr, cfg.align_warmup_steps, cfg.min_lr_ratio)
        loss = stage_loss(stage, model, ref, tokenizer, [train_items[j] for j in idx], cfg)
        row: dict[str, Any] = {"step": i + 1, "examples": (i + 1) * len(idx), "lr": lr}
        row["train_loss"] = _step(model, opt, loss, lr, cfg.grad_clip)
        if (i + 1) % cfg.align_eval_every == 0 or i + 1 == cfg.align_steps:
            row["eval_loss"] = evaluate()
        rows.append(row)
        bar.set_postfix(loss=f"{row['train_loss']:.3f}")
    if out is not None:
        info = {"organism": cfg.name, "stage": stage, "step": cfg.align_steps, **rows[-1]}
        save_checkpoint(out / "stages" / stage, model, tokenizer, opt, info)
        write_curve(out / "curves", stage, rows)
    return model, rows


def run_all(
    cfg: OrganismConfig,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    corpus: Corpus,
    streams: dict[str, torch.Tensor],
    out: Path,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, PreTrainedModel]:
    """Pretrain, then every alignment stage; returns {"final": model, "lm": ..., "sft": ..., "dpo": ...}."""
    val = fixed_windows(streams["val"], cfg.n_val_windows, cfg.context)
    pretrain(cfg, model, tokenizer, streams["train"], val, out, progress)
    models = {"final": model}
    for stage in STAGES:
        models[stage], rows = align(
            stage, cfg, model, tokenizer, corpus, streams["heldout"], out, progress
        )
        log(
            f"{cfg.name} {stage}: eval loss {rows[0]['eval_loss']:.3f} -> {rows[-1]['eval_loss']:.3f}"
        )
    return models
