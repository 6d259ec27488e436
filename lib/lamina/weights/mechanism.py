"""Paper 2's mechanism on the organisms: gradient geometry per objective, Adam's update against
its momentum, and write gradients across pretraining. Part of
:mod:`lamina.chapters.weight_update_signature` (same config, same tables conventions)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
import pandas as pd
import torch
from torch import nn

from lamina.sources.organisms.objectives import lm_loss
from lamina.sources.organisms.stages import stage_loss
from lamina.sources.organisms.tokenizer import encode_stream
from lamina.sources.organisms.train import random_windows
from lamina.weights import LinearMap, linear_maps, relative_subspace_fraction
from lamina.weights.gradients import (
    GradientFactors,
    adam_update_direction,
    gradient_factors,
    gradient_geometry,
    loss_factors,
    sign_null_cancellation,
)
from lamina.weights.probes import (
    cached_moments,
    prediction_subspace,
    probed_maps,
    read_basis,
)
from lamina.weights.settings import SignatureSettings, context_length
from lamina.weights.units import Units

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from lamina.sources.organisms.configs import OrganismConfig

# Columns of the tables that a pair without training history leaves empty.
WRITE_GRADIENT_COLUMNS = [
    "step", "checkpoint", "key", "layer", "role", "kind", "k", "d", "rsf_summed",
    "rsf_token_mean", "rsf_token_pooled", "cancellation", "cancellation_null",
    "cancellation_null_q975", "cancellation_p_aligned", "enrichment_summed",
    "enrichment_token_mean", "enrichment_token_pooled", "activation_share",
    "activation_share_fit", "weight_rsf", "weight_enrichment",
]  # fmt: skip
ADAM_COLUMNS = [
    "state", "checkpoint", "step", "key", "layer", "role", "kind", "k", "d", "rsf_momentum",
    "rsf_update", "rsf_sign", "enrichment_momentum", "enrichment_update", "enrichment_sign",
]  # fmt: skip

__all__ = [
    "activation_share",
    "held_out_share",
    "geometry_rows",
    "adam_signature",
    "objective_gradients",
    "stage_factors",
    "write_gradients_across_training",
]


def activation_share(moment: torch.Tensor, k: int) -> float:
    """Share of the input energy in the top-k principal directions: Σ_{i<=k} λ_i / Σ_i λ_i of
    the (d, d) second moment (the RSF the input side of a per-token gradient term has on
    average when every δ_t has the same norm)."""
    eig = torch.linalg.eigvalsh(moment.to(torch.float64)).flip(0).clamp_min(0)
    return float(eig[:k].sum() / eig.sum())


def held_out_share(acts: torch.Tensor, basis: torch.Tensor) -> float:
    """Share of the energy of the inputs ``acts`` (T, d_in) in the span of ``basis`` (d_in, k):
    Σ_t ‖Bᵀa_t‖² / Σ_t ‖a_t‖². On tokens the basis was not fitted on (a gradient's), it is
    the activation share that the gradient's RSF inherits when δ_t is unrelated to a_t:
    E‖Bᵀ Σ_t δ_t a_tᵀ‖² / E‖Σ_t δ_t a_tᵀ‖² is this share weighted by ‖δ_t‖². NaN without
    input energy."""
    a = acts.to(torch.float64)
    total = float((a * a).sum())
    if not total > 0:
        return float("nan")
    proj = a @ basis.to(a.device, torch.float64)
    return float((proj * proj).sum()) / total


def _replay(tok: Any, corpus: Any, n: int, length: int, seed: int) -> torch.Tensor | None:
    """``n`` random windows (n, length) of the corpus's training text, as SFT's LM replay
    draws them (:func:`lamina.sources.organisms.train.random_windows`); None when n = 0 or the text
    is shorter than one window."""
    if n <= 0:
        return None
    docs, stream = list(corpus.train), torch.zeros(0, dtype=torch.long)
    for i in range(0, len(docs), 64):  # only as much text as n windows need
        stream = torch.cat([stream, encode_stream(tok, docs[i : i + 64])])
        if len(stream) > 4 * n * length:
            break
    if len(stream) <= length:
        return None
    return random_windows(stream, n, length, torch.Generator().manual_seed(seed))


def stage_factors(
    objective: str,
    model: nn.Module,
    tok: PreTrainedTokenizerBase,
    items: Sequence[tuple[str, ...]],
    stage_cfg: OrganismConfig,
    replay: torch.Tensor | None = None,
    maps: Sequence[LinearMap] | None = None,
) -> dict[str, GradientFactors]:
    """Gradient factors (:func:`lamina.weights.gradients.loss_factors`) of the loss an
    organism's alignment stage trains (:func:`lamina.sources.organisms.stages.stage_loss`: answers end
    with a scored EOS; SFT adds ``stage_cfg.replay_weight`` × the LM loss of ``replay``; DPO's
    reference is a frozen copy of ``model``, so its value is log 2 and its gradient is the
    first DPO step from this checkpoint). items: sft (question, answer); dpo (question,
    chosen, rejected). stage_cfg: an :class:`lamina.sources.organisms.configs.OrganismConfig` whose
    ``context`` is the model's. maps: the maps whose factors are kept (default every block
    map)."""
    if objective not in ("sft", "dpo"):
        raise ValueError(f"objective must be 'sft' or 'dpo'; got {objective!r}")
    ref = copy.deepcopy(model).eval().requires_grad_(False) if objective == "dpo" else None
    maps = linear_maps(model, embeddings=False) if maps is None else maps
    return loss_factors(
        model, maps,
        lambda: stage_loss(objective, cast("PreTrainedModel", model), cast("PreTrainedModel | None", ref),
                           tok, list(items), stage_cfg, replay),
    )


def _bases(
    model,
    maps: Sequence[LinearMap],
    moments: dict,
    k: int,
    centred: bool,
    cache: dict | None = None,
    spec: str | None = None,
) -> dict[str, tuple]:
    """{key: (basis (d, k), side)}: read maps in their input principal subspace, write maps in
    the prediction subspace (both reused from ``cache`` under ``spec``)."""
    pred = prediction_subspace(model, k, centred, cache=cache, spec=spec)
    return {
        m.key: (read_basis(moments[m.key], k, cache), "input")
        if m.kind == "read"
        else (pred, "output")
        for m in maps
    }


def geometry_rows(
    factors: Mapping[str, GradientFactors],
    maps: Sequence[LinearMap],
    bases: Mapping[str, tuple[torch.Tensor, Literal["input", "output"]]],
    moments: Mapping[str, torch.Tensor],
    k: int,
    seed: int = 0,
) -> list[dict[str, object]]:
    """One row per map of ``maps``: :func:`lamina.weights.gradients.gradient_geometry` of its
    gradient factors (``factors[key]``) in its basis (``bases[key]``: (basis (d, k), side)),
    the enrichments (RSF / (k/d)), the cancellation against its sign-randomised null (200
    draws, :func:`lamina.weights.gradients.sign_null_cancellation`) and, for a read map, the
    activation share of the gradient's own tokens in the basis (:func:`held_out_share`:
    ``activation_share``) and that of the second moment the basis was fitted on
    (:func:`activation_share`: ``activation_share_fit``, biased upwards: the top-k of a finite
    sample fit that sample's own noise)."""
    rows = []
    for m in maps:
        basis, side = bases[m.key]
        d = basis.shape[0]
        f = factors[m.key]
        g = gradient_geometry(f.deltas, f.acts, basis, side)
        row: dict[str, object] = {"key": m.key, "layer": m.layer, "role": m.role, "kind": m.kind, "k": k, "d": d}
        row |= {name: getattr(g, name) for name in g.__dataclass_fields__}
        for name in ("rsf_summed", "rsf_token_mean", "rsf_token_pooled"):
            row[name.replace("rsf", "enrichment")] = getattr(g, name) / (k / d)
        null = sign_null_cancellation(f.deltas, f.acts, n=200, seed=seed)
        row["cancellation_null"] = null["median"]
        row["cancellation_null_q975"] = null["q975"]
        row["cancellation_p_aligned"] = (
            (1 + float((null["draws"] >= g.cancellation).sum())) / (1 + len(null["draws"]))
        )
        read = m.kind == "read"
        row["activation_share"] = held_out_share(f.acts, basis) if read else float("nan")
        row["activation_share_fit"] = (
            activation_share(moments[m.key], k) if read else float("nan")
        )
        rows.append(row)
    return rows


def objective_gradients(
    ck: Units,
    texts: list[str],
    config: SignatureSettings,
    cache: dict,
    grad_texts: list[str] | None = None,
) -> pd.DataFrame:
    """Gradient geometry of every block map at ``config.base`` under the lm, sft and dpo
    objectives, at k = ``config.k`` (read maps in their input principal subspace, fitted on
    ``texts``; write maps in the prediction subspace). The LM gradient is taken on
    ``grad_texts`` (held-out documents disjoint from ``texts``, so the read basis is not fitted
    on the tokens it tests; default ``texts``, which the table's ``basis_tokens`` column then
    says). SFT and DPO use the loss their stage trains (:func:`stage_factors`; SFT with its LM
    replay of ``replay_batch_size`` training windows). One row per objective × map: RSF of the
    summed gradient, mean and energy-pooled per-token RSF, cancellation with its
    sign-randomised null (:func:`lamina.weights.gradients.sign_null_cancellation`), and the
    activation share (:func:`activation_share`) of read maps. The SFT and DPO items are the
    corpus's (``ck.corpus()``; for a real pair, lamina's curriculum)."""

    spec = ck.spec(config.base)
    model, tok = ck.load(spec)
    maps = probed_maps(model, config)
    moments = cached_moments(model, tok, texts, config.centred, cache, spec, config)
    bases = _bases(model, maps, moments, config.k, config.centred, cache, spec)
    corpus = ck.corpus()
    rng = np.random.default_rng(config.seed)
    length = context_length(model, config.max_length)
    held_out = grad_texts is not None
    lm_source = grad_texts if grad_texts is not None else texts
    lm_texts = _token_budget(tok, lm_source, config.grad_tokens, length)
    stage_cfg = ck.stage_config.replace(context=length)
    samples = {
        "lm": lm_texts,
        "sft": [corpus.sft[i] for i in rng.permutation(len(corpus.sft))[: 4 * config.grad_pairs]],
        "dpo": [corpus.dpo[i] for i in rng.permutation(len(corpus.dpo))[: 2 * config.grad_pairs]],
    }
    rows = []
    caps = {"sft": config.grad_pairs, "dpo": max(1, config.grad_pairs // 2)}
    for objective, items in samples.items():
        if objective == "lm":
            factors = gradient_factors(model, tok, items, maps, lm_loss, max_length=length)
        else:
            # rendered as training renders them (qa_batch keeps the answer + EOS and cuts an
            # over-long prompt from the left)
            items = items[: caps[objective]]
            n_replay = stage_cfg.replay_batch_size if objective == "sft" else 0
            replay = _replay(tok, corpus, n_replay, length, config.seed)
            factors = stage_factors(objective, model, tok, items, stage_cfg, replay, maps)
        for row in geometry_rows(factors, maps, bases, moments, config.k, config.seed):
            rows.append({"objective": objective, "checkpoint": spec, **row})
    out = pd.DataFrame(rows)
    out["basis_tokens"] = "held-out" if held_out else "same as tested"
    return out


def _token_budget(tok, texts: list[str], n_tokens: int, max_length: int) -> list[str]:
    out, count = [], 0
    for t in texts:
        out.append(t)
        count += min(len(tok(t)["input_ids"]), max_length)
        if count >= n_tokens:
            break
    return out


def write_gradients_across_training(
    ck: Units, texts: list[str], config: SignatureSettings
) -> pd.DataFrame:  # texts: the held-out gradient texts (write bases come from W_U)
    """At every pretraining checkpoint: the LM gradient of each write map against that
    checkpoint's prediction subspace (k = ``config.k``), and the write weight itself
    (``weight_rsf`` = RSF of W, ``weight_enrichment``) against the same subspace.
    Empty (with its columns) for a pair without pretraining checkpoints."""

    if not ck.steps:
        return pd.DataFrame(columns=WRITE_GRADIENT_COLUMNS)

    rows = []
    for step, spec in sorted(ck.steps.items()):
        model, tok = ck.load(spec)
        maps = [m for m in probed_maps(model, config) if m.kind == "write"]
        bases = _bases(model, maps, {}, config.k, config.centred)
        length = context_length(model, config.max_length)
        batch = _token_budget(tok, texts, config.grad_tokens, length)
        factors = gradient_factors(model, tok, batch, maps, lm_loss, max_length=length)
        for row in geometry_rows(factors, maps, bases, {}, config.k, config.seed):
            key = str(row["key"])
            w = maps[[m.key for m in maps].index(key)].weight(model)
            rsf = relative_subspace_fraction(w, bases[key][0], "output")
            row["weight_rsf"] = rsf
            row["weight_enrichment"] = rsf / (config.k / bases[key][0].shape[0])
            rows.append({"step": step, "checkpoint": spec, **row})
    return pd.DataFrame(rows)


def adam_signature(
    ck: Units, texts: list[str], config: SignatureSettings, cache: dict
) -> pd.DataFrame:
    """Adam's update direction u = m̂/(√v̂+ε) (:func:`lamina.weights.gradients.adam_update_direction`)
    against its first moment m (the momentum-averaged raw gradient) and against sign(m), the
    update of pure elementwise normalisation (Adam's first step, u = sign(g), and its limit
    whenever v̂ ≈ m̂²), from the optimiser state saved with the base checkpoint (late
    pretraining) and with each target stage. One row per state × block map: RSF and
    enrichment of m, of u and of sign(m) at k = ``config.k``.
    Empty (with its columns) for a pair without saved optimiser state."""

    if not ck.has_optimizer_state:
        return pd.DataFrame(columns=ADAM_COLUMNS)
    betas = ck.betas
    rows = []
    for label in (config.base, *config.targets):
        spec = ck.spec(label)
        state = ck.optimizer_state(spec)
        if state is None:  # a released checkpoint ships no optimiser state
            continue
        model, tok = ck.load(spec)
        maps = probed_maps(model, config)
        moments = cached_moments(model, tok, texts, config.centred, cache, spec, config)
        bases = _bases(model, maps, moments, config.k, config.centred, cache, spec)
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
            r_s = relative_subspace_fraction(torch.sign(mom), basis, side)
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
                    "rsf_sign": r_s,
                    "enrichment_momentum": r_m / (config.k / d),
                    "enrichment_update": r_u / (config.k / d),
                    "enrichment_sign": r_s / (config.k / d),
                }
            )
    return pd.DataFrame(rows, columns=ADAM_COLUMNS)
