"""Organism configurations: one frozen dataclass per organism, hashed to name its cache folder.

An organism is a small causal LM that lamina trains offline, with its training history.
Two architectures ship:

* ``organism-gpt2``: ``GPT2LMHeadModel`` (LayerNorm, learned positions, GELU MLP).
* ``organism-llama``: ``LlamaForCausalLM`` shaped like SmolLM2 (RMSNorm, RoPE, SwiGLU,
  grouped-query attention, tied embeddings).

Both have 12 layers and d_model 128, with a 128-token context. The ``-micro`` variants
(2 layers, d = 32, a tiny corpus) train in seconds, for tests.

Training seeds: ``seed`` seeds the initialisation, the batch order and the alignment stages;
``corpus_seed`` seeds the curriculum (fixed, so every training seed reads the same corpus and is
scored on the same held-out items). A name ``<organism>~s<k>`` (e.g. ``organism-gpt2~s1``) is
the organism trained with seed k (:func:`organism_config`); ``~s0`` is the plain name.

The cache folder is ``<root>/<name>-<hash>/`` where ``hash`` is the first 10 hex digits of
sha256 over the config's JSON and :data:`ORGANISMS_CODE_VERSION`; bump the version when a
code change alters what a build produces.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from transformers import GPT2Config, LlamaConfig, PretrainedConfig

from lamina.core.bounds import COUNT, POSITIVE, SEED, Bound
from lamina.sources.organisms.curriculum import curriculum_fingerprint

SEED_MARK = "~s"
"""Separates an organism's name from a training seed: ``organism-gpt2~s1``."""

ORGANISMS_CODE_VERSION = "organisms-6"  # 3: no analogy leak, curriculum split by distinct text,
# 1 training thread, instruction-following SFT/DPO data; 4: curriculum split by entity pair,
# stages at 2 SFT epochs / 1 DPO epoch, gates against baselines (issue 34); 5: arithmetic capped
# in the alignment contents, more relation facts, 0.30 QA documents, 0.35 held out (issue 51);
# 6: the refusal taught by DPO alone (a 4-token one), 0.30 people questions, DPO lr 1e-4, the
# key covers the curriculum
"""Part of every config hash: bump when training code changes what a build produces."""


