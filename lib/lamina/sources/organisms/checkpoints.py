"""Checkpoint folders: a Hugging Face model folder plus the AdamW state, and training curves.

Layout of one checkpoint folder (loadable with ``AutoModelForCausalLM``/``AutoTokenizer``)::

    config.json, model.safetensors, generation_config.json   (save_pretrained)
    tokenizer.json, tokenizer_config.json, ...                (tokenizer.save_pretrained)
    optimizer.safetensors   "<param name>:exp_avg", "<param name>:exp_avg_sq"  (float32)
    optimizer.json          {"step", "lr", "betas", "eps", "weight_decay", "params": {name: {"step", "decay"}}}
    checkpoint.json         what the caller records (step, stage, ...)
    lamina-manifest.json    written last: every file's size and SHA-256, every tensor's dtype and
                            shape (lamina.core.manifest), checked whenever the checkpoint is resolved

Parameter names are those of ``model.named_parameters()`` (tied embeddings appear once).
At step 0 (before any update) the moments are saved as zeros with step 0.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from transformers.utils import logging as hf_logging

from lamina.core.manifest import write_manifest

MOMENTS = ("exp_avg", "exp_avg_sq")


def write_json(path: Path, obj: Any) -> None:
    """Write JSON atomically (temp file in the same folder, then os.replace)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(obj, fh, indent=1, default=str)
    os.replace(tmp, path)


def write_curve(folder: Path, name: str, rows: list[dict[str, Any]]) -> None:
    """Save a curve as ``<name>.json`` (list of row dicts) and ``<name>.csv``, atomically."""
    write_json(folder / f"{name}.json", rows)
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    with os.fdopen(fd, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, folder / f"{name}.csv")


def optimizer_tensors(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """AdamW moments keyed by parameter name: ({"name:exp_avg": tensor, ...}, metadata dict)."""
    tensors: dict[str, torch.Tensor] = {}
    params: dict[str, dict[str, Any]] = {}
    decay_ids = {
        id(p) for g in optimizer.param_groups if g.get("weight_decay", 0) > 0 for p in g["params"]
    }
    step = 0
    for name, p in model.named_parameters():
        st = optimizer.state.get(p, {})
        s = int(st["step"]) if "step" in st else 0
        step = max(step, s)
        for m in MOMENTS:
            t = st.get(m)
            tensors[f"{name}:{m}"] = (
                t.detach().float().contiguous().clone()
                if t is not None
                else torch.zeros_like(p.detach().float())
            )
        params[name] = {"step": s, "decay": id(p) in decay_ids, "shape": list(p.shape)}
    g0 = optimizer.param_groups[0]
    meta = {
        "step": step,
        "lr": float(g0["lr"]),
        "betas": list(g0["betas"]),
        "eps": float(g0["eps"]),
        "weight_decay": max(float(g["weight_decay"]) for g in optimizer.param_groups),
        "params": params,
    }
    return {"tensors": tensors, "meta": meta}


def save_checkpoint(
    folder: Path,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    optimizer: torch.optim.Optimizer,
    info: dict[str, Any] | None = None,
) -> None:
    """Write a complete checkpoint folder (model, tokenizer, optimizer state, ``info`` JSON),
    then its manifest (:func:`lamina.core.manifest.write_manifest`), checked on every load."""
    folder.mkdir(parents=True, exist_ok=True)
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # one "Writing model shards" bar per checkpoint is noise
    try:
        model.save_pretrained(str(folder))
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    tokenizer.save_pretrained(str(folder))
    state = optimizer_tensors(model, optimizer)
    save_file(state["tensors"], str(folder / "optimizer.safetensors"))
    write_json(folder / "optimizer.json", state["meta"])
    write_json(folder / "checkpoint.json", info or {})
    write_manifest(folder, {"kind": "organism checkpoint"})  # last: sizes, SHA-256, tensors


def read_optimizer_state(folder: Path) -> dict[str, dict[str, torch.Tensor]]:
    """{param name: {"exp_avg": (shape), "exp_avg_sq": (shape), "step": () int64}} from a folder."""
    tensors = load_file(str(folder / "optimizer.safetensors"))
    meta = json.loads((folder / "optimizer.json").read_text())
    out: dict[str, dict[str, torch.Tensor]] = {}
    for name, info in meta["params"].items():
        out[name] = {m: tensors[f"{name}:{m}"] for m in MOMENTS}
        out[name]["step"] = torch.tensor(info["step"], dtype=torch.int64)
    return out


def restore_optimizer(model: nn.Module, optimizer: torch.optim.Optimizer, folder: Path) -> None:
    """Load a folder's AdamW moments into ``optimizer`` (built over ``model``'s parameters)."""
    state = read_optimizer_state(folder)
    for name, p in model.named_parameters():
        s = state[name]
        if int(s["step"]) == 0:
            continue
        optimizer.state[p] = {
            "step": s["step"].to(torch.float32),
            "exp_avg": s["exp_avg"].to(p.dtype).clone(),
            "exp_avg_sq": s["exp_avg_sq"].to(p.dtype).clone(),
        }
