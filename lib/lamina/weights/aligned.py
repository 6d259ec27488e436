"""Where the chapter's aligned checkpoints come from, and their behavioural gates.

Organisms: ``@sft`` and ``@dpo`` are built with the organism (``make organisms``), which
writes their gates into ``evaluation.json`` (:func:`lamina.sources.organisms.build.
alignment_gates`). Real checkpoints: SFT and DPO on the organisms' instruction data, built
once per (model, :class:`~lamina.sources.organisms.pretrained.PretrainedAlignConfig`) by
``make aligned`` into ``<data>/aligned/<model>-<hash>/`` (:func:`~lamina.sources.organisms.
pretrained.build_aligned`), with the tensors that trained, the curves and the gates.

A checkpoint's gate (:class:`StageGate`): ``@sft`` passes when its held-out SFT accuracy
beats every content-blind policy and the base; ``@dpo`` when it raises the preference accuracy
over ``@sft``'s and the content probe over the base's, and its preference accuracy lies above
the constant-style baseline, each with the 95% CI over entity pairs
(:mod:`lamina.sources.organisms.gates`). A checkpoint without a
recorded gate (an organism built before the gates existed) has none: its alignment claims
read "not testable: alignment gate not measured". Part of
:mod:`lamina.chapters.weight_update_signature`.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch
from torch import nn

from lamina.core.provenance import data_dir
from lamina.sources import organisms
from lamina.sources.organisms.gates import DPO_WITHOUT_BASE, GATES_FORMAT, OLD_DPO_FORMATS
from lamina.sources.organisms.pretrained import (
    ADAM_FILE,
    PretrainedAlignConfig,
    aligned_state,
    build_aligned,
)


@dataclass(frozen=True)
class StageGate:
    """The behavioural gate of one aligned checkpoint, as its build recorded it.

    passed: whether the checkpoint learned its alignment task; values: the gate's numbers by
    name (fractions in [0, 1], or differences of fractions); reason: one line saying why.
    """

    passed: bool
    values: dict[str, float] = field(default_factory=dict)
    reason: str = ""

    def describe(self) -> str:
        """The values as "name 0.512, name 0.498" (sorted by name; "no values" when empty)."""
        if not self.values:
            return "no values"
        return ", ".join(f"{k} {v:.3g}" for k, v in sorted(self.values.items()))

__all__ = [
    "StageGate",
    "aligned_optimizer_state",
    "STAGE_GATE",
    "aligned_folder",
    "aligned_model",
    "aligned_curves",
    "gate_from_record",
    "organism_gates",
    "real_gates",
]

STAGE_GATE = {"sft": "sft", "dpo": "preference"}
"""In a format-1 record (one per checkpoint, {gate name: gate}), which gate decides a stage:
SFT's task gate for ``@sft``, the preference gate (with the content probe) for ``@dpo``. A
format-2 or later record (``{"format": 4, "sft": gate, "dpo": gate, ...}``, the stage gates of
``lamina.sources.organisms.gates.write_gates``) holds each stage's gate under its name. Only
format 4's DPO gate requires @dpo to beat @sft's preference accuracy and the base's content
probe: an older record's @dpo gate fails."""


def gate_from_record(stage: str, record: Mapping[str, object]) -> StageGate:
    """The :class:`StageGate` of one aligned stage from its record: a stage-gates record
    (format 2 or later), or a format-1 checkpoint record ``{"preference": {"passed", "values", "reason"},
    "sft": {...}}`` (:data:`STAGE_GATE`); values are the finite numeric ones. A record
    without the stage's gate fails it, naming what is missing; a record older than
    :data:`~lamina.sources.organisms.gates.GATES_FORMAT` fails @dpo (its DPO gate did not
    require @dpo to beat @sft's preference and the base's content: ``DPO_WITHOUT_BASE``)."""
    fmt = record.get("format", 1)
    key = stage if fmt in (*OLD_DPO_FORMATS, GATES_FORMAT) else STAGE_GATE[stage]
    found = record.get(key)
    if not isinstance(found, Mapping) or "passed" not in found:
        return StageGate(False, {}, f"the {key} gate of @{stage} is missing from its record")
    values = {
        str(k): float(v)
        for k, v in dict(found.get("values", {})).items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(float(v))
    }
    if stage == "dpo" and fmt != GATES_FORMAT:
        return StageGate(False, values, DPO_WITHOUT_BASE.format(fmt=fmt))
    return StageGate(bool(found["passed"]), values, str(found.get("reason", "")))


