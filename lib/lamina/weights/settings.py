"""The parameters of paper 2's measurements: one :class:`SignatureSettings` (every choice the
paper leaves open is a field), the real-model budget (:func:`real_budget`) and the context
length of a model's text chunks (:func:`context_length`).

The chapter's config (``lamina.chapters.weight_update_signature.Config``) is a
:class:`SignatureSettings` plus the chapter's model selection; every function of
:mod:`lamina.weights` takes the settings, never the chapter's config type.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar

from torch import nn

from lamina.core.bounds import COUNT, FRACTION, POSITIVE, SEED, Bound, check_bounds
from lamina.sources.models import hf_config
from lamina.sources.organisms import parse_spec

__all__ = ["MAX_LENGTH", "SignatureSettings", "check_model_budgets", "check_pair", "context_length",
           "real_budget"]

MAX_LENGTH = 512


@dataclass
class SignatureSettings:
    """Parameters of paper 2's measurements (serialised with the results).

    base / targets: the checkpoint the alignment stages start from ("final") and the stages
        compared with it (organism checkpoint names; a real checkpoint's are the aligned
        build's ``sft`` and ``dpo``). ``lm`` is a continued-pretraining stage.
    target / base_revision / target_revision: a real pair (base -> target; revisions kept
        apart from organism specs, where "@" names a checkpoint).
    k: subspace dimension of the verdicts (reimplementation choice); k_sweep: the curve's ks.
    n_tokens: tokens of the text sample for the input second moments (P_A).
    text_source: "heldout" (the organism's held-out split) or "curriculum" documents.
    centred: raw statistics (False, the paper's: E[a aᵀ], W_U) or centred ones.
    moments_from: subspaces of the pair's "start" (default) or "end" checkpoint.
    layers: block indices probed (None = all).
    early_fraction / late_fraction: pretraining checkpoints with step <= early_fraction *
        total are early; consecutive pairs starting at step >= late_fraction * total are late.
    n_random: random k-subspaces per matrix for the figures' empirical null band.
    random_margin: "close to random" means enrichment within [1/m, m] (reimplementation choice).
    grad_tokens / grad_pairs: tokens (LM) and pairs (SFT, DPO) of the gradient samples.
    objective_steps / objective_batch / objective_lr / objective_eval: the applied-objective
        runs of ``every_objective``: LM, SFT and DPO each from ``base`` with these AdamW steps of
        this many examples at this peak lr (one warmup step, cosine decay), the input
        embedding frozen, no LM replay; each run's gate scores ``objective_eval`` held-out
        items before and after (a real checkpoint uses ``real_steps``/``real_batch``/``real_lr``).
    edit_scale: the rank-1 edit's norm relative to ‖W‖_F per write map; edit_tokens: target
        tokens; edit_random: random directions (a control); edit_scrambled: copies of the
        model with its blocks scrambled (rows and columns of every block matrix permuted), the
        units of the write edit's null (:mod:`lamina.weights.edit_null`); edit_texts /
        edit_max_length: the texts the edit is scored on; through_final_norm: multiply the
        W_U row by the final norm's gain; edit_input: the edit's input direction.
    still_fraction: "still" = the aligned effect is at least this fraction of the base's.
    adapt_steps / adapt_batch / adapt_lr / adapt_eval: single-group adaptation (SFT, AdamW
        without weight decay, constant lr) and its held-out eval items.
    effective_fraction: a group is "effective" when its held-out loss reduction is at least
        this fraction of full fine-tuning's (its CI above it).
    n_bootstrap: resamples of the bootstrap CIs.
    max_length: tokens per sequence (cap on the model's context, :func:`context_length`).
    real_*: a real checkpoint's budget (:func:`real_budget`).
    real_align: overrides of the aligned build's budget
        (:class:`lamina.sources.organisms.pretrained.PretrainedAlignConfig`).
    seed: seeds every draw.
    quant_control: for a quantised real checkpoint, recompute the subspace claims with its
        weights re-quantised (``lamina.states.quant_control``).
    """

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
    objective_steps: int = 32
    objective_batch: int = 8
    objective_lr: float = 5e-4
    objective_eval: int = 64
    edit_scale: float = 0.05
    edit_tokens: int = 16
    edit_random: int = 99
    edit_scrambled: int = 10
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
    real_adapt_steps: int = 16
    real_adapt_batch: int = 8
    real_adapt_eval: int = 64
    real_align: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    quant_control: bool = True
    timings: dict[str, float] = field(default_factory=dict)

    BOUNDS: ClassVar[Mapping[str, Bound]] = {
        **dict.fromkeys(("k", "n_tokens", "n_random", "grad_tokens", "grad_pairs",
                         "objective_steps", "objective_batch", "objective_eval", "edit_tokens",
                         "edit_random", "edit_scrambled", "edit_texts", "edit_max_length",
                         "adapt_steps", "adapt_batch", "adapt_eval", "n_bootstrap", "max_length",
                         "real_steps", "real_batch", "real_tokens", "real_max_length",
                         "real_pairs", "real_edits", "real_edit_random", "real_adapt_steps",
                         "real_adapt_batch", "real_adapt_eval"), COUNT),
        "real_layers": Bound(0, integer=True),  # 0: every block
        "k_sweep": Bound(1, integer=True, each=True),
        "layers": Bound(0, integer=True, each=True, optional=True),
        **dict.fromkeys(("early_fraction", "late_fraction", "still_fraction",
                         "effective_fraction"), FRACTION),
        **dict.fromkeys(("edit_scale", "objective_lr", "adapt_lr", "real_lr"), POSITIVE),
        "random_margin": Bound(1, above=True),
        "seed": SEED,
    }  # fmt: skip
    """Each numeric field's type and range (:func:`lamina.core.bounds.check_bounds`), checked
    first in ``__post_init__``: counts >= 1, fractions in [0, 1], scales and rates > 0."""

    def __post_init__(self) -> None:
        check_bounds(self, self.BOUNDS)
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
        for name in ("base_revision", "target_revision"):  # papermill may pass a number
            if getattr(self, name) is not None:
                setattr(self, name, str(getattr(self, name)))

    @property
    def is_pair(self) -> bool:
        """True when the run is a real pair (``target`` set), not the organisms."""
        return self.target is not None


S = TypeVar("S", bound=SignatureSettings)


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


def context_length(model: nn.Module, cap: int = MAX_LENGTH) -> int:
    """Tokens per sequence: the model's context, capped at ``cap`` (``settings.max_length``;
    reimplementation choice: the organisms' contexts (128) are below :data:`MAX_LENGTH`; a
    real model's 8k context would make every document one sequence)."""
    cfg = hf_config(model)
    return min(int(getattr(cfg, "n_positions", None) or cfg.max_position_embeddings), int(cap))


def real_budget(
    settings: S, n_layers: int, caps: Mapping[str, float] | None = None, name: str | None = None
) -> S:
    """The settings a real checkpoint or pair runs with: the sample sizes and budgets capped by
    the ``real_*`` fields (each first capped by ``caps``, {real_* field: cap}, e.g. a model's
    entry of the chapter's ``model_budgets``), and, unless ``settings.layers`` is set,
    ``real_layers`` evenly spaced blocks of the model's ``n_layers`` (first and last included)
    probed. Shares ``timings``. Raises ValueError for a cap that is not a ``real_*`` field
    (``name`` names the model in the message)."""
    caps = dict(caps or {})
    bad = [f for f in caps if not f.startswith("real_") or not hasattr(settings, f)]
    if bad:
        raise ValueError(f"model_budgets[{name!r}] caps unknown real_* fields: {bad}")
    if caps:
        lowered = {f: min(getattr(settings, f), type(getattr(settings, f))(v)) for f, v in caps.items()}
        settings = dataclasses.replace(settings, **lowered)
    layers = settings.layers
    if layers is None and 0 < settings.real_layers < n_layers:
        step = (n_layers - 1) / (settings.real_layers - 1) if settings.real_layers > 1 else 0
        layers = tuple(sorted({round(i * step) for i in range(settings.real_layers)}))
    s = settings
    return dataclasses.replace(
        s,
        layers=layers,
        n_tokens=min(s.n_tokens, s.real_tokens),
        grad_tokens=min(s.grad_tokens, max(1, s.real_tokens // 2)),
        grad_pairs=min(s.grad_pairs, s.real_pairs),
        objective_steps=s.real_steps,
        objective_batch=s.real_batch,
        objective_lr=s.real_lr,
        adapt_steps=s.real_adapt_steps,
        adapt_batch=s.real_adapt_batch,
        adapt_lr=s.real_lr,
        adapt_eval=min(s.adapt_eval, s.real_adapt_eval),
        edit_tokens=min(s.edit_tokens, s.real_edits),
        edit_random=min(s.edit_random, s.real_edit_random),
        max_length=min(s.max_length, s.real_max_length),
    )


def check_model_budgets(budgets: object) -> None:
    """ValueError unless ``budgets`` (a chapter's ``model_budgets``) is None or {model name:
    {real_* field of :class:`SignatureSettings`: cap}}, each cap in its field's range
    (``SignatureSettings.BOUNDS``); checked before any model is loaded."""
    if budgets is None:
        return
    bounds = SignatureSettings.BOUNDS
    if not isinstance(budgets, dict) or not all(isinstance(c, dict) for c in budgets.values()):
        raise ValueError("model_budgets must be None or {model name: {real_* field: cap}}; "
                         f"got {budgets!r}")  # fmt: skip
    fields = sorted(f for f in bounds if f.startswith("real_"))
    for name, caps in budgets.items():
        for f, cap in caps.items():
            if f not in fields:
                raise ValueError(f"model_budgets[{name!r}] caps {f!r}, which is not a "
                                 f"real_* budget field; fields: {', '.join(fields)}")  # fmt: skip
            if not bounds[f].holds(cap):
                raise ValueError(f"model_budgets[{name!r}][{f!r}] must be "
                                 f"{bounds[f].describe()}; got {cap!r}")  # fmt: skip
