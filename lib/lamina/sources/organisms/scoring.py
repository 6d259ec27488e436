"""Log-probabilities of answers under a causal LM, computed only where they are needed.

An answer's log-probability needs the LM head (d_model x vocabulary: 49,152 words for SmolLM2,
262,144 for Gemma 3) at the positions that predict an answer token, not at every position;
a preference pair's two answers share their prompt, which needs to run only once. So:

* :func:`answer_logprobs` runs the model's body (every block and the final norm), then the head
  and the log-softmax at the target positions only: log p(x_{t+1} | x_{<=t}) for the N tokens
  with ``target_mask[b, t+1] = 1``;
* :func:`pair_logprobs` runs each prompt once, keeps its keys and values, and runs the chosen
  and the rejected answer against that cache (positions continue after the prompt), scoring the
  answers' tokens only;
* :func:`in_length_order` scores many items in batches of similar length (less padding) and
  returns the scores in the items' order.

The head is the model's own output embedding, with Gemma's final-logit soft-capping where the
config sets it; architectures outside :data:`HEAD_ONLY_TYPES` fall back to the full logits
(identical results, without the saving). Every tensor is created on the model's device.
Tokenisation (:func:`encode_qa`): prompt + " " + answer + EOS; the EOS is scored; an over-long
row loses prompt tokens from the left (the answer is kept).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["HEAD_ONLY_TYPES", "answer_hits", "answer_logprobs", "encode_qa", "in_length_order",
           "model_device", "pair_logprobs", "qa_batch", "sequence_logprobs"]  # fmt: skip

HEAD_ONLY_TYPES = frozenset({"gpt2", "llama", "mistral", "qwen2", "gemma", "gemma2", "gemma3",
                             "gemma3_text"})  # fmt: skip
"""``config.model_type`` values whose causal-LM logits are exactly ``head(body(x))`` (with
soft-capping where configured); tested against the full forward for gpt2, llama and gemma3."""

T = TypeVar("T")


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of the model's first parameter (CPU for a model without parameters)."""
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def encode_qa(
    tokenizer: PreTrainedTokenizerBase, prompts: Sequence[str], completions: Sequence[str],
    max_len: int,
) -> list[tuple[list[int], list[int]]]:  # fmt: skip
    """(prompt ids, completion ids + EOS) per row, at most ``max_len`` tokens together: the
    completion keeps its first ``max_len - 1`` tokens, the prompt its last tokens that fit."""
    eos = tokenizer.eos_token_id
    p_ids = tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
    c_ids = tokenizer(list(completions), add_special_tokens=False)["input_ids"]
    out = []
    for p, c in zip(p_ids, c_ids, strict=True):
        c = (c + [eos])[: max_len - 1]
        out.append((p[-(max_len - len(c)) :], c))
    return out


