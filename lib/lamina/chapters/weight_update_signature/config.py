"""The weight-update-signature chapter's parameters: one :class:`SignatureConfig`, saved with
its results, the organisms it runs on, and the context length of a model's text chunks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from torch import nn

from lamina import organisms
from lamina.chapters.config import ChapterConfig
from lamina.models import hf_config
from lamina.organisms import parse_spec

__all__ = [
    "CHAPTER",
    "FULL_ORGANISMS",
    "MAX_LENGTH",
    "MICRO_ORGANISMS",
    "SignatureConfig",
    "check_pair",
    "context_length",
    "expand_organisms",
]

CHAPTER = "weight_update_signature"
FULL_ORGANISMS = ("organism-gpt2", "organism-llama")
MICRO_ORGANISMS = ("organism-gpt2-micro", "organism-llama-micro")


@dataclass
class SignatureConfig(ChapterConfig):
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

    QUICK: ClassVar[Mapping[str, Any]] = {
        "n_tokens": 1024,
        "grad_tokens": 256,
        "grad_pairs": 8,
        "n_random": 5,
        "edit_tokens": 4,
        "edit_random": 3,
        "edit_texts": 4,
        "adapt_steps": 3,
        "adapt_batch": 4,
        "adapt_eval": 16,
        "n_bootstrap": 200,
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


def expand_organisms(config: SignatureConfig) -> tuple[list[str], list[str]]:
    """The organisms to run and notes on those skipped (not built)."""
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


def context_length(model: nn.Module) -> int:
    """Tokens per sequence: the model's context, capped at :data:`MAX_LENGTH` (reimplementation
    choice: the organisms' contexts (128) are below it; a real model's 8k context would make
    every document one sequence)."""
    cfg = hf_config(model)
    return min(int(getattr(cfg, "n_positions", None) or cfg.max_position_embeddings), MAX_LENGTH)
