"""Tables of the organisms chapter: the stage gates, accuracies with Wilson CIs per component
and kind, DPO margins, curves, the build and corpus rows, and the training seeds' build-time
numbers.

Each function returns tidy rows (dicts with a ``model`` column) for
:func:`lamina.sources.organisms.quality.organism_tables` (the organisms chapter).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from lamina.evidence.stats import bootstrap_ci, wilson
from lamina.sources import organisms
from lamina.sources.organisms.configs import OrganismConfig, organism_config
from lamina.sources.organisms.gates import sft_gate_rows
from lamina.sources.organisms.train import STAGES

__all__ = ["MEASURES", "STAGE_CHECKPOINT", "blas_name", "build_row", "corpus_rows", "gate_rows",
           "gates_long", "kind_rows", "loss_curves", "margin_curve", "margin_rows", "seed_rows",
           "stage_component_rows"]  # fmt: skip

STAGE_CHECKPOINT = {"base": "final", "sft": "sft", "dpo": "dpo"}
"""The organism checkpoint of each gated stage (the base is the end of pretraining)."""


def gate_rows(name: str, gates: dict[str, Any],
              checkpoints: dict[str, str] = STAGE_CHECKPOINT) -> list[dict[str, Any]]:  # fmt: skip
    """One row per stage of :func:`lamina.sources.organisms.gates.measure_stages`: model,
    stage, checkpoint, gated (the stage has a gate), passed (NaN for the base), reason, the
    stage's measures (accuracies with their CIs over entity pairs, dW_rel/<group>) and its
    gate's values (gains over the predecessor and the content-blind policies, with CIs).
    checkpoints: {stage: checkpoint name} (an organism's base is ``final``)."""
    rows = []
    for stage, ck in checkpoints.items():
        g = gates.get(stage)
        rows.append({"model": name, "stage": stage, "checkpoint": ck, "gated": g is not None,
                     "passed": g.passed if g is not None else np.nan,
                     "reason": g.reason if g is not None else "the base: not gated",
                     **gates["measures"][stage], **(g.values if g is not None else {})})  # fmt: skip
    return rows


def stage_component_rows(name: str, gates: dict[str, Any], policies: dict[str, np.ndarray],
                         best: str) -> list[dict[str, Any]]:  # fmt: skip
    """Held-out SFT accuracy on the SFT gate's items (the unrestricted ones) per curriculum
    component (the template's prefix) for each stage and for the best content-blind policy
    ``best`` (``policies``: {name: hits on those items}): model, checkpoint (stage, or
    "content-blind: <best>"), component (and "all"), n, hits, accuracy with its Wilson 95% CI."""
    tables = {s: gates["tables"][s][0] for s in STAGE_CHECKPOINT}
    tables = {s: sft_gate_rows(t) for s, t in tables.items()}
    first = next(iter(tables.values()))
    comp = first["template"].str.split(":").str[0].fillna("other").to_numpy()
    hits = {s: t["hit"].to_numpy(float) for s, t in tables.items()}
    hits[f"content-blind: {best}"] = np.asarray(policies[best], float)
    rows = []
    for who, h in hits.items():
        for c in ["all", *sorted(set(comp))]:
            m = np.ones(len(h), bool) if c == "all" else comp == c
            k, n = int(h[m].sum()), int(m.sum())
            acc, lo, hi = wilson(k, n)
            rows.append({"model": name, "checkpoint": who, "component": c, "n": n, "hits": k,
                         "accuracy": acc, "ci_low": lo, "ci_high": hi})  # fmt: skip
    return rows


def kind_rows(name: str, gates: dict[str, Any]) -> list[dict[str, Any]]:
    """Held-out preference accuracy (ties 1/2) per kind of triple and stage, with Wilson 95%
    CIs: model, checkpoint (stage), component (kind, and "all"), n, accuracy, ci_low, ci_high,
    p_vs_chance (binomial, against 1/2)."""
    rows = []
    for stage in STAGE_CHECKPOINT:
        t = gates["tables"][stage][1]
        wins = np.where(t["margin"] > 0, 1.0, np.where(t["margin"] < 0, 0.0, 0.5))
        for kind in ["all", *sorted(set(t["kind"]))]:
            w = wins if kind == "all" else wins[(t["kind"] == kind).to_numpy()]
            k = int(round(w.sum()))
            acc, lo, hi = wilson(k, len(w))
            rows.append({"model": name, "checkpoint": stage, "component": kind, "n": len(w),
                         "accuracy": float(w.mean()), "ci_low": lo, "ci_high": hi,
                         "p_vs_chance": sps.binomtest(k, len(w), 0.5).pvalue})  # fmt: skip
    return rows



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
        # each stage's wall time in the same run (pretrain, lm, sft, dpo, evaluation)
        **{f"{stage}_seconds": t for stage, t in (build.get("stage_seconds") or {}).items()},
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


MEASURES = {"sft_accuracy": "SFT accuracy", "content_probe": "content probe",
            "preference_accuracy": "preference accuracy"}
"""The stage measures the organisms' gates figure shows, as its rows read."""


def gates_long(g: pd.DataFrame) -> pd.DataFrame:
    """From the gates table ``g`` (:func:`gate_rows`): one row per organism, stage and measure of :data:`MEASURES` (kind "stage": model, stage,
    measure, value, ci_low, ci_high), and per organism the reference each measure is gated
    against (kind "reference", stage = its name): the best content-blind policy for SFT
    accuracy, the best constant-style policy for the two preference measures."""
    rows = [{"kind": "stage", "model": r["model"], "stage": r["stage"], "measure": label,
             "value": r[m], "ci_low": r[f"{m}_ci_low"], "ci_high": r[f"{m}_ci_high"]}
            for r in g.to_dict("records") for m, label in MEASURES.items()]  # fmt: skip
    rows += [{"kind": "reference", "model": r["model"], "stage": "best content-blind policy",
              "measure": MEASURES["sft_accuracy"], "value": r["best_policy_accuracy"]}
             for r in g[g["stage"] == "sft"].to_dict("records")]  # fmt: skip
    rows += [{"kind": "reference", "model": r["model"], "stage": "constant style",
              "measure": MEASURES[m], "value": r["constant_style_baseline"]}
             for r in g[g["stage"] == "base"].to_dict("records") for m in ("content_probe", "preference_accuracy")]  # fmt: skip
    return pd.DataFrame(rows)
