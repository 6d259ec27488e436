"""The weight-update-signature chapter's run: deltas, mechanism and causal measurements on
every unit, then the claims."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable

import pandas as pd
import torch

from lamina.chapters.results import ExperimentResult
from lamina.chapters.weight_update_signature.causal import (
    null_stages,
    single_group_adaptation,
    write_edit_effects,
)
from lamina.chapters.weight_update_signature.claims import all_claims, sensitivity
from lamina.chapters.weight_update_signature.config import (
    CHAPTER,
    SignatureConfig,
    context_length,
    expand_models,
    real_budget,
)
from lamina.chapters.weight_update_signature.deltas import organism_deltas
from lamina.chapters.weight_update_signature.gate import passed
from lamina.chapters.weight_update_signature.mechanism import (
    adam_signature,
    objective_gradients,
    write_gradients_across_training,
)
from lamina.chapters.weight_update_signature.single import SingleCheckpoint
from lamina.chapters.weight_update_signature.units import (
    BorrowedText,
    Checkpoints,
    ModelPair,
    Units,
    split_sample,
    text_sample,
)
from lamina.sources.models import get_adapter
from lamina.states.quant_control import not_run_control, run_quant_control

__all__ = ["run_weight_signature"]


def run_weight_signature(config: SignatureConfig) -> ExperimentResult:
    """Deltas, mechanism and causal tests on every model of ``config.model`` (real
    checkpoints first, :class:`~.single.SingleCheckpoint`: every objective applied to one
    checkpoint; then the organisms), or on the real pair ``config.base`` -> ``config.target``
    (:class:`ModelPair`); the claims. Real checkpoints and pairs run with the ``real_*``
    budget (:func:`~.config.real_budget`); claims a unit cannot test are "not testable",
    with the reason.

    -> ExperimentResult with tables ``deltas`` (matrix × k × pair), ``gradients``,
    ``write_gradients``, ``adam``, ``edits``, ``adaptation``, ``finetune`` (training curves
    of the applied objectives), ``sensitivity`` and ``claims``.
    Raises ValueError when a pair's architectures or shapes differ.
    """
    units: list[Units]
    notes: list[str]
    if config.is_pair:
        pair = ModelPair(
            config.base, str(config.target), config.base_revision, config.target_revision
        )
        units, notes = [pair], []
        run_config = dataclasses.replace(
            config, base=pair.base_label, targets=(pair.target_label,), base_model=None,
            aligned_model=None,
        )  # fmt: skip
    else:
        real, names, notes = expand_models(config)
        if not real and not names:
            raise RuntimeError(
                f"no organism of model={config.model!r} is built: {'; '.join(notes)}"
            )
        units = [SingleCheckpoint(n, config) for n in real] + [Checkpoints(n) for n in names]
        run_config = config
    is_real = any(not isinstance(u, Checkpoints) for u in units)
    old_threads = torch.get_num_threads()
    torch.set_num_threads(_threads(is_real, old_threads))
    try:
        return _run(config, run_config, units, notes)
    finally:
        torch.set_num_threads(old_threads)


def _unit_config(ck: Units, config: SignatureConfig) -> SignatureConfig:
    """The config one unit runs with: the organisms' as given, a real unit's under the
    ``real_*`` budget."""
    if isinstance(ck, SingleCheckpoint):
        return ck.run_config()
    if isinstance(ck, ModelPair):
        model = ck.load(ck.spec(config.base))[0]
        return real_budget(config, get_adapter(model).n_layers(model))
    return config


def _threads(is_real: bool, default: int) -> int:
    """``$LAMINA_NUM_THREADS``, else 1 for the organisms (their matrices, d <= 256, are too
    small to gain from threads, and small QRs and eigendecompositions slow down by an order
    of magnitude when threads compete for shared CPUs) and torch's default for a real pair."""
    return int(os.environ.get("LAMINA_NUM_THREADS") or (default if is_real else 1))


