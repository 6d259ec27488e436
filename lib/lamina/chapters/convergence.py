"""Paper 1, claim 1: semantically related prompts converge in middle-to-late layers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from lamina.chapters.results import ExperimentResult, claim_record, concat_tables, tested_verdict
from lamina.chapters.skeleton import (
    ChapterSpec,
    main_pool,
    run_chapter,
    sensitivity_rows,
    state_controls,
    vanish_claim,
)
from lamina.chapters.states import ModelStates
from lamina.chapters.trajectory import Convention, TrajectoryConfig, subsample
from lamina.controls import permute_labels
from lamina.geometry import convergence_index_per_prompt
from lamina.stats import bootstrap_ci, fdr_bh, mann_whitney

__all__ = ["CLAIM", "convergence_stats", "run_convergence"]

CLAIM = (
    "Semantically related prompts converge significantly in middle-to-late layers "
    "(peak CI 0.41-0.58, p<0.001, Mann-Whitney U)"
)
PAPER_RANGE = (0.41, 0.58)


def convergence_stats(
    x: np.ndarray, labels: Any, layers: list[int], n_bootstrap: int, seed: int
) -> dict[str, Any]:
    """Peak of the mean per-prompt convergence index and its tests.

    x: (n, m, d) states at layer indices ``layers``; labels: (n,). Returns peak (CI units), its
    layer and depth fraction (layer / last layer index), a BCa bootstrap 95% CI of the mean
    per-prompt CI at the peak, and the Mann-Whitney U test of per-prompt CI at the peak vs
    the first kept layer (p, rank-biserial). ``profile`` (m,) and ``per_prompt`` (n, m) too.
    """
    ci = convergence_index_per_prompt(x, labels)
    profile = np.nanmean(ci, axis=0)
    k = int(np.nanargmax(profile))
    boot = bootstrap_ci(ci[:, k], n_resamples=n_bootstrap, seed=seed).iloc[0]
    if k > 0:
        mw = mann_whitney(ci[:, k], ci[:, 0]).iloc[0]
        p, rb = float(mw["p_value"]), float(mw["rank_biserial"])
    else:  # the peak is the first layer: no convergence to test
        p, rb = 1.0, 0.0
    return {
        "peak": float(profile[k]),
        "peak_layer": int(layers[k]),
        "peak_fraction": layers[k] / layers[-1],
        "ci_low": float(boot["ci_low"]),
        "ci_high": float(boot["ci_high"]),
        "p": p,
        "rank_biserial": rb,
        "profile": profile,
        "per_prompt": ci,
        "peak_index": k,
    }


def _effect_ok(s: dict[str, Any]) -> bool:
    return s["peak"] >= PAPER_RANGE[0] and s["peak_fraction"] >= 0.25


SPEC = ChapterSpec(
    "convergence",
    families=("semantic",),
    required=("category",),
    tables=("profiles", "controls", "sensitivity"),
    quick=lambda prompts, seed: subsample(prompts, "category", 4, seed),
)


def run_convergence(config: TrajectoryConfig) -> ExperimentResult:
    """Convergence index on the semantic family (labels = ``category``) for every model, with
    controls (shuffled layers, moment-matched random states, random-init model, permuted
    labels), BH-FDR over the control comparisons, and sensitivity to the convention."""
    return run_chapter(SPEC, config, analyse_model)


def analyse_model(
    ms: ModelStates, prompts: pd.DataFrame, config: TrajectoryConfig
) -> dict[str, pd.DataFrame]:
    """One model's convergence profile, controls, claims and sensitivity (tables as in :data:`SPEC`)."""
    claims: list[dict[str, Any]] = []
    profiles: list[dict[str, Any]] = []
    controls: list[pd.DataFrame] = []
    sens: list[dict[str, Any]] = []
    pool, c, pooled = main_pool(ms, config.pooling)
    x, layers = pooled.states(c)
    labels = pooled.prompts["category"].to_numpy()
    s = convergence_stats(x, labels, layers, config.n_bootstrap, config.seed)
    for i, layer in enumerate(layers):
        b = bootstrap_ci(
            s["per_prompt"][:, i],
            n_resamples=min(config.n_bootstrap, 1000),
            seed=config.seed,
            method="percentile",
        ).iloc[0]
        profiles.append(
            {
                "model": ms.name,
                "condition": "real",
                "layer": layer,
                "depth": layer / layers[-1],
                "ci": s["profile"][i],
                "ci_low": b["ci_low"],
                "ci_high": b["ci_high"],
            }
        )
    k = s["peak_index"]
    rows = []
    for name, xc in state_controls(x, ms, c, config.seed).items():
        if xc is None:
            continue
        sc = convergence_stats(xc, labels, layers, 10, config.seed)
        mw = mann_whitney(s["per_prompt"][:, k], sc["per_prompt"][:, k]).iloc[0]
        rows.append(
            {
                "control": name,
                "peak": sc["peak"],
                "peak_layer": sc["peak_layer"],
                "p": mw["p_value"],
                "rank_biserial": mw["rank_biserial"],
            }
        )
        profiles += [
            {
                "model": ms.name,
                "condition": name,
                "layer": layer,
                "depth": layer / layers[-1],
                "ci": v,
                "ci_low": np.nan,
                "ci_high": np.nan,
            }
            for layer, v in zip(layers, sc["profile"], strict=True)
        ]
    null = np.array(
        [
            np.nanmax(
                np.nanmean(
                    convergence_index_per_prompt(x, permute_labels(labels, seed=config.seed + i)),
                    axis=0,
                )
            )
            for i in range(config.n_permutations)
        ]
    )
    rows.append(
        {
            "control": "permuted labels",
            "peak": float(np.mean(null)),
            "peak_layer": -1,
            "p": (1 + np.sum(null >= s["peak"])) / (1 + null.size),
            "rank_biserial": np.nan,
        }
    )
    table = pd.DataFrame(rows)
    table["q"] = fdr_bh(table["p"])["q_value"].to_numpy()
    table["fraction_remaining"] = table["peak"] / s["peak"]
    table.insert(0, "model", ms.name)
    controls.append(table)
    claims.append(
        claim_record(
            "convergence_peak",
            CLAIM,
            "peak CI 0.41-0.58, p<0.001",
            ms.name,
            s["peak"],
            s["ci_low"],
            s["ci_high"],
            s["p"],
            _effect_ok(s),
            effect_size=s["rank_biserial"],
            effect_name="rank-biserial (peak vs first layer)",
            convention=c.label,
        )
    )
    claims.append(
        vanish_claim(
            "convergence_controls_vanish",
            "Convergence vanishes under shuffled-layer and random-embedding controls",
            ms.name,
            table,
            effect_name="fraction of the peak CI remaining (max over the two controls)",
            convention=c.label,
            p_rule="max q",
        )
    )

    def measure(xs: np.ndarray, pooled: Any, lay: list[int], cv: Convention) -> dict:
        r = convergence_stats(
            xs,
            pooled.prompts["category"].to_numpy(),
            lay,
            min(config.n_bootstrap, 1000),
            config.seed,
        )
        return {
            "peak": r["peak"],
            "peak_layer": r["peak_layer"],
            "peak_fraction": r["peak_fraction"],
            "ci_low": r["ci_low"],
            "ci_high": r["ci_high"],
            "p": r["p"],
            "verdict": tested_verdict(r["p"], _effect_ok(r)),
        }

    sens += sensitivity_rows(ms, measure)
    return {
        "claims": pd.DataFrame(claims),
        "profiles": pd.DataFrame(profiles),
        "controls": concat_tables(controls),
        "sensitivity": pd.DataFrame(sens),
    }
