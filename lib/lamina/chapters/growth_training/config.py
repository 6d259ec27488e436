"""The Growth Training experiment's one config object and the schedule names it accepts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from lamina.anatomy.bounds import GROWTH_BOUNDS
from lamina.anatomy.growth_claims import CONTROLS
from lamina.chapters.config import ChapterConfig
from lamina.core.bounds import Bound, check_bounds

__all__ = [
    "CHAPTER",
    "CONTROLS",
    "PAPER_SCALE",
    "SCHEDULES",
    "GrowthConfig",
]

CHAPTER = "growth_training"
SCHEDULES = ("uniform", "growth", "reverse", "random")
PAPER_SCALE = "12 layers, 9.57M parameters, >= 500 steps, 3 paired seeds"


@dataclass
class GrowthConfig(ChapterConfig):
    """Parameters of the Growth Training experiment (serialised next to its results).

    model: the registered organism whose corpus (train / val splits) is used (the chapter's
        ``model`` parameter, as every chapter's); it must be built
        (its importance orders growth, and its tokenizer is used when ``vocab_size`` is None).
    vocab_size: entries of a byte-level BPE trained on the corpus's train split for the
        trained model (``lamina.sources.organisms.tokenizer.train_tokenizer``, deterministic, about
        1 s); None: the organism's own tokenizer (8,192 entries, whose unembedding is half
        of a d = 64 model's compute).
    arch, n_layers, d_model, n_heads, n_kv_heads, d_ff, context: the trained model (built from
        the organism's config with these fields replaced; weights start random).
    total_steps: optimiser steps of every schedule (equal steps); growth spends
        ``final_fraction`` of them in the final full fine-tune and splits the rest equally over
        ``n_groups`` importance-ordered groups (``train_embeddings``, ``cumulative``: see
        ``lamina.anatomy.growth.growth_schedule``; reimplementation choices).
    importance: "organism" = skip-ablation importance of the organism's layers (needs the same
        number of layers), "pretrain" = of this architecture after ``importance_steps`` uniform
        steps (seed 10_000). importance_tokens: validation tokens of that ablation.
    schedules: which of uniform, growth, reverse (least important group first) and random (a
        seeded random layer order) run; the last two are ordering controls (same phases, same
        budget).
    real_models: pretrained models (offline names, hub names or folders) whose skip-ablation
        importance, mapped onto the trained model's layers by relative depth
        (:func:`lamina.anatomy.growth_orders.depth_map`), orders one extra
        growth run each ("growth (<model> order)", same phases, budget and seeds). None: the
        installed models of the chapter's registry record (none in quick mode); []: none.
    real_tokens: held-out tokens of each real model's skip sweep (windows of
        ``real_seq_len`` tokens from the organism corpus's held-out split, mixed sources).
    carry_optimizer: one AdamW whose moments carry across the phases (True, default), or a
        fresh AdamW per phase without warmup (False, as before issue 12).
    lr: peak learning rate; ``warmup_fraction`` of ``total_steps`` warm it up linearly, then
        it decays along a cosine to ``min_lr_ratio`` x lr at the last step, over the whole
        schedule (every phase of every run at the same step gets the same rate;
        ``lamina.anatomy.growth.warmup_cosine``).
    batch_size (windows of ``context`` tokens), eval_every: training and validation.
    val_tokens: validation tokens: passages of the organism corpus's val split in a seeded
        order (``val_shuffle_seed``) that share no word 8-gram with the train split
        (:func:`lamina.anatomy.growth_text.clean_val_windows`; the templated
        curriculum's val documents mostly repeat training text and drop out).
    learn_gate: the precondition of every growth claim: each seed's uniform run must end at
        a validation loss <= ``learn_gate`` x the unigram baseline's loss (nats; add-one
        unigram of the training tokens); otherwise the claims read "not testable".
    seeds: one paired (same init, same batches) run per schedule and seed.
    threads: torch threads (wall-clock times depend on it).
    """

    model: str = "organism-llama"
    vocab_size: int | None = 2048
    arch: str = "llama"
    n_layers: int = 12
    d_model: int = 64
    n_heads: int = 4
    n_kv_heads: int = 2
    d_ff: int = 176
    context: int = 128
    total_steps: int = 240
    n_groups: int = 3
    final_fraction: float = 0.4
    train_embeddings: bool = True
    cumulative: bool = False
    importance: str = "organism"
    importance_steps: int = 60
    importance_tokens: int = 4_096
    schedules: list[str] = field(default_factory=lambda: ["uniform", "growth", "reverse", "random"])
    real_models: list[str] | None = None
    real_tokens: int = 512
    real_seq_len: int = 128
    carry_optimizer: bool = True
    lr: float = 3e-3
    warmup_fraction: float = 0.1
    min_lr_ratio: float = 0.1
    batch_size: int = 16
    eval_every: int = 10
    val_tokens: int = 4_096
    val_shuffle_seed: int = 0
    learn_gate: float = 0.85
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    threads: int | None = 1

    BOUNDS: ClassVar[dict[str, Bound]] = GROWTH_BOUNDS  # lamina.anatomy.bounds

    # quick mode: a 4-layer, d = 16 model, a few steps, importance from a short pretraining
    QUICK = {
        "n_layers": 4,
        "vocab_size": 512,
        "d_model": 16,
        "n_heads": 2,
        "n_kv_heads": 1,
        "d_ff": 32,
        "context": 32,
        "batch_size": 8,
        "n_groups": 2,
        "total_steps": 12,
        "eval_every": 2,
        "importance": "pretrain",
        "importance_steps": 4,
        "importance_tokens": 256,
        "val_tokens": 256,
        "real_tokens": 64,
        "real_seq_len": 32,
    }

    def __post_init__(self) -> None:
        if isinstance(self.seeds, int) and not isinstance(self.seeds, bool):
            self.seeds = [self.seeds]  # a single seed is accepted too
        check_bounds(self, self.BOUNDS)
        self.seeds = [int(s) for s in self.seeds]
        self.schedules = list(self.schedules)
        bad = [s for s in self.schedules if s not in SCHEDULES]
        if bad or "uniform" not in self.schedules or "growth" not in self.schedules:
            raise ValueError(
                f"schedules must include uniform and growth, from {SCHEDULES}; got {self.schedules}"
            )
        if self.importance not in ("organism", "pretrain"):
            raise ValueError(
                f"importance must be 'organism' or 'pretrain', got {self.importance!r}"
            )
        if not 0 <= self.final_fraction < 1:
            raise ValueError(f"final_fraction must be in [0, 1), got {self.final_fraction}")
        if not self.seeds:
            raise ValueError("seeds is empty")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct, got {self.seeds}")
        for name in ("warmup_fraction", "min_lr_ratio"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.vocab_size is not None and (
            isinstance(self.vocab_size, bool)
            or not isinstance(self.vocab_size, int)
            or self.vocab_size < 258
        ):
            raise ValueError(
                f"vocab_size must be None or an integer >= 258, got {self.vocab_size!r}"
            )
        if not 0 < self.learn_gate <= 1:
            raise ValueError(f"learn_gate must be in (0, 1], got {self.learn_gate}")
        if self.real_models is not None:
            if not isinstance(self.real_models, list | tuple) or not all(
                isinstance(m, str) and m.strip() for m in self.real_models
            ):
                raise TypeError(
                    "real_models must be None or a list of model names / folders, got "
                    f"{self.real_models!r}"
                )
            self.real_models = list(dict.fromkeys(self.real_models))
        for name in ("real_tokens", "real_seq_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                raise ValueError(f"{name} must be an integer >= 2, got {value!r}")
        if self.real_tokens < self.real_seq_len:
            raise ValueError(
                f"real_tokens ({self.real_tokens}) must be at least real_seq_len "
                f"({self.real_seq_len})"
            )
        self.apply_quick()
        if not 1 <= self.n_groups <= self.n_layers:
            raise ValueError(f"n_groups must be in 1..{self.n_layers}, got {self.n_groups}")
        if round(self.total_steps * (1 - self.final_fraction)) < self.n_groups:
            raise ValueError("total_steps is too small for one step per growth phase")
