"""One real checkpoint as a unit of paper 2.

A released checkpoint (SmolLM2-135M-Instruct offline, any Hugging Face causal LM by name or
folder) has no training history and, offline, no base/instruct partner. :class:`SingleCheckpoint`
offers the :class:`~lamina.weights.units.Units` interface with the checkpoint as ``base`` and,
as targets, its aligned build (``sft``: SFT; ``dpo``: SFT then DPO;
:func:`lamina.weights.aligned.aligned_folder`, built by ``make aligned``, with its behavioural
gates and, where the build kept it, its AdamW state). The paper's third design, "every
objective we apply to one checkpoint", is the applied-objective runs
(:mod:`lamina.weights.objective_runs`), trained in memory and adopted by the unit. Text is
never the evaluation prompts: the organisms' held-out split and curriculum
(:func:`~lamina.weights.units.pair_corpus`).

The claims that need a pretraining history are "not testable" (:data:`SINGLE_UNTESTABLE`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pandas as pd
from torch import nn

from lamina.sources.models import get_adapter, load_model
from lamina.sources.organisms.configs import ORGANISMS, OrganismConfig
from lamina.sources.organisms.pretrained import PretrainedAlignConfig
from lamina.sources.organisms.train import STAGES
from lamina.weights.aligned import (
    StageGate,
    aligned_curves,
    aligned_folder,
    aligned_model,
    aligned_optimizer_state,
    real_gates,
)
from lamina.weights.settings import (
    SignatureSettings,
    context_length,
    real_budget,
)
from lamina.weights.texts import TEXT_ORGANISM
from lamina.weights.units import BorrowedText

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["CURVE_COLUMNS", "SINGLE_UNTESTABLE", "SingleCheckpoint"]

CURVE_COLUMNS = ["model", "objective", "step", "lr", "loss", "examples", "tokens"]

_HISTORY = "a single released checkpoint has no pretraining history"
SINGLE_UNTESTABLE: dict[str, str] = {
    "late-pretraining-qk": f"needs consecutive late-pretraining checkpoints; {_HISTORY}",
    "late-pretraining-writes": f"needs consecutive late-pretraining checkpoints; {_HISTORY}",
    "stage-not-objective": f"needs early and late pretraining ΔW beside the objectives; {_HISTORY}",
    "write-grad-early-only": f"needs early and late pretraining checkpoints; {_HISTORY}",
    "write-weights-early": f"needs the initialisation and early checkpoints; {_HISTORY}",
}
"""{claim name (the id without ``p2-signature-``): why a single checkpoint cannot test it}."""


class SingleCheckpoint(BorrowedText):
    """One real checkpoint (``base``) and the same checkpoint after each applied objective.

    name: an offline alias (``smollm2-135m-instruct``), a hub name or a local folder;
    revision: its revision; config: the settings (its ``targets`` among ``sft`` and ``dpo``,
    the aligned build's stages; ``lm`` is accepted and left out: the continued-LM run is an
    applied objective); caps: {real_* field: cap} of this model (the chapter's
    ``model_budgets``). Specs: the label for the checkpoint, ``<label>+<stage>`` for the
    targets. ``aligned_base``: the checkpoint is already
    instruction-tuned (its name says "instruct", "chat" or "-it"), so the write-edit claim is
    also tested on the checkpoint itself.
    """

    has_optimizer_state = True
    untestable = SINGLE_UNTESTABLE
    steps: dict[int, str] = {}
    total = 0

    def __init__(self, name: str, config: SignatureSettings, revision: str | None = None,
                 caps: dict[str, Any] | None = None) -> None:  # fmt: skip
        bad = [t for t in config.targets if t not in STAGES]
        if bad:
            raise ValueError(
                f"a single checkpoint's targets are stages of its aligned build, {STAGES}; got {bad}"
            )
        config = dataclasses.replace(config, targets=tuple(t for t in config.targets if t != "lm"))
        self.caps = dict(caps or {})
        path = Path(name).expanduser()
        self.label = path.name if path.is_dir() else name
        self.label += f" ({revision})" if revision else ""
        self.name = self.label
        self.source = (name, revision)
        self.aligned_base = any(w in self.label.lower() for w in ("instruct", "chat", "-it"))
        self.user_config = config
        self.specs = [self.label, *(f"{self.label}+{t}" for t in config.targets)]
        self._models: dict[str, tuple[nn.Module, PreTrainedTokenizerBase]] = {}
        self._config: SignatureSettings | None = None
        self._aligned: Path | None = None

    # -- the Units interface ----------------------------------------------------------------
    def spec(self, checkpoint: str) -> str:
        """The checkpoint's label -> itself; a stage (``sft``) or its spec -> its spec; an
        adopted run's spec -> itself."""
        if checkpoint in self.specs or self.adopted(checkpoint) is not None:
            return checkpoint
        if f"{self.label}+{checkpoint}" in self.specs:
            return f"{self.label}+{checkpoint}"
        raise ValueError(f"{self.label} has no checkpoint {checkpoint!r}: {self.specs}")

    def check(self, start: str, end: str) -> None:
        self.spec(start), self.spec(end)

    def step_of(self, spec: str) -> int | None:
        return None

    def load(self, spec: str) -> tuple[nn.Module, PreTrainedTokenizerBase]:
        """The checkpoint (loaded once, eval mode), a target from the cached aligned build
        (:func:`~lamina.weights.aligned.aligned_folder`; built on first use when ``make
        aligned`` has not run), or an adopted applied-objective run."""
        if (a := self.adopted(spec)) is not None:
            return a[0], a[1]
        spec = self.spec(spec)
        if spec not in self._models:
            if spec == self.label:
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
                model, loaded = load_model(self.source[0], revision=self.source[1])
                self._models[spec] = (model.eval(), cast("PreTrainedTokenizerBase", loaded))
            else:
                base, tok = self.load(self.label)
                stage = spec.rsplit("+", 1)[1]
                self._models[spec] = (aligned_model(base, self.aligned, stage), tok)
        return self._models[spec]

    @property
    def aligned(self) -> Path:
        """The folder of this checkpoint's cached SFT and DPO build (built when missing)."""
        if self._aligned is None:
            if self.source[1] is not None:
                raise ValueError(f"{self.label}: aligned builds are keyed by model name; a "
                                 "revision is not supported for the sft/dpo targets")  # fmt: skip
            self._aligned = aligned_folder(
                self.source[0], PretrainedAlignConfig(**self.user_config.real_align)
            )
        return self._aligned

    def gates(self) -> dict[str, StageGate]:
        """{``sft``/``dpo``: the behavioural gate of the cached aligned build} for the targets
        this unit runs (:func:`~.alignment.real_gates`); the released checkpoint itself has no
        measured gate."""
        wanted = [t for t in self.user_config.targets if t in ("sft", "dpo")]
        return {t: g for t, g in real_gates(self.aligned).items() if t in wanted} if wanted else {}

    def optimizer_state(self, spec: str) -> dict[str, dict] | None:
        """AdamW state of an adopted run, or the state the aligned build kept for a stage
        (:func:`~lamina.weights.aligned.aligned_optimizer_state`); None for the checkpoint
        itself or a build that kept none."""
        if (a := self.adopted(spec)) is not None:
            return a[2]
        spec = self.spec(spec)
        if spec == self.label:
            return None
        return aligned_optimizer_state(self.aligned, spec.rsplit("+", 1)[1])

    def pairs(self) -> pd.DataFrame:
        """One ΔW pair per aligned stage, checkpoint -> checkpoint + stage (family "stage")."""
        rows = [
            (f"{self.label}→{t}", "stage", "alignment", self.label, f"{self.label}+{t}", None, None)
            for t in self.user_config.targets
        ]
        cols = ["pair", "family", "phase", "start", "end", "step_start", "step_end"]
        return pd.DataFrame(rows, columns=cols)

    @property
    def stage_config(self) -> OrganismConfig:
        """:data:`~lamina.weights.units.TEXT_ORGANISM`'s stage settings (losses, AdamW betas,
        clip), its context :func:`~lamina.weights.settings.context_length` (``max_length``)
        and no LM replay: the settings of the applied-objective runs and of the gradients."""
        c = self.run_config()
        return ORGANISMS[TEXT_ORGANISM].replace(
            context=context_length(self.load(self.label)[0], c.max_length), replay_batch_size=0
        )

    # -- budget, training, curves -----------------------------------------------------------
    def run_config(self) -> SignatureSettings:
        """The config this unit runs with: base = its label, :func:`~.config.real_budget`
        over the checkpoint's layers (loads the checkpoint)."""
        if self._config is None:
            model, _ = self.load(self.label)
            cfg = dataclasses.replace(self.user_config, base=self.label)
            self._config = real_budget(cfg, get_adapter(model).n_layers(model), self.caps,
                                       self.source[0])  # fmt: skip
        return self._config

    @property
    def edit_scope(self) -> str:
        """What the write-edit claim ("still changes predictions after alignment") is tested
        on for this checkpoint, in words."""
        runs = " and ".join(t.upper() for t in self.user_config.targets) or "no alignment"
        if self.aligned_base:
            return f"on the released (instruction-tuned) checkpoint and after our {runs} runs"
        return (
            f"after our {runs} runs only: a base checkpoint is not aligned, so those short "
            "runs are its only alignment"
        )

    def curves(self) -> pd.DataFrame:
        """Training curves of the aligned build's stages: model, objective, step, lr, loss
        (nats, before the step), examples (tokens: NaN, not recorded)."""
        if not self.user_config.targets:
            return self.empty_curves()
        built = aligned_curves(self.aligned, self.label, self._aligned_batch())
        return built[built["objective"].isin(self.user_config.targets)]

    def _aligned_batch(self) -> int:
        return int(json.loads((self.aligned / "build.json").read_text())["config"]["batch_size"])

    @staticmethod
    def empty_curves() -> pd.DataFrame:
        return pd.DataFrame(columns=CURVE_COLUMNS)
