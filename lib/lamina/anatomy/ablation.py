"""Ablation sweeps over layers and surgeries, reusing the clean prefix, and their reports.

An ablation at layer l cannot change the residual stream entering block l, so the prefix
sweep caches that stream (and each block's call arguments) from one clean pass and reruns
only blocks l..L-1 per ablation. ``method="naive"`` runs the full model each time
and is the reference: both give bit-identical NLLs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any, NamedTuple, cast

import numpy as np
import pandas as pd
import torch
from torch import nn

from lamina.anatomy.perplexity import (
    PerplexityResult,
    TokenIds,
    eval_mode,
    paired_diff_ci,
    perplexity,
    perplexity_result,
    require_lm,
    sequence_batches,
    sequence_nll,
)
from lamina.anatomy.predictability import RIDGE_ALPHA, predicted_layer_state
from lamina.anatomy.surgery import (
    SurgeryOption,
    apply_surgery,
    check_layer,
    check_surgery,
    substitute_weights,
)
from lamina.sources.models import get_adapter
from lamina.states import hooks

__all__ = [
    "ablation_sweep",
    "predicted_joint_nll",
    "predicted_replacement_curve",
    "sweep_nll",
]

# ----------------------------------------------------------------------------------------
# ablation sweep
# ----------------------------------------------------------------------------------------


class BlockCalls:
    """Each block's call arguments (masks, position embeddings, ...) captured on a clean forward
    pass with pre-hooks, minus the hidden state, so that blocks l..L-1 can be re-run from any
    residual stream exactly as the model's own forward runs them."""

    def __init__(self, model: nn.Module, ids: torch.Tensor, keep_all: bool = False):
        adapter = get_adapter(model)
        self.blocks = adapter.block_list(model)
        self.norm = adapter.final_norm_module(model)
        self.head = adapter.unembedding_module(model)
        self.calls: list[tuple[tuple, dict, bool]] = [((), {}, True)] * len(self.blocks)
        self.h0: torch.Tensor | None = None
        self.streams: list[torch.Tensor] = []  # stream entering each block, when keep_all

        def make(i: int) -> Any:
            def pre(module: nn.Module, args: tuple, kwargs: dict) -> None:
                if args:
                    hidden, call = args[0], ((None, *args[1:]), dict(kwargs), True)
                else:
                    hidden, call = (
                        kwargs["hidden_states"],
                        (args, {**kwargs, "hidden_states": None}, False),
                    )
                self.calls[i] = call
                if i == 0:
                    self.h0 = hidden
                if keep_all:
                    self.streams.append(hidden)

            return pre

        block_inputs = [(f"block.{i}.in", make(i)) for i in range(len(self.blocks))]
        with hooks.attached(model, block_inputs, raw=True):
            self.clean_logits = model(input_ids=ids, use_cache=False).logits

    def block(self, j: int, hidden: torch.Tensor) -> torch.Tensor:
        args, kwargs, positional = self.calls[j]
        if positional:
            out = self.blocks[j](hidden, *args[1:], **kwargs)
        else:
            out = self.blocks[j](*args, **{**kwargs, "hidden_states": hidden})
        return out[0] if isinstance(out, tuple) else out

    def logits_from(self, start: int, hidden: torch.Tensor) -> torch.Tensor:
        """Run blocks start..L-1 on ``hidden`` (the stream entering block ``start``), then the
        final norm and the unembedding."""
        for j in range(start, len(self.blocks)):
            hidden = self.block(j, hidden)
        if self.norm is not None:
            hidden = self.norm(hidden)
        return cast(nn.Module, self.head)(hidden)  # a causal LM: it has an unembedding


def _check_sweep(
    model: nn.Module, surgeries: Sequence[str], layers: Sequence[int] | None, options: dict
) -> tuple[list[str], list[int]]:
    require_lm(model)
    if isinstance(surgeries, str):
        surgeries = [surgeries]
    surgeries = [check_surgery(s) for s in surgeries]
    n = get_adapter(model).n_layers(model)
    layers = list(range(n)) if layers is None else [check_layer(model, l) for l in layers]
    extra = sorted(set(options) - set(surgeries))
    if extra:
        raise ValueError(
            f"options given for surgeries not in the sweep: {extra}; sweep: {surgeries}"
        )
    for name, opts in options.items():
        if not isinstance(opts, dict):
            raise ValueError(
                f"options for surgery {name!r} must be a dict, got {type(opts).__name__}"
            )
    return surgeries, layers


