"""The organisms' quality, measured on one built organism: what the appendix chapter
(``notebooks/organisms.py``, :mod:`lamina.chapters.organisms`) reports for each.

:func:`measure_organism` reads its build and measures its checkpoints (base = ``final``, then
``lm``, ``sft``, ``dpo``): validation perplexity against the unigram baseline
(:func:`lamina.sources.organisms.evaluate.unigram_perplexity`), the stage gates
(:func:`lamina.sources.organisms.gates.measure_stages` with the content-blind policies of
:mod:`lamina.sources.organisms.baselines`) and the DPO reward margins of @dpo against @sft.
:func:`organism_tables` turns that, the homograph probe's tables
(:func:`lamina.trajectory.homographs.homograph_separation`, measured by the chapter: it reads
states, a layer above this package) and the generated samples and bits per byte into the
chapter's tidy tables (:mod:`lamina.sources.organisms.tables`,
:mod:`lamina.sources.organisms.reference`).

The corpus, its curriculum and the token streams are read once per process and shared by the
organisms that read the same corpus (a cache keyed on everything that changes them).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from lamina.sources import organisms
from lamina.sources.organisms.baselines import fit_policies, policy_hits
from lamina.sources.organisms.configs import OrganismConfig, organism_config
from lamina.sources.organisms.corpus import Corpus, load_corpus
from lamina.sources.organisms.curriculum import generate_curriculum
from lamina.sources.organisms.evaluate import unigram_perplexity
from lamina.sources.organisms.gates import measure_stages
from lamina.sources.organisms.instructions import AlignmentData
from lamina.sources.organisms.pretrained import gate_sample
from lamina.sources.organisms.probes import samples
from lamina.sources.organisms.reference import (
    bpb_rows,
    bpb_summary,
    reference_texts,
    score_references,
)
from lamina.sources.organisms.stages import dpo_margins
from lamina.sources.organisms.tables import (
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
from lamina.sources.organisms.tokenizer import encode_stream
from lamina.sources.organisms.train import eval_lm, fixed_windows

__all__ = ["OrganismMeasures", "bpb_texts", "corpus_key", "measure_organism", "organism_tables",
           "reference_scores"]  # fmt: skip

_CACHE: dict[Any, Any] = {}


def corpus_key(cfg: OrganismConfig) -> tuple:
    """What decides an organism's corpus: (corpus seed, curriculum documents, plays, characters
    per play, characters per training play); organisms with equal keys read the same text."""
    return (cfg.corpus_seed, cfg.n_curriculum_docs, cfg.max_plays, cfg.max_chars_per_play,
            cfg.train_chars_per_play)  # fmt: skip


def _corpus(cfg: OrganismConfig) -> Corpus:
    key = ("corpus", *corpus_key(cfg))
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


def _streams(
    cfg: OrganismConfig, tokenizer: Any, folder: Path
) -> tuple[torch.Tensor, torch.Tensor]:
    """(train stream (n_tokens,), validation windows (n_val_windows, context)) with the
    organism's own tokenizer (token ids)."""
    tok_hash = hashlib.sha256((folder / "tokenizer" / "tokenizer.json").read_bytes()).hexdigest()
    key = ("streams", tok_hash, *corpus_key(cfg), cfg.n_val_windows, cfg.context)
    if key not in _CACHE:
        corpus = _corpus(cfg)
        val = fixed_windows(encode_stream(tokenizer, corpus.val), cfg.n_val_windows, cfg.context)
        _CACHE[key] = (encode_stream(tokenizer, corpus.train), val)
    return _CACHE[key]


def bpb_texts(cfg: OrganismConfig, n_docs: int, passages: int, passage_chars: int) -> pd.DataFrame:
    """The bits-per-byte texts of the organism config's corpus
    (:func:`lamina.sources.organisms.reference.reference_texts` over all its validation plays,
    ``n_docs`` curriculum documents, ``passages`` passages of ``passage_chars`` characters per
    play)."""
    corpus = _corpus(cfg)
    n_plays = len(corpus.card["natural_text"]["plays_val"])
    return reference_texts(corpus, n_plays, n_docs, passages, passage_chars)


def reference_scores(
    models: list[str], names: list[str], notes: list[str], seed: int,
    texts: tuple[int, int, int],
) -> tuple[list[dict], dict[str, dict[str, Any]]]:  # fmt: skip
    """Bits per byte of each reference model (``models``, pretrained) on the validation texts
    of the first organism of ``names`` (:func:`bpb_texts` with ``texts`` = (curriculum
    documents, passages per play, characters per passage)); a note in ``notes`` names the
    organisms that read another corpus. -> (rows of the ``bpb_documents`` table, {model: summary}) of
    :func:`lamina.sources.organisms.reference.score_references` (``seed`` seeds the CIs)."""
    if not models:
        return [], {}
    cfg = organism_config(names[0])
    others = [n for n in names[1:] if corpus_key(organism_config(n)) != corpus_key(cfg)]
    if others:
        notes.append(f"{', '.join(others)} read a different corpus from {names[0]}; the "
                     f"reference models are scored on {names[0]}'s validation text.")  # fmt: skip
    return score_references(models, bpb_texts(cfg, *texts), seed, names[0])


