"""Probe subspaces of paper 2: the principal subspace of each read map's inputs (from streamed
second moments) and the prediction subspace of the unembedding.

Matrices follow :mod:`lamina.weights.maps` (``y = W x``, shape (d_out, d_in)).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

from lamina.core.types import Basis, Moment, TokenIdBatch
from lamina.sources.models import get_adapter, hf_config, weight_of
from lamina.states import hooks
from lamina.states.hooks import map_point
from lamina.weights.maps import SHARED_INPUT, LinearMap, linear_maps
from lamina.weights.subspace_fraction import Side

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "input_second_moments",
    "prediction_basis",
    "principal_basis",
    "probe_bases",
    "token_batches",
]


def token_batches(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    batch_size: int,
    max_length: int | None,
) -> Iterator[tuple[TokenIdBatch, TokenIdBatch]]:
    """(input_ids, attention_mask), each (B, T), on the model's device."""
    if isinstance(texts, str) or not len(texts):
        raise ValueError("texts must be a non-empty list of strings")
    device = next(model.parameters()).device
    for i in range(0, len(texts), batch_size):
        enc = tokenizer(
            list(texts[i : i + batch_size]),
            return_tensors="pt",
            padding=True,
            truncation=max_length is not None,
            max_length=max_length,
        )
        yield enc["input_ids"].to(device), enc["attention_mask"].to(device)


def _input_point(m: LinearMap) -> str:
    """The hook point of the tensor map ``m`` reads: Q/K/V share ``block.{i}.attn.in``, the
    MLP's gate and up maps ``block.{i}.mlp.in``; any other map its own ``.in`` point."""
    shared = SHARED_INPUT.get(m.role)
    if shared is not None and m.layer is not None:
        return f"block.{m.layer}.{shared.removesuffix('_in')}.in"
    return map_point(m.layer, m.role, "in")


def input_second_moments(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    *,
    maps: Sequence[LinearMap] | None = None,
    centred: bool = False,
    batch_size: int = 8,
    max_length: int | None = 256,
    token_norms: dict[str, torch.Tensor] | None = None,
) -> dict[str, Moment]:
    """Second moment of each map's actual input over the non-padding tokens of ``texts``.

    M = (1/N) Σ_t a_t a_tᵀ, or with ``centred=True`` the covariance M - μ μᵀ, μ = (1/N) Σ_t a_t.
    Each batch's sum is a product in float32 (float64 for a float64 model; a float64 product
    costs as much again as the forward), accumulated over batches in float64 with forward pre-hooks; activations
    are never kept.
    Maps that read one tensor (Q/K/V; gate/up) share one accumulator and one (read-only)
    result tensor.
    maps: default every read map of the blocks. token_norms: a dict filled with each map's
    tokens' squared norms ‖a_t‖² ((N,) float64, N the tokens averaged: what the estimation
    of P_A depends on, :mod:`lamina.weights.qk_null`).
    -> {map key: (d_in, d_in) float64, on the CPU}.
    """
    maps = (
        [m for m in linear_maps(model, embeddings=False) if m.kind == "read"]
        if maps is None
        else list(maps)
    )
    if any(m.role == "embed" for m in maps):
        raise ValueError("the embedding reads one-hot token ids; it has no input second moment")
    source = {m.key: _input_point(m) for m in maps}  # maps that read one tensor share a point
    sums: dict[str, torch.Tensor] = {}
    firsts: dict[str, torch.Tensor] = {}
    norms: dict[str, list[torch.Tensor]] = {}
    count = 0
    mask_now: list[torch.Tensor] = []

    def make_hook(src: str) -> Callable:
        def hook(a: torch.Tensor) -> None:
            a = a[mask_now[0]].detach()  # (N, d_in)
            a = a if a.dtype == torch.float64 else a.float()
            sums[src] = sums.get(src, 0) + (a.T @ a).double()
            firsts[src] = firsts.get(src, 0) + a.sum(0, dtype=torch.float64)
            if token_norms is not None:
                norms.setdefault(src, []).append((a.double() ** 2).sum(1).cpu())

        return hook

    attach = {src: make_hook(src) for src in dict.fromkeys(source.values())}
    run = model if any(m.role == "unembed" for m in maps) else get_adapter(model).base(model)
    with hooks.attached(model, attach), torch.no_grad():
        for ids, mask in token_batches(model, tokenizer, texts, batch_size, max_length):
            mask_now[:] = [mask.bool()]
            run(input_ids=ids, attention_mask=mask)
            count += int(mask.sum())
    by_source: dict[str, torch.Tensor] = {}
    for src in sums:  # one tensor per source: maps that read it share it
        moment = sums[src] / count
        if centred:
            mu = firsts[src] / count
            moment = moment - torch.outer(mu, mu)
        by_source[src] = moment.cpu()
    if token_norms is not None:
        joined = {src: torch.cat(v) for src, v in norms.items()}
        token_norms.update({m.key: joined[source[m.key]] for m in maps if source[m.key] in joined})
    return {m.key: by_source[source[m.key]] for m in maps}


def principal_basis(moment: Moment, k: int) -> Basis:
    """Top-k eigenvectors of a symmetric (d, d) moment, by decreasing eigenvalue -> (d, k)
    with orthonormal columns, in the moment's dtype."""
    d = moment.shape[0]
    if not 1 <= k <= d:
        raise ValueError(f"k must be in [1, {d}], got {k}")
    _, vecs = torch.linalg.eigh(moment)
    return vecs[:, -k:].flip(1).contiguous()


def prediction_basis(model: nn.Module, k: int) -> Basis:
    """The prediction subspace: top-k right singular vectors of the unembedding W_U (vocab, d).

    -> (d_model, k) float64, orthonormal columns, by decreasing singular value (computed as
    the eigenvectors of W_Uᵀ W_U).
    """
    unembed = get_adapter(model).unembedding_module(model)
    if unembed is None:
        raise ValueError(
            f"{hf_config(model).model_type} model has no unembedding (load it as a causal LM)"
        )
    w = weight_of(unembed).detach().to(torch.float64).cpu()
    return principal_basis(w.T @ w, k)


def probe_bases(
    model: nn.Module, maps: Sequence[LinearMap], moments: Mapping[str, Moment], k_max: int
) -> dict[str, tuple[Basis, Side]]:
    """The paper's probe for each map: read maps -> (input principal basis of ``moments[key]``,
    "input"); write maps -> (prediction basis, "output"). Bases are (d, min(k_max, d))."""
    out: dict[str, tuple[torch.Tensor, Side]] = {}
    pred = None
    for m in maps:
        if m.kind == "read":
            moment = moments[m.key]
            out[m.key] = (principal_basis(moment, min(k_max, moment.shape[0])), "input")
        else:
            if pred is None:
                pred = prediction_basis(model, min(k_max, get_adapter(model).d_model(model)))
            out[m.key] = (pred, "output")
    return out
