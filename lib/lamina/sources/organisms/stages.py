"""The three alignment stages of an organism, and their losses (public: chapters reuse them).

Each stage trains a copy of its starting checkpoint (:data:`STAGE_BASE`) with a fresh AdamW
(linear warmup, then cosine decay to ``min_lr_ratio`` of the peak), for ``align_steps`` steps of
``align_batch_size`` examples:

* ``lm`` (peak ``align_lr``, from ``@final``): continued LM on windows of the held-out text.
* ``sft`` (peak ``sft_lr``, from ``@final``): masked SFT on (question, answer) pairs, the loss on
  the answer tokens and the EOS that ends them, plus LM replay of the pretraining stream:
  L = L_sft + replay_weight * L_lm(replay_batch_size random training windows).
* ``dpo`` (peak ``dpo_lr``, from ``@sft``): DPO on (question, chosen, rejected) triples against
  the frozen ``@sft`` as reference.

Pairs are rendered by :func:`qa_batch` (prompt + " " + answer + EOS); the same functions
(:mod:`lamina.sources.organisms.scoring`: the LM head at answer positions only, each DPO prompt
run once for both answers) feed :func:`stage_loss`, so gradients computed with it are those of
training. Each stage runs through :func:`lamina.sources.organisms.loop.train_steps` (losses
read once at the end, tensors on the model's device).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, cast

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from lamina.core.progress import bar as progress_bar
from lamina.sources.organisms.checkpoints import save_checkpoint, write_curve
from lamina.sources.organisms.configs import OrganismConfig
from lamina.sources.organisms.corpus import Corpus
from lamina.sources.organisms.loop import StageBudget, train_steps
from lamina.sources.organisms.objectives import dpo_loss, lm_loss
from lamina.sources.organisms.qa import format_answer, format_prompt
from lamina.sources.organisms.scoring import (
    answer_logprobs,
    encode_qa,
    in_length_order,
    model_device,
    pair_logprobs,
    qa_batch,
    sequence_logprobs,
)
from lamina.sources.organisms.train import STAGES, eval_lm, fixed_windows, pretrain, random_windows

__all__ = ["STAGES", "STAGE_BASE", "align", "completion_logprob", "dpo_batch_loss", "dpo_margins",
           "in_chunks", "pair_batch_logprobs", "qa_batch", "reference_logprobs", "run_all", "sft_batch_loss", "stage_budget",
           "stage_loss"]  # fmt: skip

STAGE_BASE = {"lm": "final", "sft": "final", "dpo": "sft"}
"""The checkpoint each stage starts from (and, for dpo, its frozen reference)."""


def completion_logprob(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    completions: list[str],
    max_len: int,
) -> torch.Tensor:
    """log pi(completion + EOS | prompt) per row: (B,), nats (with grad if enabled)."""
    return sequence_logprobs(model, qa_batch(tokenizer, prompts, completions, max_len, model_device(model)))


def pair_batch_logprobs(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, items: list[Any], max_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log pi(chosen | q), log pi(rejected | q)) for (question, chosen, rejected) triples: two
    (B,), nats; each prompt runs once (:func:`lamina.sources.organisms.scoring.pair_logprobs`)."""
    return pair_logprobs(model, tokenizer, [format_prompt(q) for q, _, _ in items],
                         [format_answer(c) for _, c, _ in items],
                         [format_answer(r) for _, _, r in items], max_len)  # fmt: skip


def triple_length(tokenizer: PreTrainedTokenizerBase, max_len: int) -> Callable[[Any], int]:
    """Token length of a (question, chosen, rejected) triple's prompt + longer answer (to sort
    batches by)."""
    def length(item: Any) -> int:
        (p, c), (_, r) = encode_qa(tokenizer, [format_prompt(item[0])] * 2,
                                   [format_answer(item[1]), format_answer(item[2])], max_len)  # fmt: skip
        return len(p) + max(len(c), len(r))

    return length