Batches = list[tuple[np.ndarray, torch.Tensor]]  # (sequence indices, token ids (b, T))
Sweep = dict[tuple[str, int], np.ndarray]  # (surgery, layer) -> summed NLL (n_seq,), nats


class _Job(NamedTuple):
    """What a sweep runs: the batches of n sequences, the surgeries (with their options by
    name) and the layers."""

    batches: Batches
    n: int
    surgeries: list[str]
    layers: list[int]
    options: dict[str, dict[str, SurgeryOption]]


def _naive_sweep(model: nn.Module, job: _Job) -> tuple[np.ndarray, np.ndarray, Sweep]:
    """:func:`sweep_nll` with a full forward pass per ablation (the reference method)."""
    batches, n, surgeries, layers, options = job
    clean, counts = np.zeros(n), np.zeros(n)
    for idx, ids in batches:
        clean[idx] = sequence_nll(model(input_ids=ids, use_cache=False).logits, ids)
        counts[idx] = ids.shape[1] - 1
    out: Sweep = {}
    for s in surgeries:
        for l in layers:
            sums = np.zeros(n)
            with apply_surgery(model, s, l, **options.get(s, {})):
                for idx, ids in batches:
                    sums[idx] = sequence_nll(model(input_ids=ids, use_cache=False).logits, ids)
            out[(s, l)] = sums
    return clean, counts, out


def _ablate_from(
    model: nn.Module,
    batches: Batches,
    calls: list[BlockCalls],
    streams: list[torch.Tensor | None],
    n: int,
    s: str,
    l: int,
    opts: dict[str, SurgeryOption],
) -> np.ndarray:
    """(n,) summed NLL with surgery ``s`` at block ``l``, rerunning blocks l..L-1 from the
    cached ``streams`` entering block l (``skip``: blocks l+1..L-1 on the same stream)."""
    sums = np.zeros(n)
    if s == "skip":  # the stream entering l leaves l unchanged
        for (idx, ids), c, h in zip(batches, calls, streams, strict=True):
            sums[idx] = sequence_nll(c.logits_from(l + 1, cast(torch.Tensor, h)), ids)
        return sums
    with apply_surgery(model, s, l, **opts):
        for (idx, ids), c, h in zip(batches, calls, streams, strict=True):
            sums[idx] = sequence_nll(c.logits_from(l, cast(torch.Tensor, h)), ids)
    return sums


def _prefix_sweep(
    model: nn.Module, job: _Job, cache_limit_mb: float
) -> tuple[np.ndarray, np.ndarray, Sweep]:
    """:func:`sweep_nll` reusing the clean prefix (the streams entering every block, or only
    the current one when all would exceed ``cache_limit_mb``)."""
    batches, n, surgeries, layers, options = job
    adapter = get_adapter(model)
    n_layers = adapter.n_layers(model)
    itemsize = next(model.parameters()).element_size()
    n_tokens = sum(ids.numel() for _, ids in batches)
    keep_all = n_layers * n_tokens * adapter.d_model(model) * itemsize <= cache_limit_mb * 2**20
    clean, counts = np.zeros(n), np.zeros(n)
    calls: list[BlockCalls] = []
    streams: list[torch.Tensor | None] = []  # None only past the last block, never read
    for idx, ids in batches:
        c = BlockCalls(model, ids, keep_all)
        clean[idx] = sequence_nll(c.clean_logits, ids)
        counts[idx] = ids.shape[1] - 1
        del c.clean_logits
        calls.append(c)
        streams.append(c.h0)
    out: Sweep = {}
    wanted = set(layers)
    for l in range(max(layers) + 1):
        if l in wanted:
            for s in surgeries:
                opts = options.get(s, {})
                out[(s, l)] = _ablate_from(model, batches, calls, streams, n, s, l, opts)
        if keep_all:
            streams = [c.streams[l + 1] if l + 1 < n_layers else None for c in calls]
        elif l < max(layers):
            streams = [
                c.block(l, cast(torch.Tensor, h)) for c, h in zip(calls, streams, strict=True)
            ]
    order = sorted(out, key=lambda k: (surgeries.index(k[0]), k[1]))
    return clean, counts, {k: out[k] for k in order}


