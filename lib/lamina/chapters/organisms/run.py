"""The model organisms' quality: what the appendix chapter ``notebooks/organisms.py`` shows.

For every organism: its build (architecture, time, corpus card), loss curves, validation
perplexity against the unigram baseline, generated samples, held-out SFT accuracy and DPO
preference accuracy of the base and of each alignment stage (Wilson 95% CIs), and whether each
homograph's two senses are separated at the final layer beyond its unambiguous control.
Metrics come from :mod:`lamina.organisms.evaluate` and :func:`lamina.geometry.bifurcation`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch
from scipy import stats as sps

from lamina import organisms
from lamina.chapters.config import ChapterConfig
from lamina.chapters.organisms.probes import SAMPLE_PROMPTS, homograph_separation, samples
from lamina.io import write_results
from lamina.models import load_model
from lamina.organisms.configs import ORGANISMS, OrganismConfig
from lamina.organisms.corpus import Corpus, load_corpus
from lamina.organisms.curriculum import generate_curriculum
from lamina.organisms.evaluate import dpo_accuracy, sft_accuracy, unigram_perplexity
from lamina.organisms.tokenizer import encode_stream
from lamina.organisms.train import STAGES, eval_lm, fixed_windows
from lamina.stats import bootstrap_ci, wilson

__all__ = [
    "CHECKPOINTS",
    "DEFAULT_ORGANISMS",
    "SAMPLE_PROMPTS",
    "OrganismsConfig",
    "OrganismsResult",
    "homograph_separation",
    "organism_names",
    "run_organisms",
    "wilson",
]

DEFAULT_ORGANISMS = ("organism-gpt2", "organism-llama")
CHECKPOINTS = ("final", *STAGES)  # the base (end of pretraining), then lm, sft, dpo


@dataclass
class OrganismsConfig(ChapterConfig):
    """Parameters of the organisms' quality report (serialised next to its results).

    model: "default" (every built full organism), one organism name, a comma-separated string
        or a list of names (e.g. the ``-micro`` test organisms).
    n_eval: held-out curriculum questions / preference pairs scored (None: all of them).
    n_samples: prompts of :data:`SAMPLE_PROMPTS` to generate from (greedy and sampled), and
        held-out questions answered by the base and @sft.
    seed: seeds the sampled generations and the bootstrap.
    quick: fewer questions (32), samples (2) and tokens (12), for tests (caps in ``QUICK``).
    max_new_tokens: generated tokens per sample; temperature: of the sampled generations.
    """

    model: str | list[str] = "default"
    n_eval: int | None = None
    n_samples: int = 4
    seed: int = 0
    quick: bool = False
    max_new_tokens: int = 40
    temperature: float = 0.8

    QUICK: ClassVar[Mapping[str, Any]] = {"n_eval": 32, "n_samples": 2, "max_new_tokens": 12}

    def __post_init__(self) -> None:
        self.apply_quick()


@dataclass
class OrganismsResult:
    """Tidy tables (each with a ``model`` column: the organism), a summary per organism, notes."""

    config: OrganismsConfig
    tables: dict[str, pd.DataFrame]
    summaries: dict[str, dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    @property
    def models(self) -> list[str]:
        return list(self.summaries)

    def write(self, root: str | os.PathLike | None = None) -> list[Path]:
        """``lamina.io.write_results("organisms", organism, ...)`` once per organism."""

        return [
            write_results(
                "organisms",
                name,
                summary={**summary, "notes": self.notes},
                config=self.config.to_dict(),
                tables={
                    k: v[v["model"] == name].reset_index(drop=True) for k, v in self.tables.items()
                },
                root=root,
            )
            for name, summary in self.summaries.items()
        ]


def _built(name: str) -> bool:
    try:
        organisms.resolve(name)
    except organisms.OrganismNotBuiltError:
        return False
    return True


def organism_names(model: str | list[str]) -> tuple[list[str], list[str]]:
    """(organisms to report, notes). "default": the built full organisms, else the built micro
    ones (noted); raises OrganismNotBuiltError (saying how to build) when none is built."""
    if model != "default":
        names = [m.strip() for m in model.split(",")] if isinstance(model, str) else list(model)
        for n in names:
            organisms.resolve(n)  # clear error for an unknown or unbuilt organism
        return names, []
    names = [n for n in DEFAULT_ORGANISMS if _built(n)]
    notes = [f"{n} is not built; skipped." for n in DEFAULT_ORGANISMS if n not in names]
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
    key = ("corpus", cfg.seed, cfg.n_curriculum_docs, cfg.max_plays, cfg.max_chars_per_play)
    if key not in _CACHE:
        _CACHE[key] = load_corpus(cfg)
    return _CACHE[key]


def _components(cfg: OrganismConfig) -> dict[str, str]:
    """{question: curriculum component} (the questions do not depend on n_docs)."""
    key = ("components", cfg.seed)
    if key not in _CACHE:
        _CACHE[key] = generate_curriculum(cfg.seed, 1).qa_components
    return _CACHE[key]


def _streams(
    cfg: OrganismConfig, tokenizer: Any, folder: Path
) -> tuple[torch.Tensor, torch.Tensor]:
    """(train stream, validation windows) with the organism's own tokenizer."""
    tok_hash = hashlib.sha256((folder / "tokenizer" / "tokenizer.json").read_bytes()).hexdigest()
    key = ("streams", tok_hash, cfg.seed, cfg.n_curriculum_docs, cfg.max_plays,
           cfg.max_chars_per_play, cfg.n_val_windows, cfg.context)  # fmt: skip
    if key not in _CACHE:
        corpus = _corpus(cfg)
        val = fixed_windows(encode_stream(tokenizer, corpus.val), cfg.n_val_windows, cfg.context)
        _CACHE[key] = (encode_stream(tokenizer, corpus.train), val)
    return _CACHE[key]