@dataclass
class OrganismMeasures:
    """One organism's build and the measures of its checkpoints (:func:`measure_organism`).

    quality: per checkpoint, val_loss (nats per token), val_perplexity, unigram_perplexity,
    fraction_of_unigram and ratio_to_base (perplexity over the base's). gates:
    :func:`~lamina.sources.organisms.gates.measure_stages` of base, @sft and @dpo; policies:
    {policy: (n_items,) hits} of the content-blind policies on the same items, ``best`` the most
    accurate; margins: {"training" | "held-out": (n_pairs,) DPO margins of @dpo against @sft,
    nats, before the beta factor}."""

    name: str
    cfg: OrganismConfig
    folder: Path
    build: dict[str, Any]
    quality: list[dict[str, Any]]
    gates: dict[str, Any]
    policies: dict[str, Any]
    best: str
    margins: dict[str, np.ndarray]


def measure_organism(
    name: str, models: dict[str, Any], tok: Any, n_eval: int | None, seed: int
) -> OrganismMeasures:
    """Perplexities, stage gates and DPO margins of organism ``name`` (``models``: checkpoint
    -> loaded model, base ``final`` first; ``tok``: its tokenizer). The gates read the held-out
    items, or a seeded sample of ``n_eval`` (``seed``); the margins ``n_eval`` held-out pairs
    and as many training pairs. Leaves every model in eval mode."""
    cfg = organism_config(name)
    folder = organisms.organism_dir(name)
    build = json.loads((folder / "build.json").read_text())
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
    data = gate_sample(_alignment(cfg), n_eval, seed)
    gates = measure_stages({"base": models["final"], "sft": models["sft"], "dpo": models["dpo"]},
                           tok, data, cfg.context, seed)  # fmt: skip
    policies = policy_hits(fit_policies(data.train), data.sft_heldout)  # the SFT gate's items
    best = max(gates["policies"], key=lambda k: gates["policies"][k])
    n_pairs = len(corpus.dpo_eval[:n_eval])
    margins = {split: dpo_margins(models["dpo"], models["sft"], tok, items, cfg.context).numpy()
               for split, items in (("training", corpus.dpo[:n_pairs]),
                                    ("held-out", corpus.dpo_eval[:n_eval]))}  # fmt: skip
    return OrganismMeasures(name, cfg, folder, build, quality, gates, policies, best, margins)


def organism_tables(
    m: OrganismMeasures,
    models: dict[str, Any],
    tok: Any,
    homographs: tuple[pd.DataFrame, pd.DataFrame],
    texts: pd.DataFrame,
    *,
    n_samples: int,
    n_new: int,
    temperature: float,
    seed: int,
) -> dict[str, list[dict]]:
    """The chapter's tables of one organism as lists of rows, each with a ``model`` column:
    build, corpus, overlap, curves, margin_curve, quality, sft_accuracy, dpo_accuracy,
    dpo_margins, gates, policies, seeds, samples (``n_samples`` prompts, ``n_new`` tokens,
    sampled at ``temperature``), homographs and homograph_layers (``homographs``: the probe's
    (per word, per layer) tables), bpb_documents (every checkpoint on ``texts``,
    :func:`bpb_texts`) and bits_per_byte (with CIs; ``seed`` seeds the bootstraps)."""
    name, cfg, folder, build = m.name, m.cfg, m.folder, m.build
    words, profile = homographs
    corpus = _corpus(cfg)
    bpb_docs = [row for ck, model in models.items() for row in bpb_rows(name, ck, model, tok, texts)]
    return {
        "build": [build_row(name, cfg, build, models["final"])],
        "corpus": corpus_rows(name, build["corpus"]),
        "overlap": [{"model": name, "part": part, **{k: v for k, v in r.items() if k != "examples"},
                     "examples": "; ".join(r["examples"])}
                    for part, r in build.get("overlap", {}).get("by_part", {}).items()],
        "curves": loss_curves(name, folder).to_dict("records"),
        "margin_curve": margin_curve(name, folder),
        "quality": m.quality,
        "sft_accuracy": stage_component_rows(name, m.gates, m.policies, m.best),
        "dpo_accuracy": kind_rows(name, m.gates),
        "dpo_margins": margin_rows(name, m.margins, cfg.dpo_beta, seed),
        "gates": gate_rows(name, m.gates),
        "policies": [{"model": name, "policy": k, "accuracy": v} for k, v in m.gates["policies"].items()],
        "seeds": seed_rows(name),
        "samples": samples(name, models, tok, corpus.sft_eval, _components(cfg), n_samples, n_new, temperature, seed),
        "homographs": words.assign(model=name).to_dict("records"),
        "homograph_layers": profile.assign(model=name).to_dict("records"),
        "bpb_documents": bpb_docs,
        "bits_per_byte": bpb_summary(pd.DataFrame(bpb_docs), seed),
    }  # fmt: skip
