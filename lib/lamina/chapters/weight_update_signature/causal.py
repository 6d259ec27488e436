"""Paper 2's causal tests on the organisms: rank-1 unembedding write edits against random
directions, and single-group adaptation. Part of :mod:`lamina.chapters.weight_update_signature`."""

from __future__ import annotations

import copy
from collections.abc import Collection
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from lamina.chapters.weight_update_signature.config import SignatureConfig, context_length
from lamina.chapters.weight_update_signature.units import Units
from lamina.sources.models import input_embeddings, weight_of
from lamina.sources.organisms.corpus import format_answer, format_prompt
from lamina.sources.organisms.objectives import sft_loss, token_logprobs
from lamina.sources.organisms.stages import qa_batch
from lamina.states import hooks
from lamina.states.hooks import map_point
from lamina.weights import linear_maps
from lamina.weights.edits import (
    GROUPS,
    rank1_write_edit,
    single_group_parameters,
    unembedding_direction,
)

__all__ = [
    "mean_write_inputs",
    "null_stages",
    "per_item_sft_loss",
    "sft_eval",
    "single_group_adaptation",
    "write_edit_effects",
]


def _log_probs(model, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return F.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), dim=-1)


def mean_write_inputs(
    model, ids: torch.Tensor, mask: torch.Tensor, log_probs: bool = False
) -> Any:
    """Mean input of every block write map over the non-padding tokens: {key: (d_in,)} fp32.
    Used as the edit's input direction v̂, so that v̂ᵀa_t > 0 on typical tokens and the rank-1
    edit writes +û rather than a sign that depends on the token (reimplementation choice).
    ``log_probs=True`` -> (that dict, the same forward pass's log-softmax (B, T, vocab) fp32),
    so the unedited predictions cost no second pass."""
    maps = [m for m in linear_maps(model, embeddings=False) if m.kind == "write"]
    sums: dict[str, torch.Tensor] = {}
    keep = mask.bool()

    def make_hook(key: str):
        def hook(a: torch.Tensor) -> None:  # (B, T, d_in)
            sums[key] = a[keep].float().mean(0).detach()

        return hook

    inputs = {map_point(m.layer, m.role, "in"): make_hook(m.key) for m in maps}
    with hooks.attached(model, inputs), torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits
    if log_probs:
        return sums, F.log_softmax(logits.float(), dim=-1)
    return sums


