"""Build one organism from nothing into a folder: corpus, tokenizer, pretraining, alignment, evaluation.

Folder layout (``<root>/<name>-<hash>/``)::

    build.json                     config, corpus card, 8-gram overlap with the evaluation
                                   prompts, provenance (threads, BLAS, CPU), wall and CPU seconds
    lamina-manifest.json           written last: size and SHA-256 of build.json and
                                   evaluation.json (each checkpoint folder has its own)
    evaluation.json                perplexities and accuracies (see lamina.sources.organisms.evaluate)
                                   and the gates (also in gates.json, per item in gates_items.csv)
    tokenizer/                     the trained tokenizer (also copied into every checkpoint)
    checkpoints/step-N/            pretraining checkpoints (HF folder + optimizer state)
    stages/{lm,sft,dpo}/           alignment stages (HF folder + optimizer state)
    curves/{pretrain,lm,sft,dpo}.{json,csv}
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from lamina.core.manifest import write_manifest
from lamina.core.threads import configured_threads, threads
from lamina.sources.organisms.checkpoints import write_json
from lamina.sources.organisms.configs import ORGANISMS_CODE_VERSION, OrganismConfig
from lamina.sources.organisms.corpus import Corpus, load_corpus
from lamina.sources.organisms.curriculum import homograph_rows
from lamina.sources.organisms.evaluate import evaluate_models
from lamina.sources.organisms.overlap import corpus_overlap, phrase_hits
from lamina.sources.organisms.stages import run_all
from lamina.sources.organisms.tokenizer import encode_stream, save_tokenizer, train_tokenizer
from lamina.sources.organisms.train import fixed_windows, make_model

BUILD_MARKER = "build.json"


TRAIN_THREADS = 1
"""Torch threads for training, whatever the machine: a thread count changes the order of
floating-point sums (gradients of a full organism differ by about 5e-7 relative between 1 and
2 threads), which compounds over training, so builds on machines with different core counts
drifted apart (validation perplexity 99.7 vs 92.0 for one commit). Parallelism comes from
building organisms side by side (``--jobs``)."""


def num_threads(cfg: OrganismConfig) -> int:
    """Threads for training: :data:`TRAIN_THREADS`, or ``$LAMINA_NUM_THREADS`` when set
    (:func:`lamina.core.threads.configured_threads`; an explicit override: recorded in the build
    record's ``torch_threads``, and such a build may differ in the last digits from the default
    one)."""
    return configured_threads() or TRAIN_THREADS


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else :func:`platform.processor`."""
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def compute_environment() -> dict[str, Any]:
    """Threads, BLAS/LAPACK and CPU of this process: what can change a build's numbers."""
    import numpy as np

    try:
        np_cfg: Any = np.show_config(mode="dicts")
        blas = {k: np_cfg.get("Build Dependencies", {}).get(k) for k in ("blas", "lapack")}
    except Exception as exc:  # numpy < 1.26 has no mode="dicts"
        blas = {"error": repr(exc)}
    return {
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "env_threads": {
            k: os.environ.get(k)
            for k in (
                "LAMINA_NUM_THREADS",
                "OMP_NUM_THREADS",
                "MKL_NUM_THREADS",
                "OPENBLAS_NUM_THREADS",
            )
        },  # fmt: skip
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "machine": platform.machine(),
        "numpy_blas": blas,
        "torch_blas": torch.__config__.show(),
        "torch_parallel": torch.__config__.parallel_info(),
        "torch_mkl": torch.backends.mkl.is_available(),
        "torch_mkldnn": torch.backends.mkldnn.is_available(),
    }


def contamination(corpus: Any) -> dict[str, Any]:
    """Word 8-grams shared by ``data/prompts/`` and every text a stage trains on (must be 0),
    and the glosses of ambiguous.jsonl found in that text (must be none)."""
    parts = {
        "pretraining (plays + curriculum, train split)": corpus.train,
        "lm stage (held-out split)": corpus.heldout,
        "sft pairs": [f"{q} {a}" for q, a in corpus.sft],
        "dpo triples": [f"{q} {c} {r}" for q, c, r in corpus.dpo],
    }
    out = corpus_overlap(parts)
    docs = [d for v in parts.values() for d in v]
    out["gloss_hits"] = phrase_hits([r["gloss"] for r in homograph_rows()], docs)
    return out


