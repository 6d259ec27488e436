"""ΔW between checkpoints of one organism, probed in the input principal subspace (read maps)
or the prediction subspace (write maps) at every k, with a random-subspace null. Part of
:mod:`lamina.chapters.weight_update_signature`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, cast

import pandas as pd
import torch
from torch import nn

from lamina.sources.models import get_adapter, hf_config, weight_of
from lamina.sources.quantize import quantize_model
from lamina.weights import (
    LinearMap,
    input_second_moments,
    k_sweep,
    linear_maps,
    norm_gain,
    principal_basis,
    random_matrix_null,
    random_subspace_null,
    weight_deltas,
)
from lamina.weights.qk_null import add_null_centres
from lamina.weights.settings import SignatureSettings, context_length
from lamina.weights.units import Checkpoints, ModelPair, Units, checkpoint_pairs

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "cached_moments",
    "delta_signature",
    "organism_deltas",
    "prediction_subspace",
    "probed_maps",
    "read_basis",
    "signature_from_deltas",
]


def read_basis(moment: torch.Tensor, k: int, cache: dict | None = None) -> torch.Tensor:
    """:func:`lamina.weights.principal_basis` (top-k eigenvectors, (d, k)) of a read map's
    input second moment, with one eigendecomposition per moment tensor in ``cache`` (maps
    that read one tensor share it; every k is a slice of the same eigh, so the result is
    bit-identical to an uncached call)."""
    if cache is None:
        return principal_basis(moment, k)
    memo = cache.setdefault("eigh", {})
    hit = memo.get(id(moment))
    if hit is None or hit[0] is not moment:  # keep the tensor: its id stays unique
        hit = memo[id(moment)] = (moment, principal_basis(moment, moment.shape[0]))
    if not 1 <= k <= moment.shape[0]:
        raise ValueError(f"k must be in [1, {moment.shape[0]}], got {k}")
    return hit[1][:, :k].contiguous()


def signature_from_deltas(
    deltas: dict[str, torch.Tensor],
    maps: Sequence[LinearMap],
    moments: dict[str, torch.Tensor],
    pred: torch.Tensor,
    ks: Sequence[int],
    *,
    n_random: int = 0,
    seed: int = 0,
    weights: dict[str, torch.Tensor] | None = None,
    cache: dict | None = None,
    n_tokens: int | dict[str, int] | None = None,
    squared_norms: dict[str, torch.Tensor] | None = None,
) -> pd.DataFrame:
    """RSF and enrichment of every block ΔW at every k: read maps against the top eigenvectors
    of their input second moment ``moments[key]`` (d_in, d_in), write maps against the
    prediction basis ``pred`` (d_model, >= max k). See :func:`lamina.weights.k_sweep`.

    weights: {key: W (d_out, d_in)} of the start checkpoint: adds the baseline "RSF of W
    itself" in the same basis (``weight_rsf``) and ``vs_weight`` = RSF(ΔW) / RSF(W). Unlike the
    k/d, random-subspace and random-matrix nulls (all k/d in expectation), it asks whether the
    update is more concentrated in the subspace than the matrix it updates (a ΔW ∝ W, e.g.
    weight decay, gives 1). cache: eigendecompositions reused (:func:`read_basis`).
    n_tokens (with weights): the tokens each moment averages; adds the read rows' null centre
    of ``vs_weight`` when P_A is estimated and its inputs (:func:`lamina.weights.qk_null.
    add_null_centres`; squared_norms: the tokens' ‖a_t‖² per key, or None for Gaussian
    tails)."""
    block = [m for m in maps if m.layer is not None]
    k_max = max(ks)
    bases: dict[str, tuple[torch.Tensor, Literal["input", "output"]]] = {}
    for m in block:
        if m.kind == "read":
            moment = moments[m.key]
            bases[m.key] = (read_basis(moment, min(k_max, moment.shape[0]), cache), "input")
        else:
            bases[m.key] = (pred, "output")
    table = k_sweep({m.key: deltas[m.key] for m in block}, bases, ks, maps=block)
    if weights is not None:
        own = k_sweep({m.key: weights[m.key] for m in block}, bases, ks, maps=block)
        table = table.merge(
            own[["key", "k", "rsf"]].rename(columns={"rsf": "weight_rsf"}), on=["key", "k"]
        )
        table["vs_weight"] = table["rsf"] / table["weight_rsf"]
        if n_tokens is not None:
            table = add_null_centres(table, moments, n_tokens, squared_norms, cache)
    if n_random:
        null = random_subspace_null(
            {m.key: deltas[m.key] for m in block},
            {k: s for k, (_, s) in bases.items()},
            ks,
            n=n_random,
            seed=seed,
        )
        table = table.merge(null, on=["key", "k"], how="left")
        rmat = random_matrix_null(
            {m.key: cast(tuple[int, int], tuple(deltas[m.key].shape)) for m in block}, bases, ks, n=n_random, seed=seed + 1
        )
        table = table.merge(rmat, on=["key", "k"], how="left")
    return table


def prediction_subspace(
    model: torch.nn.Module,
    k: int,
    centred: bool,
    fold_gain: bool = False,
    cache: dict | None = None,
    spec: str | None = None,
) -> torch.Tensor:
    """The prediction subspace (d_model, k), float64: :func:`lamina.weights.prediction_basis`
    (top-k right singular vectors of W_U), or with ``centred=True`` those of W_U with its
    mean row removed (reimplementation choice: the mean row is the direction that shifts
    every logit alike, which the softmax ignores). ``fold_gain=True`` (sensitivity) uses
    W_U diag(γ), γ (d_model,) the final norm's gain: the map from the normalised residual
    stream to the logits (a model without a final-norm gain gives W_U; Gemma's RMSNorm
    multiplies by 1 + γ, :func:`lamina.weights.norm_gain`). With ``cache`` and the checkpoint's
    ``spec``, W_Uᵀ W_U is formed once per checkpoint (for a 262k vocabulary it costs about a
    minute of one core in float64); the centred and gain-folded Grams are always derived from
    it (:func:`_unembedding_gram`), so a cached and an uncached call agree exactly."""
    if cache is None or spec is None:  # one call: nothing to share
        cache, spec = {}, ""
    key = ("prediction", spec, centred, fold_gain)
    if key not in cache:
        cache[key] = principal_basis(_unembedding_gram(model, centred, fold_gain, cache, spec), _d(model))
    if not 1 <= k <= cache[key].shape[1]:
        raise ValueError(f"k must be in [1, {cache[key].shape[1]}], got {k}")
    return cache[key][:, :k].contiguous()


def _d(model: nn.Module) -> int:
    return get_adapter(model).d_model(model)


def _unembedding_gram(
    model: nn.Module, centred: bool, fold_gain: bool, cache: dict, spec: str
) -> torch.Tensor:
    """The (d, d) float64 Gram whose top eigenvectors :func:`prediction_subspace` returns,
    from one cached W_Uᵀ W_U and column sum s of W_U (V rows): centred W_Uᵀ W_U - s sᵀ / V
    (= (W_U - mean row)ᵀ (W_U - mean row)); gain-folded diag(g) G diag(g)
    (= (W_U diag(g))ᵀ (W_U diag(g))), g the final norm's gain."""
    key = ("gram", spec)
    if key not in cache:
        unembed = get_adapter(model).unembedding_module(model)
        if unembed is None:
            raise ValueError(
                f"{hf_config(model).model_type} model has no unembedding (load it as a causal LM)"
            )
        w = weight_of(unembed).detach().to(torch.float64).cpu()
        cache[key] = (w.T @ w, w.sum(0), w.shape[0])
    gram, colsum, n = cache[key]
    if centred:
        gram = gram - torch.outer(colsum, colsum) / n
    norm = get_adapter(model).final_norm_module(model)
    gain = norm_gain(norm) if fold_gain and norm is not None else None
    if gain is not None:
        g = gain.to(torch.float64).cpu()
        gram = g[:, None] * gram * g[None, :]
    return gram