def _reference(lp0: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """What every edit of one model is compared with, at the non-padding positions (N of
    them): (p0 (N, vocab), mean_t log p0 (vocab,), Σ_v p0 log p0 (N,)), fp32, nats."""
    lp = lp0[mask.bool()]
    p = lp.exp()
    return p, lp.mean(0), torch.linalg.vecdot(p, lp)


def _edit_effect(model, inputs, ref, direction, scale, ids, mask) -> tuple[torch.Tensor, float]:
    """(mean Δ log p over valid positions (vocab,), mean KL(p || p_edit)), nats, with the
    edit's logits z (N, vocab) at the N valid positions and lse = logsumexp(z):
    mean_t Δlog p = mean_t z - mean_t lse - mean_t log p0, and
    KL = Σ_v p0 log p0 - Σ_v p0 z + lse (no log-softmax of the edited model is formed)."""
    p0, mean_lp0, neg_entropy0 = ref
    with rank1_write_edit(model, direction, scale, input_direction=inputs), torch.no_grad():
        z = model(input_ids=ids, attention_mask=mask).logits[mask.bool()].float()
    lse = torch.logsumexp(z, dim=-1)  # (N,)
    kl = float((neg_entropy0 - torch.linalg.vecdot(p0, z) + lse).mean())
    return z.mean(0) - lse.mean() - mean_lp0, kl


def null_stages(ck: Units, config: SignatureConfig) -> list[str]:
    """The stages whose write-edit claim rows need the random-direction null: the aligned
    targets (every target but ``lm``; all targets when ``lm`` is the only one) and, for a
    released aligned checkpoint (``ck.aligned_base``), the base itself. The base of an
    unaligned model and the ``lm`` target enter no verdict, so they get no null (saving
    ``edit_random`` forward passes each)."""
    stages = [t for t in config.targets if t != "lm"] or list(config.targets)
    return ([config.base] if getattr(ck, "aligned_base", False) else []) + stages


def _edit_tokens(counts: torch.Tensor, special: set, config: SignatureConfig) -> list[int]:
    """``config.edit_tokens`` target tokens drawn (seeded) from those seen twice or more."""
    candidates = [int(t) for t in torch.nonzero(counts >= 2).flatten() if int(t) not in special]
    rng = np.random.default_rng(config.seed)
    size = min(config.edit_tokens, len(candidates))
    return sorted(rng.choice(candidates, size=size, replace=False).tolist())


def _edit_batch(
    model: torch.nn.Module, tok: Any, texts: list[str], config: SignatureConfig
) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """(input ids (B, T), attention mask (B, T), target tokens) of the write edits: the first
    ``config.edit_texts`` texts, padded and cut to ``config.edit_max_length`` tokens (at most
    the model's context), and :func:`_edit_tokens` drawn from the non-special tokens in them."""
    enc = tok(
        texts[: config.edit_texts],
        return_tensors="pt",
        padding=True,
        truncation=True,
        max_length=min(context_length(model, config.max_length), config.edit_max_length),
    )
    ids, mask = enc["input_ids"], enc["attention_mask"]
    special = {tok.eos_token_id, tok.pad_token_id, tok.bos_token_id}
    tokens = _edit_tokens(torch.bincount(ids[mask.bool()], minlength=len(tok)), special, config)
    return ids, mask, tokens


def write_edit_effects(
    ck: Units,
    texts: list[str],
    config: SignatureConfig,
    only: Collection[str] | None = None,
) -> pd.DataFrame:
    """Rank-1 edits of every block write map (:func:`lamina.weights.edits.rank1_write_edit`,
    norm ``config.edit_scale`` · ‖W‖_F each) along a token's unembedding row, against random
    Gaussian directions of matched edit norm, on ``config.base`` and each target. The edit's
    input direction is ``config.edit_input``: each map's mean input (:func:`mean_write_inputs`)
    or its top right singular vector.

    Scored over the non-padding positions of ``config.edit_texts`` texts of at most
    ``config.edit_max_length`` tokens:
    delta_logp = mean_t [log p_edit(token | x_<t) - log p(token | x_<t)] (nats) and
    kl = mean_t KL(p || p_edit) (nats). One row per stage × direction × target token
    (a random direction is scored on every target token; it is still one unit of the null,
    :func:`~.causal_claims.direction_null`). The ``edit_random`` random directions (the same
    draws at every stage) are scored only at :func:`null_stages`, and, when ``only`` is given,
    only at those of them in ``only`` (e.g. the stages whose alignment gate passed,
    :func:`~.gate.passed`: a failed stage's row is not testable whatever its null says).

    Cost: one forward pass over the edit texts per (stage, direction): ``edit_tokens`` per
    stage plus ``edit_random`` per null stage."""

    base_model, tok = ck.load(ck.spec(config.base))
    ids, mask, tokens = _edit_batch(base_model, tok, texts, config)
    d = weight_of(input_embeddings(base_model)).shape[1]
    gen = torch.Generator().manual_seed(config.seed)
    randoms = torch.randn(config.edit_random, d, generator=gen)
    with_null = set(null_stages(ck, config))
    if only is not None:
        with_null &= set(only)
    rows: list[dict[str, Any]] = []
    for label in (config.base, *config.targets):
        model, _ = ck.load(ck.spec(label))
        inputs: Any = "top_singular"
        if config.edit_input == "mean_input":  # one pass: the inputs and the predictions
            inputs, lp0 = mean_write_inputs(model, ids, mask, log_probs=True)
        else:
            lp0 = _log_probs(model, ids, mask)
        ref = _reference(lp0, mask)
        del lp0

        def score(
            direction: torch.Tensor, state: tuple[Any, Any, Any] = (model, inputs, ref)
        ) -> tuple[torch.Tensor, float]:
            return _edit_effect(*state, direction, config.edit_scale, ids, mask)

        for t in tokens:
            dlp, kl = score(
                unembedding_direction(model, t, through_final_norm=config.through_final_norm)
            )
            rows.append({"stage": label, "direction": "unembedding", "direction_id": t,
                         "token": t, "delta_logp": float(dlp[t]), "kl": kl})  # fmt: skip
        for i, r in enumerate(randoms if label in with_null else []):
            dlp, kl = score(r)
            rows += [{"stage": label, "direction": "random", "direction_id": i, "token": t,
                      "delta_logp": float(dlp[t]), "kl": kl} for t in tokens]  # fmt: skip
    return pd.DataFrame(rows)


def per_item_sft_loss(model, tok, pairs: list[tuple[str, str]], max_len: int) -> np.ndarray:
    """Masked SFT loss of each (question, answer) pair: mean over its answer tokens (and EOS)
    of -log p, nats. -> (n,) float64."""
    return sft_eval(model, tok, pairs, max_len)[0]


def _qa_forward(
    model: torch.nn.Module, tok: Any, pairs: list[tuple[str, str]], max_len: int
) -> tuple[dict, torch.Tensor]:
    """(the :func:`~lamina.sources.organisms.stages.qa_batch` of the (question, answer) pairs in
    the organisms' prompt format, the model's logits (B, T, V) on it)."""
    b = qa_batch(
        tok,
        [format_prompt(q) for q, _ in pairs],
        [format_answer(a) for _, a in pairs],
        max_len,
    )
    return b, model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits


def sft_eval(
    model, tok, pairs: list[tuple[str, str]], max_len: int
) -> tuple[np.ndarray, float]:
    """(:func:`per_item_sft_loss` (n,) nats, the SFT accuracy
    (:func:`lamina.sources.organisms.evaluate.hit_rate` of ``sft_hits``)) of the pairs from one
    forward pass per chunk of 64 (the two read the same logits)."""
    out, hits = [], []
    model.eval()
    with torch.no_grad():
        for i in range(0, len(pairs), 64):
            chunk = pairs[i : i + 64]
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
    config: SignatureConfig,
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
        b, logits = _qa_forward(model, tok, items, max_len)
        loss = sft_loss(logits, b["input_ids"], b["target_mask"])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model, params


def single_group_adaptation(ck: Units, config: SignatureConfig) -> pd.DataFrame:
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
