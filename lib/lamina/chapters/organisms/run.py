"""The model organisms' quality: what the appendix chapter ``notebooks/organisms.py`` shows.

For every organism: its build (architecture, wall and CPU time, threads, CPU, corpus card, the
word 8-grams its training text shares with ``data/prompts/``), loss curves, validation
perplexity against the unigram baseline and the alignment stages' perplexity ratios to the
base, generated samples, the stage gates (:func:`lamina.sources.organisms.gates.measure_stages`:
the base, @sft and @dpo on held-out entity pairs, @sft against the content-blind policies and
the base, @dpo's content probe against @sft) with accuracies per component and kind, DPO reward
margins on training and held-out pairs, the spread over training seeds where several are
built, and whether each homograph's two senses are separated at the final layer beyond its
control. Metrics come from :mod:`lamina.sources.organisms.evaluate`,
:mod:`lamina.sources.organisms.gates` and :func:`lamina.trajectory.bifurcation`. :data:`TARGETS`
and the two gates are the organisms' targets; ``targets`` in each summary says which were met.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from lamina.chapters.config import ChapterConfig, default_models
from lamina.chapters.models import chapter_models
from lamina.chapters.organisms.checks import aligned_gates, summary
from lamina.chapters.organisms.probes import SAMPLE_PROMPTS, homograph_separation, samples
from lamina.chapters.organisms.reference import (
    DEFAULT_REFERENCE_MODELS,
    bpb_rows,
    bpb_summary,
    reference_texts,
    score_references,
)
from lamina.chapters.organisms.tables import (
    build_row,
    corpus_rows,
    gate_rows,
    kind_rows,
    loss_curves,
    margin_curve,
    margin_rows,
    seed_rows,
    stage_component_rows,
)  # fmt: skip
from lamina.core.threads import configured_threads, threads
from lamina.sources import organisms
from lamina.sources.models import load_model
from lamina.sources.organisms.baselines import fit_policies, policy_hits
from lamina.sources.organisms.configs import OrganismConfig, organism_config
from lamina.sources.organisms.corpus import Corpus, load_corpus
from lamina.sources.organisms.curriculum import generate_curriculum
from lamina.sources.organisms.evaluate import unigram_perplexity
from lamina.sources.organisms.gates import measure_stages
from lamina.sources.organisms.instructions import AlignmentData
from lamina.sources.organisms.pretrained import gate_sample
from lamina.sources.organisms.stages import dpo_margins
from lamina.sources.organisms.tokenizer import encode_stream
from lamina.sources.organisms.train import STAGES, eval_lm, fixed_windows
from lamina.states.io import write_results

__all__ = [
    "CHECKPOINTS",
    "DEFAULT_ORGANISMS",
    "SAMPLE_PROMPTS",
    "TARGETS",
    "OrganismsConfig",
    "OrganismsResult",
    "homograph_separation",
    "organism_names",
    "run_organisms",
]

DEFAULT_ORGANISMS = default_models("organisms")[1]  # the chapter's registry record
CHECKPOINTS = ("final", *STAGES)  # the base (end of pretraining), then lm, sft, dpo
TARGETS = {"sft_ppl_ratio": 1.25, "overlap": 0}
"""@sft validation perplexity at most 1.25x the base's; no evaluation 8-gram in the training
text. With the two stage gates (:mod:`lamina.sources.organisms.gates`: @sft beats every
content-blind policy and the base, @dpo raises the content probe over @sft, each with the CI of
the gain above 0), these are the organisms' targets. (Until issue 34: @dpo preference accuracy
at least 0.75 and @sft above the always-refuse answer.)"""


@dataclass
class OrganismsConfig(ChapterConfig):
    """Parameters of the organisms' quality report (serialised next to its results).

    model: "default" (every built full organism), one organism name, a comma-separated string
        or a list of names (e.g. the ``-micro`` test organisms).
    n_eval: held-out SFT items gated (a seeded sample, with twice as many preference triples;
        None: all of them).
    n_samples: prompts of :data:`SAMPLE_PROMPTS` to generate from (greedy and sampled), and
        held-out questions answered by the base and @sft.
    seed: seeds the sampled generations and the bootstrap.
    quick: fewer questions (32), samples (2) and tokens (12), for tests (caps in ``QUICK``).
    max_new_tokens: generated tokens per sample; temperature: of the sampled generations.
    reference_models: pretrained models scored, like the organisms, in bits per byte on the
        organisms' validation text (default: smollm2-135m-instruct and gemma-3-270m; [] skips;
        in quick mode the default is [] and only models named explicitly are scored).
    aligned_models: real models whose aligned builds' stage gates are shown beside the
        organisms' (read from ``make aligned``'s builds, never trained here; default as
        ``reference_models``, [] in quick mode).
    ref_docs: validation curriculum documents scored in bits per byte (evenly spaced);
    ref_passages: passages per validation play; ref_passage_chars: characters per passage.
    """

    model: str | list[str] = "default"
    n_eval: int | None = None
    n_samples: int = 4
    seed: int = 0
    max_new_tokens: int = 40
    temperature: float = 0.8
    reference_models: list[str] = field(default_factory=lambda: list(DEFAULT_REFERENCE_MODELS))
    aligned_models: list[str] = field(default_factory=lambda: list(DEFAULT_REFERENCE_MODELS))
    ref_docs: int = 64
    ref_passages: int = 4
    ref_passage_chars: int = 800

    QUICK = {"n_eval": 32, "n_samples": 2, "max_new_tokens": 12, "ref_docs": 8,
             "ref_passages": 2, "ref_passage_chars": 200}  # fmt: skip

    def __post_init__(self) -> None:
        if isinstance(self.reference_models, str):
            self.reference_models = [m.strip() for m in self.reference_models.split(",") if m.strip()]
        if isinstance(self.aligned_models, str):
            self.aligned_models = [m.strip() for m in self.aligned_models.split(",") if m.strip()]
        if self.quick and list(self.reference_models) == list(DEFAULT_REFERENCE_MODELS):
            self.reference_models = []
        if self.quick and list(self.aligned_models) == list(DEFAULT_REFERENCE_MODELS):
            self.aligned_models = []
        self.apply_quick()


@dataclass
class OrganismsResult:
    """Tidy tables (each with a ``model`` column), a summary per organism, notes, and a
    summary per reference model (``references``: its bits per byte; its rows are in the
    ``bits_per_byte`` and ``bpb_documents`` tables)."""

    config: OrganismsConfig
    tables: dict[str, pd.DataFrame]
    summaries: dict[str, dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    references: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def models(self) -> list[str]:
        return list(self.summaries)

    def write(self, root: str | os.PathLike | None = None) -> list[Path]:
        """``lamina.states.io.write_results("organisms", model, ...)`` once per organism, then once per
        reference or aligned real model (its bits-per-byte and gate tables only)."""

        return [
            write_results(
                "organisms",
                name,
                summary={**summary, "notes": self.notes},
                config=self.config.to_dict(),
                tables={
                    k: v[v["model"] == name].reset_index(drop=True)
                    for k, v in self.tables.items()
                    if name in self.summaries
                    or (k in ("bits_per_byte", "bpb_documents", "gates") and name in set(v["model"]))
                },
                root=root,
            )
            for name, summary in {**self.summaries, **self.references}.items()
        ]


def _built(name: str) -> bool:
    try:
        organisms.resolve(name)
    except organisms.OrganismNotBuiltError:
        return False
    return True


def organism_names(model: str | list[str]) -> tuple[list[str], list[str]]:
    """(organisms to report, notes): :func:`lamina.chapters.models.chapter_models` (for
    "default", the registry's built organisms, the unbuilt ones noted), and when none of the
    full organisms is built, the built micro ones (noted); raises OrganismNotBuiltError (saying
    how to build) when none is built or a named one is not."""
    names, notes = chapter_models("organisms", model)
    if model != "default":
        for n in names:
            organisms.resolve(n)  # clear error for an unknown or unbuilt organism
        return names, []
    if not names:
        names = [n for n in organisms.list_organisms(micro=True) if n.endswith("-micro")]
        names = [n for n in names if _built(n)]
        notes = ["The full organisms are not built: this page shows the micro test organisms."]
    if not names:
        organisms.resolve(DEFAULT_ORGANISMS[0])
    return names, notes


# ----------------------------------------------------------------------------- corpus, curves

_CACHE: dict[Any, Any] = {}


def _corpus(cfg: OrganismConfig) -> Corpus:
    key = ("corpus", cfg.corpus_seed, cfg.n_curriculum_docs, cfg.max_plays, cfg.max_chars_per_play)
    if key not in _CACHE:
        _CACHE[key] = load_corpus(cfg)
    return _CACHE[key]


def _components(cfg: OrganismConfig) -> dict[str, str]:
    """{question: curriculum component} (the questions do not depend on n_docs)."""
    key = ("components", cfg.corpus_seed)
    if key not in _CACHE:
        _CACHE[key] = generate_curriculum(cfg.corpus_seed, 1).qa_components
    return _CACHE[key]


def _alignment(cfg: OrganismConfig) -> AlignmentData:
    """The instruction-following SFT / DPO items of the organism's curriculum."""
    key = ("alignment", cfg.corpus_seed)
    if key not in _CACHE:
        data = generate_curriculum(cfg.corpus_seed, 1).alignment
        assert data is not None
        _CACHE[key] = data
    return _CACHE[key]


def _gates(cfg: OrganismConfig, models: dict[str, Any], tok: Any, n_eval: int | None,
           seed: int) -> tuple[dict[str, Any], dict[str, Any]]:  # fmt: skip
    """(:func:`~lamina.sources.organisms.gates.measure_stages` of base = @final, @sft, @dpo on
    the held-out items, or a seeded sample of ``n_eval``; the content-blind policies' per-item
    hits on the same items)."""
    data = gate_sample(_alignment(cfg), n_eval, seed)
    gates = measure_stages({"base": models["final"], "sft": models["sft"], "dpo": models["dpo"]},
                           tok, data, cfg.context, seed)  # fmt: skip
    return gates, policy_hits(fit_policies(data.train), data.heldout)


def _streams(
    cfg: OrganismConfig, tokenizer: Any, folder: Path
) -> tuple[torch.Tensor, torch.Tensor]:
    """(train stream, validation windows) with the organism's own tokenizer."""
    tok_hash = hashlib.sha256((folder / "tokenizer" / "tokenizer.json").read_bytes()).hexdigest()
    key = ("streams", tok_hash, cfg.corpus_seed, cfg.n_curriculum_docs, cfg.max_plays,
           cfg.max_chars_per_play, cfg.n_val_windows, cfg.context)  # fmt: skip
    if key not in _CACHE:
        corpus = _corpus(cfg)
        val = fixed_windows(encode_stream(tokenizer, corpus.val), cfg.n_val_windows, cfg.context)
        _CACHE[key] = (encode_stream(tokenizer, corpus.train), val)
    return _CACHE[key]


def _one(
    name: str, config: OrganismsConfig, n_eval: int | None, n_samples: int, n_new: int
) -> tuple[dict[str, list[dict]], dict[str, Any]]:
    cfg = organism_config(name)
    folder = organisms.organism_dir(name)
    build = json.loads((folder / "build.json").read_text())
    models: dict[str, Any] = {}  # transformers models (load_model types them as nn.Module)
    tok: Any = None
    for ck in CHECKPOINTS:
        models[ck], tok = load_model(f"{name}@{ck}")
    corpus = _corpus(cfg)
    train, val = _streams(cfg, tok, folder)
    unigram = unigram_perplexity(train, val, len(tok))
    quality: list[dict[str, Any]] = []
    for ck, m in models.items():
        loss = eval_lm(m, val)
        m.eval()  # eval_lm leaves the model in train mode
        quality.append({"model": name, "checkpoint": ck, "val_loss": loss,
                        "val_perplexity": float(np.exp(loss)), "unigram_perplexity": unigram,
                        "fraction_of_unigram": float(np.exp(loss)) / unigram})  # fmt: skip
    base_ppl = quality[0]["val_perplexity"]
    for row in quality:
        row["ratio_to_base"] = row["val_perplexity"] / base_ppl
    comp, L = _components(cfg), cfg.context
    gates, policies = _gates(cfg, models, tok, n_eval, config.seed)
    best = max(gates["policies"], key=lambda k: gates["policies"][k])
    n_pairs = len(corpus.dpo_eval[:n_eval])
    margins = {split: dpo_margins(models["dpo"], models["sft"], tok, items, L).numpy()
               for split, items in (("training", corpus.dpo[:n_pairs]),
                                    ("held-out", corpus.dpo_eval[:n_eval]))}  # fmt: skip
    words, profile = homograph_separation(models["final"], tok)
    texts = _texts(cfg, config)
    bpb_docs = [row for ck, m in models.items() for row in bpb_rows(name, ck, m, tok, texts)]
    tables = {
        "build": [build_row(name, cfg, build, models["final"])],
        "corpus": corpus_rows(name, build["corpus"]),
        "overlap": [{"model": name, "part": part, **{k: v for k, v in r.items() if k != "examples"},
                     "examples": "; ".join(r["examples"])}
                    for part, r in build.get("overlap", {}).get("by_part", {}).items()],
        "curves": loss_curves(name, folder).to_dict("records"),
        "margin_curve": margin_curve(name, folder),
        "quality": quality,
        "sft_accuracy": stage_component_rows(name, gates, policies, best),
        "dpo_accuracy": kind_rows(name, gates),
        "dpo_margins": margin_rows(name, margins, cfg.dpo_beta, config.seed),
        "gates": gate_rows(name, gates),
        "policies": [{"model": name, "policy": k, "accuracy": v} for k, v in gates["policies"].items()],
        "seeds": seed_rows(name),
        "samples": samples(name, models, tok, corpus.sft_eval, comp, n_samples, n_new, config.temperature, config.seed),
        "homographs": words.assign(model=name).to_dict("records"),
        "homograph_layers": profile.assign(model=name).to_dict("records"),
        "bpb_documents": bpb_docs,
        "bits_per_byte": bpb_summary(pd.DataFrame(bpb_docs), config.seed),
    }  # fmt: skip
    return tables, summary(name, tables, words, config.seed, build)


def _texts(cfg: OrganismConfig, config: OrganismsConfig) -> pd.DataFrame:
    """The bits-per-byte texts (:func:`reference_texts`) of the organism config's corpus."""
    corpus = _corpus(cfg)
    n_plays = len(corpus.card["natural_text"]["plays_val"])
    return reference_texts(corpus, n_plays, config.ref_docs, config.ref_passages,
                           config.ref_passage_chars)  # fmt: skip


def _corpus_key(cfg: OrganismConfig) -> tuple:
    return (cfg.corpus_seed, cfg.n_curriculum_docs, cfg.max_plays, cfg.max_chars_per_play)


def _references(
    names: list[str], config: OrganismsConfig, notes: list[str]
) -> tuple[list[dict], dict[str, dict[str, Any]]]:
    """Bits per byte of each reference model on the first organism's texts: (rows of the
    ``bpb_documents`` table, {model: summary})."""
    if not config.reference_models:
        return [], {}
    cfg = organism_config(names[0])
    others = [n for n in names[1:] if _corpus_key(organism_config(n)) != _corpus_key(cfg)]
    if others:
        notes.append(f"{', '.join(others)} read a different corpus from {names[0]}; the "
                     f"reference models are scored on {names[0]}'s validation text.")  # fmt: skip
    return score_references(config.reference_models, _texts(cfg, config), config.seed, names[0])


def run_organisms(config: OrganismsConfig) -> OrganismsResult:
    """Everything the organisms chapter shows, for every organism of ``config.model``.

    Runs on ``$LAMINA_NUM_THREADS`` torch threads (:func:`lamina.core.threads.threads`; default
    1: these small models gain nothing from more, and lose much when the CPUs are shared).
    """
    names, notes = organism_names(config.model)
    n_eval, n_samples, n_new = config.n_eval, config.n_samples, config.max_new_tokens
    rows: dict[str, list[dict]] = {}
    summaries = {}
    with threads(configured_threads() or 1):
        for name in names:
            tables, summaries[name] = _one(name, config, n_eval, n_samples, n_new)
            for k, v in tables.items():
                rows.setdefault(k, []).extend(v)
        ref_rows, references = _references(names, config, notes)
    aligned_rows, aligned, aligned_notes = aligned_gates(config.aligned_models)
    rows["gates"] += aligned_rows
    notes += aligned_notes
    for m, a in aligned.items():
        references.setdefault(m, {}).update(a)
    rows["bpb_documents"] += ref_rows
    rows["bits_per_byte"] += bpb_summary(pd.DataFrame(ref_rows), config.seed) if ref_rows else []
    return OrganismsResult(config, {k: pd.DataFrame(v) for k, v in rows.items()}, summaries,
                           notes, references)  # fmt: skip
