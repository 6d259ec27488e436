"""SFT then DPO of any causal LM on the organisms' instruction-following data.

:func:`align_pretrained` trains a copy of a model (a real checkpoint such as SmolLM2 or Gemma,
or an organism) with the same data and losses as the organisms' ``sft`` and ``dpo`` stages
(:mod:`lamina.sources.organisms.instructions`, :mod:`lamina.sources.organisms.objectives`): masked SFT on
(instruction + question, required response + EOS), then DPO against the frozen ``@sft``. By
default the input embedding (tied to the unembedding in SmolLM2 and Gemma) is frozen, so the
prediction subspace the weight-update chapter reads stays fixed. AdamW with linear warmup and
cosine decay (:func:`lamina.sources.organisms.train.lr_at`); weight decay on matrices only.

:func:`build_aligned` runs it once per (model, config) into ``<root>/<model>-<hash>/`` (safetensors
of the changed tensors of ``sft`` and ``dpo``, curves, the behavioural gates), written atomically.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import shutil
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lamina.core.manifest import safetensors_table, write_manifest
from lamina.core.provenance import data_dir
from lamina.sources.model_files import ModelFileError, check_lamina_folder
from lamina.sources.models import load_model
from lamina.sources.organisms.curriculum import generate_curriculum
from lamina.sources.organisms.gates import measure_checkpoint
from lamina.sources.organisms.instructions import AlignmentData
from lamina.sources.organisms.objectives import dpo_loss, sft_loss
from lamina.sources.organisms.qa import format_answer, format_prompt
from lamina.sources.organisms.stages import completion_logprob, qa_batch
from lamina.sources.organisms.train import lr_at

__all__ = [
    "ALIGN_CODE_VERSION",
    "ALIGNED_FILES",
    "PretrainedAlignConfig",
    "align_pretrained",
    "aligned_damage",
    "aligned_state",
    "build_aligned",
    "gate_sample",
]

ALIGN_CODE_VERSION = "align-pretrained-1"


@dataclass(frozen=True)
class PretrainedAlignConfig:
    """Budget of :func:`align_pretrained`: steps of ``batch_size`` items per stage, peak learning
    rates, DPO's beta, the token cap per item (``max_length``), what trains."""
    sft_steps: int = 120
    dpo_steps: int = 120
    batch_size: int = 8
    sft_lr: float = 3e-5
    dpo_lr: float = 1e-5
    dpo_beta: float = 0.1
    max_length: int = 64
    warmup_steps: int = 10
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    freeze_embeddings: bool = True
    seed: int = 0
    corpus_seed: int = 0
    gate_items: int | None = None  # None: every held-out item; N: a seeded sample (quick runs)

    @property
    def config_hash(self) -> str:
        """sha256(config JSON + :data:`ALIGN_CODE_VERSION`), first 10 hex digits."""
        blob = json.dumps(dataclasses.asdict(self), sort_keys=True) + "\n" + ALIGN_CODE_VERSION
        return hashlib.sha256(blob.encode()).hexdigest()[:10]


def _logprob(model: Any, tok: Any, prompts: list[str], comps: list[str], max_len: int) -> torch.Tensor:
    """log pi(completion + EOS | prompt) per row: (B,), nats."""
    return completion_logprob(model, tok, [format_prompt(p) for p in prompts],
                              [format_answer(c) for c in comps], max_len)  # fmt: skip


def _sft_loss(model: Any, tok: Any, items: list[tuple[str, str]], max_len: int) -> torch.Tensor:
    b = qa_batch(tok, [format_prompt(q) for q, _ in items], [format_answer(a) for _, a in items], max_len)
    logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
    return sft_loss(logits, b["input_ids"], b["target_mask"])


