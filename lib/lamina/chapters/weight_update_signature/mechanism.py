"""Paper 2's mechanism on the organisms: gradient geometry per objective, Adam's update against
its momentum, and write gradients across pretraining. Part of
:mod:`lamina.chapters.weight_update_signature` (same config, same tables conventions)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from lamina import organisms
from lamina.chapters.weight_update_signature.config import SignatureConfig, context_length
from lamina.chapters.weight_update_signature.deltas import cached_moments, prediction_subspace
from lamina.chapters.weight_update_signature.units import Units
from lamina.organisms.corpus import format_answer, format_prompt
from lamina.organisms.objectives import dpo_loss, lm_loss, sequence_logprob, sft_loss
from lamina.weights import LinearMap, linear_maps, principal_basis, relative_subspace_fraction
from lamina.weights.gradients import (
    LossFn,
    adam_update_direction,
    gradient_factors,
    gradient_geometry,
)

# Columns of the tables that a pair without training history leaves empty.
WRITE_GRADIENT_COLUMNS = [
    "step", "checkpoint", "key", "layer", "role", "kind", "k", "d", "rsf_summed",
    "rsf_token_mean", "rsf_token_pooled", "cancellation", "enrichment_summed",
    "enrichment_token_mean", "enrichment_token_pooled", "activation_share", "weight_rsf",
    "weight_enrichment",
]  # fmt: skip
ADAM_COLUMNS = [
    "state", "checkpoint", "step", "key", "layer", "role", "kind", "k", "d", "rsf_momentum",
    "rsf_update", "enrichment_momentum", "enrichment_update",
]  # fmt: skip

__all__ = [
    "activation_share",
    "adam_signature",
    "objective_gradients",
    "objective_loss",
    "write_gradients_across_training",
]


def activation_share(moment: torch.Tensor, k: int) -> float:
    """Share of the input energy in the top-k principal directions: Σ_{i<=k} λ_i / Σ_i λ_i of
    the (d, d) second moment (the RSF the input side of a per-token gradient term has on
    average when every δ_t has the same norm)."""
    eig = torch.linalg.eigvalsh(moment.to(torch.float64)).flip(0).clamp_min(0)
    return float(eig[:k].sum() / eig.sum())


def _prompt_lengths(tok: Any, prompts: Sequence[str]) -> torch.Tensor:
    return torch.tensor([len(tok(p)["input_ids"]) for p in prompts])


def _completion_mask(ids: torch.Tensor, mask: torch.Tensor, plen: torch.Tensor) -> torch.Tensor:
    pos = torch.arange(ids.shape[1], device=ids.device)[None, :]
    return ((pos >= plen[:, None].to(ids.device)) & mask.bool()).long()


def fitting_items(tok: Any, items: Sequence[tuple], max_length: int) -> list[tuple]:
    """The (question, answer, ...) items whose prompt + every answer fit in ``max_length`` tokens."""

    return [
        it
        for it in items
        if all(
            len(tok(format_prompt(it[0]) + format_answer(a))["input_ids"]) <= max_length
            for a in it[1:]
        )
    ]


def objective_loss(
    objective: str,
    tok: Any,
    texts_or_items: Sequence[Any],
    dpo_beta: float = 0.1,
    max_length: int | None = None,
) -> tuple[list[str], LossFn]:
    """(texts, loss) for :func:`lamina.weights.gradients.gradient_factors` under one objective.

    lm: texts as given, next-token loss. sft: items (question, answer) rendered as prompt +
    answer, loss on the answer tokens (:func:`lamina.organisms.objectives.sft_loss`). dpo:
    items (prompt, chosen, rejected) as 2n rows (chosen, then rejected); the DPO loss with the
    reference equal to the model itself (its value is log 2; its gradient is the first step
    of DPO from this checkpoint). Items whose rendering exceeds ``max_length`` tokens are
    dropped (truncation would cut their answer off).
    """

    if objective == "lm":
        return list(texts_or_items), lm_loss
    if max_length is not None:
        texts_or_items = fitting_items(tok, texts_or_items, max_length)
        if not texts_or_items:
            raise ValueError(f"every {objective} item is longer than {max_length} tokens")
    if objective == "sft":
        prompts = [format_prompt(q) for q, _ in texts_or_items]
        texts = [p + format_answer(a) for p, (_, a) in zip(prompts, texts_or_items, strict=True)]
        plen = _prompt_lengths(tok, prompts)

        def sft(logits, ids, mask):
            return sft_loss(logits, ids, _completion_mask(ids, mask, plen))

        return texts, sft
    if objective == "dpo":
        prompts = [format_prompt(p) for p, _, _ in texts_or_items]
        texts = [p + format_answer(c) for p, (_, c, _) in zip(prompts, texts_or_items, strict=True)]
        texts += [
            p + format_answer(r) for p, (_, _, r) in zip(prompts, texts_or_items, strict=True)
        ]
        plen = _prompt_lengths(tok, prompts * 2)
        n = len(prompts)

        def dpo(logits, ids, mask):
            lp = sequence_logprob(logits, ids, _completion_mask(ids, mask, plen))
            ref = lp.detach()
            return dpo_loss(lp[:n], lp[n:], ref[:n], ref[n:], dpo_beta)

        return texts, dpo
    raise ValueError(f"objective must be 'lm', 'sft' or 'dpo'; got {objective!r}")


def _bases(
    model, maps: Sequence[LinearMap], moments: dict, k: int, centred: bool
) -> dict[str, tuple]:

    pred = prediction_subspace(model, k, centred)
    return {
        m.key: (principal_basis(moments[m.key], k), "input")
        if m.kind == "read"
        else (pred, "output")
        for m in maps
    }


def _geometry_rows(factors, maps, bases, moments, k: int) -> list[dict[str, Any]]:
    rows = []
    for m in maps:
        basis, side = bases[m.key]
        d = basis.shape[0]
        f = factors[m.key]
        g = gradient_geometry(f.deltas, f.acts, basis, side)
        row = {"key": m.key, "layer": m.layer, "role": m.role, "kind": m.kind, "k": k, "d": d}
        row |= {name: getattr(g, name) for name in g.__dataclass_fields__}
        for name in ("rsf_summed", "rsf_token_mean", "rsf_token_pooled"):
            row[name.replace("rsf", "enrichment")] = row[name] / (k / d)
        row["activation_share"] = (
            activation_share(moments[m.key], k) if m.kind == "read" else float("nan")
        )
        rows.append(row)
    return rows


def objective_gradients(
    ck: Units, texts: list[str], config: SignatureConfig, cache: dict
) -> pd.DataFrame:
    """Gradient geometry of every block map at ``config.base`` under the lm, sft and dpo
    objectives, at k = ``config.k`` (read maps in their input principal subspace, write maps
    in the prediction subspace). One row per objective × map: RSF of the summed gradient,
    mean and energy-pooled per-token RSF, cancellation, and the activation share
    (:func:`activation_share`) of read maps. The SFT and DPO items are the corpus's
    (``ck.corpus()``; for a real pair, lamina's curriculum)."""

    spec = ck.spec(config.base)
    model, tok = ck.load(spec)
    maps = [m for m in linear_maps(model, embeddings=False)]
    moments = cached_moments(model, tok, texts, config.centred, cache, spec)
    bases = _bases(model, maps, moments, config.k, config.centred)
    corpus = ck.corpus()
    rng = np.random.default_rng(config.seed)
    lm_texts = _token_budget(tok, texts, config.grad_tokens, context_length(model))
    samples = {
        "lm": lm_texts,
        "sft": [corpus.sft[i] for i in rng.permutation(len(corpus.sft))[: 4 * config.grad_pairs]],
        "dpo": [corpus.dpo[i] for i in rng.permutation(len(corpus.dpo))[: 2 * config.grad_pairs]],
    }
    rows = []
    caps = {"sft": config.grad_pairs, "dpo": max(1, config.grad_pairs // 2)}
    for objective, items in samples.items():
        if objective in caps:
            items = fitting_items(tok, items, context_length(model))[: caps[objective]]
        batch, loss = objective_loss(objective, tok, items, ck.dpo_beta, context_length(model))
        factors = gradient_factors(model, tok, batch, maps, loss, max_length=context_length(model))
        for row in _geometry_rows(factors, maps, bases, moments, config.k):
            rows.append({"objective": objective, "checkpoint": spec, **row})
    return pd.DataFrame(rows)


def _token_budget(tok, texts: list[str], n_tokens: int, max_length: int) -> list[str]:
    out, count = [], 0
    for t in texts:
        out.append(t)
        count += min(len(tok(t)["input_ids"]), max_length)
        if count >= n_tokens:
            break
    return out


def write_gradients_across_training(
    ck: Units, texts: list[str], config: SignatureConfig
) -> pd.DataFrame:
    """At every pretraining checkpoint: the LM gradient of each write map against that
    checkpoint's prediction subspace (k = ``config.k``), and the write weight itself
    (``weight_rsf`` = RSF of W, ``weight_enrichment``) against the same subspace.
    Empty (with its columns) for a pair without pretraining checkpoints."""

    if not ck.steps:
        return pd.DataFrame(columns=WRITE_GRADIENT_COLUMNS)

    rows = []
    for step, spec in sorted(ck.steps.items()):
        model, tok = ck.load(spec)
        maps = [m for m in linear_maps(model, embeddings=False) if m.kind == "write"]
        bases = _bases(model, maps, {}, config.k, config.centred)
        batch = _token_budget(tok, texts, config.grad_tokens, context_length(model))
        factors = gradient_factors(
            model, tok, batch, maps, lm_loss, max_length=context_length(model)
        )
        for row in _geometry_rows(factors, maps, bases, {}, config.k):
            w = maps[[m.key for m in maps].index(row["key"])].weight(model)
            row["weight_rsf"] = relative_subspace_fraction(w, bases[row["key"]][0], "output")
            row["weight_enrichment"] = row["weight_rsf"] / (config.k / row["d"])
            rows.append({"step": step, "checkpoint": spec, **row})
    return pd.DataFrame(rows)


def adam_signature(
    ck: Units, texts: list[str], config: SignatureConfig, cache: dict
) -> pd.DataFrame:
    """Adam's update direction u = m̂/(√v̂+ε) (:func:`lamina.weights.gradients.adam_update_direction`)
    against its first moment m (the momentum-averaged raw gradient), from the optimiser
    state saved with the base checkpoint (late pretraining) and with each target stage.
    One row per state × block map: RSF and enrichment of m and of u at k = ``config.k``.
    Empty (with its columns) for a pair without saved optimiser state."""

    if not ck.has_optimizer_state:
        return pd.DataFrame(columns=ADAM_COLUMNS)
    betas = ck.betas
    rows = []
    for label in (config.base, *config.targets):
        spec = ck.spec(label)
        state = organisms.load_optimizer_state(spec)
        model, tok = ck.load(spec)
        maps = linear_maps(model, embeddings=False)
        moments = cached_moments(model, tok, texts, config.centred, cache, spec)
        bases = _bases(model, maps, moments, config.k, config.centred)
        for m in maps:
            st = state.get(m.parameter)
            if st is None or int(st["step"]) < 1:
                continue
            basis, side = bases[m.key]
            mom = m.as_matrix(st["exp_avg"])
            upd = m.as_matrix(
                adam_update_direction(st["exp_avg"], st["exp_avg_sq"], int(st["step"]), betas)
            )
            d = basis.shape[0]
            r_m = relative_subspace_fraction(mom, basis, side)
            r_u = relative_subspace_fraction(upd, basis, side)
            rows.append(
                {
                    "state": label,
                    "checkpoint": spec,
                    "step": int(st["step"]),
                    "key": m.key,
                    "layer": m.layer,
                    "role": m.role,
                    "kind": m.kind,
                    "k": config.k,
                    "d": d,
                    "rsf_momentum": r_m,
                    "rsf_update": r_u,
                    "enrichment_momentum": r_m / (config.k / d),
                    "enrichment_update": r_u / (config.k / d),
                }
            )
    return pd.DataFrame(rows)