def sweep_nll(
    model: nn.Module,
    token_ids: TokenIds,
    surgeries: Sequence[str] = ("skip", "interpolate"),
    layers: Sequence[int] | None = None,
    *,
    method: str = "prefix",
    batch_size: int = 8,
    cache_limit_mb: float = 2048.0,
    **options: dict[str, SurgeryOption],
) -> tuple[np.ndarray, np.ndarray, dict[tuple[str, int], np.ndarray]]:
    """Summed NLL per sequence of the clean model and of every (surgery, layer).

    ``method="prefix"`` runs one clean pass per batch and caches the stream entering every
    block; an ablation at layer l then reruns only blocks l..L-1 (``skip``: l+1..L-1). If that
    cache (L x n_tokens x d floats) would exceed ``cache_limit_mb``, only the stream entering
    the current layer is kept and advanced through clean block l after its ablations (one
    extra clean pass in all). ``method="naive"`` runs the full model
    for every ablation. Both give bit-identical results (same ops on the same inputs).
    Returns (clean (n_seq,), counts (n_seq,), {(surgery, layer): (n_seq,)}), nats.
    """
    surgeries, layers = _check_sweep(model, surgeries, layers, options)
    if method not in ("prefix", "naive"):
        raise ValueError(f"method must be 'prefix' or 'naive', got {method!r}")
    batches, n = sequence_batches(token_ids, batch_size)
    device = next(model.parameters()).device
    batches = [(idx, ids.to(device)) for idx, ids in batches]
    job = _Job(batches, n, surgeries, layers, options)
    with eval_mode(model):
        if method == "naive":
            return _naive_sweep(model, job)
        return _prefix_sweep(model, job, cache_limit_mb)


def _sweep_row(
    s: str,
    l: int,
    sums: np.ndarray,
    clean: np.ndarray,
    counts: np.ndarray,
    base: PerplexityResult,
    n_bootstrap: int,
    seed: int,
) -> dict[str, object]:
    """The :func:`ablation_sweep` row of surgery ``s`` at layer ``l`` (sums, clean, counts:
    (n_seq,) summed NLL in nats and predicted tokens)."""
    r = perplexity_result(sums, counts, n_bootstrap, seed)
    lo, hi = paired_diff_ci(sums, clean, counts, n_bootstrap, seed)
    return {
        "layer": l,
        "surgery": s,
        "ppl": r.ppl,
        "nll": r.nll,
        "delta_pct": 100.0 * float(np.expm1(r.nll - base.nll)),
        "delta_ci_low": 100.0 * float(np.expm1(lo)),
        "delta_ci_high": 100.0 * float(np.expm1(hi)),
        "ppl_ci_low": r.ci_low,
        "ppl_ci_high": r.ci_high,
        "baseline_ppl": base.ppl,
        "nll_per_seq": r.nll_per_seq,
    }