def alignment_gates(cfg: OrganismConfig, models: dict[str, Any], tok: Any, folder: Path,
                    log: Callable[[str], None] = print) -> dict[str, Any]:  # fmt: skip
    """Behavioural gates (:func:`lamina.sources.organisms.gates.measure_stages`) of the base
    (@final), @sft and @dpo on every held-out instruction item, written to ``folder/gates.json``
    (and ``gates_items.csv``); returns that record."""
    from lamina.sources.organisms.curriculum import generate_curriculum
    from lamina.sources.organisms.gates import measure_stages, write_gates

    data = generate_curriculum(cfg.corpus_seed, 1).alignment
    assert data is not None
    res = measure_stages({"base": models["final"], "sft": models["sft"], "dpo": models["dpo"]},
                         tok, data, cfg.context, cfg.seed)  # fmt: skip
    write_gates(folder / "gates.json", res)
    for stage in ("sft", "dpo"):
        log(f"{cfg.name} @{stage} gate: {res[stage].reason}")
    return json.loads((folder / "gates.json").read_text())


def _evaluate_build(
    cfg: OrganismConfig,
    models: dict[str, Any],
    tok: Any,
    corpus: Corpus,
    streams: dict[str, torch.Tensor],
    folder: Path,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """The evaluation of a build's checkpoints (``evaluation.json``: perplexities, SFT / DPO
    accuracies on held-out items, the alignment gates), logged in one line."""
    val = fixed_windows(streams["val"], cfg.n_val_windows, cfg.context)
    ev = evaluate_models(
        models,
        tok,
        val,
        streams["train"],
        corpus.sft_eval[: cfg.max_eval_items],
        corpus.dpo_eval[: cfg.max_eval_items],
        cfg.context,
        ref=models["sft"],
        beta=cfg.dpo_beta,
    )
    ev["gates"] = alignment_gates(cfg, models, tok, folder, log)
    final = ev["models"]["final"]
    log(
        f"{cfg.name}: val ppl {final['val_perplexity']:.1f} (unigram "
        f"{ev['unigram_val_perplexity']:.1f}); sft acc "
        + ", ".join(f"{k} {v['sft_accuracy']:.2f}" for k, v in ev["models"].items())
        + "; dpo acc "
        + ", ".join(f"{k} {v['dpo_accuracy']:.2f}" for k, v in ev["models"].items())
    )
    return ev


def build_into(
    cfg: OrganismConfig, folder: Path, progress: bool = True, log: Callable[[str], None] = print
) -> None:
    """Train ``cfg`` from nothing, writing everything into ``folder`` (which must not exist).
    ``build.json``'s ``lamina_commit`` is the commit when the build started, whose code it runs
    (a commit made during a long build is ``lamina_commit_at_end``)."""
    from lamina.core.provenance import git_commit, provenance

    git_commit.cache_clear()  # the commit now, not one this process read earlier
    t0, c0, commit = time.time(), time.process_time(), git_commit()
    with threads(num_threads(cfg)):
        folder.mkdir(parents=True)
        corpus = load_corpus(cfg)
        overlap = contamination(corpus)
        log(f"{cfg.name}: evaluation 8-grams in the training text: {overlap['overlap']}")
        tok = train_tokenizer(corpus.train, cfg.vocab_size)
        save_tokenizer(tok, folder / "tokenizer")
        streams = {k: encode_stream(tok, getattr(corpus, k)) for k in ("train", "val", "heldout")}
        log(
            f"{cfg.name}: vocab {len(tok)}, tokens train {len(streams['train']):,} "
            f"val {len(streams['val']):,} heldout {len(streams['heldout']):,}"
        )
        t_pre = time.time()
        model = make_model(cfg, tok)
        stage_seconds: dict[str, float] = {}
        models = run_all(cfg, model, tok, corpus, streams, folder, progress, log, stage_seconds)
        t_train = time.time() - t_pre
        t_eval = time.time()
        ev = _evaluate_build(cfg, models, tok, corpus, streams, folder, log)
        stage_seconds["evaluation"] = round(time.time() - t_eval, 1)
        write_json(folder / "evaluation.json", ev)
        card = dict(corpus.card)
        card["tokens"] = {k: len(v) for k, v in streams.items()}
        git_commit.cache_clear()  # git_commit is cached: read the checkout again
        end = git_commit()
        write_json(
            folder / BUILD_MARKER,
            provenance(
                organism=cfg.name,
                config=cfg.to_json(),
                config_hash=cfg.config_hash,
                code_version=ORGANISMS_CODE_VERSION,
                corpus=card,
                overlap=overlap,
                threads=torch.get_num_threads(),
                environment=compute_environment(),
                train_seconds=round(t_train, 1),
                stage_seconds=stage_seconds,
                elapsed_seconds=round(time.time() - t0, 1),
                cpu_seconds=round(time.process_time() - c0, 1),
                lamina_commit=commit,
                **({} if end == commit else {"lamina_commit_at_end": end}),
            ),
        )
        write_manifest(folder, {"kind": "organism build"})  # last: build.json, evaluation.json


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
