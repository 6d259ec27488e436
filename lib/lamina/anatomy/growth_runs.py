"""The runs of paper 3's Growth Training experiment: the trained architecture
(:func:`build_model`), its tokenizer (:func:`training_tokenizer`), the layer importance that
orders its phases (:func:`layer_importance`: the organism's, or a brief pretraining's), the
schedules (:func:`schedules_for`), the orders mapped from real models (:func:`real_orders`; the
mapping is :mod:`lamina.anatomy.growth_orders`), and every schedule trained for every seed
(:func:`train_runs`). The chapter (:mod:`lamina.chapters.growth_training`) runs them with its
config, any object with the fields of :class:`GrowthSetup`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, cast

import numpy as np
import pandas as pd
import torch

from lamina.anatomy.ablation import ablation_sweep
from lamina.anatomy.growth import (
    Phase,
    growth_schedule,
    train_with_schedule,
    uniform_schedule,
    warmup_cosine,
)
from lamina.anatomy.growth_orders import (
    depth_map,
    random_order,
    rank_correlations,
    real_importance,
    real_label,
)
from lamina.anatomy.windows import corpus_windows
from lamina.sources import organisms
from lamina.sources.gguf_models import resolve_device
from lamina.sources.models import load_model
from lamina.sources.organisms import ORGANISMS
from lamina.sources.organisms.configs import hf_config
from lamina.sources.organisms.corpus import load_corpus
from lamina.sources.organisms.tokenizer import train_tokenizer

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["GrowthSetup", "build_model", "importance_table", "layer_importance", "real_orders",
           "schedule_table", "schedules_for", "train_runs", "training_tokenizer"]  # fmt: skip


class GrowthSetup(Protocol):
    """The parameters the runs read (the fields of the chapter's ``GrowthConfig``, which
    documents them): the corpus organism ``model``; the trained architecture; the schedules and
    their budget; the importance measurement; the optimiser; the paired seeds."""

    model: str
    vocab_size: int | None
    arch: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    context: int
    total_steps: int
    n_groups: int
    final_fraction: float
    train_embeddings: bool
    cumulative: bool
    importance: str
    importance_steps: int
    importance_tokens: int
    schedules: list[str]
    real_tokens: int
    real_seq_len: int
    carry_optimizer: bool
    lr: float
    warmup_fraction: float
    min_lr_ratio: float
    batch_size: int
    eval_every: int
    seeds: list[int]


def build_model(
    config: GrowthSetup, tokenizer: PreTrainedTokenizerBase, seed: int
) -> torch.nn.Module:
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


def training_tokenizer(config: GrowthSetup) -> PreTrainedTokenizerBase:
    """The trained model's tokenizer: a byte-level BPE of ``config.vocab_size`` entries trained
    on the organism corpus's train split, or (None) the built organism's own tokenizer."""
    if config.vocab_size is None:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(organisms.resolve(config.model)))
        return cast("PreTrainedTokenizerBase", tok)
    name = config.model.partition("@")[0]
    if name not in ORGANISMS:
        raise ValueError(f"corpus {config.model!r} is not a registered organism")
    return train_tokenizer(load_corpus(ORGANISMS[name]).train, config.vocab_size)


def layer_importance(
    config: GrowthSetup, tokenizer: PreTrainedTokenizerBase, train: torch.Tensor, val: torch.Tensor
) -> tuple[np.ndarray, str]:
    """(L,) skip-ablation delta_pct per layer and a note saying where it was measured."""

    if config.importance == "organism":
        model, loaded = load_model(config.model)
        tok = cast("PreTrainedTokenizerBase", loaded)
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


def schedules_for(
    config: GrowthSetup,
    importance: np.ndarray,
    extra_orders: Mapping[str, np.ndarray] | None = None,
    seed: int | None = None,
) -> dict[str, list[Phase]]:
    """The schedules named in ``config.schedules``, all of ``config.total_steps`` steps, then
    one growth schedule per ``extra_orders`` entry (name -> (L,) importance), same phases.
    The random-order control's order is :func:`random_order` of ``seed`` (None: the first of
    ``config.seeds``), so each training seed draws its own."""
    seed = config.seeds[0] if seed is None else seed
    growth_steps = round(config.total_steps * (1 - config.final_fraction))
    per_phase = growth_steps // config.n_groups
    final = config.total_steps - per_phase * config.n_groups
    orders: dict[str, np.ndarray] = {}
    out: dict[str, list[Phase]] = {}
    for name in config.schedules:
        if name == "uniform":
            out[name] = uniform_schedule(config.total_steps)
        else:
            orders[name] = {
                "growth": importance,
                "reverse": -importance,
                "random": random_order(len(importance), seed),
            }[name]
    for name, order in (extra_orders or {}).items():
        if len(order) != config.n_layers:
            raise ValueError(f"order {name!r} has {len(order)} layers, not {config.n_layers}")
        orders[name] = np.asarray(order, float)
    for name, order in orders.items():
        out[name] = growth_schedule(
            order,
            config.n_groups,
            per_phase,
            final,
            train_embeddings=config.train_embeddings,
            cumulative=config.cumulative,
        )
    return out


def real_orders(
    config: GrowthSetup, models: list[str], reference: np.ndarray, reference_name: str
) -> tuple[dict[str, np.ndarray], pd.DataFrame, pd.DataFrame, list[str]]:
    """The layer orders of the real ``models``: their skip-ablation importance
    (:func:`lamina.anatomy.growth_orders.real_importance`) mapped onto the trained depth.
    -> ({label: (L,) mapped importance}, native profiles table (source, layer, n_layers,
    delta_pct, depth = (layer + 0.5) / n_layers), rank correlations, notes)."""
    mapped: dict[str, np.ndarray] = {}
    native = [pd.DataFrame({"source": reference_name, "layer": np.arange(config.n_layers),
                            "n_layers": config.n_layers, "delta_pct": reference})]  # fmt: skip
    notes = []
    for name in models:
        label = real_label(name)
        delta, info = real_importance(name, config.model, config.real_tokens, config.real_seq_len)
        mapped[label] = depth_map(delta, config.n_layers)
        native.append(pd.DataFrame({"source": label, "layer": np.arange(len(delta)),
                                    "n_layers": len(delta), "delta_pct": delta}))  # fmt: skip
        notes.append(
            f"Importance of {label}: skip ablation of its {info['n_layers']} layers on "
            f"{info['n_tokens']:,} held-out tokens of the {config.model} corpus "
            f"({info['n_windows']} windows from {info['n_documents']} documents; clean "
            f"perplexity {info['baseline_ppl']:.1f}), mapped onto {config.n_layers} layers by "
            f"relative depth (each trained layer: the overlap-weighted mean delta_pct of the "
            f"{info['n_layers'] / config.n_layers:.2f} real layers in its depth span); load "
            f"{info['load_s']:.0f} s, sweep {info['sweep_s']:.0f} s."
        )
    profiles = pd.concat(native, ignore_index=True)
    profiles["depth"] = (profiles["layer"] + 0.5) / profiles["n_layers"]
    corr = rank_correlations({reference_name: reference, **mapped})
    return mapped, profiles, corr, notes


def train_runs(
    config: GrowthSetup,
    tok: PreTrainedTokenizerBase,
    plans: Mapping[int, Mapping[str, list[Phase]]],
    train: torch.Tensor,
    val: torch.Tensor,
) -> tuple[pd.DataFrame, int, dict[tuple[str, int], str], dict[str, float]]:
    """Every plan of every seed ({seed: {run name: phases}}; ``train``, ``val``: token windows
    (n, context)) -> (curves: :func:`lamina.anatomy.growth.train_with_schedule` rows with run,
    seed and load_avg; parameters of the model; reused {(run, seed): twin}; seconds of training
    per run, over the seeds). Runs of one seed start from the same weights and see the same
    batches; a plan whose phases equal an earlier one's of the same seed reuses its rows."""
    lr_scale = warmup_cosine(
        config.total_steps, round(config.warmup_fraction * config.total_steps), config.min_lr_ratio
    )
    frames: list[pd.DataFrame] = []
    n_params = 0
    reused: dict[tuple[str, int], str] = {}
    t_train: dict[str, float] = {}
    for seed, seed_plans in plans.items():
        done: dict[tuple, pd.DataFrame] = {}
        names: dict[tuple, str] = {}
        for name, phases in seed_plans.items():
            key = tuple((p.steps, tuple(p.layers or ()), p.train_embeddings) for p in phases)
            if key in done:  # same phases, same seed: the same run
                reused[name, seed] = names[key]
                frames.append(done[key].assign(run=name))
                continue
            t1 = time.perf_counter()
            model = build_model(config, tok, seed)
            n_params = sum(p.numel() for p in model.parameters())
            df = train_with_schedule(
                model,
                phases,
                train,
                val,
                lr=config.lr,
                batch_size=config.batch_size,
                seed=seed,
                eval_every=config.eval_every,
                carry_optimizer=config.carry_optimizer,
                lr_scale=lr_scale,
            )
            t_train[name] = t_train.get(name, 0.0) + time.perf_counter() - t1
            # arms run one after another in this process; the load average says what
            # else shared the CPUs while each was timed
            done[key] = df.assign(run=name, seed=seed, load_avg=os.getloadavg()[0])
            names[key] = name
            frames.append(done[key])
    return pd.concat(frames, ignore_index=True), n_params, reused, t_train


def schedule_table(n_layers: int, plans: Mapping[int, Mapping[str, list[Phase]]]) -> pd.DataFrame:
    """One row per (seed, schedule, phase): name, steps, layers (all ``n_layers`` for a phase
    that trains every layer), train_embeddings."""
    return pd.DataFrame(
        [
            {
                "seed": seed,
                "schedule": n,
                "phase": i,
                "name": p.name,
                "steps": p.steps,
                "layers": list(range(n_layers)) if p.layers is None else p.layers,
                "train_embeddings": p.train_embeddings,
            }
            for seed, by_name in plans.items()
            for n, ps in by_name.items()
            for i, p in enumerate(ps)
        ]
    )


def importance_table(
    n_layers: int, ref_name: str, importance: np.ndarray, mapped: Mapping[str, np.ndarray]
) -> pd.DataFrame:
    """The ``importance`` table: per trained layer and order source, delta_pct (the
    reference's own, then each real model's mapped onto the trained depth)."""
    return pd.concat(
        [
            pd.DataFrame(
                {"source": s, "layer": range(n_layers), "delta_pct": v, "mapped": s != ref_name}
            )
            for s, v in {ref_name: importance, **mapped}.items()
        ],
        ignore_index=True,
    )
