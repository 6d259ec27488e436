"""Paper 2's single-group adaptation: SFT from one checkpoint training only one group of
matrices, or every parameter, with one budget, scored on held-out (question, answer) items."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from lamina.core.arrays import logit_rows
from lamina.sources.organisms.corpus import format_answer, format_prompt
from lamina.sources.organisms.objectives import token_logprobs
from lamina.sources.organisms.scoring import answer_logprobs
from lamina.sources.organisms.stages import qa_batch
from lamina.weights.edits import GROUPS, single_group_parameters
from lamina.weights.settings import SignatureSettings, context_length
from lamina.weights.units import Units

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["answer_sft_loss", "per_item_sft_loss", "sft_eval", "single_group_adaptation"]


def per_item_sft_loss(
    model: torch.nn.Module, tok: PreTrainedTokenizerBase, pairs: list[tuple[str, str]], max_len: int
) -> np.ndarray:
    """Masked SFT loss of each (question, answer) pair: mean over its answer tokens (and EOS)
    of -log p, nats. -> (n,) float64."""
    return sft_eval(model, tok, pairs, max_len)[0]


def _qa(tok: Any, pairs: list[tuple[str, str]], max_len: int) -> dict[str, torch.Tensor]:
    """The :func:`~lamina.sources.organisms.stages.qa_batch` of the (question, answer) pairs in
    the organisms' prompt format: input_ids, attention_mask, target_mask, each (B, T)."""
    prompts = [format_prompt(q) for q, _ in pairs]
    return qa_batch(tok, prompts, [format_answer(a) for _, a in pairs], max_len)


def _qa_forward(
    model: torch.nn.Module, tok: Any, pairs: list[tuple[str, str]], max_len: int
) -> tuple[dict, torch.Tensor]:
    """(:func:`_qa` of the pairs, the model's logits (B, T, V) on it)."""
    b = _qa(tok, pairs, max_len)
    return b, model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits


def answer_sft_loss(model: torch.nn.Module, b: dict[str, torch.Tensor]) -> torch.Tensor:
    """:func:`lamina.sources.organisms.objectives.sft_loss` of a :func:`_qa` batch, with the LM
    head run at the answer positions only (:func:`lamina.sources.organisms.scoring.
    answer_logprobs`): L = -(1/N) sum of log p over the batch's N answer tokens, nats per
    token (0 when N = 0). The full (B, T, V) logits -- 1 GiB for 8 rows of 128 tokens on
    Gemma 3's 262,144 words, and as much again for their log-softmax and each gradient -- are
    never formed; the value and its gradient are the same."""
    logp, _ = answer_logprobs(model, b)  # type: ignore[arg-type]  # (N,)
    return -logp.sum() / max(1, logp.numel())


def sft_eval(
    model: torch.nn.Module, tok: PreTrainedTokenizerBase, pairs: list[tuple[str, str]], max_len: int
) -> tuple[np.ndarray, float]:
    """(:func:`per_item_sft_loss` (n,) nats, the SFT accuracy
    (:func:`lamina.sources.organisms.evaluate.hit_rate` of ``sft_hits``)) of the pairs from one
    forward pass per chunk of at most 64 (:func:`lamina.core.arrays.logit_rows`: 4 on
    Gemma-3 at 128 tokens; the two read the same logits)."""
    out, hits = [], []
    model.eval()
    step = logit_rows(model, max_len)
    with torch.no_grad():
        for i in range(0, len(pairs), step):
            chunk = pairs[i : i + step]
            b, logits = _qa_forward(model, tok, chunk, max_len)
            lp = token_logprobs(logits, b["input_ids"])
            m = b["target_mask"][:, 1:].float()
            out.append((-(lp * m).sum(-1) / m.sum(-1).clamp_min(1)).double().numpy())
            hits.append(_answer_hits(logits, b, len(chunk)))
    hit = torch.cat(hits) if hits else torch.zeros(0, dtype=torch.bool)
    return np.concatenate(out), float(hit.float().mean()) if len(hit) else 0.0