def _train_stage(stage: str, model: Any, tok: Any, items: list[Any], cfg: PretrainedAlignConfig,
                 ref: Any = None, log: Callable[[str], None] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Train ``model`` in place on ``items``; returns the curve (step, lr, train_loss)."""
    steps, peak = (cfg.sft_steps, cfg.sft_lr) if stage == "sft" else (cfg.dpo_steps, cfg.dpo_lr)
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.ndim >= 2], "weight_decay": cfg.weight_decay},
              {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]  # fmt: skip
    opt = torch.optim.AdamW(groups, lr=peak, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(cfg.seed * 1000 + (1 if stage == "sft" else 2))
    order: list[int] = []
    rows = []
    model.train()
    for i in range(steps):
        while len(order) < cfg.batch_size:
            order += torch.randperm(len(items), generator=gen).tolist()
        batch, order = [items[j] for j in order[: cfg.batch_size]], order[cfg.batch_size :]
        if stage == "sft":
            loss = _sft_loss(model, tok, batch, cfg.max_length)
        else:
            prompts = [p for p, _, _ in batch]
            pc = _logprob(model, tok, prompts, [c for _, c, _ in batch], cfg.max_length)
            pr = _logprob(model, tok, prompts, [r for _, _, r in batch], cfg.max_length)
            with torch.no_grad():
                rc = _logprob(ref, tok, prompts, [c for _, c, _ in batch], cfg.max_length)
                rr = _logprob(ref, tok, prompts, [r for _, _, r in batch], cfg.max_length)
            loss = dpo_loss(pc, pr, rc, rr, cfg.dpo_beta)
        lr = lr_at(i, steps, peak, cfg.warmup_steps, cfg.min_lr_ratio)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        opt.step()
        rows.append({"stage": stage, "step": i + 1, "lr": lr, "train_loss": float(loss.detach())})
        if log is not None and (i + 1) % max(1, steps // 10) == 0:
            log(f"{stage} step {i + 1}/{steps}: loss {rows[-1]['train_loss']:.4f}")
    model.eval()
    return rows


def align_pretrained(model: Any, tokenizer: Any, config: PretrainedAlignConfig,
                     data: AlignmentData | None = None,
                     log: Callable[[str], None] | None = None) -> dict[str, Any]:  # fmt: skip
    """SFT a copy of ``model`` on ``data.train``, then DPO a copy of ``@sft`` on ``data.dpo_train``
    against the frozen ``@sft``. ``model`` is left unchanged.

    data: default the curriculum's (:func:`lamina.sources.organisms.curriculum.generate_curriculum`
    with ``config.corpus_seed``). The tokenizer needs an ``eos_token_id``.
    -> {"sft": model, "dpo": model, "curve": [{"stage", "step", "lr", "train_loss"}],
    "trainable": names of the trained tensors}.
    """
    if tokenizer.eos_token_id is None:
        raise ValueError("align_pretrained needs a tokenizer with an eos_token_id")
    if data is None:
        data = generate_curriculum(config.corpus_seed, 1).alignment
        assert data is not None
    torch.manual_seed(config.seed)
    sft = copy.deepcopy(model)
    frozen = {id(sft.get_input_embeddings().weight)} if config.freeze_embeddings else set()
    for p in sft.parameters():
        p.requires_grad_(id(p) not in frozen)
    trainable = [n for n, p in sft.named_parameters() if p.requires_grad]
    curve = _train_stage("sft", sft, tokenizer, [(x.prompt, x.target) for x in data.train], config, log=log)
    ref = copy.deepcopy(sft).eval().requires_grad_(False)
    dpo = copy.deepcopy(sft)
    for p, q in zip(dpo.parameters(), sft.parameters(), strict=True):
        p.requires_grad_(q.requires_grad)
    curve += _train_stage("dpo", dpo, tokenizer, [t.as_tuple() for t in data.dpo_train], config,
                          ref=ref, log=log)  # fmt: skip
    return {"sft": sft, "dpo": dpo, "curve": curve, "trainable": trainable}


def gate_sample(data: AlignmentData, n: int | None, seed: int) -> AlignmentData:
    """``data`` with at most ``n`` held-out SFT items and ``2 n`` held-out DPO triples, a seeded
    sample (None: unchanged). A sample's constant-style baseline is measured on the sample
    itself, so it stays the reference the gate compares against."""
    if n is None:
        return data
    if n < 1:
        raise ValueError(f"gate_items must be >= 1 or None; got {n}")
    gen = torch.Generator().manual_seed(seed)

    def pick(items: tuple, k: int) -> tuple:
        order = torch.randperm(len(items), generator=gen)[:k].sort().values.tolist()
        return tuple(items[i] for i in order)

    return dataclasses.replace(
        data, heldout=pick(data.heldout, n), dpo_heldout=pick(data.dpo_heldout, 2 * n)
    )


def build_aligned(name: str, config: PretrainedAlignConfig, root: Path,
                  log: Callable[[str], None] = print) -> Path:  # fmt: skip
    """Align the model ``name`` (:func:`lamina.sources.models.load_model`) once into
    ``root/<name>-<config hash>/``: ``{sft,dpo}.safetensors`` (every trained tensor), ``curve.json``,
    ``gates.json`` (:func:`lamina.sources.organisms.gates.measure_checkpoint` per stage),
    ``build.json`` (config, seconds) and, last, ``lamina-manifest.json`` (sizes, SHA-256, the
    trained tensors' names), written to a temporary folder and renamed; idempotent. A build
    whose files are missing or differ from its manifest (:func:`aligned_damage`) is rebuilt
    with a warning, never used."""
    from safetensors.torch import save_file

    target = Path(root) / f"{name.replace('/', '--')}-{config.config_hash}"
    if (target / "build.json").is_file():
        damage = aligned_damage(target)
        if damage is None:
            return target
        warnings.warn(f"aligned build {target}: {damage}; rebuilding it", RuntimeWarning, stacklevel=2)
    tmp = target.parent / f".tmp-{target.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        t0 = time.time()
        base, tok = load_model(name)

        data = generate_curriculum(config.corpus_seed, 1).alignment
        if data is None:
            raise RuntimeError("the curriculum produced no alignment data")
        out = align_pretrained(base, tok, config, data, log=log)
        held = gate_sample(data, config.gate_items, config.seed)
        gates = {}
        for stage in ("sft", "dpo"):
            state = {n: p.detach().contiguous() for n, p in out[stage].named_parameters()
                     if n in set(out["trainable"])}  # fmt: skip
            save_file(state, str(tmp / f"{stage}.safetensors"))
            res = measure_checkpoint(out[stage], base, tok, held, config.max_length, config.seed)
            gates[stage] = {k: dataclasses.asdict(v) for k, v in res.items()}
        (tmp / "curve.json").write_text(json.dumps(out["curve"]))
        (tmp / "gates.json").write_text(json.dumps(gates, indent=1))
        (tmp / "build.json").write_text(json.dumps({"model": name, "config": dataclasses.asdict(config),
                                                    "config_hash": config.config_hash,
                                                    "code_version": ALIGN_CODE_VERSION,
                                                    "seconds": round(time.time() - t0, 1)}, indent=1))  # fmt: skip
        write_manifest(tmp, {"kind": "aligned build", "model": name, "trained": out["trainable"]})
        if target.exists():
            shutil.rmtree(target)
        os.rename(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


ALIGNED_FILES = ("sft.safetensors", "dpo.safetensors", "curve.json", "gates.json", "build.json")


def aligned_damage(folder: Path) -> str | None:
    """Why the aligned build ``folder`` cannot be used (a file missing, or bytes that differ
    from its manifest: :func:`lamina.core.manifest.check_folder`), or None when it can. A
    build written before manifests (no ``lamina-manifest.json``) is usable when its files are
    all there (one warning; its tensors are checked when applied, :func:`aligned_state`)."""
    missing = [f for f in ALIGNED_FILES if not (folder / f).is_file()]
    if missing:
        return f"files missing: {missing}"
    try:
        check_lamina_folder(folder, "aligned build")
    except ModelFileError as exc:
        return str(exc)
    return None


def aligned_state(folder: Path, stage: str) -> dict[str, torch.Tensor]:
    """The tensors ``stage`` (``"sft"`` or ``"dpo"``) trained, from ``<folder>/<stage>.safetensors``,
    checked: the folder against its manifest, and the file against the trained tensors the
    manifest lists (a build without a manifest: against the other stage's file and the
    config's frozen embedding). :class:`lamina.sources.model_files.ModelFileError` names the
    file and the tensors missing or extra: never a partial state."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(folder)
    path = folder / f"{stage}.safetensors"
    manifest = check_lamina_folder(folder, "aligned build")
    try:
        state = load_file(str(path))
    except (OSError, SafetensorError) as exc:
        raise ModelFileError(f"{path}: unreadable ({exc.__class__.__name__}: {exc})") from exc
    if manifest is not None:
        want = set(manifest.get("trained") or manifest["files"][path.name]["tensors"])
    else:  # before manifests: both stages train the same tensors
        other = folder / f"{'dpo' if stage == 'sft' else 'sft'}.safetensors"
        want = set(safetensors_table(other)) | set(state)
    missing, extra = sorted(want - set(state)), sorted(set(state) - want)
    if missing or extra or not state:
        raise ModelFileError(
            f"{path}: holds {len(state)} tensors, not the {len(want)} its build trained "
            f"(missing: {missing[:5]}; extra: {extra[:5]}): a partial or foreign file"
        )
    return state


def main(argv: list[str] | None = None) -> int:
    """``python -m lamina.sources.organisms.pretrained MODEL [MODEL ...] [--root DIR]``: build (or find)
    each model's aligned checkpoints at the default :class:`PretrainedAlignConfig`; prints the
    folders and the gates' reasons."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m lamina.sources.organisms.pretrained")
    parser.add_argument("models", nargs="+")
    parser.add_argument("--root", type=Path, default=None,
                        help="cache root (default <data>/aligned)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.root is None:
        args.root = data_dir() / "aligned"
    for name in args.models:
        folder = build_aligned(name, PretrainedAlignConfig(), args.root)
        gates = json.loads((folder / "gates.json").read_text())
        print(folder)
        for stage, gs in gates.items():
            for g, r in gs.items():
                print(f"  @{stage} {g}: {r['reason']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