def delta_signature(
    ck: Units,
    start: str,
    end: str,
    texts: Sequence[str],
    config: SignatureSettings,
    *,
    centred: bool | None = None,
    n_random: int = 0,
    cache: dict | None = None,
    fold_gain: bool = False,
    requantise: str | None = None,
) -> pd.DataFrame:
    """ΔW = W(end) - W(start) probed at every k of ``config.k_sweep`` (one row per matrix
    and k, see :func:`signature_from_deltas`). Subspaces come from ``config.moments_from``.
    ``requantise`` (quantisation control, :mod:`lamina.states.quant_control`): ΔW unchanged,
    but the subspaces (second moments, prediction basis) and W's own RSF are taken from the
    reference and start checkpoints with their weights rounded through that GGUF type.
    Raises ValueError for checkpoints of different organisms, architectures or shapes."""
    ck.check(start, end)
    centred = config.centred if centred is None else centred
    model_a, tok = ck.load(start)
    model_b, _ = ck.load(end)
    maps = probed_maps(model_a, config)
    deltas = weight_deltas(model_a, model_b, maps=maps)  # only the probed maps are used
    ref = model_a if config.moments_from == "start" else model_b
    ref_spec = start if config.moments_from == "start" else end
    if requantise is not None:
        model_a, ref, ref_spec = _requantised(model_a, ref, ref_spec, requantise, cache)
    norms: dict[str, torch.Tensor] = {}
    moments = cached_moments(ref, tok, texts, centred, cache, ref_spec, config, norms)
    cfg = hf_config(ref)
    d = cfg.hidden_size if hasattr(cfg, "hidden_size") else cfg.n_embd
    pred = prediction_subspace(
        ref, min(max(config.k_sweep), d), centred, fold_gain, cache, ref_spec
    )
    weights = {m.key: m.weight(model_a) for m in maps if m.layer is not None}
    out = signature_from_deltas(
        deltas, maps, moments, pred, config.k_sweep, n_random=n_random, seed=config.seed,
        weights=weights, cache=cache, n_tokens={k: len(v) for k, v in norms.items()},
        squared_norms=norms,
    )  # fmt: skip
    out["prediction"] = "W_U diag(gamma)" if fold_gain else "W_U"
    return out


