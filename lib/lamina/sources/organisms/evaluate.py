"""Quality checks of an organism: perplexity vs a unigram baseline, SFT and DPO accuracy.

All scores are on held-out data: the validation windows (text), ``sft_eval`` and ``dpo_eval``
(questions never seen in any training format).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from lamina.sources.organisms.corpus import format_answer, format_prompt
from lamina.sources.organisms.scoring import (
    answer_hits,
    encode_qa,
    in_length_order,
    model_device,
    qa_batch,
)
from lamina.sources.organisms.stages import dpo_margins
from lamina.sources.organisms.train import eval_lm


def perplexity(model: PreTrainedModel, windows: torch.Tensor) -> float:
    """exp(mean next-token loss) over fixed windows (n, T); dimensionless, >= 1."""
    return math.exp(eval_lm(model, windows))


def unigram_perplexity(train_stream: torch.Tensor, windows: torch.Tensor, vocab_size: int) -> float:
    """Perplexity of the add-one-smoothed unigram model of the training stream on ``windows``.

    p(v) = (count_train(v) + 1) / (N_train + V);  ppl = exp(-mean_{targets} log p(x)),
    where the targets are windows[:, 1:] (the tokens the LM is scored on).
    train_stream: (N,) int64; windows: (n, T) int64 -> float.
    """
    counts = torch.bincount(train_stream, minlength=vocab_size).double() + 1.0
    logp = torch.log(counts / counts.sum())
    return math.exp(-float(logp[windows[:, 1:].reshape(-1)].mean()))


@torch.no_grad()
def sft_hits(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    pairs: list[tuple[str, str]],
    max_len: int,
    batch: int = 64,
) -> torch.Tensor:
    """Per (question, answer) pair: does the greedy completion start with the answer? (N,) bool.

    Computed teacher-forced: greedy decoding reproduces the answer tokens exactly iff the argmax
    at every answer position equals the answer token
    (:func:`lamina.sources.organisms.scoring.answer_hits`), in batches of similar length; -> on
    the CPU, in the pairs' order.
    """
    model.eval()
    dev = model_device(model)

    def hits(chunk: list[tuple[str, str]]) -> torch.Tensor:
        return answer_hits(model, qa_batch(tokenizer, [format_prompt(q) for q, _ in chunk],
                                           [format_answer(a) for _, a in chunk], max_len, dev))  # fmt: skip

    def length(pair: tuple[str, str]) -> int:
        (p, c), = encode_qa(tokenizer, [format_prompt(pair[0])], [format_answer(pair[1])], max_len)
        return len(p) + len(c)

    out = in_length_order(hits, pairs, length, batch)
    return out if len(out) else torch.zeros(0, dtype=torch.bool)


def hit_rate(hits: torch.Tensor) -> float:
    """Fraction of hits: hits (N,) bool (:func:`sft_hits`, or ``dpo_margins(model, None, ...) > 0``)
    -> mean in [0, 1]; 0.0 for no items. With :func:`sft_hits`: the SFT accuracy; with the
    margins (:func:`lamina.sources.organisms.stages.dpo_margins` without a reference): the
    DPO preference accuracy."""
    return float(hits.float().mean()) if len(hits) else 0.0


def evaluate_models(
    models: dict[str, PreTrainedModel],
    tokenizer: PreTrainedTokenizerBase,
    val_windows: torch.Tensor,
    train_stream: torch.Tensor,
    sft_eval: list[tuple[str, str]],
    dpo_eval: list[tuple[str, str, str]],
    max_len: int,
    ref: PreTrainedModel | None = None,
    beta: float = 0.1,
) -> dict[str, Any]:
    """One row per model name: val perplexity, SFT accuracy, DPO preference accuracy; plus baseline.

    -> {"unigram_val_perplexity": float, "models": {name: {"val_loss", "val_perplexity",
    "sft_accuracy", "dpo_accuracy"}}, "n_val_windows", "n_sft_eval", "n_dpo_eval"}.
    With ``ref`` (DPO's reference), the "dpo" model also gets "reward_margin" (mean beta * margin
    of :func:`lamina.sources.organisms.stages.dpo_margins`, nats) and "reward_accuracy" (margin > 0) on
    ``dpo_eval``.
    """
    out: dict[str, Any] = {
        "unigram_val_perplexity": unigram_perplexity(train_stream, val_windows, len(tokenizer)),
        "n_val_windows": len(val_windows),
        "n_sft_eval": len(sft_eval),
        "n_dpo_eval": len(dpo_eval),
        "models": {},
    }
    for name, model in models.items():
        loss = eval_lm(model, val_windows)
        out["models"][name] = {
            "val_loss": loss,
            "val_perplexity": math.exp(loss),
            "sft_accuracy": hit_rate(sft_hits(model, tokenizer, sft_eval, max_len)),
            "dpo_accuracy": hit_rate(dpo_margins(model, None, tokenizer, dpo_eval, max_len) > 0),
        }
        if ref is not None and name == "dpo" and dpo_eval:
            m = dpo_margins(model, ref, tokenizer, dpo_eval, max_len)
            out["models"][name]["reward_margin"] = beta * float(m.mean())
            out["models"][name]["reward_accuracy"] = float((m > 0).float().mean())
    return out
