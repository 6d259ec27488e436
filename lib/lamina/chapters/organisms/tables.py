"""Tables of the organisms chapter: accuracies with Wilson CIs, paired gains, DPO margins,
curves, the build and corpus rows, and the training seeds' build-time numbers.

Each function returns tidy rows (dicts with a ``model`` column) for
:func:`lamina.chapters.organisms.run.run_organisms`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from lamina.evidence.stats import bootstrap_ci, wilson
from lamina.sources import organisms
from lamina.sources.organisms.configs import OrganismConfig, organism_config
from lamina.sources.organisms.train import STAGES

__all__ = ["GATE_CHECKPOINTS", "accuracy_rows", "blas_name", "build_row", "corpus_rows",
           "gate_rows", "group_by_component", "loss_curves", "margin_curve", "margin_rows",
           "paired_gain", "seed_rows"]  # fmt: skip

GATE_CHECKPOINTS = ("final", "sft", "dpo")
"""Checkpoints whose behavioural gates the chapter shows (the base shows what alignment adds)."""


def gate_rows(name: str, checkpoint: str, gates: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per gate of a checkpoint (:func:`lamina.sources.organisms.gates.measure_checkpoint`):
    model, checkpoint, gate, passed, reason, and the gate's values as columns (dW_rel/<group>:
    ||dW||_F / ||W||_F against the base)."""
    return [{"model": name, "checkpoint": checkpoint, "gate": g, "passed": r.passed,
             "reason": r.reason, **r.values} for g, r in gates.items()]  # fmt: skip



def loss_curves(name: str, folder: Path) -> pd.DataFrame:
    """Long table: phase, step, amount (tokens or examples seen), split, loss (nats)."""
    rows = []
    for phase in ("pretrain", *STAGES):
        path = folder / "curves" / f"{phase}.json"
        if not path.is_file():
            continue
        for r in json.loads(path.read_text()):
            amount = r.get("tokens", r.get("examples"))
            for col, split in (("train_loss", "train"), ("val_loss", "validation"),
                               ("eval_loss", "validation"), ("val_lm_loss", "validation LM")):  # fmt: skip
                if r.get(col) is not None:
                    rows.append({"model": name, "phase": phase, "step": r["step"],
                                 "amount": amount, "split": split, "loss": r[col]})  # fmt: skip
    return pd.DataFrame(rows)


def margin_curve(name: str, folder: Path) -> list[dict[str, Any]]:
    """DPO reward margins logged during training: model, step, pairs, reward_margin, accuracy."""
    path = folder / "curves" / "dpo.json"
    rows = json.loads(path.read_text()) if path.is_file() else []
    return [{"model": name, "step": r["step"], "pairs": label,
             "reward_margin": r[f"{key}_reward_margin"],
             "reward_accuracy": r.get(f"{key}_reward_accuracy")}
            for r in rows for key, label in (("train", "training"), ("eval", "held-out"))
            if r.get(f"{key}_reward_margin") is not None]  # fmt: skip


def corpus_rows(name: str, card: dict[str, Any]) -> list[dict[str, Any]]:
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


def build_row(name: str, cfg: OrganismConfig, build: dict[str, Any], model: Any) -> dict:
    env = build.get("environment", {})
    return {
        "model": name, "arch": cfg.arch, "n_layers": cfg.n_layers, "d_model": cfg.d_model,
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab": cfg.vocab_size, "context": cfg.context, "steps": cfg.steps,
        "tokens_seen": cfg.steps * cfg.batch_size * cfg.context,
        "corpus_tokens_train": build["corpus"].get("tokens", {}).get("train"),
        "align_steps": cfg.align_steps, "sft_lr": cfg.sft_lr, "dpo_lr": cfg.dpo_lr,
        "replay_batch_size": cfg.replay_batch_size, "seed": cfg.seed,
        "threads": build.get("threads"), "cpu_model": env.get("cpu_model"),
        "blas": blas_name(env), "train_seconds": build.get("train_seconds"),
        "build_seconds": build.get("elapsed_seconds"), "cpu_seconds": build.get("cpu_seconds"),
        "eval_8gram_overlap": build.get("overlap", {}).get("overlap"),
        "config_hash": build.get("config_hash"),
    }  # fmt: skip


def blas_name(env: dict[str, Any]) -> str | None:
    """'numpy: <blas name> <version>' from the build's environment record, if present."""
    blas = (env.get("numpy_blas") or {}).get("blas") or {}
    return f"numpy: {blas.get('name')} {blas.get('version', '')}".strip() if blas else None