def training_lengths(stage: str, tokenizer: PreTrainedTokenizerBase, items: list[Any],
                     max_len: int) -> list[int]:  # fmt: skip
    """Sort keys (tokens) that group a stage's training items into batches of little padding
    (:func:`lamina.sources.organisms.loop.length_grouped_batches`): (N,) ints.

    sft, (question, answer): prompt + answer + EOS tokens, the one padded row of :func:`qa_batch`.
    dpo, (question, chosen, rejected): the prompt and the answers are padded apart
    (:func:`lamina.sources.organisms.scoring.pair_logprobs`), so the key orders by the prompt's
    tokens, then by the longer answer's: prompt * (max_len + 1) + max(chosen, rejected).
    """
    if stage == "sft":
        rows = encode_qa(tokenizer, [format_prompt(q) for q, _ in items],
                         [format_answer(a) for _, a in items], max_len)  # fmt: skip
        return [len(p) + len(c) for p, c in rows]
    if stage == "dpo":
        prompts = [format_prompt(q) for q, _, _ in items]
        chosen = encode_qa(tokenizer, prompts, [format_answer(c) for _, c, _ in items], max_len)
        rejected = encode_qa(tokenizer, prompts, [format_answer(r) for _, _, r in items], max_len)
        full = tokenizer(prompts, add_special_tokens=False)["input_ids"]
        keys = []
        for p, (_, c), (_, r) in zip(full, chosen, rejected, strict=True):
            answer = max(len(c), len(r))
            keys.append(min(len(p), max_len - answer) * (max_len + 1) + answer)
        return keys
    raise ValueError(f"length-grouped batches are for the sft and dpo stages; got {stage!r}")


