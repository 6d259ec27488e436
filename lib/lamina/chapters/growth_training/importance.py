"""The models of a Growth Training run: the trained architecture (:func:`build_model`), the
layer importance that orders its phases (:func:`layer_importance`: the organism's, or a brief
pretraining's), and the real models whose mapped importance orders extra runs
(:func:`resolve_real_models`; the mapping is :mod:`lamina.anatomy.growth_orders`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from lamina.anatomy.ablation import ablation_sweep
from lamina.anatomy.growth import train_with_schedule, uniform_schedule, warmup_cosine
from lamina.anatomy.growth_orders import real_label
from lamina.chapters.growth_training.config import CHAPTER, GrowthConfig
from lamina.chapters.models import chapter_models
from lamina.chapters.runtime import corpus_windows
from lamina.sources.gguf_models import resolve_device
from lamina.sources.models import load_model
from lamina.sources.organisms import ORGANISMS
from lamina.sources.organisms.configs import hf_config

__all__ = ["build_model", "layer_importance", "resolve_real_models"]


def build_model(config: GrowthConfig, tokenizer: Any, seed: int) -> torch.nn.Module:
    """A freshly initialised causal LM of the config's architecture (seeded)."""
    from transformers import AutoModelForCausalLM

    base = ORGANISMS[config.model.partition("@")[0]]
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
        model, tok = load_model(config.model)
        n = model.config.num_hidden_layers if hasattr(model.config, "num_hidden_layers") else None
        if n != config.n_layers:
            raise ValueError(
                f"importance='organism' needs {config.n_layers} layers; {config.model} has {n}"
            )
        ids = corpus_windows(config.model, tok, "val", config.importance_tokens, 128)
        where = f"skip ablation of {config.model} on {ids.numel():,} validation tokens"
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


def resolve_real_models(config: GrowthConfig) -> tuple[list[str], list[str]]:
    """(models, notes): ``config.real_models`` as given; None -> the installed
    the registry record's default models (a missing wheel is skipped with a note), or none in quick mode."""
    if config.real_models is not None:
        labels = [real_label(m) for m in config.real_models]
        if len(set(labels)) != len(labels):
            raise ValueError(f"real_models have clashing labels {labels}; rename the folders")
        return list(config.real_models), []
    if config.quick:
        return [], ["Real-model importance orders: none in quick mode (set real_models)."]
    return chapter_models(CHAPTER, "default")