def margin_rows(name: str, margins: dict[str, np.ndarray], beta: float, seed: int) -> list[dict]:
    """Mean beta * margin (bootstrap 95% CI over pairs) and reward accuracy (Wilson) per split."""
    rows = []
    for split, m in margins.items():
        ci = bootstrap_ci(beta * m, np.mean, n_resamples=2000, seed=seed,
                          method="percentile").iloc[0] if len(m) > 1 else None  # fmt: skip
        acc = wilson(int((m > 0).sum()), len(m))
        rows.append({"model": name, "pairs": split, "n": len(m),
                     "reward_margin": float(beta * m.mean()) if len(m) else np.nan,
                     "margin_ci_low": float(ci["ci_low"]) if ci is not None else np.nan,
                     "margin_ci_high": float(ci["ci_high"]) if ci is not None else np.nan,
                     "reward_accuracy": acc[0], "ci_low": acc[1], "ci_high": acc[2]})  # fmt: skip
    return rows


def seed_rows(name: str) -> list[dict[str, Any]]:
    """One row per built training seed of ``name``, from each build's evaluation.json."""
    rows = []
    for n in organisms.built_seeds(name):
        ev = json.loads((organisms.organism_dir(n) / "evaluation.json").read_text())["models"]
        base = ev["final"]["val_perplexity"]
        rows.append({"model": name, "organism": n, "seed": organism_config(n).seed,
                     "val_perplexity": base,
                     "sft_ppl_ratio": ev["sft"]["val_perplexity"] / base,
                     "sft_accuracy": ev["sft"]["sft_accuracy"],
                     "dpo_preference_accuracy": ev["dpo"]["dpo_accuracy"],
                     "dpo_reward_margin": ev["dpo"].get("reward_margin", np.nan)})  # fmt: skip
    return rows


def group_by_component(items: list[tuple], comp: dict[str, str]) -> dict[str, list[tuple]]:
    """Items by curriculum component, each sorted by question length (less padding)."""
    out: dict[str, list[tuple]] = {}
    for it in items:
        out.setdefault(comp.get(it[0], "other"), []).append(it)
    return {c: sorted(v, key=lambda it: len(it[0])) for c, v in sorted(out.items())}


def accuracy_rows(
    name: str,
    scorers: dict[str, Callable[[list], np.ndarray]],
    groups: dict[str, list[tuple]],
    chance: float | None,
) -> tuple[list[dict], dict[str, np.ndarray]]:
    """Hits per (scorer, component), then totals ("all"), Wilson CIs, binomial p vs chance.

    -> (rows, {scorer: per-item hits over all groups, in group order}).
    """
    per_item = {ck: [np.asarray(score(g), dtype=bool) for g in groups.values()]
                for ck, score in scorers.items()}  # fmt: skip
    rows = [{"model": name, "checkpoint": ck, "component": c, "n": len(g), "hits": int(h.sum())}
            for ck, hs in per_item.items() for (c, g), h in zip(groups.items(), hs, strict=True)]  # fmt: skip
    df = pd.DataFrame(rows)
    total = df.groupby(["model", "checkpoint"], as_index=False, sort=False)[["n", "hits"]].sum()
    df = pd.concat([total.assign(component="all"), df], ignore_index=True)
    ci = np.array([wilson(h, n) for h, n in zip(df["hits"], df["n"], strict=True)])
    df["accuracy"], df["ci_low"], df["ci_high"] = ci.T
    if chance is not None:
        df["p_vs_chance"] = [sps.binomtest(h, n, chance).pvalue if n else np.nan
                             for h, n in zip(df["hits"], df["n"], strict=True)]  # fmt: skip
    return df.to_dict("records"), {ck: np.concatenate(hs) for ck, hs in per_item.items()}


def paired_gain(a: np.ndarray, b: np.ndarray, seed: int) -> list[float]:
    """[mean(a - b), 95% CI low, high]: paired bootstrap over items (a, b: (N,) 0/1 hits)."""
    d = a.astype(float) - b.astype(float)
    if len(d) < 2 or np.all(d == d[0]):
        return [float(d.mean()) if len(d) else np.nan] * 3
    r = bootstrap_ci(d, np.mean, n_resamples=4000, seed=seed, method="percentile").iloc[0]
    return [float(d.mean()), float(r["ci_low"]), float(r["ci_high"])]
