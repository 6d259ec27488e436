"""Build one organism from nothing into a folder: corpus, tokenizer, pretraining, alignment, evaluation.

Folder layout (``<root>/<name>-<hash>/``)::

    build.json                     config, corpus card, provenance, elapsed seconds
    evaluation.json                perplexities and accuracies (see lamina.organisms.evaluate)
    tokenizer/                     the trained tokenizer (also copied into every checkpoint)
    checkpoints/step-N/            pretraining checkpoints (HF folder + optimizer state)
    stages/{lm,sft,dpo}/           alignment stages (HF folder + optimizer state)
    curves/{pretrain,lm,sft,dpo}.{json,csv}
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import torch

from lamina.organisms.checkpoints import write_json
from lamina.organisms.configs import ORGANISMS_CODE_VERSION, OrganismConfig
from lamina.organisms.corpus import load_corpus
from lamina.organisms.evaluate import evaluate_models
from lamina.organisms.tokenizer import encode_stream, save_tokenizer, train_tokenizer
from lamina.organisms.train import fixed_windows, make_model, run_all

BUILD_MARKER = "build.json"


def num_threads(cfg: OrganismConfig) -> int:
    """Threads for training: ``$LAMINA_NUM_THREADS``; else 1 for micro models (tiny matrices
    gain nothing from threads and suffer most when the CPUs are shared); else all CPUs."""
    if "LAMINA_NUM_THREADS" in os.environ:
        return int(os.environ["LAMINA_NUM_THREADS"])
    return 1 if cfg.d_model < 64 else (os.cpu_count() or 1)


def build_into(
    cfg: OrganismConfig, folder: Path, progress: bool = True, log: Callable[[str], None] = print
) -> None:
    """Train ``cfg`` from nothing, writing everything into ``folder`` (which must not exist)."""
    from lamina.provenance import provenance

    t0 = time.time()
    old_threads = torch.get_num_threads()
    torch.set_num_threads(num_threads(cfg))
    try:
        folder.mkdir(parents=True)
        corpus = load_corpus(cfg)
        tok = train_tokenizer(corpus.train, cfg.vocab_size)
        save_tokenizer(tok, folder / "tokenizer")
        streams = {k: encode_stream(tok, getattr(corpus, k)) for k in ("train", "val", "heldout")}
        log(
            f"{cfg.name}: vocab {len(tok)}, tokens train {len(streams['train']):,} "
            f"val {len(streams['val']):,} heldout {len(streams['heldout']):,}"
        )
        t_pre = time.time()
        model = make_model(cfg, tok)
        models = run_all(cfg, model, tok, corpus, streams, folder, progress, log)
        t_train = time.time() - t_pre
        val = fixed_windows(streams["val"], cfg.n_val_windows, cfg.context)
        ev = evaluate_models(
            models,
            tok,
            val,
            streams["train"],
            corpus.sft_eval[: cfg.max_eval_items],
            corpus.dpo_eval[: cfg.max_eval_items],
            cfg.context,
        )
        write_json(folder / "evaluation.json", ev)
        final = ev["models"]["final"]
        log(
            f"{cfg.name}: val ppl {final['val_perplexity']:.1f} (unigram "
            f"{ev['unigram_val_perplexity']:.1f}); sft acc "
            + ", ".join(f"{k} {v['sft_accuracy']:.2f}" for k, v in ev["models"].items())
            + "; dpo acc "
            + ", ".join(f"{k} {v['dpo_accuracy']:.2f}" for k, v in ev["models"].items())
        )
        card = dict(corpus.card)
        card["tokens"] = {k: len(v) for k, v in streams.items()}
        write_json(
            folder / BUILD_MARKER,
            provenance(
                organism=cfg.name,
                config=cfg.to_json(),
                config_hash=cfg.config_hash,
                code_version=ORGANISMS_CODE_VERSION,
                corpus=card,
                threads=torch.get_num_threads(),
                train_seconds=round(t_train, 1),
                elapsed_seconds=round(time.time() - t0, 1),
            ),
        )
    finally:
        torch.set_num_threads(old_threads)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def build_atomically(
    cfg: OrganismConfig, target: Path, progress: bool = True, log: Callable[[str], None] = print
) -> Path:
    """Build into a temporary sibling of ``target`` and rename it into place; idempotent."""
    if (target / BUILD_MARKER).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".tmp-{target.name}-*"):  # left by a killed build
        pid = stale.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    tmp = target.parent / f".tmp-{target.name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        build_into(cfg, tmp, progress, log)
        if (target / BUILD_MARKER).is_file():  # another process finished first
            return target
        if target.exists():  # a stale, incomplete folder (no marker)
            shutil.rmtree(target)
        os.rename(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