def in_chunks(
    score: Callable[[list[Any]], torch.Tensor],
    items: list[Any],
    batch: int,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """``score`` of consecutive chunks of at most ``batch`` items, concatenated: (N, ...) in
    the items' order; an empty (0,) tensor of ``dtype`` when there are no items."""
    out = [score(items[i : i + batch]) for i in range(0, len(items), batch)]
    return torch.cat(out) if out else torch.zeros(0, dtype=dtype)


@torch.no_grad()
def dpo_margins(
    model: PreTrainedModel,
    ref: PreTrainedModel | None,
    tokenizer: PreTrainedTokenizerBase,
    items: list[tuple[str, str, str]],
    max_len: int,
    batch: int = 64,
) -> torch.Tensor:
    """Preference margins of (question, chosen, rejected) triples: (N,), nats.

    With a reference model, DPO's implicit reward margin before the beta factor:
    m = (log pi(y_w|x) - log pi_ref(y_w|x)) - (log pi(y_l|x) - log pi_ref(y_l|x));
    beta * m is the DPO reward margin; m > 0 means the policy moved towards the chosen answer.
    With ``ref=None``, the policy's own margin m = log pi(y_w|x) - log pi(y_l|x); m > 0 means it
    prefers the chosen answer (the DPO preference accuracy is the fraction of m > 0).
    Sequence log-probabilities include the EOS that ends each answer; each prompt runs once
    for both answers, in batches of similar length. -> (N,) on the CPU, in the items' order.
    """
    model.eval()

    def margins(chunk: list[tuple[str, str, str]]) -> torch.Tensor:
        pc, pr = pair_batch_logprobs(model, tokenizer, chunk, max_len)
        if ref is None:
            return pc - pr
        rc, rr = pair_batch_logprobs(ref, tokenizer, chunk, max_len)
        return (pc - rc) - (pr - rr)

    return in_length_order(margins, items, triple_length(tokenizer, max_len), batch)


def stage_loss(
    stage: str,
    model: PreTrainedModel,
    ref: PreTrainedModel | None,
    tokenizer: PreTrainedTokenizerBase,
    items: list[Any],
    cfg: OrganismConfig,
    replay: torch.Tensor | None = None,
    ref_logprobs: torch.Tensor | None = None,
) -> torch.Tensor:
    """The objective an alignment stage trains on one batch; scalar, nats.

    items: lm: (T,) token windows; sft: (question, answer); dpo: (question, chosen, rejected).
    Answers are rendered by :func:`qa_batch` and end with EOS, which is scored.
    ref: the frozen reference (dpo only; its log-probabilities carry no gradient).
    replay: (B_r, T) pretraining windows (sft only): adds ``cfg.replay_weight`` times their LM
    loss, as in training. Without it, the sft value is the answer loss alone.
    ref_logprobs: (B, 2) dpo only: the reference's log-probabilities of these triples
    (:func:`reference_logprobs`), in place of scoring them with ``ref``.
    """
    dev = model_device(model)
    if stage == "lm":
        x = torch.stack(items).to(dev)
        return lm_loss(model(input_ids=x).logits, x)
    if stage == "sft":
        loss = sft_batch_loss(model, tokenizer, items, cfg.context)
        if replay is not None and len(replay):
            replay = replay.to(dev)
            loss = loss + cfg.replay_weight * lm_loss(model(input_ids=replay).logits, replay)
        return loss
    if stage == "dpo":
        if ref is None and ref_logprobs is None:
            raise ValueError("the dpo stage needs a reference model (ref)")
        return dpo_batch_loss(model, ref, tokenizer, items, cfg.context, cfg.dpo_beta, ref_logprobs)
    raise ValueError(f"unknown alignment stage {stage!r}; expected one of {STAGES}")


def sft_batch_loss(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                   items: list[Any], max_len: int) -> torch.Tensor:  # fmt: skip
    """Masked SFT loss of (question, answer) pairs: the mean of -log p over the answer tokens
    and their EOS (:func:`lamina.sources.organisms.objectives.sft_loss`), the head at those
    positions only. -> scalar, nats per answer token."""
    b = qa_batch(tokenizer, [format_prompt(q) for q, _ in items],
                 [format_answer(a) for _, a in items], max_len, model_device(model))  # fmt: skip
    return -answer_logprobs(model, b)[0].mean()


def dpo_batch_loss(model: PreTrainedModel, ref: PreTrainedModel | None,
                   tokenizer: PreTrainedTokenizerBase, items: list[Any], max_len: int, beta: float,
                   ref_logprobs: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
    """DPO loss (:func:`lamina.sources.organisms.objectives.dpo_loss`) of (question, chosen,
    rejected) triples against the frozen ``ref``; each prompt runs once per model. -> scalar,
    nats. ``ref_logprobs``: (B, 2) the reference's (log pi_ref(chosen), log pi_ref(rejected))
    of these triples, nats, computed once for the whole training set
    (:func:`reference_logprobs`); None: ``ref`` scores the batch."""
    pc, pr = pair_batch_logprobs(model, tokenizer, items, max_len)
    if ref_logprobs is not None:
        if ref_logprobs.shape != (len(items), 2):
            raise ValueError(f"ref_logprobs must be ({len(items)}, 2); got {tuple(ref_logprobs.shape)}")
        r = ref_logprobs.to(pc.device, pc.dtype)
        return dpo_loss(pc, pr, r[:, 0], r[:, 1], beta)
    if ref is None:
        raise ValueError("dpo_batch_loss needs a reference model or its ref_logprobs")
    with torch.no_grad():
        rc, rr = pair_batch_logprobs(ref, tokenizer, items, max_len)
    return dpo_loss(pc, pr, rc, rr, beta)


@torch.no_grad()
def reference_logprobs(ref: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                       items: list[Any], max_len: int, batch: int = 64) -> torch.Tensor:  # fmt: skip
    """The frozen reference's (log pi_ref(chosen | q), log pi_ref(rejected | q)) of every DPO
    training triple, in one pass of length-sorted batches (the reference never changes, so a
    step need not score its batch again): (N, 2), nats, on the CPU, in the items' order."""
    ref.eval()

    def score(chunk: list[Any]) -> torch.Tensor:
        return torch.stack(pair_batch_logprobs(ref, tokenizer, chunk, max_len), dim=1)

    return in_length_order(score, items, triple_length(tokenizer, max_len), batch)


def stage_budget(stage: str, cfg: OrganismConfig, lr: float | None = None) -> StageBudget:
    """The budget of an organism's stage: ``align_steps`` of ``align_batch_size``, peak
    :func:`stage_lr` (or ``lr``), the organism's AdamW settings (weight decay ``weight_decay``
    on matrices), ``align_warmup_steps``, seeded by the organism's seed and the stage."""
    return StageBudget(steps=cfg.align_steps, batch_size=cfg.align_batch_size,
                       lr=stage_lr(stage, cfg) if lr is None else lr,
                       warmup_steps=cfg.align_warmup_steps, min_lr_ratio=cfg.min_lr_ratio,
                       weight_decay=cfg.weight_decay, betas=cfg.betas, grad_clip=cfg.grad_clip,
                       seed=cfg.seed * 1000 + 1 + STAGES.index(stage))  # fmt: skip


def stage_lr(stage: str, cfg: OrganismConfig) -> float:
    """Peak learning rate of a stage: lm ``align_lr``, sft ``sft_lr``, dpo ``dpo_lr``."""
    return {"lm": cfg.align_lr, "sft": cfg.sft_lr, "dpo": cfg.dpo_lr}[stage]


def _stage_items(
    stage: str, cfg: OrganismConfig, corpus: Corpus, streams: dict[str, torch.Tensor]
) -> tuple[list[Any], list[Any]]:
    """(training items, evaluation items) of a stage: lm: context-length windows of the
    held-out stream (the last up to 32 for evaluation); sft / dpo: the corpus's items and up to
    64 of its evaluation items."""
    train_items: list[Any]
    if stage == "lm":
        held, T = streams["heldout"], cfg.context
        n_win = max(1, (len(held) - 1) // T)
        train_items = list(held[: n_win * T].view(n_win, T))
        eval_items = train_items[-min(32, len(train_items)) :]
        train_items = train_items[: len(train_items) - len(eval_items)] or eval_items
    elif stage in ("sft", "dpo"):
        train_items = corpus.sft if stage == "sft" else corpus.dpo
        eval_items = (corpus.sft_eval if stage == "sft" else corpus.dpo_eval)[:64]
    else:
        raise ValueError(f"unknown alignment stage {stage!r}; expected one of {STAGES}")
    return train_items, eval_items


def _evaluate_stage(
    stage: str,
    cfg: OrganismConfig,
    model: PreTrainedModel,
    ref: PreTrainedModel | None,
    tokenizer: PreTrainedTokenizerBase,
    train_items: list[Any],
    eval_items: list[Any],
    val: torch.Tensor,
    row: dict[str, Any],
) -> None:
    """Add to ``row`` the stage's evaluation (see :func:`align`); the model is left training."""
    model.eval()
    with torch.no_grad():
        row["eval_loss"] = float(stage_loss(stage, model, ref, tokenizer, eval_items, cfg))
    if stage != "lm":
        row["val_lm_loss"] = eval_lm(model, val)
    if stage == "dpo":
        assert ref is not None
        for split, its in (("train", train_items[:64]), ("eval", eval_items)):
            m = dpo_margins(model, ref, tokenizer, cast(list[tuple[str, str, str]], its), cfg.context)
            row[f"{split}_reward_margin"] = cfg.dpo_beta * float(m.mean())
            row[f"{split}_reward_accuracy"] = float((m > 0).float().mean())
    model.train()


def align(
    stage: str,
    cfg: OrganismConfig,
    base: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    corpus: Corpus,
    streams: dict[str, torch.Tensor],
    out: Path | None,
    progress: bool = True,
    ref: PreTrainedModel | None = None,
    lr: float | None = None,
) -> tuple[PreTrainedModel, list[dict[str, Any]]]:
    """Run one stage from a copy of ``base`` (left unchanged); save ``out/stages/<stage>``.

    streams: {"train", "val", "heldout"} token streams (1-D int64). ref: dpo's reference
    (default: ``base``). lr: peak learning rate (default :func:`stage_lr`).
    Returns (trained model, curve rows: step, lr, train_loss; every ``align_eval_every`` steps
    eval_loss on up to 64 held-out items, val_lm_loss for sft/dpo, and for dpo the mean beta *
    margin and the fraction of margins > 0 on 64 training and 64 held-out pairs).
    """
    model = copy.deepcopy(base).train()
    if stage == "dpo":
        ref = copy.deepcopy(ref if ref is not None else base).eval().requires_grad_(False)
    budget = stage_budget(stage, cfg, lr)
    peak = budget.lr
    gen = torch.Generator().manual_seed(budget.seed)
    train_items, eval_items = _stage_items(stage, cfg, corpus, streams)
    val = fixed_windows(streams["val"], min(cfg.n_val_windows, 32), cfg.context)
    evaluate = partial(_evaluate_stage, stage, cfg, model, ref, tokenizer, train_items,
                       eval_items, val)  # fmt: skip
    rows: list[dict[str, Any]] = [{"step": 0, "examples": 0}]
    evaluate(rows[0])
    bar = progress_bar(desc=f"{cfg.name} {stage}", total=cfg.align_steps, disable=not progress)

    ref_lp = (reference_logprobs(ref, tokenizer, train_items, cfg.context)
              if stage == "dpo" and ref is not None else None)  # fmt: skip

    def loss(idx: list[int], i: int) -> torch.Tensor:
        replay = None
        if stage == "sft" and cfg.replay_batch_size > 0:
            replay = random_windows(streams["train"], cfg.replay_batch_size, cfg.context, gen)
        return stage_loss(stage, model, ref, tokenizer, [train_items[j] for j in idx], cfg, replay,
                          None if ref_lp is None else ref_lp[idx])  # fmt: skip

    def on_step(step: int, read: Callable[[], float]) -> None:
        rows.append({"step": step, "examples": step * budget.batch_size})
        if step % cfg.align_eval_every == 0 or step == cfg.align_steps:
            evaluate(rows[-1])
            bar.set_postfix(loss=f"{read():.3f}")
        bar.update(1)

    run = train_steps(model, loss, len(train_items), budget, gen, on_step)
    bar.close()
    for row, lr_i, loss_i in zip(rows[1:], run.lrs, run.losses, strict=True):
        row["lr"], row["train_loss"] = lr_i, loss_i
    opt = run.optimizer
    if out is not None:
        info = {"organism": cfg.name, "stage": stage, "step": cfg.align_steps,
                "starts_from": STAGE_BASE[stage], "peak_lr": peak, **rows[-1]}  # fmt: skip
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
    seconds: dict[str, float] | None = None,
) -> dict[str, PreTrainedModel]:
    """Pretrain, then every stage; returns {"final": model, "lm": ..., "sft": ..., "dpo": ...}.

    ``seconds``, when given, receives each stage's wall time in seconds ("pretrain", then
    :data:`STAGES`), its evaluations included.
    """
    times = {} if seconds is None else seconds
    val = fixed_windows(streams["val"], cfg.n_val_windows, cfg.context)
    t0 = time.perf_counter()
    pretrain(cfg, model, tokenizer, streams["train"], val, out, progress)
    times["pretrain"] = round(time.perf_counter() - t0, 1)
    models = {"final": model}
    for stage in STAGES:
        start = models[STAGE_BASE[stage]]
        t0 = time.perf_counter()
        models[stage], rows = align(stage, cfg, start, tokenizer, corpus, streams, out, progress)
        times[stage] = round(time.perf_counter() - t0, 1)
        log(f"{cfg.name} {stage}: eval loss {rows[0]['eval_loss']:.3f} -> "
            f"{rows[-1]['eval_loss']:.3f}")  # fmt: skip
    return models