def _requantised(
    start: nn.Module, ref: nn.Module, ref_spec: str, qtype: str, cache: dict | None
) -> tuple[nn.Module, nn.Module, str]:
    """(start, ref, ref's cache spec) with their weights rounded through GGUF ``qtype``
    (copies, each made once per ``cache``; ref is start's copy when it is start)."""
    memo = cache.setdefault("requantised", {}) if cache is not None else {}
    for model in (start, ref):
        if (id(model), qtype) not in memo:
            memo[(id(model), qtype)] = (model, quantize_model(model, qtype))
    return memo[(id(start), qtype)][1], memo[(id(ref), qtype)][1], f"{ref_spec}+{qtype}"


def probed_maps(model: nn.Module, config: SignatureSettings) -> list[LinearMap]:
    """The block maps of ``model`` in the probed layers (``config.layers``; None = all)."""
    maps = linear_maps(model, embeddings=False)
    keep = config.layers
    return [m for m in maps if m.layer is not None and (keep is None or m.layer in keep)]


def cached_moments(
    model: nn.Module, tok: PreTrainedTokenizerBase, texts: Sequence[str], centred: bool,
    cache: dict | None, spec: str, config: SignatureSettings,
    norms: dict[str, torch.Tensor] | None = None,
) -> dict[str, torch.Tensor]:
    """:func:`lamina.weights.input_second_moments` of the probed read maps
    (:func:`probed_maps`) over ``texts``, cached in ``cache`` under (spec, centred, layers);
    ``norms`` (when given) is filled with their tokens' squared norms (cached alike)."""
    key = (spec, centred, config.layers)
    if cache is not None and key in cache and (key, "norms") in cache:
        if norms is not None:
            norms.update(cache[(key, "norms")])
        return cache[key]
    found: dict[str, torch.Tensor] = {}
    moments = input_second_moments(
        model, tok, texts, centred=centred, batch_size=16,
        maps=[m for m in probed_maps(model, config) if m.kind == "read"],
        max_length=context_length(model, config.max_length), token_norms=found,
    )  # fmt: skip
    if cache is not None:
        cache[key], cache[(key, "norms")] = moments, found
    if norms is not None:
        norms.update(found)
    return moments


def organism_deltas(
    ck: Units, texts: list[str], config: SignatureSettings, cache: dict,
    requantise: str | None = None,
) -> pd.DataFrame:
    """The signature of every pair of :func:`checkpoint_pairs` (nulls for the stage and
    early→late pairs; for the stage pairs, sensitivity copies with the other second-moment
    convention (``moment``) and with the final-norm gain folded into W_U (``prediction``
    "W_U diag(gamma)"); for a :class:`ModelPair`, its one base -> target pair (a stage pair).
    ``requantise``: see :func:`delta_signature`; the sensitivity copies (other moment, gain
    folded) are then left out: no claim reads them."""
    frames = []
    for pair in checkpoint_pairs(cast("Checkpoints | ModelPair", ck), config).itertuples():
        main = pair.family != "pretraining"
        table = delta_signature(
            ck,
            pair.start,
            pair.end,
            texts,
            config,
            n_random=config.n_random if main else 0,
            cache=cache,
            requantise=requantise,
        )
        table["moment"] = "centred" if config.centred else "raw"
        tables = [table]
        if pair.family == "stage" and requantise is None:  # the claims read neither copy
            other = delta_signature(
                ck, pair.start, pair.end, texts, config, centred=not config.centred, cache=cache,
                requantise=requantise,
            )
            other["moment"] = "raw" if config.centred else "centred"
            tables.append(other)
            gain = delta_signature(
                ck, pair.start, pair.end, texts, config, cache=cache, fold_gain=True,
                requantise=requantise,
            )
            gain["moment"] = table["moment"].iloc[0]
            tables.append(gain)
        for t in tables:
            for col in ("pair", "family", "phase", "step_start", "step_end"):
                t[col] = getattr(pair, col)
            frames.append(t)
    out = pd.concat(frames, ignore_index=True)
    out["model"] = ck.name
    return out
