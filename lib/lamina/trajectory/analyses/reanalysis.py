"""Reanalysis of paper 1's released GPT-2 states: which conventions give the released numbers
(curvature 0.94-1.27 rad, peak CI ~0.14) and which the paper's text (0.27-0.83 rad, 0.41-0.58).

Rows of two kinds: self-checks of lamina (its metrics reproduce the released per-prompt
values; the released bootstrap table's source), which never count as reproductions, and
paper 1's claims tested on the released states (the curvature gap at equal length and the two
families' levels, the peak CI), declared in :mod:`lamina.trajectory.claims` and judged by
:func:`lamina.evidence.decide.decide`. The released prompts can also run through other models
(:mod:`.reanalysis_models`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lamina.evidence.claims import Claim
from lamina.evidence.decide import Context, Judge, Measurement
from lamina.trajectory import claims as C
from lamina.trajectory.judging import measurements
from lamina.trajectory.metrics import (
    convergence_index_per_prompt,
    mean_curvature,
    trajectory_length,
)
from lamina.trajectory.model_states import CONVENTIONS, ModelStates
from lamina.trajectory.sizes import chapter_mask
from lamina.trajectory.stat_tests import paper1_test

__all__ = ["CATEGORIES", "HEADLINE_CONVENTION", "PER_PROMPT", "bootstrap_source",
           "convention_rows", "curvature_per_category", "headline_rows", "released",
           "self_checks"]  # fmt: skip

# the reanalysis row of each chapter claim
AS = {"p1-reanalysis-gap": C.GAP.id, "p1-reanalysis-reasoning-range": C.REASONING_LEVEL.id,
      "p1-reanalysis-lexical-range": C.LEXICAL_LEVEL.id, "p1-reanalysis-peak": C.PEAK.id}  # fmt: skip


def released(root: Path, rel: str) -> pd.DataFrame | None:
    """A released results table (``results/<rel>`` under the release), or None if absent."""
    path = root / "results" / rel
    return pd.read_csv(path) if path.is_file() else None


PER_PROMPT = "metrics/phase_7_controls_metrics/gpt2_trajectory_metrics.csv"
CATEGORIES = ("animals", "objects", "reasoning")


def _per_prompt_match(ms: ModelStates, released: pd.DataFrame | None) -> pd.DataFrame:
    """Per convention: the largest |lamina - released| of per-prompt mean curvature (rad) and of
    raw length over the prompts of the released per-prompt metrics table."""
    rows: list[dict] = []
    if released is None:
        return pd.DataFrame(rows)
    rel = released.set_index("prompt_id")
    for name, conv in CONVENTIONS.items():
        if conv.pool not in ms.pools:
            continue
        pooled = ms.pools[conv.pool]
        ids = pooled.prompts["id"].tolist()
        common = [i for i in rel.index if i in ids]
        if not common:
            continue
        x = pooled.states(conv)[0][[ids.index(i) for i in common]]
        rows.append({
            "model": "peer-gpt2", "convention": name, "n_prompts": len(common),
            "curvature_max_diff": float(np.max(np.abs(
                mean_curvature(x) - rel.loc[common, "curvature"].to_numpy()))),
            "length_max_diff": float(np.max(np.abs(
                trajectory_length(x) - rel.loc[common, "length"].to_numpy()))),
        })
    return pd.DataFrame(rows)


def bootstrap_source(
    boot: pd.DataFrame | None, per_prompt: pd.DataFrame | None, ms: ModelStates
) -> pd.DataFrame:
    """The released bootstrap table's curvature means beside the category means of (a) the
    prompts of the released per-prompt metrics table and (b) all 170 released trajectories
    (released code's convention). Columns: category, released, per_prompt_table, all_170."""
    if boot is None or per_prompt is None:
        return pd.DataFrame()
    rb = boot[boot["metric"] == "curvature"].set_index("category")["mean"]
    pooled = ms.pools["last"]
    # the per-prompt table names some categories by subgroup ("vehicles"): use the released
    # prompt table's group of each prompt id instead
    group = dict(zip(pooled.prompts["id"], pooled.prompts["category"], strict=True))
    cats = per_prompt["prompt_id"].map(group).fillna(per_prompt["category"])
    pp = per_prompt["curvature"].groupby(cats.to_numpy()).mean()
    n_pp = cats.value_counts()
    mc = mean_curvature(pooled.states(CONVENTIONS["released code"])[0])
    allm = pd.Series(mc).groupby(pooled.prompts["category"].to_numpy()).mean()
    rows = [{"model": "peer-gpt2", "category": c, "released": float(rb[c]),
             "per_prompt_table": float(pp.get(c, np.nan)), "all_170": float(allm.get(c, np.nan)),
             "n_per_prompt_table": int(n_pp.get(c, 0))}
            for c in rb.index]
    return pd.DataFrame(rows)


HEADLINE_CONVENTION = "paper text"  # fixed in advance: the convention the paper's text states


def _judge(judge: Judge, s: dict[str, Any], chapter: str, ids: tuple[str, ...]) -> list[Claim]:
    """The reanalysis rows ``ids`` from the chapter test summary ``s`` (each judged as its
    chapter claim is, :data:`AS`)."""
    found = measurements(chapter, s)
    return [judge(C.by_id(cid), found[AS[cid]]) for cid in ids]


def headline_rows(sens: pd.DataFrame, parts: pd.DataFrame) -> list[Claim]:
    """The reanalysis' claim rows under a convention fixed before looking at the data:
    :data:`HEADLINE_CONVENTION` when the release has its pooling, else the first available in
    ``CONVENTIONS`` order (never the convention with the best value: choosing the best of
    several inflates the estimate and its CI). sens: one row per convention with columns
    convention and ``_s`` (the convergence test's dict); parts: the curvature parts with
    ``_s`` (the curvature test's dict) per convention and single-token handling."""
    order = [c for c in CONVENTIONS if c in set(sens["convention"])]
    if not order:
        raise ValueError("the reanalysis needs at least one convention's test")
    name = HEADLINE_CONVENTION if HEADLINE_CONVENTION in order else order[0]
    label = f"{CONVENTIONS[name].label} (fixed in advance: {name!r})"
    judge = Judge(Context(model="peer-gpt2", convention=label))
    head = parts[(parts["convention"] == name) & (parts["single_token_prompts"] == "excluded")]
    rows = _judge(judge, dict(head.iloc[0]["_s"]), "curvature",
                  ("p1-reanalysis-gap", "p1-reanalysis-reasoning-range",
                   "p1-reanalysis-lexical-range")) if len(head) else []  # fmt: skip
    s = dict(sens.set_index("convention").loc[name, "_s"])
    return rows + _judge(judge, s, "convergence", ("p1-reanalysis-peak",))


def convention_rows(
    ms: ModelStates, n_bootstrap: int, n_permutations: int, seed: int
) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    """Per representation convention of the released states: (curvature rows by category,
    convergence-index rows by layer, convergence sensitivity rows, curvature parts with and
    without single-token prompts)."""
    curv_rows, ci_rows, sens, parts = [], [], [], []
    nb, nperm = min(n_bootstrap, 1000), max(n_permutations, 1000)
    for name, conv in CONVENTIONS.items():
        if conv.pool not in ms.pools:
            continue
        pooled = ms.pools[conv.pool]
        x, layers = pooled.states(conv)
        mc = mean_curvature(x)
        cats = pooled.prompts["category"].to_numpy()
        curv_rows += [{"model": "peer-gpt2", "convention": name, "category": cat,
                       "mean_curvature": float(np.mean(mc[cats == cat]))} for cat in CATEGORIES]
        ci = np.nanmean(convergence_index_per_prompt(x, cats), axis=0)
        ci_rows += [{"model": "peer-gpt2", "convention": name, "layer": layer, "ci": float(v)}
                    for layer, v in zip(layers, ci, strict=True)]
        conv_s = paper1_test("convergence", x, pooled.prompts, layers, n_bootstrap=nb,
                             n_permutations=nperm, seed=seed)
        for exclude in (True, False):
            keep = chapter_mask("curvature", pooled.prompts, pooled.n_tokens, exclude)
            t = pooled.prompts[keep].reset_index(drop=True)
            r = paper1_test("curvature", x[keep], t, layers, n_tokens=pooled.n_tokens[keep],
                            n_bootstrap=nb, seed=seed)
            parts.append({"model": "peer-gpt2", "convention": name,
                          "single_token_prompts": "excluded" if exclude else "included",
                          "n_prompts": int(keep.sum()), "reasoning": r["reasoning"],
                          "lexical": r["lexical"], "difference": r["difference"],
                          "diff_low": r["diff_low"], "diff_high": r["diff_high"], "p": r["p"],
                          "matched": r.get("matched", np.nan), "_s": r})  # fmt: skip
        sens.append({"model": "peer-gpt2", "convention": name, "definition": conv.label,
                     "n_prompts": len(x), "peak_ci": conv_s["peak"],
                     "peak_low": conv_s["ci_low"], "peak_high": conv_s["ci_high"],
                     "peak_layer": conv_s["peak_layer"], "p": conv_s["p"], "_s": conv_s})
    return curv_rows, ci_rows, sens, parts


def _check(cid: str, value: float, tolerance: float, what: str, convention: str = "") -> Claim:
    """A self-check row: ``value`` (the largest difference) below ``tolerance``."""
    judge = Judge(Context(model="peer-gpt2", convention=convention))
    return judge(C.by_id(cid), Measurement(estimate=value, passed=bool(value < tolerance),
                                           detail=f"to {tolerance:g} {what}"))  # fmt: skip


def self_checks(
    ms: ModelStates,
    root: Path,
    per_prompt: pd.DataFrame | None,
    rel_ci: pd.DataFrame | None,
    ci_rows: list[dict],
) -> tuple[list[Claim], pd.DataFrame, pd.DataFrame, list[dict]]:
    """The self-checks against the released tables: (claims, bootstrap-source table,
    per-prompt match table, convergence rows with the released profile beside ours)."""
    claims: list[Claim] = []
    code = CONVENTIONS["released code"].label
    match = _per_prompt_match(ms, per_prompt)
    if len(match):
        ours = match.set_index("convention").loc["released code"]
        claims.append(_check("self-reanalysis-released-curvature",
                             float(ours["curvature_max_diff"]), 1e-3, "rad", code))
    source = bootstrap_source(released(root, "statistics/bootstrap_ci.csv"), per_prompt, ms)
    if len(source):
        gap = float(np.max(np.abs(source["released"] - source["per_prompt_table"])))
        claims.append(_check("self-reanalysis-bootstrap-table-source", gap, 1e-3, "rad"))
    if rel_ci is not None:
        rc = rel_ci[rel_ci["model"] == "gpt2"].set_index("layer")["mean_tci"]
        ours_ci = pd.DataFrame(ci_rows)
        ours_ci = ours_ci[ours_ci["convention"] == "released code"].set_index("layer")["ci"]
        gap = float(np.nanmax(np.abs(ours_ci.reindex(rc.index) - rc)))
        ci_rows = [dict(r, released=float(rc.get(r["layer"], np.nan))
                        if r["convention"] == "released code" else np.nan) for r in ci_rows]  # fmt: skip
        claims.append(_check("self-reanalysis-released-ci", gap, 0.01, "(chord)", code))
    return claims, source, match, ci_rows


def curvature_per_category(real: pd.DataFrame) -> pd.DataFrame:
    """Curvature 'estimate [low, high]' (rad) per convention and model (rows) and released
    category (columns)."""
    per_cat = real[(real["metric"] == "curvature (rad)") & (real["category"] != "all")]
    return per_cat.assign(value=[f"{e:.3f} [{lo:.3f}, {hi:.3f}]" for e, lo, hi in zip(
        per_cat["estimate"], per_cat["ci_low"], per_cat["ci_high"], strict=True)]).pivot_table(
        index=["convention", "model"], columns="category", values="value", aggfunc="first",
        sort=False)  # fmt: skip
