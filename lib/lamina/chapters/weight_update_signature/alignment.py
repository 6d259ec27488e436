"""Where the chapter's aligned checkpoints come from, and their behavioural gates.

Organisms: ``@sft`` and ``@dpo`` are built with the organism (``make organisms``), which
writes their gates into ``evaluation.json`` (:func:`lamina.sources.organisms.build.
alignment_gates`). Real checkpoints: SFT and DPO on the organisms' instruction data, built
once per (model, :class:`~lamina.sources.organisms.pretrained.PretrainedAlignConfig`) by
``make aligned`` into ``<data>/aligned/<model>-<hash>/`` (:func:`~lamina.sources.organisms.
pretrained.build_aligned`), with the tensors that trained, the curves and the gates.

A checkpoint's gate (:class:`~.gate.AlignmentGate`): ``@sft`` passes when its held-out SFT
accuracy beats every content-blind policy and the base; ``@dpo`` when it raises the content
probe over ``@sft`` and its preference accuracy lies above the constant-style baseline, each
with the 95% CI over entity pairs (:mod:`lamina.sources.organisms.gates`). A checkpoint without a
recorded gate (an organism built before the gates existed) has none: its alignment claims
read "not testable: alignment gate not measured". Part of
:mod:`lamina.chapters.weight_update_signature`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pandas as pd
import torch
from torch import nn

from lamina.chapters.weight_update_signature.gate import AlignmentGate, gates_from_record
from lamina.core.provenance import data_dir
from lamina.sources import organisms
from lamina.sources.organisms.pretrained import PretrainedAlignConfig, aligned_state, build_aligned

__all__ = [
    "aligned_folder",
    "aligned_model",
    "aligned_curves",
    "organism_gates",
    "real_gates",
]

def organism_gates(name: str) -> dict[str, AlignmentGate]:
    """{``sft``/``dpo``: gate} of a built organism, from its ``evaluation.json``
    (:func:`~.gate.gates_from_record`); {} when the build recorded none (alignment claims then
    read not measured)."""
    path = organisms.organism_dir(name) / "evaluation.json"
    return gates_from_record(json.loads(path.read_text()).get("gates"))


def aligned_folder(name: str, config: PretrainedAlignConfig | None = None) -> Path:
    """The cached aligned build of the real model ``name`` (built now when missing, as
    ``make aligned`` does beforehand): ``<data>/aligned/<model>-<config hash>/``."""
    return build_aligned(name, config or PretrainedAlignConfig(), data_dir() / "aligned")


def real_gates(folder: Path) -> dict[str, AlignmentGate]:
    """{``sft``/``dpo``: gate} of an aligned build folder (its ``gates.json``)."""
    return gates_from_record(json.loads((Path(folder) / "gates.json").read_text()))


def aligned_model(base: nn.Module, folder: Path, stage: str) -> nn.Module:
    """A copy of ``base`` with the tensors that ``stage`` trained (``<stage>.safetensors``,
    checked against its build's manifest: :func:`~lamina.sources.organisms.pretrained.
    aligned_state`). Raises ValueError naming a saved tensor the model lacks or whose shape
    differs (never a partial load)."""
    state = aligned_state(Path(folder), stage)
    model = copy.deepcopy(base)
    own = dict(model.named_parameters())
    bad = [k for k, v in state.items() if k not in own or own[k].shape != v.shape]
    if bad or not state:
        raise ValueError(
            f"{folder}/{stage}.safetensors does not fit the model: {bad[:5] or 'no tensors'}"
        )
    with torch.no_grad():
        for k, v in state.items():
            own[k].copy_(v.to(own[k].dtype))
    return model.eval().requires_grad_(False)


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
