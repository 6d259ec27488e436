"""The organisms chapter's summaries: headline numbers, the self-checks judged by the engine,
and the plain list of what did not work.

The self-checks (:data:`lamina.sources.organisms.claims.CLAIMS`) go through
:class:`lamina.evidence.decide.Judge` like every claim of the book; the ``targets`` table of a
summary is their rows with the value, CI and threshold each compares. The stage gates of the
aligned real models (:func:`aligned_gates`) are read from their builds (``make aligned``).
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from lamina.core.provenance import data_dir
from lamina.evidence.claims import SELF_VERDICTS, Claim
from lamina.evidence.decide import Context, Judge, Measurement
from lamina.evidence.stats import bootstrap_ci
from lamina.sources.organisms.claims import DPO_GATE, NO_LEAK, SFT_GATE, SFT_KEEPS_LM, SFT_PPL_RATIO
from lamina.sources.organisms.gates import read_gates
from lamina.sources.organisms.pretrained import PretrainedAlignConfig
from lamina.sources.organisms.reference import bpb_by_source
from lamina.sources.organisms.tables import gate_rows

__all__ = ["aligned_gates", "gate_checks", "summary"]

_GAINS = {"sft": ("gain_over_best_policy", SFT_GATE, "CI above 0, and above 0 against the base and every policy"),
          "dpo": ("preference_gain", DPO_GATE, "CI above 0, the content probe's gain over the base too, and preference accuracy above the constant style")}  # fmt: skip


def _ci(r: dict[str, Any], col: str) -> tuple[float, float, float]:
    return tuple(float(r.get(f"{col}{k}", math.nan)) for k in ("", "_ci_low", "_ci_high"))  # type: ignore[return-value]


def gate_checks(judge: Judge, gates: dict[str, dict[str, Any]]) -> list[tuple[Claim, str]]:
    """The SFT and DPO gates of one model as self-check rows (:data:`SFT_GATE`,
    :data:`DPO_GATE`) from its gate rows by stage (:func:`~.tables.gate_rows`): (row, the
    threshold in words). A stage without a gate is "not testable"."""
    out = []
    for stage, (col, spec, threshold) in _GAINS.items():
        r = gates.get(stage, {})
        e, lo, hi = _ci(r, col)
        measured = r.get("gated") is True
        m = Measurement(estimate=e, ci_low=lo, ci_high=hi, passed=bool(r["passed"]) if measured else None,
                        n_units=int(r["n_units"]) if measured else None,
                        detail=str(r.get("reason", "")))  # fmt: skip
        out.append((judge(spec, m), threshold))
    return out


def _targets(rows: list[tuple[Claim, str]]) -> list[dict[str, Any]]:
    """The targets table of one summary: each self-check's row with its threshold."""
    return [{"target": c.claim, "claim_id": c.claim_id, "value": c.measured,
             "ci_low": None if math.isnan(c.ci_low) else c.ci_low,
             "ci_high": None if math.isnan(c.ci_high) else c.ci_high,
             "threshold": threshold, "verdict": c.verdict} for c, threshold in rows]  # fmt: skip