def _curves(name: str, folder: Path) -> pd.DataFrame:
    """Long table: phase, step, amount (tokens or examples seen), split, loss (nats)."""
    rows = []
    for phase in ("pretrain", *STAGES):
        path = folder / "curves" / f"{phase}.json"
        if not path.is_file():
            continue
        for r in json.loads(path.read_text()):
            amount = r.get("tokens", r.get("examples"))
            for col, split in (("train_loss", "train"), ("val_loss", "validation"),
                               ("eval_loss", "validation")):  # fmt: skip
                if r.get(col) is not None:
                    rows.append({"model": name, "phase": phase, "step": r["step"],
                                 "amount": amount, "split": split, "loss": r[col]})  # fmt: skip
    return pd.DataFrame(rows)


def _corpus_rows(name: str, card: dict[str, Any]) -> list[dict[str, Any]]:
    nat, cur = card["natural_text"], card["curriculum"]
    return [
        {"model": name, "part": "natural text (Shakespeare's plays)", "source": nat["source"],
         "licence": nat["licence"], "units": "plays", "n_train": len(nat["plays_train"]),
         "n_val": len(nat["plays_val"]), "n_heldout": len(nat["plays_heldout"]),
         "chars_train": nat["chars_train"], "chars_val": nat["chars_val"],
         "chars_heldout": nat["chars_heldout"]},
        {"model": name, "part": "curriculum (modern English)", "source": cur["source"],
         "licence": cur["licence"], "units": "documents", "n_train": cur["docs_train"],
         "n_val": cur["docs_val"], "n_heldout": cur["docs_heldout"],
         "chars_train": cur["chars_train"], "chars_val": cur["chars_val"],
         "chars_heldout": cur["chars_heldout"]},
        {"model": name, "part": "SFT pairs (question -> answer)", "source": cur["source"],
         "licence": cur["licence"], "units": "pairs", "n_train": cur["n_sft"], "n_val": 0,
         "n_heldout": cur["n_sft_eval"]},
        {"model": name, "part": "DPO triples (question, chosen, rejected)",
         "source": cur["source"], "licence": cur["licence"], "units": "triples",
         "n_train": cur["n_dpo"], "n_val": 0, "n_heldout": cur["n_dpo_eval"]},
    ]  # fmt: skip


def _build_row(name: str, cfg: OrganismConfig, build: dict[str, Any], model: Any) -> dict:
    return {
        "model": name, "arch": cfg.arch, "n_layers": cfg.n_layers, "d_model": cfg.d_model,
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab": cfg.vocab_size, "context": cfg.context, "steps": cfg.steps,
        "tokens_seen": cfg.steps * cfg.batch_size * cfg.context,
        "corpus_tokens_train": build["corpus"].get("tokens", {}).get("train"),
        "align_steps": cfg.align_steps, "threads": build.get("threads"),
        "train_seconds": build.get("train_seconds"),
        "build_seconds": build.get("elapsed_seconds"), "config_hash": build.get("config_hash"),
    }  # fmt: skip


# ----------------------------------------------------------------------------- one organism


