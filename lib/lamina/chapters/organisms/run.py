"""The model organisms' quality: what the appendix chapter ``notebooks/organisms.py`` shows.

For every organism: its build (architecture, wall and CPU time, threads, CPU, corpus card, the
word 8-grams its training text shares with ``data/prompts/``), loss curves, validation
perplexity against the unigram baseline and the alignment stages' perplexity ratios to the
base, generated samples, the stage gates (:func:`lamina.sources.organisms.gates.measure_stages`:
the base, @sft and @dpo on held-out entity pairs, @sft against the content-blind policies and
the base, @dpo's content probe against @sft) with accuracies per component and kind, DPO reward
margins on training and held-out pairs, the spread over training seeds where several are
built, and whether each homograph's two senses are separated at the final layer beyond its
control. The measurements are :mod:`lamina.sources.organisms.quality` (and the modules it
names) and :mod:`lamina.trajectory.homographs`; this module chooses the organisms and the
reference models, runs them and keeps their tables. :data:`TARGETS` and the two gates are the
organisms' targets; ``targets`` in each summary says which were met.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from lamina.chapters.config import ChapterConfig, default_models
from lamina.chapters.models import chapter_models
from lamina.core.bounds import Bound, check_bounds
from lamina.core.threads import configured_threads, threads
from lamina.sources import organisms
from lamina.sources.models import load_model
from lamina.sources.organisms.checks import aligned_gates, summary
from lamina.sources.organisms.configs import EVALUATION_BOUNDS
from lamina.sources.organisms.quality import (
    bpb_texts,
    measure_organism,
    organism_tables,
    reference_scores,
)
from lamina.sources.organisms.reference import DEFAULT_REFERENCE_MODELS, bpb_summary
from lamina.sources.organisms.train import STAGES
from lamina.states.io import write_results
from lamina.trajectory.homographs import homograph_separation

__all__ = [
    "CHECKPOINTS",
    "DEFAULT_ORGANISMS",
    "TARGETS",
    "OrganismsConfig",
    "OrganismsResult",
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
    n_samples: prompts of :data:`lamina.sources.organisms.probes.SAMPLE_PROMPTS` to generate
        from (greedy and sampled), and held-out questions answered by the base and @sft.
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
    BOUNDS: ClassVar[dict[str, Bound]] = EVALUATION_BOUNDS  # lamina.sources.organisms.configs

    def __post_init__(self) -> None:
        check_bounds(self, self.BOUNDS)
        for name in ("reference_models", "aligned_models"):
            value = getattr(self, name)
            if isinstance(value, str):
                setattr(self, name, [m.strip() for m in value.split(",") if m.strip()])
            elif not isinstance(value, list | tuple) or not all(isinstance(m, str) for m in value):
                raise ValueError(f"{name} must be a list of model names ([] skips); got {value!r}")
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


def _one(name: str, config: OrganismsConfig) -> tuple[dict[str, list[dict]], dict[str, Any]]:
    """One organism's tables (:func:`lamina.sources.organisms.quality.organism_tables`) and
    summary (:func:`lamina.sources.organisms.checks.summary`)."""
    models: dict[str, Any] = {}  # transformers models (load_model types them as nn.Module)
    tok: Any = None
    for ck in CHECKPOINTS:
        models[ck], tok = load_model(f"{name}@{ck}")
    measured = measure_organism(name, models, tok, config.n_eval, config.seed)
    words, profile = homograph_separation(models["final"], tok)
    texts = bpb_texts(measured.cfg, config.ref_docs, config.ref_passages, config.ref_passage_chars)
    tables = organism_tables(measured, models, tok, (words, profile), texts,
                             n_samples=config.n_samples, n_new=config.max_new_tokens,
                             temperature=config.temperature, seed=config.seed)  # fmt: skip
    return tables, summary(name, tables, words, config.seed, measured.build)


def run_organisms(config: OrganismsConfig) -> OrganismsResult:
    """Everything the organisms chapter shows, for every organism of ``config.model``.

    Runs on ``$LAMINA_NUM_THREADS`` torch threads (:func:`lamina.core.threads.threads`; default
    1: these small models gain nothing from more, and lose much when the CPUs are shared).
    """
    names, notes = organism_names(config.model)
    rows: dict[str, list[dict]] = {}
    summaries = {}
    with threads(configured_threads() or 1):
        for name in names:
            tables, summaries[name] = _one(name, config)
            for k, v in tables.items():
                rows.setdefault(k, []).extend(v)
        ref_rows, references = reference_scores(
            config.reference_models, names, notes, config.seed,
            (config.ref_docs, config.ref_passages, config.ref_passage_chars))  # fmt: skip
    aligned_rows, aligned, aligned_notes = aligned_gates(config.aligned_models)
    rows["gates"] += aligned_rows
    notes += aligned_notes
    for m, a in aligned.items():
        references.setdefault(m, {}).update(a)
    rows["bpb_documents"] += ref_rows
    rows["bits_per_byte"] += bpb_summary(pd.DataFrame(ref_rows), config.seed) if ref_rows else []
    return OrganismsResult(config, {k: pd.DataFrame(v) for k, v in rows.items()}, summaries,
                           notes, references)  # fmt: skip
