"""Layer importance that orders the growth phases: skip ablation of the organism, of a brief
pretraining of the trained architecture, or of a real pretrained model mapped by relative depth.

Importance of layer l is the skip-ablation perplexity change (``lamina.anatomy.ablation_sweep``,
surgery "skip")::

    delta_pct(l) = 100 (ppl with layer l skipped / clean ppl - 1)        (percent)

A real model of R layers is mapped onto the trained model's L layers by relative depth
(:func:`depth_map`): trained layer l covers the depth span [l/L, (l+1)/L), real layer r the
span [r/R, (r+1)/R), and the mapped importance of l is the overlap-weighted mean of the
delta_pct of the real layers whose spans overlap l's (a reimplementation choice).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import torch
from scipy import stats

from lamina.anatomy.ablation import ablation_sweep
from lamina.anatomy.growth import train_with_schedule, uniform_schedule, warmup_cosine
from lamina.chapters.growth_training.config import REAL_MODELS, GrowthConfig
from lamina.chapters.layer_anatomy.documents import organism_heldout
from lamina.chapters.runtime import corpus_windows
from lamina.sources.gguf_models import installed_offline, resolve_device
from lamina.sources.models import get_adapter, load_model
from lamina.sources.organisms import ORGANISMS
from lamina.sources.organisms.configs import hf_config

__all__ = [
    "build_model",
    "depth_map",
    "layer_importance",
    "rank_correlations",
    "real_importance",
    "real_label",
    "resolve_real_models",
]


def build_model(config: GrowthConfig, tokenizer: Any, seed: int) -> torch.nn.Module:
    """A freshly initialised causal LM of the config's architecture (seeded)."""
    from transformers import AutoModelForCausalLM

    base = ORGANISMS[config.organism.partition("@")[0]]
    cfg = base.replace(
        arch=config.arch,
        n_layers=config.n_layers,
        d_model=config.d_model,
        n_heads=config.n_heads,
        n_kv_heads=config.n_kv_heads,
        d_ff=config.d_ff,
        context=config.context,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(
            hf_config(cfg, len(tokenizer), tokenizer.eos_token_id)
        )
    # initialised on the CPU (the same weights on every device), trained on the GPU when present
    return model.to(resolve_device("auto")).train()


def layer_importance(
    config: GrowthConfig, tokenizer: Any, train: torch.Tensor, val: torch.Tensor
) -> tuple[np.ndarray, str]:
    """(L,) skip-ablation delta_pct per layer and a note saying where it was measured."""

    if config.importance == "organism":
        model, tok = load_model(config.organism)
        n = model.config.num_hidden_layers if hasattr(model.config, "num_hidden_layers") else None
        if n != config.n_layers:
            raise ValueError(
                f"importance='organism' needs {config.n_layers} layers; {config.organism} has {n}"
            )
        ids = corpus_windows(config.organism, tok, "val", config.importance_tokens, 128)
        where = f"skip ablation of {config.organism} on {ids.numel():,} validation tokens"
    else:
        model = build_model(config, tokenizer, 10_000)
        train_with_schedule(
            model,
            uniform_schedule(config.importance_steps),
            train,
            val,
            lr=config.lr,
            batch_size=config.batch_size,
            seed=10_000,
            eval_every=config.importance_steps,
            lr_scale=warmup_cosine(
                config.importance_steps,
                round(config.warmup_fraction * config.importance_steps),
                config.min_lr_ratio,
            ),
        )
        ids = val[: max(1, -(-config.importance_tokens // val.shape[1]))]
        where = (
            f"skip ablation after {config.importance_steps} uniform steps of this "
            f"architecture (seed 10000), on {ids.numel():,} validation tokens"
        )
    df = ablation_sweep(model, ids, ["skip"], n_bootstrap=0)
    return df.sort_values("layer")["delta_pct"].to_numpy(), where


def depth_map(values: np.ndarray, n_layers: int) -> np.ndarray:
    """(R,) per-layer values of an R-layer model -> (n_layers,) by relative depth.

    mapped[l] = sum_r w[l, r] values[r] / sum_r w[l, r], with w[l, r] the length of the
    overlap of [l/L, (l+1)/L) and [r/R, (r+1)/R) (L = n_layers). R = L is the identity; a
    real model deeper than L averages about R/L of its layers into each trained layer."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"values must be a non-empty 1-D array, got shape {v.shape}")
    if n_layers < 1:
        raise ValueError(f"n_layers must be >= 1, got {n_layers}")
    r = v.size
    edges_l = np.arange(n_layers + 1) / n_layers  # (L + 1,)
    edges_r = np.arange(r + 1) / r  # (R + 1,)
    lo = np.maximum(edges_l[:-1, None], edges_r[None, :-1])  # (L, R)
    hi = np.minimum(edges_l[1:, None], edges_r[None, 1:])  # (L, R)
    w = np.clip(hi - lo, 0.0, None)
    return cast(np.ndarray, (w @ v) / w.sum(axis=1))


def real_label(name: str) -> str:
    """A short label of a model name or folder: the folder's (or file's) name for a path."""
    text = str(name).rstrip("/")
    return Path(text).name if ("/" in text or Path(text).exists()) else text


def resolve_real_models(config: GrowthConfig) -> tuple[list[str], list[str]]:
    """(models, notes): ``config.real_models`` as given; None -> the installed
    :data:`REAL_MODELS` (a missing wheel is skipped with a note), or none in quick mode."""
    if config.real_models is not None:
        labels = [real_label(m) for m in config.real_models]
        if len(set(labels)) != len(labels):
            raise ValueError(f"real_models have clashing labels {labels}; rename the folders")
        return list(config.real_models), []
    if config.quick:
        return [], ["Real-model importance orders: none in quick mode (set real_models)."]
    return installed_offline(REAL_MODELS)


def real_importance(
    name: str, corpus: str, n_tokens: int, seq_len: int, seed: int = 0
) -> tuple[np.ndarray, dict[str, Any]]:
    """Skip-ablation importance of every layer of a pretrained causal LM.

    -> ((R,) delta_pct in percent, info): the held-out text is
    ``lamina.chapters.layer_anatomy.documents.organism_heldout`` of ``corpus`` (passages of
    its held-out plays and curriculum documents in a seeded shuffle) tokenised by the model's
    own tokenizer, ceil(n_tokens / seq_len) windows of ``seq_len`` tokens (capped at the
    model's context). info: n_layers, n_tokens, n_windows, n_documents, baseline_ppl,
    load_s, sweep_s."""
    t0 = time.perf_counter()
    model, tok = load_model(name, dtype=torch.float32)
    load_s = time.perf_counter() - t0
    n_layers = get_adapter(model).n_layers(model)
    max_pos = getattr(model.config, "max_position_embeddings", None) or seq_len
    seq = min(seq_len, int(max_pos))
    held = organism_heldout(corpus, tok, max(n_tokens, seq), seq, seed)
    df = ablation_sweep(model, held.windows, ["skip"], n_bootstrap=0, batch_size=8)
    delta = df.sort_values("layer")["delta_pct"].to_numpy(float)
    if delta.shape != (n_layers,) or not np.all(np.isfinite(delta)):
        raise RuntimeError(f"{name}: skip sweep gave {delta.shape} values, not {n_layers} finite")
    info = held.summary()
    del model
    return delta, {
        "n_layers": n_layers,
        "n_tokens": info["n_tokens"],
        "n_windows": info["n_windows"],
        "n_documents": info["n_documents"],
        "baseline_ppl": float(df.attrs["baseline_ppl"]),
        "load_s": load_s,
        "sweep_s": float(df.attrs["seconds"]),
    }


def rank_correlations(profiles: dict[str, np.ndarray]) -> pd.DataFrame:
    """Spearman rank correlation of every pair of importance profiles of equal length (the
    trained model's L layers): columns a, b, rho, p (two-sided, scipy), n_layers. NaN where
    a profile is constant."""
    names = list(profiles)
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            x, y = np.asarray(profiles[a], float), np.asarray(profiles[b], float)
            if x.shape != y.shape:
                raise ValueError(f"profiles {a!r} {x.shape} and {b!r} {y.shape} differ in length")
            flat = np.ptp(x) == 0 or np.ptp(y) == 0
            res = None if flat else stats.spearmanr(x, y)
            rows.append(
                {
                    "a": a,
                    "b": b,
                    "rho": float("nan") if res is None else float(res.statistic),
                    "p": float("nan") if res is None else float(res.pvalue),
                    "n_layers": int(x.size),
                }
            )
    return pd.DataFrame(rows, columns=["a", "b", "rho", "p", "n_layers"])