def _groups(items: list[tuple], comp: dict[str, str]) -> dict[str, list[tuple]]:
    """Items by curriculum component, each sorted by question length (less padding)."""
    out: dict[str, list[tuple]] = {}
    for it in items:
        out.setdefault(comp.get(it[0], "other"), []).append(it)
    return {c: sorted(v, key=lambda it: len(it[0])) for c, v in sorted(out.items())}


def _accuracy_rows(
    name: str,
    scorers: dict[str, Callable[[list], int]],
    groups: dict[str, list[tuple]],
    chance: float | None,
) -> list[dict]:
    """hits per (scorer, component), then totals ("all"), Wilson CIs, binomial p vs chance."""
    rows = [{"model": name, "checkpoint": ck, "component": c, "n": len(g), "hits": int(score(g))}
            for ck, score in scorers.items() for c, g in groups.items()]  # fmt: skip
    df = pd.DataFrame(rows)
    total = df.groupby(["model", "checkpoint"], as_index=False, sort=False)[["n", "hits"]].sum()
    df = pd.concat([total.assign(component="all"), df], ignore_index=True)
    ci = np.array([wilson(h, n) for h, n in zip(df["hits"], df["n"], strict=True)])
    df["accuracy"], df["ci_low"], df["ci_high"] = ci.T
    if chance is not None:
        df["p_vs_chance"] = [sps.binomtest(h, n, chance).pvalue if n else np.nan
                             for h, n in zip(df["hits"], df["n"], strict=True)]  # fmt: skip
    return df.to_dict("records")


def _one(
    name: str, config: OrganismsConfig, n_eval: int | None, n_samples: int, n_new: int
) -> tuple[dict[str, list[dict]], dict[str, Any]]:
    cfg = ORGANISMS[name]
    folder = organisms.organism_dir(name)
    build = json.loads((folder / "build.json").read_text())
    models, tok = {}, None
    for ck in CHECKPOINTS:
        models[ck], tok = load_model(f"{name}@{ck}")
    corpus = _corpus(cfg)
    train, val = _streams(cfg, tok, folder)
    unigram = unigram_perplexity(train, val, len(tok))
    quality = []
    for ck, m in models.items():
        loss = eval_lm(m, val)
        m.eval()  # eval_lm leaves the model in train mode
        quality.append({"model": name, "checkpoint": ck, "val_loss": loss,
                        "val_perplexity": float(np.exp(loss)), "unigram_perplexity": unigram,
                        "fraction_of_unigram": float(np.exp(loss)) / unigram})  # fmt: skip
    comp, L = _components(cfg), cfg.context
    prior: dict[str, Counter] = {}  # answers of the training pairs, by component
    for q, a in corpus.sft:
        prior.setdefault(comp.get(q, "other"), Counter())[a] += 1

    def majority(g: list[tuple]) -> int:
        c = prior.get(comp.get(g[0][0], "other"), Counter())
        return sum(a == c.most_common(1)[0][0] for _, a in g) if c else 0

    sft_scorers: dict[str, Callable[[list], int]] = {"majority answer": majority}
    for ck in CHECKPOINTS:
        sft_scorers[ck] = lambda g, m=models[ck]: round(sft_accuracy(m, tok, g, L) * len(g))
    dpo_scorers = {ck: (lambda g, m=models[ck]: round(dpo_accuracy(m, tok, g, L) * len(g)))
                   for ck in ("final", "dpo")}  # fmt: skip
    words, profile = homograph_separation(models["final"], tok)
    tables = {
        "build": [_build_row(name, cfg, build, models["final"])],
        "corpus": _corpus_rows(name, build["corpus"]),
        "curves": _curves(name, folder).to_dict("records"),
        "quality": quality,
        "sft_accuracy": _accuracy_rows(name, sft_scorers,
                                       _groups(corpus.sft_eval[:n_eval], comp), None),
        "dpo_accuracy": _accuracy_rows(name, dpo_scorers,
                                       _groups(corpus.dpo_eval[:n_eval], comp), 0.5),
        "samples": samples(name, models, tok, corpus.sft_eval, comp, n_samples, n_new, config.temperature, config.seed),
        "homographs": words.assign(model=name).to_dict("records"),
        "homograph_layers": profile.assign(model=name).to_dict("records"),
    }  # fmt: skip
    return tables, _summary(tables, words, config.seed)


