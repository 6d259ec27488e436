"""Paper 2's write edit: rank-1 edits of every block write map along a token's unembedding row,
scored as the change of that token's log-probability, on the model, on copies of it with
scrambled blocks (the null, :mod:`lamina.weights.edit_null`) and, as a control, along random
directions of the same norm."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from lamina.sources.models import input_embeddings, weight_of
from lamina.states import hooks
from lamina.states.hooks import map_point
from lamina.weights import linear_maps
from lamina.weights.edit_null import scrambled_copy
from lamina.weights.edits import rank1_write_edit, unembedding_direction
from lamina.weights.settings import SignatureSettings, context_length
from lamina.weights.units import Units

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["EDIT_COLUMNS", "edit_batch", "edit_stages", "mean_write_inputs", "null_stages", "score_edits",
           "write_edit_effects"]  # fmt: skip


def _log_probs(model, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return F.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), dim=-1)


@overload
def mean_write_inputs(
    model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, log_probs: Literal[False] = ...
) -> dict[str, torch.Tensor]: ...
@overload
def mean_write_inputs(
    model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, log_probs: Literal[True]
) -> tuple[dict[str, torch.Tensor], torch.Tensor]: ...
def mean_write_inputs(
    model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, log_probs: bool = False
) -> dict[str, torch.Tensor] | tuple[dict[str, torch.Tensor], torch.Tensor]:
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


def edit_stages(ck: Units, s: SignatureSettings) -> list[str]:
    """The aligned stages the write-edit rows read: those of ``s.targets`` among ``sft`` and
    ``dpo`` (every target when none is), in order."""
    stages = [t for t in s.targets if t in ("sft", "dpo")]
    return stages or [t for t in s.targets if t != "lm"] or list(s.targets)


def null_stages(ck: Units, s: SignatureSettings) -> list[str]:
    """The stages whose write-edit rows need the null (scrambled copies) and the random-direction
    control: :func:`edit_stages` and, for a released aligned checkpoint (``ck.aligned_base``),
    the base itself. The base of an unaligned model enters only as the reference of the
    "kept" rows, so it gets no null (saving ``edit_scrambled`` copies)."""
    return ([s.base] if getattr(ck, "aligned_base", False) else []) + edit_stages(ck, s)


def _edit_tokens(counts: torch.Tensor, special: set, s: SignatureSettings) -> list[int]:
    """``s.edit_tokens`` target tokens drawn (seeded) from those seen twice or more."""
    candidates = [int(t) for t in torch.nonzero(counts >= 2).flatten() if int(t) not in special]
    rng = np.random.default_rng(s.seed)
    size = min(s.edit_tokens, len(candidates))
    return sorted(rng.choice(candidates, size=size, replace=False).tolist())


def edit_batch(
    model: torch.nn.Module, tok: PreTrainedTokenizerBase, texts: list[str], s: SignatureSettings
) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """(input ids (B, T), attention mask (B, T), target tokens) of the write edits: the first
    ``s.edit_texts`` texts, padded and cut to ``s.edit_max_length`` tokens (at most
    the model's context), and :func:`_edit_tokens` drawn from the non-special tokens in them."""
    enc = tok(
        texts[: s.edit_texts],
        return_tensors="pt",
        padding=True,
        truncation=True,
        max_length=min(context_length(model, s.max_length), s.edit_max_length),
    )
    ids, mask = enc["input_ids"], enc["attention_mask"]
    special = {tok.eos_token_id, tok.pad_token_id, tok.bos_token_id}
    tokens = _edit_tokens(torch.bincount(ids[mask.bool()], minlength=len(tok)), special, s)
    return ids, mask, tokens


def write_edit_effects(
    ck: Units,
    texts: list[str],
    s: SignatureSettings,
    only: Collection[str] | None = None,
) -> pd.DataFrame:
    """Rank-1 edits of every block write map (:func:`lamina.weights.edits.rank1_write_edit`,
    norm ``s.edit_scale`` · ‖W‖_F each) along a token's unembedding row, on ``s.base`` and each
    stage of :func:`edit_stages`. The edit's input direction is ``s.edit_input``: each map's
    mean input (:func:`mean_write_inputs`) or its top right singular vector.

    Scored over the non-padding positions of ``s.edit_texts`` texts of at most
    ``s.edit_max_length`` tokens: delta_logp = mean_t [log p_edit(token | x_<t) -
    log p(token | x_<t)] (nats) and kl = mean_t KL(p || p_edit) (nats). One row per stage ×
    direction × unit × target token; ``direction`` is "unembedding" (the model itself),
    "scrambled" (the same edit on copy ``direction_id`` of the model with scrambled blocks,
    :func:`lamina.weights.edit_null.scrambled_copy`: the null) or "random" (random Gaussian
    direction ``direction_id`` of the same norm, scored on every target token: a control).
    The null and the control are scored at :func:`null_stages` only, and, when ``only`` is
    given, only at those of them in ``only`` (e.g. the stages whose gate passed).

    Cost: one forward pass over the edit texts per (stage, direction, unit):
    ``edit_tokens`` per stage, plus ``edit_scrambled`` × (``edit_tokens`` + 1) and
    ``edit_random`` per null stage, plus one copy of the blocks per scrambled copy."""
    base_model, tok = ck.load(ck.spec(s.base))
    ids, mask, tokens = edit_batch(base_model, tok, texts, s)
    d = weight_of(input_embeddings(base_model)).shape[1]
    gen = torch.Generator().manual_seed(s.seed)
    randoms = torch.randn(s.edit_random, d, generator=gen)
    with_null = set(null_stages(ck, s))
    if only is not None:
        with_null &= set(only)
    rows: list[dict[str, object]] = []
    for label in dict.fromkeys((s.base, *edit_stages(ck, s))):
        model, _ = ck.load(ck.spec(label))
        rows += score_edits(model, label, "unembedding", 0, tokens, ids, mask, s)
        if label not in with_null:
            continue
        for i in range(s.edit_scrambled):
            copy_i = scrambled_copy(model, 7919 * s.seed + i)
            rows += score_edits(copy_i, label, "scrambled", i, tokens, ids, mask, s)
            del copy_i
        rows += score_edits(model, label, "random", 0, tokens, ids, mask, s, randoms)
    return pd.DataFrame(rows, columns=EDIT_COLUMNS)


EDIT_COLUMNS = ["stage", "direction", "direction_id", "token", "delta_logp", "kl"]


def score_edits(
    model: torch.nn.Module, label: str, direction: str, unit: int, tokens: list[int],
    ids: torch.Tensor, mask: torch.Tensor, s: SignatureSettings,
    randoms: torch.Tensor | None = None,
) -> list[dict[str, object]]:
    """The rows of one model (or copy) at one stage: the unembedding edit of every target token
    or, with ``randoms`` (n, d), every random direction scored on every target token."""
    inputs: Any = "top_singular"
    if s.edit_input == "mean_input":  # one pass: the inputs and the predictions
        inputs, lp0 = mean_write_inputs(model, ids, mask, log_probs=True)
    else:
        lp0 = _log_probs(model, ids, mask)
    ref = _reference(lp0, mask)
    del lp0
    rows = []
    if randoms is None:
        for t in tokens:
            u = unembedding_direction(model, t, through_final_norm=s.through_final_norm)
            dlp, kl = _edit_effect(model, inputs, ref, u, s.edit_scale, ids, mask)
            rows.append({"stage": label, "direction": direction, "direction_id": unit,
                         "token": t, "delta_logp": float(dlp[t]), "kl": kl})  # fmt: skip
        return rows
    for i, r in enumerate(randoms):
        dlp, kl = _edit_effect(model, inputs, ref, r, s.edit_scale, ids, mask)
        rows += [{"stage": label, "direction": "random", "direction_id": i, "token": t,
                  "delta_logp": float(dlp[t]), "kl": kl} for t in tokens]  # fmt: skip
    return rows