def _answer_hits(logits: torch.Tensor, b: dict, n: int) -> torch.Tensor:
    """:func:`lamina.sources.organisms.evaluate.sft_hits` of one batch from its logits (B, T, V):
    does the argmax reproduce every answer token (EOS excluded)? -> (B,) bool."""
    pred = logits[:, :-1].argmax(-1)
    tgt = b["target_mask"].clone()
    lengths = b["attention_mask"].sum(-1)
    tgt[torch.arange(n), lengths - 1] = 0  # the EOS is not part of the answer
    m = tgt[:, 1:].bool()
    return ((pred == b["input_ids"][:, 1:]) | ~m).all(-1)


def _adapt_group(
    model0: torch.nn.Module,
    tok: Any,
    group: str,
    batches: list[list[tuple[str, str]]],
    max_len: int,
    betas: tuple[float, float],
    config: SignatureSettings,
) -> tuple[torch.nn.Module, list[torch.nn.Parameter]]:
    """(a copy of ``model0`` after one AdamW step (no weight decay, ``config.adapt_lr``) of the
    SFT loss per batch of (question, answer) pairs, training only ``group``'s parameters or,
    for "all", every parameter; those parameters)."""
    model = copy.deepcopy(model0)
    if group == "all":
        params = list(model.parameters())
        for p in params:
            p.requires_grad_(True)
    else:
        params = single_group_parameters(model, group)
    opt = torch.optim.AdamW(params, lr=config.adapt_lr, betas=betas, weight_decay=0.0)
    model.train()
    for items in batches:
        loss = answer_sft_loss(model, _qa(tok, items, max_len))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model, params


def single_group_adaptation(ck: Units, config: SignatureSettings) -> pd.DataFrame:
    """SFT from ``config.base`` training only one matrix group (``qk``, ``vo``, ``mlp_in``,
    ``mlp_out``; :data:`lamina.weights.edits.GROUPS`) or every parameter (``all``), with one
    budget: ``adapt_steps`` AdamW steps (no weight decay, constant ``adapt_lr``) of
    ``adapt_batch`` pairs, the same batches for every group.

    One row per group × eval pair: loss_before, loss_after (nats, :func:`per_item_sft_loss`),
    and per group acc_before / acc_after (the SFT accuracy:
    :func:`lamina.sources.organisms.evaluate.hit_rate` of ``sft_hits``) and n_params (trainable parameters). Pairs and betas are ``ck``'s (for a real pair,
    lamina's curriculum and the organisms' AdamW betas)."""

    model0, tok = ck.load(ck.spec(config.base))
    max_len = context_length(model0, config.max_length)
    corpus = ck.corpus()
    evals = corpus.sft_eval[: config.adapt_eval]
    gen = torch.Generator().manual_seed(config.seed)
    order = torch.randperm(len(corpus.sft), generator=gen).tolist()
    need = config.adapt_steps * config.adapt_batch
    order = (order * (need // len(order) + 1))[:need]
    before, acc_before = sft_eval(model0, tok, evals, max_len)
    betas = ck.betas
    rows = []
    for group in (*GROUPS, "all"):
        batches = [
            [corpus.sft[j] for j in order[s * config.adapt_batch : (s + 1) * config.adapt_batch]]
            for s in range(config.adapt_steps)
        ]
        model, params = _adapt_group(model0, tok, group, batches, max_len, betas, config)
        after, acc_after = sft_eval(model, tok, evals, max_len)
        n_params = int(sum(p.numel() for p in params))
        for i, (lb, la) in enumerate(zip(before, after, strict=True)):
            rows.append(
                {
                    "group": group,
                    "item": i,
                    "loss_before": lb,
                    "loss_after": la,
                    "acc_before": acc_before,
                    "acc_after": acc_after,
                    "n_params": n_params,
                }
            )
    return pd.DataFrame(rows)