def _summary(t: dict[str, list[dict]], words: pd.DataFrame, seed: int) -> dict[str, Any]:
    """Headline numbers and the plain list of what did not work (``problems``)."""
    q = {r["checkpoint"]: r for r in t["quality"]}
    s = {r["checkpoint"]: r for r in t["sft_accuracy"] if r["component"] == "all"}
    d = {r["checkpoint"]: r for r in t["dpo_accuracy"] if r["component"] == "all"}
    gap = (words["separation"] - words["control_separation"]).to_numpy()
    wil = sps.wilcoxon(gap) if np.count_nonzero(gap) else None
    ratio = bootstrap_ci(words["ratio"].to_numpy(), np.median, n_resamples=2000, seed=seed,
                         method="percentile").iloc[0]  # fmt: skip
    out: dict[str, Any] = {
        "val_perplexity": {ck: r["val_perplexity"] for ck, r in q.items()},
        "unigram_perplexity": q["final"]["unigram_perplexity"],
        "sft_accuracy": {ck: [r["accuracy"], r["ci_low"], r["ci_high"]] for ck, r in s.items()},
        "dpo_accuracy": {
            ck: [r["accuracy"], r["ci_low"], r["ci_high"], r["p_vs_chance"]] for ck, r in d.items()
        },  # fmt: skip
        "homographs_separated": int(words["separated"].sum()),
        "homographs": len(words),
        "homograph_median_ratio": [
            float(ratio["estimate"]),
            float(ratio["ci_low"]),
            float(ratio["ci_high"]),
        ],  # fmt: skip
        "homograph_wilcoxon_p": float(wil.pvalue) if wil is not None else float("nan"),
        "build_seconds": t["build"][0]["build_seconds"],
    }
    problems = []
    base_ppl, uni = q["final"]["val_perplexity"], q["final"]["unigram_perplexity"]
    if base_ppl > 0.5 * uni:
        problems.append(f"validation perplexity {base_ppl:.1f} is not far below the unigram "
                        f"baseline {uni:.1f}")  # fmt: skip
    for ck in ("sft", "dpo"):
        if q[ck]["val_perplexity"] > 1.5 * base_ppl:
            problems.append(f"@{ck} raised validation perplexity from {base_ppl:.1f} to "
                            f"{q[ck]['val_perplexity']:.1f}")  # fmt: skip
    if s["sft"]["ci_low"] <= s["final"]["ci_high"]:
        problems.append(f"@sft ({s['sft']['accuracy']:.3f}) does not beat the base "
                        f"({s['final']['accuracy']:.3f}) on held-out questions")  # fmt: skip
    if s["sft"]["ci_low"] <= s["majority answer"]["accuracy"]:
        problems.append(f"@sft ({s['sft']['accuracy']:.3f}) does not beat always giving each "
                        f"kind of question its most frequent training answer "
                        f"({s['majority answer']['accuracy']:.3f})")  # fmt: skip
    if d["dpo"]["ci_low"] <= d["final"]["accuracy"]:
        problems.append(
            f"@dpo ({d['dpo']['accuracy']:.3f}) prefers the correct answer no more often than "
            f"its base ({d['final']['accuracy']:.3f}) on held-out pairs"
        )
    if d["dpo"]["ci_low"] <= 0.5:
        problems.append(f"@dpo prefers the correct answer on {d['dpo']['accuracy']:.3f} of "
                        f"held-out pairs (95% CI {d['dpo']['ci_low']:.3f}-"
                        f"{d['dpo']['ci_high']:.3f}): not distinguishable from chance")  # fmt: skip
    if not (out["homograph_wilcoxon_p"] < 0.05 and np.median(gap) > 0):
        problems.append(f"homograph senses are not separated beyond their controls "
                        f"({out['homographs_separated']} of {len(words)} words; Wilcoxon "
                        f"p = {out['homograph_wilcoxon_p']:.3g})")  # fmt: skip
    out["problems"] = problems
    return out


def run_organisms(config: OrganismsConfig) -> OrganismsResult:
    """Everything the organisms chapter shows, for every organism of ``config.model``.

    Runs on ``$LAMINA_NUM_THREADS`` torch threads (default 1: these small models gain nothing
    from more, and lose much when the CPUs are shared).
    """
    names, notes = organism_names(config.model)
    n_eval, n_samples, n_new = config.n_eval, config.n_samples, config.max_new_tokens
    rows: dict[str, list[dict]] = {}
    summaries = {}
    old_threads = torch.get_num_threads()
    torch.set_num_threads(int(os.environ.get("LAMINA_NUM_THREADS", 1)))
    try:
        for name in names:
            tables, summaries[name] = _one(name, config, n_eval, n_samples, n_new)
            for k, v in tables.items():
                rows.setdefault(k, []).extend(v)
    finally:
        torch.set_num_threads(old_threads)
    return OrganismsResult(config, {k: pd.DataFrame(v) for k, v in rows.items()}, summaries, notes)