def organism_gates(name: str) -> dict[str, StageGate]:
    """{``sft``/``dpo``: gate} of a built organism, from its ``evaluation.json``; {} when the
    build recorded none (alignment claims then read not measured)."""
    path = organisms.organism_dir(name) / "evaluation.json"
    gates = json.loads(path.read_text()).get("gates") or {}
    if gates.get("format") in (*OLD_DPO_FORMATS, GATES_FORMAT):
        return {s: gate_from_record(s, gates) for s in STAGE_GATE}
    return {s: gate_from_record(s, gates[s]) for s in STAGE_GATE if s in gates}


def aligned_folder(name: str, config: PretrainedAlignConfig | None = None) -> Path:
    """The cached aligned build of the real model ``name`` (built now when missing, as
    ``make aligned`` does beforehand): ``<data>/aligned/<model>-<config hash>/``."""
    return build_aligned(name, config or PretrainedAlignConfig(), data_dir() / "aligned")


def real_gates(folder: Path) -> dict[str, StageGate]:
    """{``sft``/``dpo``: gate} of an aligned build folder (its ``gates.json``)."""
    gates = json.loads((Path(folder) / "gates.json").read_text())
    if gates.get("format") in (*OLD_DPO_FORMATS, GATES_FORMAT):
        return {s: gate_from_record(s, gates) for s in STAGE_GATE}
    return {s: gate_from_record(s, gates.get(s, {})) for s in STAGE_GATE}


def aligned_model(base: nn.Module, folder: Path, stage: str) -> nn.Module:
    """A copy of ``base`` with the tensors that ``stage`` trained (``<stage>.safetensors``,
    checked against its build's manifest: :func:`~lamina.sources.organisms.pretrained.
    aligned_state`), in eval mode. The tensors the stage did not train are ``base``'s own,
    shared rather than copied (Gemma 3's frozen tied embedding is 0.63 GiB of each copy), so
    the copy must not be edited outside a context that restores them; the trained ones are
    new and frozen. Raises ValueError naming a saved tensor the model lacks or whose shape
    differs (never a partial load)."""
    state = aligned_state(Path(folder), stage)
    named = dict(base.named_parameters())
    bad = [k for k, v in state.items() if k not in named or named[k].shape != v.shape]
    if bad or not state:
        raise ValueError(
            f"{folder}/{stage}.safetensors does not fit the model: {bad[:5] or 'no tensors'}"
        )
    model = copy.deepcopy(base, {id(p): p for k, p in named.items() if k not in state})
    own = dict(model.named_parameters())
    with torch.no_grad():
        for k, v in state.items():
            own[k].copy_(v.to(own[k].dtype))
            own[k].requires_grad_(False)
    return model.eval()


def aligned_curves(folder: Path, label: str, batch_size: int) -> pd.DataFrame:
    """The SFT and DPO training curves of an aligned build, in the chapter's curve columns
    (model, objective, step, lr, loss in nats, examples; tokens not recorded: NaN)."""
    rows = json.loads((Path(folder) / "curve.json").read_text())
    return pd.DataFrame(
        [
            {"model": label, "objective": r["stage"], "step": r["step"], "lr": r["lr"],
             "loss": r["train_loss"], "examples": batch_size, "tokens": float("nan")}
            for r in rows
        ],
        columns=["model", "objective", "step", "lr", "loss", "examples", "tokens"],
    )  # fmt: skip


def aligned_optimizer_state(folder: Path, stage: str) -> dict[str, dict[str, torch.Tensor]] | None:
    """The AdamW state an aligned build kept for ``stage`` (:data:`ADAM_FILE`):
    {parameter name: {"step", "exp_avg", "exp_avg_sq"}} in the layout of
    ``torch.optim.AdamW.state``; None when the build kept none. Raises ValueError for a file
    without a ``step`` or with an ``exp_avg`` lacking its ``exp_avg_sq``."""
    from safetensors import safe_open

    path = Path(folder) / ADAM_FILE.format(stage=stage)
    if not path.is_file():
        return None
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
        if "step" not in meta:
            raise ValueError(f"{path}: no 'step' in its metadata ({ADAM_FILE} format)")
        names = [k.split("/", 1)[1] for k in f.keys() if k.startswith("exp_avg/")]
        out = {}
        for n in names:
            if f"exp_avg_sq/{n}" not in f.keys():
                raise ValueError(f"{path}: exp_avg/{n} has no exp_avg_sq/{n}")
            out[n] = {"step": torch.tensor(float(meta["step"])),
                      "exp_avg": f.get_tensor(f"exp_avg/{n}"),
                      "exp_avg_sq": f.get_tensor(f"exp_avg_sq/{n}")}  # fmt: skip
    return out