def _pad(rows: list[list[int]], fill: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded (ids, mask): each (B, max length) int64 on ``device``."""
    T_ = max(len(r) for r in rows)
    ids = torch.full((len(rows), T_), fill, dtype=torch.long)
    mask = torch.zeros((len(rows), T_), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        mask[i, : len(r)] = 1
    return ids.to(device), mask.to(device)


def qa_batch(
    tokenizer: PreTrainedTokenizerBase, prompts: Sequence[str], completions: Sequence[str],
    max_len: int, device: torch.device | str | None = None,
) -> dict[str, torch.Tensor]:  # fmt: skip
    """Tokenise prompt + completion + EOS (:func:`encode_qa`), right-padded with EOS.

    -> {"input_ids", "attention_mask", "target_mask"}: each (B, T) int64 on ``device`` (default
    CPU; pass the model's device, :func:`model_device`), T <= max_len; target_mask is 1 on the
    completion and its EOS.
    """
    rows = encode_qa(tokenizer, prompts, completions, max_len)
    dev = torch.device(device) if device is not None else torch.device("cpu")
    ids, att = _pad([p + c for p, c in rows], tokenizer.eos_token_id, dev)
    tgt, _ = _pad([[0] * len(p) + [1] * len(c) for p, c in rows], 0, dev)
    return {"input_ids": ids, "attention_mask": att, "target_mask": tgt}


def _split(model: PreTrainedModel, length: int = 0) -> tuple[Any, Any, float | None] | None:
    """(body, head, soft-cap) when the logits are head(body(x)); None otherwise, and None when
    a sliding attention window is shorter than ``length`` (a shared prompt's padding would take
    places in the window)."""
    if getattr(model.config, "model_type", None) not in HEAD_ONLY_TYPES:
        return None
    window = getattr(model.config, "sliding_window", None)
    if window is not None and window < length:
        return None
    body, head = getattr(model, "base_model", None), model.get_output_embeddings()
    if body is None or body is model or head is None:
        return None
    return body, head, getattr(model.config, "final_logit_softcapping", None)


def _head_logprobs(split: tuple[Any, Any, float | None], hidden: torch.Tensor,
                   targets: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """log softmax(head(hidden))[target]: hidden (N, d), targets (N,) -> (N,), nats."""
    _, head, cap = split
    logits = head(hidden).float()
    if cap is not None:
        logits = torch.tanh(logits / cap) * cap
    return F.log_softmax(logits, dim=-1).gather(-1, targets[:, None]).squeeze(-1)


def answer_logprobs(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """log p of every target token of a :func:`qa_batch`, in row-major order.

    -> (logp (N,) nats, row (N,) int64: the row of each), N = target_mask[:, 1:].sum();
    with gradient when enabled. The head runs at those N positions only (see module docstring).
    """
    ids, att, tgt = batch["input_ids"], batch["attention_mask"], batch["target_mask"]
    sel = tgt[:, 1:].bool()  # (B, T-1): position t predicts a target token t+1
    targets = ids[:, 1:][sel]  # (N,)
    split = _split(model)
    if split is None:
        logits = model(input_ids=ids, attention_mask=att).logits[:, :-1][sel]  # (N, V)
        logp = F.log_softmax(logits.float(), dim=-1).gather(-1, targets[:, None]).squeeze(-1)
    else:
        hidden = split[0](input_ids=ids, attention_mask=att).last_hidden_state  # (B, T, d)
        logp = _head_logprobs(split, hidden[:, :-1][sel], targets)
    return logp, sel.nonzero()[:, 0]


def sequence_logprobs(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """log pi(completion + EOS | prompt) per row of a :func:`qa_batch`: (B,), nats."""
    logp, rows = answer_logprobs(model, batch)
    return torch.zeros(len(batch["input_ids"]), dtype=logp.dtype, device=logp.device).index_add(0, rows, logp)


@torch.no_grad()
def answer_hits(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Per row of a :func:`qa_batch`: does greedy decoding reproduce the completion (its EOS
    excluded)? Teacher-forced: the argmax at every answer position equals the answer token.
    -> (B,) bool."""
    ids, att, tgt = batch["input_ids"], batch["attention_mask"], batch["target_mask"].clone()
    tgt[torch.arange(len(ids), device=ids.device), att.sum(-1) - 1] = 0  # the EOS: not scored
    sel = tgt[:, 1:].bool()
    split = _split(model)
    if split is None:
        pred = model(input_ids=ids, attention_mask=att).logits[:, :-1][sel].argmax(-1)
    else:
        hidden = split[0](input_ids=ids, attention_mask=att).last_hidden_state
        pred = split[1](hidden[:, :-1][sel]).argmax(-1)  # soft-capping keeps the argmax
    wrong = (pred != ids[:, 1:][sel]).long()
    bad = torch.zeros(len(ids), dtype=torch.long, device=ids.device).index_add(0, sel.nonzero()[:, 0], wrong)
    return bad == 0


def pair_logprobs(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, prompts: Sequence[str],
    chosen: Sequence[str], rejected: Sequence[str], max_len: int,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """(log pi(chosen + EOS | prompt), log pi(rejected + EOS | prompt)): two (B,), nats.

    Each prompt runs once; both answers run against its cached keys and values, at the
    positions that follow it. Each answer keeps its first ``max_len - 1`` tokens; the prompt its
    last tokens that fit beside the longer answer (so, unlike :func:`qa_batch`, both answers
    read the same prompt). Falls back to two :func:`qa_batch` passes for an architecture
    outside :data:`HEAD_ONLY_TYPES`.
    """
    dev = model_device(model)
    split = _split(model, 2 * max_len)
    if split is None:
        lc = sequence_logprobs(model, qa_batch(tokenizer, prompts, chosen, max_len, dev))
        return lc, sequence_logprobs(model, qa_batch(tokenizer, prompts, rejected, max_len, dev))
    eos, B = tokenizer.eos_token_id, len(prompts)
    c_rows = [c for _, c in encode_qa(tokenizer, prompts, chosen, max_len)]
    r_rows = [c for _, c in encode_qa(tokenizer, prompts, rejected, max_len)]
    p_all = tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
    p_rows = [p[-(max_len - max(len(c), len(r))) :] for p, c, r in zip(p_all, c_rows, r_rows, strict=True)]
    p_ids, p_att = _pad(p_rows, eos, dev)  # (B, Tp)
    out = split[0](input_ids=p_ids, attention_mask=p_att, use_cache=True)
    p_len = p_att.sum(-1)  # (B,)
    last = out.last_hidden_state[torch.arange(B, device=dev), p_len - 1]  # (B, d)
    cache = out.cache
    cache.reorder_cache(torch.arange(B, device=dev).repeat(2))  # rows: B chosen, then B rejected
    a_ids, a_att = _pad(c_rows + r_rows, eos, dev)  # (2B, Ta)
    pos = p_len.repeat(2)[:, None] + torch.arange(a_ids.shape[1], device=dev)[None]  # (2B, Ta)
    pos = pos.clamp(max=max_len - 1)  # padding only: each row's real tokens end below max_len
    h = split[0](input_ids=a_ids, attention_mask=torch.cat([p_att.repeat(2, 1), a_att], dim=1),
                 position_ids=pos, cache=cache, use_cache=True).last_hidden_state  # fmt: skip
    # answer token j is predicted by the prompt's last state (j = 0) or by answer state j - 1
    h = torch.cat([last.repeat(2, 1)[:, None], h[:, :-1]], dim=1)  # (2B, Ta, d)
    sel = a_att.bool()
    logp = _head_logprobs(split, h[sel], a_ids[sel])
    seq = torch.zeros(2 * B, dtype=logp.dtype, device=dev).index_add(0, sel.nonzero()[:, 0], logp)
    return seq[:B], seq[B:]


def in_length_order(
    score: Callable[[list[T]], torch.Tensor], items: Sequence[T], length: Callable[[T], int],
    batch: int,
) -> torch.Tensor:  # fmt: skip
    """``score`` of batches of at most ``batch`` items of similar ``length`` (sorted), put back
    in the items' order: (N, ...) on the CPU; an empty (0,) float tensor for no items."""
    order = sorted(range(len(items)), key=lambda i: length(items[i]))
    parts = [score([items[i] for i in order[k : k + batch]]).detach().cpu()
             for k in range(0, len(order), batch)]  # fmt: skip
    if not parts:
        return torch.zeros(0)
    out = torch.cat(parts)
    back = torch.empty_like(torch.tensor(order))
    back[torch.tensor(order)] = torch.arange(len(order))
    return out[back]