def _run(
    user_config: SignatureConfig,
    run_config: SignatureConfig,
    units: list[Units],
    notes: list[str],
) -> ExperimentResult:
    tables: dict[str, list[pd.DataFrame]] = {}
    claims = []
    torch.manual_seed(run_config.seed)
    for ck in units:
        name = ck.name
        t0 = time.perf_counter()
        config = _unit_config(ck, run_config)
        base_model, tok = ck.load(ck.spec(config.base))
        for target in config.targets:  # a single checkpoint trains its targets here
            ck.load(ck.spec(target))
        config.timings[f"{name}:load"] = round(time.perf_counter() - t0, 2)
        basis_docs, grad_docs = split_sample(ck.documents(config.text_source), config.seed)
        length = context_length(base_model, config.max_length)
        texts = text_sample(basis_docs, tok, config.n_tokens, config.seed, length)
        grad_texts = text_sample(grad_docs, tok, config.grad_tokens, config.seed, length)
        if isinstance(ck, BorrowedText):  # a real model: text borrowed from the organisms
            notes.append(f"{name}: text from {ck.text_description}; {_budget_note(config)}")
        if isinstance(ck, SingleCheckpoint):
            tables.setdefault("finetune", []).append(ck.curves())
            notes.append(f"{name}: the unembedding write edit is tested {ck.edit_scope}")
        gates = ck.gates()  # {sft/dpo: behavioural gate}; {} = not measured
        notes += [f"{name} @{s} alignment gate: {'passed' if g.passed else 'failed'} "
                  f"({g.describe()}; {g.reason})" for s, g in gates.items()]  # fmt: skip
        cache: dict = {}
        parts: dict[str, pd.DataFrame] = {}
        steps: dict[str, tuple[Callable[..., pd.DataFrame], tuple]] = {
            "deltas": (organism_deltas, (ck, texts, config, cache)),
            "gradients": (objective_gradients, (ck, texts, config, cache, grad_texts)),
            "write_gradients": (write_gradients_across_training, (ck, grad_texts, config)),
            "adam": (adam_signature, (ck, texts, config, cache)),
            "edits": (write_edit_effects, (ck, texts, config, passed(gates, null_stages(ck, config)))),
            "adaptation": (single_group_adaptation, (ck, config)),
        }
        for part, (fn, args) in steps.items():
            t0 = time.perf_counter()
            parts[part] = fn(*args)
            parts[part]["model"] = name
            config.timings[f"{name}:{part}"] = round(time.perf_counter() - t0, 2)
            tables.setdefault(part, []).append(parts[part])
        tables.setdefault("sensitivity", []).append(sensitivity(name, parts["deltas"], config))
        unit_claims = all_claims(name, parts, config, ck, gate=gates)
        if isinstance(ck, SingleCheckpoint) and run_config.quant_control:
            t0 = time.perf_counter()
            unit_claims, flips = _quant_control(ck, base_model, parts, config, texts, cache,
                                                gates, unit_claims, notes)  # fmt: skip
            tables.setdefault("quantisation", []).append(flips)
            config.timings[f"{name}:quant_control"] = round(time.perf_counter() - t0, 2)
        claims.append(unit_claims)
    claim_table = pd.concat(claims, ignore_index=True) if claims else pd.DataFrame()
    out = {k: pd.concat(v, ignore_index=True) for k, v in tables.items()}
    out.setdefault("finetune", SingleCheckpoint.empty_curves())
    out["claims"] = claim_table
    names = [ck.name for ck in units]
    return ExperimentResult(CHAPTER, user_config, claim_table, out, notes, names)


# the claims computed from the deltas table alone (ΔW probed in the base's subspaces)
SUBSPACE_CLAIMS = tuple(
    f"P2.{c}" for c in ("align_qk_enriched", "align_write_random", "every_objective_signature",
                        "stage_not_objective", "late_pretraining_signature", "where_not_which")
)  # fmt: skip


def _quant_control(
    ck: SingleCheckpoint, base_model: torch.nn.Module, parts: dict[str, pd.DataFrame],
    config: SignatureConfig, texts: list[str], cache: dict, gates: dict,
    claims: pd.DataFrame, notes: list[str],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The quantisation control of a quantised real checkpoint (:mod:`lamina.states.
    quant_control`): the claims of :data:`SUBSPACE_CLAIMS` recomputed with the base's
    subspaces taken from its weights re-quantised (same ΔW, no retraining); the other
    claims (gradients, Adam, write edits, adaptation: new training or forward passes per
    checkpoint) read "not run: cost". -> (claims with ``quant_shift``, flip table)."""
    quantization = {ck.name: (getattr(base_model, "lamina_source", None) or {}).get("quantization")}

    def run_claims(name: str) -> pd.DataFrame:
        qtype = name.rpartition("+")[2]
        deltas = organism_deltas(ck, texts, config, cache, requantise=qtype)
        out = all_claims(name, {**parts, "deltas": deltas}, config, ck, gate=gates)
        return out[out["claim_id"].isin(SUBSPACE_CLAIMS)]

    out, flips = run_quant_control([ck.name], claims, quantization, run_claims, notes=notes)
    cost = ("cost: it needs new gradients, training or edits on the re-quantised checkpoint, "
            "beyond the book's budget")  # fmt: skip
    rest = ~out["claim_id"].isin(SUBSPACE_CLAIMS)
    out.loc[rest, "quant_shift"] = not_run_control(out[rest], quantization, cost)["quant_shift"]
    return out, flips


def _budget_note(config: SignatureConfig) -> str:
    layers = "all blocks" if config.layers is None else f"blocks {list(config.layers)}"
    return (
        f"real-model budget: {layers} probed, {config.n_tokens} tokens for the second "
        f"moments, sequences of at most {config.max_length} tokens, {config.real_steps} "
        f"AdamW steps of {config.real_batch} examples per objective and adaptation "
        f"(peak lr {config.real_lr:g})"
    )
