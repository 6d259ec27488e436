"""SFT then DPO of any causal LM on the organisms' instruction-following data.

:func:`align_pretrained` trains a copy of a model (a real checkpoint such as SmolLM2 or Gemma,
or an organism) with the same data and losses as the organisms' ``sft`` and ``dpo`` stages
(:mod:`lamina.sources.organisms.instructions`, :mod:`lamina.sources.organisms.stages`): masked SFT on
(instruction + question, required response + EOS), then DPO against the frozen ``@sft``. By
default the input embedding (tied to the unembedding in SmolLM2 and Gemma) is frozen, so the
prediction subspace the weight-update chapter reads stays fixed. Both stages run through
:func:`lamina.sources.organisms.loop.train_steps` (AdamW, linear warmup and cosine decay,
weight decay on matrices only) with :meth:`PretrainedAlignConfig.budget`.

**Budget.** Both stages take 322 steps of 8 examples (equal step, example and schedule
budgets): 9.7 epochs of the 266 SFT training items and 3.5 of the 741 DPO training triples of
organisms-6's curriculum (``build.json`` records the epochs; ``tests`` check that the default
makes at least 2 and 1), in batches of similar lengths. The key covers the alignment data.

:func:`build_aligned` runs it once per (model, config) into ``<root>/<model>-<hash>/``:
``{sft,dpo}.safetensors`` (the tensors that trained), ``optimizer/{sft,dpo}/`` (each run's
AdamW moments, :func:`lamina.sources.organisms.checkpoints.read_optimizer_state`), curves, the
behavioural gates of the base, ``@sft`` and ``@dpo`` (:func:`lamina.sources.organisms.gates.
measure_stages`), written atomically.
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

from lamina.core.manifest import MANIFEST, ManifestError, safetensors_table, write_manifest
from lamina.core.provenance import data_dir
from lamina.core.threads import threads
from lamina.sources.model_files import ModelFileError, check_lamina_folder
from lamina.sources.models import load_model
from lamina.sources.organisms.curriculum import alignment_fingerprint, generate_curriculum
from lamina.sources.organisms.gates import measure_stages, write_gates
from lamina.sources.organisms.instructions import AlignmentData
from lamina.sources.organisms.loop import StageBudget, synchronize, train_steps
from lamina.sources.organisms.scoring import model_device
from lamina.sources.organisms.stages import (
    dpo_batch_loss,
    reference_logprobs,
    sft_batch_loss,
    training_lengths,
)

__all__ = ["ADAM_FILE", "ALIGN_CODE_VERSION", "ALIGNED_FILES", "PretrainedAlignConfig", "align_pretrained",
           "aligned_damage", "aligned_state", "build_aligned", "gate_sample", "save_adam_state"]

ALIGN_CODE_VERSION = "align-pretrained-3"  # 3: length-grouped batches; 2: entity-pair split, gates, Adam


@dataclass(frozen=True)
class PretrainedAlignConfig:
    """Budget of :func:`align_pretrained`: steps of ``batch_size`` items per stage (default 322
    each; see the module docstring), peak learning rates, DPO's
    beta, the token cap per item (``max_length``), what trains."""
    sft_steps: int = 322
    dpo_steps: int = 322
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
    length_grouped: bool = True  # batches of similar lengths (loop.length_grouped_batches)
    gate_items: int | None = None  # None: every held-out item; N: a seeded sample (quick runs)

    def budget(self, stage: str) -> StageBudget:
        """The :class:`~lamina.sources.organisms.loop.StageBudget` of ``stage`` (sft or dpo)."""
        steps, lr = (self.sft_steps, self.sft_lr) if stage == "sft" else (self.dpo_steps, self.dpo_lr)
        return StageBudget(steps=steps, batch_size=self.batch_size, lr=lr,
                           warmup_steps=self.warmup_steps, min_lr_ratio=self.min_lr_ratio,
                           weight_decay=self.weight_decay, betas=(0.9, 0.95),
                           grad_clip=self.grad_clip,
                           seed=self.seed * 1000 + (1 if stage == "sft" else 2))  # fmt: skip

    @property
    def config_hash(self) -> str:
        """sha256(config JSON + :data:`ALIGN_CODE_VERSION` + the fingerprint of the alignment
        data it trains and gates on, ``curriculum.alignment_fingerprint``), first 10 hex digits: a changed
        curriculum is a new build, never a stale one reused."""
        blob = (json.dumps(dataclasses.asdict(self), sort_keys=True) + "\n" + ALIGN_CODE_VERSION
                + "\n" + alignment_fingerprint(self.corpus_seed))  # fmt: skip
        return hashlib.sha256(blob.encode()).hexdigest()[:10]


def _train_stage(stage: str, model: Any, tok: Any, items: list[Any], cfg: PretrainedAlignConfig,
                 ref: Any = None, log: Callable[[str], None] | None = None) -> tuple[list[dict[str, Any]], Any]:  # fmt: skip
    """Train ``model`` in place on ``items`` for ``cfg.budget(stage)``; returns (the curve:
    stage, step, lr, train_loss per step; the AdamW optimiser, whose moments are the run's)."""
    budget = cfg.budget(stage)
    # the frozen reference scores every triple once, in length-sorted batches
    ref_lp = reference_logprobs(ref, tok, items, cfg.max_length) if stage == "dpo" else None

    def loss(idx: list[int], i: int) -> torch.Tensor:
        batch = [items[j] for j in idx]
        if ref_lp is None:
            return sft_batch_loss(model, tok, batch, cfg.max_length)
        return dpo_batch_loss(model, None, tok, batch, cfg.max_length, cfg.dpo_beta, ref_lp[idx])

    def on_step(step: int, read: Callable[[], float]) -> None:
        if log is not None and step % max(1, budget.steps // 10) == 0:
            log(f"{stage} step {step}/{budget.steps}: loss {read():.4f}")

    lengths = training_lengths(stage, tok, items, cfg.max_length) if cfg.length_grouped else None
    run = train_steps(model, loss, len(items), budget, on_step=on_step, lengths=lengths)
    model.eval()
    rows = [{"stage": stage, "step": i + 1, "lr": lr, "train_loss": v}
            for i, (lr, v) in enumerate(zip(run.lrs, run.losses, strict=True))]  # fmt: skip
    return rows, run.optimizer


def align_pretrained(model: Any, tokenizer: Any, config: PretrainedAlignConfig,
                     data: AlignmentData | None = None, log: Callable[[str], None] | None = None,
                     on_stage: Callable[[str, Any, Any], None] | None = None) -> dict[str, Any]:  # fmt: skip
    """SFT a copy of ``model`` on ``data.sft_train``, then DPO a copy of ``@sft`` on ``data.dpo_train``
    against the frozen ``@sft``. ``model`` is left unchanged.

    data: default the curriculum's (:func:`lamina.sources.organisms.curriculum.generate_curriculum`
    with ``config.corpus_seed``). The tokenizer needs an ``eos_token_id``.
    -> {"sft": model, "dpo": model, "curve": [{"stage", "step", "lr", "train_loss"}],
    "trainable": names of the trained tensors, "optimizers": {"sft": AdamW, "dpo": AdamW},
    "epochs": {"sft": passes over data.sft_train, "dpo": over data.dpo_train}}.
    on_stage(stage, model, optimizer): called when a stage ends (e.g. to save its Adam state);
    its optimiser is then dropped ("optimizers" holds None), so that two stages' moments are
    never in memory at once.
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
    curve, opt_sft = _train_stage("sft", sft, tokenizer, [(x.prompt, x.target) for x in data.sft_train],
                                  config, log=log)  # fmt: skip
    if on_stage is not None:
        on_stage("sft", sft, opt_sft)
        opt_sft = None
    ref = copy.deepcopy(sft).eval().requires_grad_(False)
    dpo = copy.deepcopy(sft)
    for p, q in zip(dpo.parameters(), sft.parameters(), strict=True):
        p.requires_grad_(q.requires_grad)
    rows, opt_dpo = _train_stage("dpo", dpo, tokenizer, [t.as_tuple() for t in data.dpo_train], config,
                                 ref=ref, log=log)  # fmt: skip
    if on_stage is not None:
        on_stage("dpo", dpo, opt_dpo)
        opt_dpo = None
    del ref
    epochs = {"sft": config.budget("sft").epochs(len(data.sft_train)),
              "dpo": config.budget("dpo").epochs(len(data.dpo_train))}  # fmt: skip
    return {"sft": sft, "dpo": dpo, "curve": curve + rows, "trainable": trainable,
            "optimizers": {"sft": opt_sft, "dpo": opt_dpo}, "epochs": epochs}  # fmt: skip


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


ADAM_FILE = "{stage}.adam.safetensors"
"""The AdamW state an aligned build keeps per stage, beside ``<stage>.safetensors`` (so its
manifest covers it): one safetensors file whose tensors are ``exp_avg/<parameter name>`` and
``exp_avg_sq/<parameter name>`` (the parameter's shape, fp32) for every trained parameter, and
whose metadata (string values) are ``step`` (AdamW steps taken), ``beta1``, ``beta2`` and
``eps``. Written by :func:`save_adam_state`, read by
:func:`lamina.weights.aligned.aligned_optimizer_state`."""


def save_adam_state(path: Path, model: Any, optimizer: torch.optim.Optimizer) -> Path:
    """Write ``optimizer``'s AdamW state of ``model``'s parameters to ``path`` in the format
    of :data:`ADAM_FILE` (parameters without state, the frozen ones, are skipped). -> ``path``."""
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    step = 0
    for name, p in model.named_parameters():
        st = optimizer.state.get(p)
        if not st:
            continue
        tensors[f"exp_avg/{name}"] = st["exp_avg"].detach().float().cpu().contiguous()
        tensors[f"exp_avg_sq/{name}"] = st["exp_avg_sq"].detach().float().cpu().contiguous()
        step = int(st["step"])
    group = optimizer.param_groups[0]
    meta = {"step": str(step), "beta1": str(group["betas"][0]), "beta2": str(group["betas"][1]),
            "eps": str(group["eps"])}  # fmt: skip
    save_file(tensors, str(path), metadata=meta)
    return Path(path)


def build_aligned(name: str, config: PretrainedAlignConfig, root: Path,
                  log: Callable[[str], None] = print) -> Path:  # fmt: skip
    """Align the model ``name`` (:func:`lamina.sources.models.load_model`) once into
    ``root/<name>-<config hash>/``: ``{sft,dpo}.safetensors`` (every trained tensor),
    ``{sft,dpo}.adam.safetensors`` (:func:`save_adam_state`), ``curve.json``, ``gates.json`` and
    ``gates_items.csv`` (:func:`lamina.sources.organisms.gates.measure_stages` of the base,
    @sft and @dpo) and ``build.json`` (config, steps, epochs, seconds: load + training, and in
    all), written to a temporary folder and renamed; idempotent. Clocks are read after the
    device's queued work (:func:`lamina.sources.organisms.loop.synchronize`). A build
    ends with ``lamina-manifest.json`` (sizes, SHA-256, the trained tensors' names); one whose
    files are missing or differ from its manifest (:func:`aligned_damage`) is rebuilt with a
    warning, never used."""
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
        t_load = time.time() - t0
        data = generate_curriculum(config.corpus_seed, 1).alignment
        if data is None:
            raise RuntimeError("the curriculum produced no alignment data")
        t_save = 0.0

        def save(stage: str, model: Any, optimizer: Any) -> None:
            nonlocal t_save
            t = time.time()
            state = {n: p.detach().contiguous().cpu() for n, p in model.named_parameters()
                     if p.requires_grad}  # fmt: skip
            save_file(state, str(tmp / f"{stage}.safetensors"))
            save_adam_state(tmp / ADAM_FILE.format(stage=stage), model, optimizer)
            t_save += time.time() - t

        out = align_pretrained(base, tok, config, data, log=log, on_stage=save)
        synchronize(model_device(base))
        t_train = time.time() - t0 - t_load - t_save
        gates = measure_stages({"base": base, "sft": out["sft"], "dpo": out["dpo"]}, tok,
                               gate_sample(data, config.gate_items, config.seed),
                               config.max_length, config.seed)  # fmt: skip
        (tmp / "curve.json").write_text(json.dumps(out["curve"]))
        write_gates(tmp / "gates.json", gates)
        synchronize(model_device(base))
        (tmp / "build.json").write_text(json.dumps({
            "model": name, "config": dataclasses.asdict(config), "config_hash": config.config_hash,
            "code_version": ALIGN_CODE_VERSION, "epochs": out["epochs"],
            "steps": {"sft": config.sft_steps, "dpo": config.dpo_steps},
            "examples": {"sft": len(data.sft_train), "dpo": len(data.dpo_train)},
            "load_seconds": round(t_load, 1), "train_seconds": round(t_train, 1),
            "seconds": round(time.time() - t0, 1),
            "device": str(model_device(base)), "torch_threads": torch.get_num_threads()}, indent=1))  # fmt: skip
        write_manifest(tmp, {"kind": "aligned build", "model": name, "trained": out["trainable"]})
        if target.exists():
            shutil.rmtree(target)
        os.rename(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


ALIGNED_FILES = ("sft.safetensors", "dpo.safetensors", "curve.json", "gates.json", "build.json")
STAGES = ("sft", "dpo")


def _partial(path: Path, held: set[str], want: set[str], known_from: str = "") -> str | None:
    """Why the stage file ``path``, holding the tensors ``held``, is not the ``want`` its build
    trained (names missing or extra), or None."""
    missing, extra = sorted(want - held), sorted(held - want)
    if not (missing or extra or not held):
        return None
    return (f"{path}: holds {len(held)} tensors, not the {len(want)} its build trained (missing: "
            f"{missing[:5]}; extra: {extra[:5]}{known_from}): a partial or foreign file")  # fmt: skip


def _legacy_damage(folder: Path, stage: str, held: set[str]) -> str | None:
    """Why ``<folder>/<stage>.safetensors`` (holding ``held``) of a build without a manifest
    is not its whole stage, or None. Both stages train the same tensors, so the other stage's
    file and the Adam-state files (:data:`ADAM_FILE`, ``exp_avg/<name>``) say which; when none
    of them is readable the file cannot be verified, and that is the error, naming it."""
    path, other = folder / f"{stage}.safetensors", "dpo" if stage == "sft" else "sft"
    want: set[str] = set()
    read, unread = [], []
    for name in (f"{other}.safetensors", *(ADAM_FILE.format(stage=s) for s in (stage, other))):
        try:
            table = safetensors_table(folder / name)
        except ManifestError:
            unread.append(f"{name} is {'unreadable' if (folder / name).exists() else 'missing'}")
            continue
        want |= {n.split("/", 1)[-1] for n in table} if "adam" in name else set(table)
        read.append(name)
    if not read:
        return (f"{path}: cannot be verified: its build has no {MANIFEST}, and no other file "
                f"says which tensors it should hold ({', '.join(unread)}); rebuild the build")  # fmt: skip
    return _partial(path, held, want | held, f"; known from {', '.join(read)}")


def _own_damage(folder: Path, path: Path) -> str | None:
    """What is wrong with the stage file ``path`` against its own entry in its build's
    manifest (missing, size, tensor table; not its SHA-256), or None (also when the manifest
    is unreadable: :func:`check_lamina_folder` says so)."""
    try:
        entry = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["files"][path.name]
        if not path.is_file():
            return "listed in its folder's manifest but missing"
        size = path.stat().st_size
        if size != entry.get("size"):
            return (f"has {size} bytes, its manifest says {entry.get('size')} (truncated, "
                    "replaced or an interrupted copy)")  # fmt: skip
        if "tensors" in entry and safetensors_table(path) != entry["tensors"]:
            return "its tensor table differs from its manifest's"
    except (OSError, ValueError, KeyError, TypeError, ManifestError):
        return None
    return None


def _checked_manifest(folder: Path, path: Path) -> dict[str, Any] | None:
    """:func:`check_lamina_folder` of the build, the stage file ``path`` first: when it is
    damaged itself, the error names it before any other damage of its build."""
    try:
        return check_lamina_folder(folder, "aligned build")
    except ModelFileError as exc:
        own = _own_damage(folder, path)
        if own is None or str(exc).startswith(f"aligned build: {path}:"):
            raise
        rest = str(exc).removeprefix("aligned build: ")
        raise ModelFileError(f"aligned build: {path}: {own}; and {rest}") from None


def aligned_damage(folder: Path) -> str | None:
    """Why the aligned build ``folder`` cannot be used (a file missing, a stage file damaged,
    bytes that differ from its manifest: :func:`lamina.core.manifest.check_folder`), each
    naming its file, or None when it can. A build written before manifests (no
    ``lamina-manifest.json``) is usable when its files are all there and each stage file holds
    every tensor the build's other files say it trained (one warning; :func:`aligned_state`)."""
    missing = [f for f in ALIGNED_FILES if not (folder / f).is_file()]
    parts = [f"files missing: {missing}"] if missing else []
    try:
        legacy = check_lamina_folder(folder, "aligned build") is None
    except ModelFileError as exc:
        legacy = False
        if not any(str(exc).startswith(f"aligned build: {folder / m}:") for m in missing):
            parts.append(str(exc))
    said = " ".join(parts)
    for stage in STAGES:
        path = folder / f"{stage}.safetensors"
        if not path.is_file() or f"{path}:" in said:
            continue
        if legacy:
            try:
                why = _legacy_damage(folder, stage, set(safetensors_table(path)))
            except ManifestError as exc:
                why = str(exc)
        else:
            own = _own_damage(folder, path)
            why = None if own is None else f"{path}: {own}"
        parts += [why] if why else []
    return "; ".join(parts) or None


def aligned_state(folder: Path, stage: str) -> dict[str, torch.Tensor]:
    """The tensors ``stage`` (``"sft"`` or ``"dpo"``) trained, from ``<folder>/<stage>.safetensors``,
    checked: the folder against its manifest (this file's own entry first), and the file
    against the trained tensors the manifest lists (a build without a manifest: against the
    tensors its other stage's file and Adam-state files name, :func:`_legacy_damage`).
    :class:`lamina.sources.model_files.ModelFileError` names this file and the tensors missing
    or extra, or why it cannot be verified: never a partial state."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(folder)
    path = folder / f"{stage}.safetensors"
    manifest = _checked_manifest(folder, path)
    try:
        state = load_file(str(path))
    except (OSError, SafetensorError) as exc:
        raise ModelFileError(f"{path}: unreadable ({exc.__class__.__name__}: {exc})") from exc
    if manifest is not None:
        want = set(manifest.get("trained") or manifest["files"][path.name]["tensors"])
        why = _partial(path, set(state), want)
    else:  # before manifests: both stages train the same tensors
        why = _legacy_damage(folder, stage, set(state))
    if why is not None:
        raise ModelFileError(why)
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
        with threads():  # $LAMINA_NUM_THREADS, e.g. 1 for a long build on shared cores
            folder = build_aligned(name, PretrainedAlignConfig(), args.root)
        gates = json.loads((folder / "gates.json").read_text())
        print(folder)
        for stage in ("sft", "dpo"):
            print(f"  @{stage}: {gates[stage]['reason']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
