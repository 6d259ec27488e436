"""One real checkpoint as a unit of paper 2: "every objective we apply to one checkpoint".

A released checkpoint (SmolLM2-135M-Instruct offline, any Hugging Face causal LM by name or
folder) has no training history and, offline, no base/instruct partner. What one checkpoint
supports is the paper's third design: apply several objectives to it, with equal budgets, and
compare the signatures of the deltas. :class:`SingleCheckpoint` offers the
:class:`~.units.Units` interface with the checkpoint as ``base`` and, as targets, the
checkpoint after a short continued-LM, SFT or DPO run (``lm``, ``sft``, ``dpo``), each trained
in memory on first use:

* the loss is the organisms' stage loss (:func:`lamina.sources.organisms.stages.stage_loss`), on the
  organisms' text (:func:`~.units.pair_corpus`: the LM continuation on its training split, SFT
  on its (question, answer) pairs, DPO on its preference triples with the checkpoint itself,
  frozen, as reference), never on the evaluation prompts of ``data/prompts``;
* every objective gets ``real_steps`` AdamW steps of ``real_batch`` examples (equal step and
  example budgets; the tokens they consume are recorded in :meth:`SingleCheckpoint.curves`),
  peak learning rate ``real_lr`` with one warmup step and cosine decay, the organisms' AdamW
  settings (:func:`lamina.sources.organisms.train.make_optimizer`), no LM replay in SFT; every
  parameter trains;
* the AdamW state of each run is kept (for the probed maps), so the optimiser-attenuation
  claim is testable on the applied objectives.

The claims that need a pretraining history are "not testable" (:data:`SINGLE_UNTESTABLE`).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from lamina.chapters.weight_update_signature.alignment import (
    aligned_curves,
    aligned_folder,
    aligned_model,
    real_gates,
)
from lamina.chapters.weight_update_signature.config import (
    SignatureConfig,
    context_length,
    real_budget,
)
from lamina.chapters.weight_update_signature.deltas import probed_maps
from lamina.chapters.weight_update_signature.gate import AlignmentGate
from lamina.chapters.weight_update_signature.units import TEXT_ORGANISM, BorrowedText
from lamina.sources.models import get_adapter, load_model
from lamina.sources.organisms.configs import ORGANISMS
from lamina.sources.organisms.pretrained import PretrainedAlignConfig
from lamina.sources.organisms.qa import format_answer, format_prompt
from lamina.sources.organisms.stages import qa_batch, stage_loss
from lamina.sources.organisms.tokenizer import encode_stream
from lamina.sources.organisms.train import (
    STAGES,
    lr_at,
    make_optimizer,
    optimizer_step,
    random_windows,
)

__all__ = ["CURVE_COLUMNS", "SINGLE_UNTESTABLE", "SingleCheckpoint"]

CURVE_COLUMNS = ["model", "objective", "step", "lr", "loss", "examples", "tokens"]

_HISTORY = "a single released checkpoint has no pretraining history"
SINGLE_UNTESTABLE: dict[str, str] = {
    "late_pretraining_signature": f"needs consecutive late-pretraining checkpoints; {_HISTORY}",
    "stage_not_objective": "needs early and late pretraining ΔW beside the objectives; "
    + _HISTORY,
    "write_grad_early_only": f"needs early and late pretraining checkpoints; {_HISTORY}",
    "write_weights_acquire_early": f"needs the initialisation and early checkpoints; {_HISTORY}",
}


class SingleCheckpoint(BorrowedText):
    """One real checkpoint (``base``) and the same checkpoint after each applied objective.

    name: an offline alias (``smollm2-135m-instruct``), a hub name or a local folder;
    revision: its revision; config: the chapter's config (its ``targets`` must be objectives
    of :data:`lamina.sources.organisms.train.STAGES`). Specs: the label for the checkpoint,
    ``<label>+<objective>`` for the targets. ``aligned_base``: the checkpoint is already
    instruction-tuned (its name says "instruct", "chat" or "-it"), so the write-edit claim is
    also tested on the checkpoint itself.
    """

    has_optimizer_state = True
    untestable = SINGLE_UNTESTABLE
    steps: dict[int, str] = {}
    total = 0

    def __init__(self, name: str, config: SignatureConfig, revision: str | None = None) -> None:
        bad = [t for t in config.targets if t not in STAGES]
        if bad:
            raise ValueError(
                f"a single checkpoint's targets are objectives applied to it, {STAGES}; got {bad}"
            )
        path = Path(name).expanduser()
        self.label = path.name if path.is_dir() else name
        self.label += f" ({revision})" if revision else ""
        self.name = self.label
        self.source = (name, revision)
        self.aligned_base = any(w in self.label.lower() for w in ("instruct", "chat", "-it"))
        self.user_config = config
        self.specs = [self.label, *(f"{self.label}+{t}" for t in config.targets)]
        self._models: dict[str, tuple[nn.Module, Any]] = {}
        self._states: dict[str, dict[str, dict]] = {}
        self._curves: list[dict[str, Any]] = []
        self._config: SignatureConfig | None = None
        self._aligned: Path | None = None

    # -- the Units interface ----------------------------------------------------------------
    def spec(self, checkpoint: str) -> str:
        """The checkpoint's label -> itself; an objective (``sft``) or its spec -> its spec."""
        if checkpoint in self.specs:
            return checkpoint
        if f"{self.label}+{checkpoint}" in self.specs:
            return f"{self.label}+{checkpoint}"
        raise ValueError(f"{self.label} has no checkpoint {checkpoint!r}: {self.specs}")

    def check(self, start: str, end: str) -> None:
        self.spec(start), self.spec(end)

    def step_of(self, spec: str) -> int | None:
        return None

    def load(self, spec: str) -> tuple[nn.Module, Any]:
        """The checkpoint (loaded once, eval mode) or, for a target, the checkpoint after that
        objective: ``sft`` and ``dpo`` from the cached aligned build (:func:`~.alignment.
        aligned_folder`; built on first use when ``make aligned`` has not run), ``lm`` trained
        on first use with :meth:`run_config`'s budget."""
        spec = self.spec(spec)
        if spec not in self._models:
            if spec == self.label:
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
                model, tok = load_model(self.source[0], revision=self.source[1])
                self._models[spec] = (model.eval(), tok)
            elif spec.rsplit("+", 1)[1] in ("sft", "dpo"):
                base, tok = self.load(self.label)
                stage = spec.rsplit("+", 1)[1]
                self._models[spec] = (aligned_model(base, self.aligned, stage), tok)
            else:
                self._models[spec] = self._train(spec.rsplit("+", 1)[1])
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

    def gates(self) -> dict[str, AlignmentGate]:
        """{``sft``/``dpo``: the behavioural gate of the cached aligned build} for the targets
        this unit runs (:func:`~.alignment.real_gates`); the released checkpoint itself has no
        measured gate."""
        wanted = [t for t in self.user_config.targets if t in ("sft", "dpo")]
        return {t: g for t, g in real_gates(self.aligned).items() if t in wanted} if wanted else {}

    def optimizer_state(self, spec: str) -> dict[str, dict] | None:
        """AdamW state (probed maps only) of an applied objective; None for the checkpoint."""
        spec = self.spec(spec)
        if spec != self.label:
            self.load(spec)
        return self._states.get(spec)

    def pairs(self) -> pd.DataFrame:
        """One ΔW pair per objective, checkpoint -> checkpoint + objective (family "stage")."""
        rows = [
            (f"{self.label}→{t}", "stage", "alignment", self.label, f"{self.label}+{t}", None, None)
            for t in self.user_config.targets
        ]
        cols = ["pair", "family", "phase", "start", "end", "step_start", "step_end"]
        return pd.DataFrame(rows, columns=cols)

    @property
    def stage_config(self) -> Any:
        """:data:`~.units.TEXT_ORGANISM`'s stage settings with the real budget: context
        :func:`~.config.context_length` (``max_length``), ``real_steps`` steps of ``real_batch`` examples, peak lr ``real_lr``
        for every objective, one warmup step, no LM replay."""
        c = self.run_config()
        return ORGANISMS[TEXT_ORGANISM].replace(
            context=context_length(self.load(self.label)[0], c.max_length), align_steps=c.real_steps, align_batch_size=c.real_batch,
            align_lr=c.real_lr, sft_lr=c.real_lr, dpo_lr=c.real_lr, align_warmup_steps=1,
            replay_batch_size=0,
        )  # fmt: skip

    # -- budget, training, curves -----------------------------------------------------------
    def run_config(self) -> SignatureConfig:
        """The config this unit runs with: base = its label, :func:`~.config.real_budget`
        over the checkpoint's layers (loads the checkpoint)."""
        if self._config is None:
            model, _ = self.load(self.label)
            cfg = dataclasses.replace(self.user_config, base=self.label)
            self._config = real_budget(cfg, get_adapter(model).n_layers(model), self.source[0])
        return self._config

    @property
    def edit_scope(self) -> str:
        """What the write-edit claim ("still changes predictions after alignment") is tested
        on for this checkpoint, in words."""
        runs = " and ".join(t.upper() for t in self.user_config.targets if t != "lm")
        runs = runs or " and ".join(t.upper() for t in self.user_config.targets)
        if self.aligned_base:
            return f"on the released (instruction-tuned) checkpoint and after our {runs} runs"
        return (
            f"after our {runs} runs only: a base checkpoint is not aligned, so those short "
            "runs are its only alignment"
        )

    def _batches(self, objective: str, tok: Any, cfg: Any, config: SignatureConfig) -> list:
        corpus, gen = self.corpus(), torch.Generator().manual_seed(config.seed + 11)
        n, b = config.real_steps, config.real_batch
        if objective == "lm":
            docs, stream = list(corpus.train), torch.zeros(0, dtype=torch.long)
            for i in range(0, len(docs), 32):  # only as much text as the windows need
                stream = torch.cat([stream, encode_stream(tok, docs[i : i + 32])])
                if len(stream) > 4 * n * b * cfg.context:
                    break
            return [list(random_windows(stream, b, cfg.context, gen)) for _ in range(n)]
        items = corpus.sft if objective == "sft" else corpus.dpo
        order = torch.randperm(len(items), generator=gen).tolist()
        order = (order * (n * b // len(order) + 1))[: n * b]
        return [[items[j] for j in order[i * b : (i + 1) * b]] for i in range(n)]

    def _train(self, objective: str) -> tuple[nn.Module, Any]:
        base, tok = self.load(self.label)
        config, cfg = self.run_config(), self.stage_config
        # Any: stage_loss / optimizer_step are typed for PreTrainedModel, which base is
        model: Any = copy.deepcopy(base).train().requires_grad_(True)
        ref: Any = copy.deepcopy(base).eval().requires_grad_(False) if objective == "dpo" else None
        opt = make_optimizer(model, cfg, config.real_lr)
        for i, batch in enumerate(self._batches(objective, tok, cfg, config)):
            lr = lr_at(i, config.real_steps, config.real_lr, 1, cfg.min_lr_ratio)
            loss = stage_loss(objective, model, ref, tok, batch, cfg)
            self._curves.append(
                {"model": self.label, "objective": objective, "step": i + 1, "lr": lr,
                 "loss": optimizer_step(model, opt, loss, lr, cfg.grad_clip),
                 "examples": len(batch), "tokens": _tokens(objective, tok, batch, cfg.context)}
            )  # fmt: skip
        model.eval().requires_grad_(False)
        keep = {m.parameter for m in probed_maps(model, config)}
        self._states[f"{self.label}+{objective}"] = {
            name: {k: (v.detach().clone() if torch.is_tensor(v) else v) for k, v in st.items()}
            for name, p in model.named_parameters()
            if name in keep and (st := opt.state.get(p))
        }
        del opt
        return model, tok

    def curves(self) -> pd.DataFrame:
        """Training curve of every applied objective: model, objective, step, lr, loss
        (nats, before the step), examples and tokens (non-padding tokens the step's forward
        passes read: DPO reads chosen and rejected)."""
        own = pd.DataFrame(self._curves, columns=CURVE_COLUMNS)
        if not any(t in ("sft", "dpo") for t in self.user_config.targets):
            return own
        built = aligned_curves(self.aligned, self.label, self._aligned_batch())
        built = built[built["objective"].isin(self.user_config.targets)]
        return pd.concat([own, built], ignore_index=True) if len(own) else built

    def _aligned_batch(self) -> int:
        return int(json.loads((self.aligned / "build.json").read_text())["config"]["batch_size"])

    @staticmethod
    def empty_curves() -> pd.DataFrame:
        return pd.DataFrame(columns=CURVE_COLUMNS)


def _tokens(objective: str, tok: Any, batch: list, context: int) -> int:
    if objective == "lm":
        return int(sum(len(x) for x in batch))
    if objective == "sft":
        prompts, answers = [format_prompt(q) for q, _ in batch], [format_answer(a) for _, a in batch]
    else:
        prompts = [format_prompt(q) for q, _, _ in batch] * 2
        answers = [format_answer(c) for _, c, _ in batch] + [format_answer(r) for _, _, r in batch]
    return int(qa_batch(tok, prompts, answers, context)["attention_mask"].sum())