@dataclass(frozen=True)
class OrganismConfig:
    """Everything that determines an organism build (architecture, corpus, tokenizer, training).

    Sizes are in tokens (``context``), sequences (``batch_size``) and optimiser steps.
    Learning rates are peak values of a linear-warmup + cosine schedule.
    Alignment stages (lm, sft, dpo) each run ``align_steps`` steps of ``align_batch_size``
    examples (windows, Q->A pairs or preference pairs): equal step and example budgets; their
    peak learning rates are ``align_lr`` (lm), ``sft_lr`` and ``dpo_lr``. SFT adds the LM loss
    of ``replay_batch_size`` pretraining windows per step, weighted by ``replay_weight``.
    """

    name: str
    arch: str  # "gpt2" | "llama"
    n_layers: int = 12
    d_model: int = 128
    n_heads: int = 4
    n_kv_heads: int = 2  # llama only (grouped-query attention)
    d_ff: int = 512  # gpt2: 4 d; llama: SwiGLU intermediate size
    context: int = 128
    rope_theta: float = 100000.0
    vocab_size: int = 8192
    seed: int = 0  # training seed: init, batch order, alignment stages
    # corpus
    corpus_seed: int = 0  # curriculum generation (fixed across training seeds)
    n_curriculum_docs: int = 20000
    max_chars_per_play: int | None = None  # truncate every play (micro corpora)
    # The first 20,000 characters of each training play (validation and held-out plays stay
    # whole): the curriculum is then about 0.7 of the training tokens (issue 51). Facts are
    # learnt only after about four passes over the curriculum (benchmarks/organism_recall.py:
    # organism-gpt2 on the curriculum alone recalls "The opposite of hot is" -> cold for 0.00 /
    # 0.44 / 0.89 / 0.94 of the opposites after 1.1 / 2.2 / 3.3 / 4.4 passes); at 400 steps on
    # whole plays (one pass, 0.26 curriculum) the base organisms recalled none, and @sft did
    # not beat the content-blind policies.
    train_chars_per_play: int | None = 20000
    max_plays: int | None = None
    # pretraining: 600 steps of 32 x 128 tokens, 2.5M tokens, 4.5 passes over the 548,182
    # training tokens of organisms-5's corpus
    steps: int = 600
    batch_size: int = 32
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 40
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    n_checkpoints: int = 10  # log-spaced in 1..steps, plus step 0
    eval_every: int = 50
    n_val_windows: int = 64
    # alignment stages: equal steps and examples per stage; 161 x 16 = 2,576 examples (issue 34;
    # was 100 x 16): at organisms-5, 8.9 epochs of the 290 SFT items and 4.5 of the 577 DPO
    # triples (at f213eae SFT answered 0.32 of its own training items after 2 epochs)
    align_steps: int = 161
    align_batch_size: int = 16
    align_lr: float = 5e-4  # lm stage
    # pilot (issue 21; step-54 llama base, 100 steps x 16): at sft_lr 1e-4 / 3e-4 the instruction
    # data teaches nothing (gates at chance); from 1e-3 the style and refusal preferences are learnt
    sft_lr: float = 1e-3
    # organisms-6 pilot (the organisms-5 pretrained checkpoints, the refusal taught by DPO alone):
    # at 1e-4 DPO prefers the required response on >= 0.98 of its training triples of every kind
    # and raises the LM loss less than at 3e-4 (val 5.04 / 4.82 against 5.28 / 4.95 nats)
    dpo_lr: float = 1e-4
    replay_batch_size: int = 8  # pretraining windows replayed per SFT step
    replay_weight: float = 1.0
    align_warmup_steps: int = 6
    dpo_beta: float = 0.1
    align_eval_every: int = 20
    max_eval_items: int | None = None  # cap on sft_eval / dpo_eval items scored at the end

    def to_json(self) -> str:
        """Canonical JSON (sorted keys) of all fields."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @property
    def config_hash(self) -> str:
        """sha256(config JSON + code version + the curriculum's content), first 10 hex digits
        (:func:`~lamina.sources.organisms.curriculum.curriculum_fingerprint`)."""
        text = curriculum_fingerprint(self.corpus_seed, self.n_curriculum_docs)
        blob = (self.to_json() + "\n" + ORGANISMS_CODE_VERSION + "\n" + text).encode()
        return hashlib.sha256(blob).hexdigest()[:10]

    @property
    def folder_name(self) -> str:
        """``<name>-<hash>``: the organism's cache folder under the organisms root."""
        return f"{self.name}-{self.config_hash}"

    @property
    def base_name(self) -> str:
        """The registered organism this config derives from (``name`` without ``~s<k>``)."""
        return self.name.split(SEED_MARK)[0]

    def replace(self, **changes: object) -> OrganismConfig:
        """A copy with some fields changed (a new hash, hence a new cache folder)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


# Per architecture: its Hugging Face config class, the Hugging Face name of each
# OrganismConfig field it takes, and its fixed settings.
_HF_ARCH: dict[str, tuple[type[PretrainedConfig], dict[str, str], dict[str, Any]]] = {
    "gpt2": (
        GPT2Config,
        dict(context="n_positions", d_model="n_embd", n_layers="n_layer", n_heads="n_head",
             d_ff="n_inner"),
        # exact GELU: fused, ~30% faster on CPU than gelu_new
        dict(activation_function="gelu", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0),
    ),
    "llama": (
        LlamaConfig,
        dict(d_model="hidden_size", d_ff="intermediate_size", n_layers="num_hidden_layers",
             n_heads="num_attention_heads", n_kv_heads="num_key_value_heads",
             context="max_position_embeddings"),
        dict(hidden_act="silu", initializer_range=0.02, rms_norm_eps=1e-5),
    ),
}  # fmt: skip


def hf_config(cfg: OrganismConfig, vocab_size: int, eos_id: int) -> PretrainedConfig:
    """The Hugging Face config for an organism, given its trained tokenizer's size and EOS id
    (the fields and fixed settings of its architecture's row of ``_HF_ARCH``)."""
    if cfg.arch not in _HF_ARCH:
        raise ValueError(f"unknown organism architecture {cfg.arch!r}; expected 'gpt2' or 'llama'")
    cls, names, fixed = _HF_ARCH[cfg.arch]
    # both architectures: the EOS id also begins and pads sequences; embeddings are tied
    shared: dict[str, Any] = dict(vocab_size=vocab_size, bos_token_id=eos_id, eos_token_id=eos_id,
                                  pad_token_id=eos_id, tie_word_embeddings=True)  # fmt: skip
    sizes = {hf: getattr(cfg, ours) for ours, hf in names.items()}
    if cfg.arch == "llama":
        fixed = fixed | {"rope_parameters": {"rope_type": "default", "rope_theta": cfg.rope_theta}}
    return cls(**shared, **sizes, **fixed)


_MICRO: dict[str, Any] = dict(
    n_layers=2,
    d_model=32,
    n_heads=2,
    n_kv_heads=1,
    context=32,
    vocab_size=384,
    n_curriculum_docs=200,
    max_chars_per_play=20000,
    max_plays=6,
    steps=24,
    batch_size=4,
    lr=3e-3,
    warmup_steps=4,
    n_checkpoints=8,
    eval_every=8,
    n_val_windows=8,
    align_steps=6,
    align_batch_size=4,
    align_warmup_steps=1,
    align_eval_every=3,
    replay_batch_size=2,
    max_eval_items=32,
)

ORGANISMS: dict[str, OrganismConfig] = {
    "organism-gpt2": OrganismConfig(name="organism-gpt2", arch="gpt2", d_ff=512),
    "organism-llama": OrganismConfig(name="organism-llama", arch="llama", d_ff=352),
    "organism-gpt2-micro": OrganismConfig(
        name="organism-gpt2-micro", arch="gpt2", d_ff=128, **_MICRO
    ),
    "organism-llama-micro": OrganismConfig(
        name="organism-llama-micro", arch="llama", d_ff=88, **_MICRO
    ),
}
"""The registry: name -> default config. ``build_all`` builds the non-micro ones."""


def seed_name(name: str, seed: int) -> str:
    """The organism name for training seed ``seed``: ``name`` for 0, else ``name~s<seed>``."""
    base = name.split(SEED_MARK)[0]
    return base if int(seed) == 0 else f"{base}{SEED_MARK}{int(seed)}"


def organism_config(name: str) -> OrganismConfig:
    """The config of a registered organism or of a seed variant ``<organism>~s<k>``.

    ``~s0`` is the registered config itself. Raises KeyError naming the known organisms when
    the base name is not registered, ValueError when the seed is not a non-negative integer.
    """
    base, mark, seed = name.partition(SEED_MARK)
    if base not in ORGANISMS:
        raise KeyError(f"unknown organism {name!r}; known organisms: {', '.join(ORGANISMS)}")
    if not mark:
        return ORGANISMS[base]
    if not seed.isdigit():
        raise ValueError(f"bad training seed in {name!r}: expected {base}{SEED_MARK}<k>, k >= 0")
    k = int(seed)
    return ORGANISMS[base] if k == 0 else ORGANISMS[base].replace(name=seed_name(base, k), seed=k)


EVALUATION_BOUNDS: dict[str, Bound] = {
    **dict.fromkeys(("n_samples", "max_new_tokens", "ref_docs", "ref_passages",
                     "ref_passage_chars"), COUNT),
    "n_eval": Bound(1, integer=True, optional=True),
    "temperature": POSITIVE,
    "seed": SEED,
}  # fmt: skip
"""The ranges of the organisms chapter's evaluation parameters (its ``OrganismsConfig``:
held-out items, samples, the reference passages; :func:`lamina.core.bounds.check_bounds`)."""