def summary(name: str, t: dict[str, list[dict]], words: pd.DataFrame, seed: int,
            build: dict) -> dict[str, Any]:  # fmt: skip
    """Headline numbers of one organism, its self-checks (``claims``: the engine's rows;
    ``targets``: the same with thresholds) and the plain list of what did not work
    (``problems``)."""
    q = {r["checkpoint"]: r for r in t["quality"]}
    s = {r["checkpoint"]: r for r in t["sft_accuracy"] if r["component"] == "all"}
    d = {r["checkpoint"]: r for r in t["dpo_accuracy"] if r["component"] == "all"}
    g = {r["stage"]: r for r in t["gates"]}
    mg = {r["pairs"]: r for r in t["dpo_margins"]}
    gap = (words["separation"] - words["control_separation"]).to_numpy()
    wil = sps.wilcoxon(gap) if np.count_nonzero(gap) else None
    ratio = bootstrap_ci(words["ratio"].to_numpy(), np.median, n_resamples=2000, seed=seed,
                         method="percentile").iloc[0]  # fmt: skip
    overlap = build.get("overlap", {}).get("overlap")
    judge = Judge(Context(model=name))
    leak = judge(NO_LEAK, Measurement(estimate=math.nan if overlap is None else float(overlap),
                                      passed=None if overlap is None else overlap == 0))  # fmt: skip
    lm = judge(SFT_KEEPS_LM, Measurement(estimate=q["sft"]["ratio_to_base"],
                                         passed=bool(q["sft"]["ratio_to_base"] <= SFT_PPL_RATIO)))  # fmt: skip
    checks = [(lm, f"<= {SFT_PPL_RATIO}"), *gate_checks(judge, g), (leak, "= 0")]
    out: dict[str, Any] = {
        "val_perplexity": {ck: r["val_perplexity"] for ck, r in q.items()},
        "ppl_ratio_to_base": {ck: r["ratio_to_base"] for ck, r in q.items()},
        "unigram_perplexity": q["final"]["unigram_perplexity"],
        "sft_accuracy": {ck: [r["accuracy"], r["ci_low"], r["ci_high"]] for ck, r in s.items()},
        "gates": {st: {"passed": r["passed"], "reason": r["reason"]} for st, r in g.items() if r["gated"]},
        "sft_gain_over_best_policy": list(_ci(g["sft"], "gain_over_best_policy")),
        "dpo_preference_gain": list(_ci(g["dpo"], "preference_gain")),
        "dpo_content_gain_over_base": list(_ci(g["dpo"], "content_gain_over_base")),
        "dpo_accuracy": {ck: [r["accuracy"], r["ci_low"], r["ci_high"], r["p_vs_chance"]] for ck, r in d.items()},
        "dpo_reward_margin": {k: [r["reward_margin"], r["margin_ci_low"], r["margin_ci_high"]] for k, r in mg.items()},
        "dpo_reward_accuracy": {k: [r["reward_accuracy"], r["ci_low"], r["ci_high"]] for k, r in mg.items()},
        "eval_8gram_overlap": overlap,
        "gloss_hits": len(build.get("overlap", {}).get("gloss_hits", [])),
        "n_training_seeds": len(t["seeds"]),
        "homographs_separated": int(words["separated"].sum()),
        "homographs": len(words),
        "homograph_median_ratio": [float(ratio["estimate"]), float(ratio["ci_low"]), float(ratio["ci_high"])],
        "homograph_wilcoxon_p": float(wil.pvalue) if wil is not None else float("nan"),
        "bits_per_byte": bpb_by_source(t["bits_per_byte"], "final"),
        "build_seconds": t["build"][0]["build_seconds"],
        "cpu_seconds": t["build"][0]["cpu_seconds"],
        "claims": [c.row() for c, _ in checks],
        "targets": _targets(checks),
    }  # fmt: skip
    failed = {c.claim_id for c, _ in checks if c.verdict != SELF_VERDICTS[0]}  # not "check passed"
    problems = [f"{x['claim_id']} ({x['verdict']}): {x['value']:.3g} (target {x['threshold']})"
                for x in out["targets"] if x["claim_id"] in failed]  # fmt: skip
    base_ppl, uni = q["final"]["val_perplexity"], q["final"]["unigram_perplexity"]
    if base_ppl > 0.5 * uni:
        problems.append(f"validation perplexity {base_ppl:.1f} is not far below the unigram "
                        f"baseline {uni:.1f}")  # fmt: skip
    if q["dpo"]["ratio_to_base"] > 1.5:
        problems.append(f"@dpo raised validation perplexity from {base_ppl:.1f} to "
                        f"{q['dpo']['val_perplexity']:.1f}")  # fmt: skip
    if mg["held-out"]["margin_ci_low"] <= 0:
        problems.append("@dpo's mean reward margin on held-out pairs is not above 0")
    if not (out["homograph_wilcoxon_p"] < 0.05 and np.median(gap) > 0):
        problems.append(f"homograph senses are not separated beyond their controls "
                        f"({out['homographs_separated']} of {len(words)} words; Wilcoxon "
                        f"p = {out['homograph_wilcoxon_p']:.3g})")  # fmt: skip
    out["problems"] = problems
    return out


def aligned_gates(models: list[str]) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], list[str]]:
    """The stage gates of the aligned real models (``make aligned``, the default
    :class:`~lamina.sources.organisms.pretrained.PretrainedAlignConfig`): (their gate rows, as
    :func:`~.tables.gate_rows`; {model: {"claims", "targets", "build"}}; notes for the models
    not built). Read from each build's ``gates.json`` and ``build.json``, never recomputed."""
    rows: list[dict[str, Any]] = []
    found: dict[str, dict[str, Any]] = {}
    notes = []
    cfg = PretrainedAlignConfig()
    for name in models:
        folder = data_dir() / "aligned" / f"{name.replace('/', '--')}-{cfg.config_hash}"
        if not (folder / "build.json").is_file():
            notes.append(f"The aligned {name} is not built (`make aligned ALIGNED={name}`): its "
                         "stage gates are not shown.")  # fmt: skip
            continue
        record = json.loads((folder / "gates.json").read_text())
        gates = {"measures": record["measures"], **read_gates(record)}
        mine = gate_rows(name, gates, checkpoints={"base": "base", "sft": "sft", "dpo": "dpo"})
        rows += mine
        checks = gate_checks(Judge(Context(model=name)), {r["stage"]: r for r in mine})
        found[name] = {"claims": [c.row() for c, _ in checks], "targets": _targets(checks),
                       "build": json.loads((folder / "build.json").read_text())}  # fmt: skip
    return rows, found, notes
