"""The layer-anatomy chapter's parameters: one :class:`AnatomyConfig`, saved with its results."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from lamina.anatomy.surgery import SURGERIES
from lamina.chapters.config import ChapterConfig

__all__ = ["ALL_SURGERIES", "CHAPTER", "IMPORTANCE_SURGERIES", "AnatomyConfig"]

CHAPTER = "layer_anatomy"
ALL_SURGERIES = ["skip", "interpolate", "scale", "noise", "reinit", "predicted"]
IMPORTANCE_SURGERIES = ("skip", "interpolate")  # the paper's ablation: removal / neighbour mean


@dataclass
class AnatomyConfig(ChapterConfig):
    """Parameters of the layer-anatomy experiment (serialised next to its results).

    model: any spec ``lamina.load_model`` accepts (organism spec, hub name, local folder).
    corpus: registered organism whose held-out split supplies the text; None = the model's
        own organism, or ``organism-llama``'s corpus for any other model.
    surgeries: subset of skip, interpolate, scale, noise, reinit, predicted.
    layers: layers to sweep and perturb (None: all), e.g. to save time on a deep model.
    alpha: the scaling factor of ``scale`` (paper: 0.9); noise_scale: relative noise of the
        ``noise`` surgery (paper: 0.5); recovery_noise: relative noise of the recovery
        perturbation (paper: 0.5, which leaves small organisms within tolerance, so there is
        nothing to recover from; the default 2.0 is our choice).
    n_tokens: held-out tokens for perplexity and the skip/interpolate sweep (>= 20k);
        robustness_tokens: tokens for the other surgeries (a subset of the same windows).
    recovery_*: the recovery-speed fine-tune (AdamW steps, lr, batch in windows, evaluation
        period, evaluation tokens); tolerance_pct: "back at baseline" means within this %.
    ridge_alpha, ridge_degree: the depth regression; k_max: predicted weights replace layers
        0..k-1 for k <= k_max (None: all).
    preserve_pct: a strategy "preserves quality" when it raises ppl by less than this at every
        layer; catastrophic_pct: "catastrophic" means a ppl increase above this (our thresholds).
    threads: torch threads (1 is fastest for these small matrices on a shared CPU).
    """

    model: str = "organism-llama"
    corpus: str | None = None
    surgeries: list[str] = field(default_factory=lambda: list(ALL_SURGERIES))
    layers: list[int] | None = None
    alpha: float = 0.9
    noise_scale: float = 0.5
    seq_len: int = 128
    n_tokens: int = 20_480
    robustness_tokens: int = 4_096
    recovery_noise: float = 2.0
    recovery_budget: int = 24
    recovery_lr: float = 1e-4
    recovery_batch: int = 4
    recovery_eval_every: int = 4
    recovery_tokens: int = 1_024
    tolerance_pct: float = 5.0
    ridge_alpha: float = 1.0
    ridge_degree: int = 2
    k_max: int | None = None
    preserve_pct: float = 5.0
    catastrophic_pct: float = 100.0
    n_bootstrap: int = 2_000
    n_permutations: int = 1_000
    seed: int = 0
    threads: int | None = 1
    quick: bool = False

    QUICK: ClassVar[Mapping[str, Any]] = {
        "n_tokens": 2_048,
        "robustness_tokens": 1_024,
        "recovery_budget": 4,
        "recovery_eval_every": 2,
        "recovery_tokens": 512,
        "n_bootstrap": 200,
        "n_permutations": 20,
    }

    def __post_init__(self) -> None:
        given: str | list[str] = self.surgeries  # a single name is accepted too
        self.surgeries = [given] if isinstance(given, str) else list(given)
        unknown = [s for s in self.surgeries if s not in SURGERIES]
        if unknown:
            raise ValueError(f"unknown surgery {unknown}; valid: {sorted(SURGERIES)}")
        if "skip" not in self.surgeries:
            raise ValueError("surgeries must include 'skip' (importance is the skip ablation)")
        if self.noise_scale < 0 or self.seq_len < 2 or self.n_tokens < self.seq_len:
            raise ValueError("need noise_scale >= 0, seq_len >= 2 and n_tokens >= seq_len")
        self.apply_quick()