def ablation_sweep(
    model: nn.Module,
    token_ids: TokenIds,
    surgeries: Sequence[str] = ("skip", "interpolate"),
    layers: Sequence[int] | None = None,
    *,
    batch_size: int = 8,
    n_bootstrap: int = 2000,
    seed: int = 0,
    method: str = "prefix",
    **options: dict[str, SurgeryOption],
) -> pd.DataFrame:
    """Perplexity change for every (surgery, layer), reusing the clean prefix
    (``method="naive"``: a full forward pass per ablation, the reference).

    ``options`` give each surgery its keyword arguments by name, e.g.
    ``scale={"alpha": 0.9}, noise={"rel_scale": 0.5, "seed": 0}``.

        delta_pct = 100 (ppl_ablated / ppl_clean - 1) = 100 (exp(nll_ablated - nll_clean) - 1)

    delta_ci_low/high: 95% paired BCa bootstrap CI over sequences of the NLL difference,
    mapped through the same formula. ppl_ci_low/high: unpaired CI of the ablated ppl.
    Columns: layer, surgery, ppl, nll, delta_pct, delta_ci_low, delta_ci_high, ppl_ci_low,
    ppl_ci_high, baseline_ppl, nll_per_seq (array (n_seq,), nats per token).
    ``df.attrs`` holds the clean model's baseline_ppl, baseline_nll, baseline_ci and
    baseline_nll_per_seq, the sweep's seconds and method.
    """
    t0 = time.perf_counter()
    clean, counts, ablated = sweep_nll(
        model,
        token_ids,
        surgeries,
        layers,
        method=method,
        batch_size=batch_size,
        **cast("dict[str, Any]", options),
    )
    seconds = time.perf_counter() - t0
    base = perplexity_result(clean, counts, n_bootstrap, seed)
    df = pd.DataFrame(
        [
            _sweep_row(s, l, sums, clean, counts, base, n_bootstrap, seed)
            for (s, l), sums in ablated.items()
        ]
    )
    df.attrs.update(
        baseline_ppl=base.ppl,
        baseline_nll=base.nll,
        baseline_ci=[base.ci_low, base.ci_high],
        baseline_nll_per_seq=base.nll_per_seq.tolist(),
        seconds=seconds,
        method=method,
    )
    return df


def predicted_replacement_curve(
    model: nn.Module,
    token_ids: TokenIds,
    *,
    order: Sequence[int] | None = None,
    k_max: int | None = None,
    alpha: float = RIDGE_ALPHA,
    degree: int = 2,
    batch_size: int = 8,
) -> pd.DataFrame:
    """Perplexity when ridge-predicted weights (leave-one-out, from the clean model) replace
    the first k layers of ``order`` at once, k = 0..k_max. Columns k, layers, ppl, delta_pct."""
    n = get_adapter(model).n_layers(model)
    order = list(range(n)) if order is None else [check_layer(model, l) for l in order]
    k_max = len(order) if k_max is None else k_max
    states = {l: predicted_layer_state(model, l, alpha=alpha, degree=degree) for l in order[:k_max]}
    base = perplexity(model, token_ids, batch_size=batch_size, n_bootstrap=0)
    rows = [{"k": 0, "layers": [], "ppl": base.ppl, "delta_pct": 0.0}]
    for k in range(1, k_max + 1):
        with ExitStack() as stack:
            for l in order[:k]:
                stack.enter_context(substitute_weights(model, l, states[l]))
            r = perplexity(model, token_ids, batch_size=batch_size, n_bootstrap=0)
        rows.append(
            {
                "k": k,
                "layers": order[:k],
                "ppl": r.ppl,
                "delta_pct": 100.0 * float(np.expm1(r.nll - base.nll)),
            }
        )
    return pd.DataFrame(rows)


def predicted_joint_nll(
    model: nn.Module,
    token_ids: TokenIds,
    layers: Sequence[int],
    *,
    alpha: float = RIDGE_ALPHA,
    degree: int = 2,
    batch_size: int = 8,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-sequence mean NLL (nats per token), each (n_seq,), of the intact model and of the
    model with ridge-predicted weights (leave-one-out, from the clean model:
    :func:`lamina.anatomy.predictability.predicted_layer_state`) in every one of ``layers``
    at once: the joint replacement whose excess over the single-layer replacements measures
    how errors accumulate."""
    layers = [check_layer(model, l) for l in layers]
    states = {l: predicted_layer_state(model, l, alpha=alpha, degree=degree) for l in layers}
    base = perplexity(model, token_ids, batch_size=batch_size, n_bootstrap=0)
    with ExitStack() as stack:
        for l in layers:
            stack.enter_context(substitute_weights(model, l, states[l]))
        joint = perplexity(model, token_ids, batch_size=batch_size, n_bootstrap=0)
    return base.nll_per_seq, joint.nll_per_seq
