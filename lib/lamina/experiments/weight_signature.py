"""Paper 2, the weight-update signature: where pretraining and alignment put their ΔW.

One config (:class:`SignatureConfig`) drives three pipelines, each in its own module:

It runs on lamina's organisms (``model``) or, by parameters only, on any pair of Hugging Face
causal LMs of one architecture (``base`` and ``target``, :mod:`lamina.experiments.weight_signature_pair`).

* **deltas** (:mod:`lamina.experiments.weight_signature_deltas`): ΔW between checkpoint pairs of one organism (consecutive pretraining
  checkpoints, early → late pretraining, base → every alignment stage), probed with
  :func:`lamina.weights.relative_subspace_fraction` in the input principal subspace (read
  maps) or the prediction subspace (write maps), swept over k, with random-subspace nulls;
* **mechanism** (:mod:`lamina.experiments.weight_signature_mechanism`): per-token gradient
  geometry under each objective, Adam's update against its momentum, write gradients across
  pretraining;
* **causal** (:mod:`lamina.experiments.weight_signature_causal`): rank-1 unembedding edits vs
  random directions, single-group adaptation.

:func:`run_weight_signature` runs all three on every organism of ``config.model`` (or on the
pair ``config.base`` -> ``config.target``) and turns
the tables into one verdict row per claim of the abstract
(:mod:`lamina.experiments.weight_signature_claims`); the chapter's figure tables and verdict
sentences are in :mod:`lamina.experiments.weight_signature_report`. This module holds the
config, the checkpoints of an organism, their pairs, the text sample and the run.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd
import torch
from torch import nn

from lamina.experiments.trajectory import ExperimentResult
from lamina.experiments.weight_signature_pair import ModelPair

__all__ = [
    "FULL_ORGANISMS",
    "MICRO_ORGANISMS",
    "Checkpoints",
    "ModelPair",
    "SignatureConfig",
    "check_pair",
    "checkpoint_pairs",
    "expand_organisms",
    "run_weight_signature",
    "text_sample",
]

CHAPTER = "weight_update_signature"
FULL_ORGANISMS = ("organism-gpt2", "organism-llama")
MICRO_ORGANISMS = ("organism-gpt2-micro", "organism-llama-micro")


@dataclass
class SignatureConfig:
    """Parameters of the weight-update-signature experiment (serialised with its results).

    Every choice paper 2 leaves open is a field here (``reimplementation choice``).

    model: "default" (both full organisms), "micro" (both micro organisms) or organism names,
        comma-separated.
    base: checkpoint the alignment stages start from ("final"); for a real pair (``target``
        set), the base model: a hub name, a local folder or an organism spec. Left at "final"
        with ``model`` naming one model, ``model`` is the base (so that
        ``make chapter MODEL=...`` runs a pair).
    targets: the alignment stages compared with ``base`` (checkpoint names of the organism).
    target: a real pair's target model (hub name, folder or organism spec); setting it runs the
        pair base -> target instead of the organisms (``targets`` is then ignored).
    base_revision / target_revision: the pair's revisions (branch, tag or commit; e.g. an
        intermediate checkpoint). Given separately: "name@revision" is not parsed, since "@"
        already names organism checkpoints ("organism-llama@sft").
    k: subspace dimension of the verdicts (reimplementation choice); k_sweep: the curve's ks.
    n_tokens: tokens of the text sample for the input second moments.
    text_source: "heldout" (the organism's held-out text split) or "curriculum" (its curriculum
        documents) for that sample (reimplementation choice).
    centred: main subspaces from raw statistics (False, the paper's: E[a aᵀ], W_U) or centred
        ones (covariance of the inputs, W_U minus its mean row); the other convention is
        always reported as a sensitivity row for the stage pairs.
    moments_from: subspaces of the pair's "start" (default) or "end" checkpoint.
    layers: block indices kept in the verdicts (None = all).
    early_fraction / late_fraction: pretraining checkpoints with step <= early_fraction * total
        are early; consecutive pairs starting at step >= late_fraction * total are late.
    n_random: random k-subspaces per matrix for the empirical null.
    random_margin: "close to random" means enrichment within [1/m, m] (reimplementation choice).
    grad_tokens / grad_pairs: tokens (LM) and pairs (SFT, DPO) of the gradient samples.
    edit_scale: the rank-1 edit's norm relative to ‖W‖_F per write map; edit_tokens: target
        tokens; edit_random: random directions; edit_texts: texts the edit is scored on;
        through_final_norm: multiply the W_U row by the final norm's gain; edit_input: the
        edit's input direction, each map's "mean_input" or its "top_singular" vector.
    still_fraction: "still changes predictions after alignment" means the aligned model's
        effect is >= this fraction of the base model's.
    adapt_steps / adapt_batch / adapt_lr / adapt_eval: the single-group adaptation budget
        (SFT, AdamW without weight decay, constant lr) and the number of eval pairs.
    effective_fraction: a group is "effective" if it achieves >= this fraction of the
        full-model eval-loss reduction.
    n_bootstrap: resamples of the bootstrap CIs (over matrices, tokens or eval items).
    seed: seeds every draw. quick: tiny samples and budgets, for CI.
    """

    model: str = "default"
    base: str = "final"
    targets: tuple[str, ...] = ("lm", "sft", "dpo")
    target: str | None = None
    base_revision: str | None = None
    target_revision: str | None = None
    k: int = 8
    k_sweep: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    n_tokens: int = 4096
    text_source: Literal["heldout", "curriculum"] = "heldout"
    centred: bool = False
    moments_from: Literal["start", "end"] = "start"
    layers: tuple[int, ...] | None = None
    early_fraction: float = 0.1
    late_fraction: float = 0.25
    n_random: int = 10
    random_margin: float = 1.25
    grad_tokens: int = 1024
    grad_pairs: int = 64
    edit_scale: float = 0.05
    edit_tokens: int = 16
    edit_random: int = 8
    edit_texts: int = 4
    through_final_norm: bool = False
    edit_input: Literal["mean_input", "top_singular"] = "mean_input"
    still_fraction: float = 0.5
    adapt_steps: int = 20
    adapt_batch: int = 8
    adapt_lr: float = 1e-3
    adapt_eval: int = 64
    effective_fraction: float = 0.5
    n_bootstrap: int = 2000
    seed: int = 0
    quick: bool = False
    timings: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.targets = tuple(self.targets)
        self.k_sweep = tuple(sorted(set(int(k) for k in self.k_sweep) | {int(self.k)}))
        if self.layers is not None:
            self.layers = tuple(int(x) for x in self.layers)
        if self.text_source not in ("heldout", "curriculum"):
            raise ValueError(
                f"text_source must be 'heldout' or 'curriculum'; got {self.text_source!r}"
            )
        if self.moments_from not in ("start", "end"):
            raise ValueError(f"moments_from must be 'start' or 'end'; got {self.moments_from!r}")
        if self.k < 1 or self.random_margin <= 1:
            raise ValueError("k must be >= 1 and random_margin > 1")
        for name in ("base_revision", "target_revision"):  # papermill may pass a number
            if getattr(self, name) is not None:
                setattr(self, name, str(getattr(self, name)))
        if self.target is not None:
            self.target = str(self.target)
            if self.base == "final":
                if self.model in ("default", "micro") or "," in self.model:
                    raise ValueError(
                        f"target={self.target!r} makes a real pair; name its base model: "
                        "base=<hub name or folder> (or model=<one model>)"
                    )
                self.base = self.model
            self.base = str(self.base)
        if self.quick:
            self.n_tokens = min(self.n_tokens, 1024)
            self.grad_tokens = min(self.grad_tokens, 256)
            self.grad_pairs = min(self.grad_pairs, 8)
            self.n_random = min(self.n_random, 5)
            self.edit_tokens = min(self.edit_tokens, 4)
            self.edit_random = min(self.edit_random, 3)
            self.edit_texts = min(self.edit_texts, 4)
            self.adapt_steps = min(self.adapt_steps, 3)
            self.adapt_batch = min(self.adapt_batch, 4)
            self.adapt_eval = min(self.adapt_eval, 16)
            self.n_bootstrap = min(self.n_bootstrap, 200)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def is_pair(self) -> bool:
        """True when the run is a real pair (``target`` set), not the organisms."""
        return self.target is not None


def expand_organisms(config: SignatureConfig) -> tuple[list[str], list[str]]:
    """The organisms to run and notes on those skipped (not built)."""
    from lamina import organisms

    if config.model == "default":
        names = list(FULL_ORGANISMS)
    elif config.model == "micro":
        names = list(MICRO_ORGANISMS)
    else:
        names = [n.strip() for n in config.model.split(",") if n.strip()]
    keep, notes = [], []
    for name in names:
        if name not in organisms.ORGANISMS:
            raise ValueError(
                f"model {name!r} is not an organism; this chapter runs on organisms "
                f"({', '.join(organisms.list_organisms(micro=True))}), 'default' or 'micro', "
                f"or on a real pair: base=<model>, target=<model>"
            )
        try:
            organisms.list_checkpoints(name)
        except organisms.OrganismNotBuiltError as exc:
            notes.append(f"{name} skipped: {exc}")
            continue
        keep.append(name)
    return keep, notes


# ----------------------------------------------------------------------------- checkpoints
def check_pair(spec_a: str, spec_b: str) -> None:
    """Raise ValueError unless two specs name checkpoints of one organism (ΔW needs the same
    architecture and shapes; different organisms never qualify)."""
    from lamina.organisms import parse_spec

    name_a, _ = parse_spec(spec_a)
    name_b, _ = parse_spec(spec_b)
    if name_a != name_b:
        raise ValueError(
            f"cannot take ΔW between {spec_a!r} and {spec_b!r}: they are checkpoints of "
            f"different organisms ({name_a!r} vs {name_b!r}); a weight delta needs one architecture"
        )


class Checkpoints:
    """The checkpoints of one organism, loaded once each (fp32, eval mode, CPU).

    steps: {pretraining step: spec}; stages: {stage name: spec}; total: last pretraining step.
    The corpus, AdamW betas and DPO beta are the organism's.
    """

    has_optimizer_state = True
    untestable: dict[str, str] = {}

    def __init__(self, name: str) -> None:
        from lamina import organisms

        self.name = name
        self.specs = organisms.list_checkpoints(name)
        self.steps: dict[int, str] = {}
        for spec in self.specs:
            m = re.fullmatch(r".*@step-(\d+)", spec)
            if m:
                self.steps[int(m.group(1))] = spec
        self.total = max(self.steps)
        self._models: dict[str, tuple[nn.Module, Any]] = {}

    def spec(self, checkpoint: str) -> str:
        """``final`` / ``sft`` / ``step-N`` -> the full spec (ValueError listing the valid ones)."""
        spec = checkpoint if "@" in checkpoint else f"{self.name}@{checkpoint}"
        check_pair(spec, f"{self.name}@final")
        if spec not in self.specs and spec != f"{self.name}@final":
            raise ValueError(f"{self.name} has no checkpoint {checkpoint!r}; it has: {self.specs}")
        return spec

    def check(self, start: str, end: str) -> None:
        """:func:`check_pair`."""
        check_pair(start, end)

    def corpus(self) -> Any:
        return _corpus(self.name)

    def documents(self, source: str) -> list[str]:
        """The held-out split ("heldout") or the curriculum documents ("curriculum")."""
        return list(
            _corpus(self.name).heldout if source == "heldout" else _curriculum_docs(self.name)
        )

    @property
    def betas(self) -> tuple[float, float]:
        from lamina.organisms.configs import ORGANISMS

        return tuple(ORGANISMS[self.name].betas)  # type: ignore[return-value]

    @property
    def dpo_beta(self) -> float:
        from lamina.organisms.configs import ORGANISMS

        return float(ORGANISMS[self.name].dpo_beta)

    def step_of(self, spec: str) -> int | None:
        for step, s in self.steps.items():
            if s == spec:
                return step
        return self.total if spec.endswith("@final") else None

    def load(self, spec: str) -> tuple[nn.Module, Any]:
        if spec not in self._models:
            from transformers.utils import logging as hf_logging

            import lamina

            hf_logging.disable_progress_bar()
            self._models[spec] = lamina.load_model(spec)
        return self._models[spec]


def checkpoint_pairs(ck: Checkpoints | ModelPair, config: SignatureConfig) -> pd.DataFrame:
    """The ΔW pairs of one organism (or the one pair of a :class:`ModelPair`).

    family "pretraining": every consecutive pair of pretraining checkpoints, with phase
    "early" (end step <= early_fraction * total), "late" (start step >= late_fraction *
    total) or "middle"; "early→late": last early checkpoint -> final; "stage": base -> each
    target, phase "alignment". -> columns pair, start, end, family, phase, step_start, step_end.
    """
    if not isinstance(ck, Checkpoints):
        return ck.pairs()
    rows = []
    steps = sorted(ck.steps)
    early_cut, late_cut = config.early_fraction * ck.total, config.late_fraction * ck.total
    for a, b in zip(steps[:-1], steps[1:], strict=True):
        phase = "early" if b <= early_cut else "late" if a >= late_cut else "middle"
        rows.append(("pretraining", phase, ck.steps[a], ck.steps[b], a, b))
    early = [s for s in steps if 0 < s <= early_cut] or steps[1:2]
    if early and early[-1] != ck.total:
        rows.append(
            ("early→late", "late", ck.steps[early[-1]], ck.steps[ck.total], early[-1], ck.total)
        )
    base = ck.spec(config.base)
    for target in config.targets:
        rows.append(("stage", "alignment", base, ck.spec(target), ck.step_of(base), None))
    out = pd.DataFrame(rows, columns=["family", "phase", "start", "end", "step_start", "step_end"])
    out.insert(
        0,
        "pair",
        [f"{s.split('@')[1]}→{e.split('@')[1]}" for s, e in zip(out.start, out.end, strict=True)],
    )
    return out


# ----------------------------------------------------------------------------- text
@functools.lru_cache(maxsize=4)
def _corpus(name: str):
    from lamina.organisms.configs import ORGANISMS
    from lamina.organisms.corpus import load_corpus

    return load_corpus(ORGANISMS[name])


@functools.lru_cache(maxsize=4)
def _curriculum_docs(name: str) -> tuple[str, ...]:
    from lamina.organisms.configs import ORGANISMS
    from lamina.organisms.curriculum import generate_curriculum

    cfg = ORGANISMS[name]
    return tuple(generate_curriculum(cfg.seed, cfg.n_curriculum_docs).text)


def text_sample(
    docs: list[str], tokenizer: Any, n_tokens: int, seed: int, max_length: int
) -> list[str]:
    """About ``n_tokens`` tokens of text, as chunks of at most ``max_length`` tokens: the
    documents (e.g. ``ck.documents("heldout")``, an organism's held-out split) in a seeded
    order, cut into pieces of 3 * max_length characters."""
    docs = list(docs)
    random.Random(seed).shuffle(docs)
    width = 3 * max_length
    out, count = [], 0
    for doc in docs:
        for i in range(0, len(doc), width):
            piece = doc[i : i + width].strip()
            if not piece:
                continue
            n = min(len(tokenizer(piece)["input_ids"]), max_length)
            out.append(piece)
            count += n
            if count >= n_tokens:
                return out
    return out


MAX_LENGTH = 512


def context_length(model: nn.Module) -> int:
    """Tokens per sequence: the model's context, capped at :data:`MAX_LENGTH` (reimplementation
    choice: the organisms' contexts (128) are below it; a real model's 8k context would make
    every document one sequence)."""
    cfg = model.config
    return min(int(getattr(cfg, "n_positions", None) or cfg.max_position_embeddings), MAX_LENGTH)


# ----------------------------------------------------------------------------- run
def run_weight_signature(config: SignatureConfig) -> ExperimentResult:
    """Deltas, mechanism and causal tests on every organism of ``config.model``, or on the real
    pair ``config.base`` -> ``config.target`` (:class:`ModelPair`: the claims that need the
    training history are "not testable", with the reason); the claims.

    -> ExperimentResult with tables ``deltas`` (matrix × k × pair), ``gradients``,
    ``write_gradients``, ``adam``, ``edits``, ``adaptation``, ``sensitivity`` and ``claims``.
    Raises ValueError when a pair's architectures or shapes differ.
    """
    units: list[Checkpoints | ModelPair]
    if config.is_pair:
        pair = ModelPair(
            config.base, str(config.target), config.base_revision, config.target_revision
        )
        units, notes = [pair], []
        run_config = dataclasses.replace(config, base=pair.base_label, targets=(pair.target_label,))
    else:
        names, notes = expand_organisms(config)
        if not names:
            raise RuntimeError(
                f"no organism of model={config.model!r} is built: {'; '.join(notes)}"
            )
        units, run_config = [Checkpoints(n) for n in names], config
    old_threads = torch.get_num_threads()
    torch.set_num_threads(_threads(config.is_pair, old_threads))
    try:
        return _run(config, run_config, units, notes)
    finally:
        torch.set_num_threads(old_threads)


def _threads(is_pair: bool, default: int) -> int:
    """``$LAMINA_NUM_THREADS``, else 1 for the organisms (their matrices, d <= 256, are too
    small to gain from threads, and small QRs and eigendecompositions slow down by an order
    of magnitude when threads compete for shared CPUs) and torch's default for a real pair."""
    return int(os.environ.get("LAMINA_NUM_THREADS") or (default if is_pair else 1))


def _run(
    user_config: SignatureConfig,
    config: SignatureConfig,
    units: list[Checkpoints | ModelPair],
    notes: list[str],
) -> ExperimentResult:
    from lamina.experiments.weight_signature_causal import (
        single_group_adaptation,
        write_edit_effects,
    )
    from lamina.experiments.weight_signature_claims import all_claims, sensitivity
    from lamina.experiments.weight_signature_deltas import organism_deltas
    from lamina.experiments.weight_signature_mechanism import (
        adam_signature,
        objective_gradients,
        write_gradients_across_training,
    )

    tables: dict[str, list[pd.DataFrame]] = {}
    claims = []
    torch.manual_seed(config.seed)
    for ck in units:
        name = ck.name
        base_model, tok = ck.load(ck.spec(config.base))
        texts = text_sample(
            ck.documents(config.text_source),
            tok,
            config.n_tokens,
            config.seed,
            context_length(base_model),
        )
        if isinstance(ck, ModelPair):
            notes.append(f"{name}: text from {ck.text_description}")
        cache: dict = {}
        parts: dict[str, pd.DataFrame] = {}
        steps = {
            "deltas": (organism_deltas, (ck, texts, config, cache)),
            "gradients": (objective_gradients, (ck, texts, config, cache)),
            "write_gradients": (write_gradients_across_training, (ck, texts, config)),
            "adam": (adam_signature, (ck, texts, config, cache)),
            "edits": (write_edit_effects, (ck, texts, config)),
            "adaptation": (single_group_adaptation, (ck, config)),
        }
        for part, (fn, args) in steps.items():
            t0 = time.perf_counter()
            parts[part] = fn(*args)
            parts[part]["model"] = name
            config.timings[f"{name}:{part}"] = round(time.perf_counter() - t0, 2)
            tables.setdefault(part, []).append(parts[part])
        tables.setdefault("sensitivity", []).append(sensitivity(name, parts["deltas"], config))
        claims.append(all_claims(name, parts, config, ck))
    claim_table = pd.concat(claims, ignore_index=True) if claims else pd.DataFrame()
    out = {k: pd.concat(v, ignore_index=True) for k, v in tables.items()}
    out["claims"] = claim_table
    names = [ck.name for ck in units]
    return ExperimentResult(CHAPTER, user_config, claim_table, out, notes, names)  # type: ignore[arg-type]
