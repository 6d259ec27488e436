"""Paper 1, claim 4: layerwise similarity has three phases (encoding, elaboration, output)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from lamina.chapters.results import ExperimentResult, claim_record, concat_tables
from lamina.chapters.skeleton import (
    ChapterSpec,
    main_pool,
    run_chapter,
    sensitivity_rows,
    state_controls,
)
from lamina.chapters.states import ModelStates
from lamina.chapters.trajectory import Convention, TrajectoryConfig, subsample
from lamina.geometry import detect_phases, fixed_phase_bands, layerwise_cosine, phase_summary
from lamina.stats import bootstrap_ci, fdr_bh, mann_whitney

__all__ = ["CLAIM", "PAPER_SIM_RANGES", "phase_stats", "run_three_phase"]

CLAIM = (
    "Layerwise cosine similarity reveals a universal three-phase structure: encoding, "
    "elaboration, and output preparation, consistent across all three architectures"
)
PAPER_SIM_RANGES = ((0.35, 0.55), (0.70, 0.85), (0.60, 0.70))  # GPT-2, per fixed band


def phase_stats(sim: np.ndarray, n_bootstrap: int, seed: int) -> dict[str, Any]:
    """Fixed bands and detected phases of a SIM profile.

    sim: (n, L) per-prompt SIM(l). Fixed bands: per-prompt band means; the elaboration -
    encoding difference with a BCa bootstrap CI; Mann-Whitney U tests elaboration vs encoding
    and elaboration vs output preparation (BH-adjusted, p = the larger q); ``ordered`` = the
    band means are ordered encoding < output preparation < elaboration, as in the paper's GPT-2
    ranges. Detected: ``detect_phases`` (BIC and CV) on the prompt-mean profile, and the
    number of phases over ``min(n_bootstrap, 300)`` prompt resamples (share that gives 3).
    """
    n_blocks = sim.shape[1]
    bands = fixed_phase_bands(n_blocks)
    summary = phase_summary(sim, bands)
    means = [np.nanmean(sim[:, bands == k], axis=1) for k in range(3) if np.any(bands == k)]
    out: dict[str, Any] = {"summary": summary, "bands": bands}
    if len(means) == 3:
        enc, elab, outp = means
        d = bootstrap_ci(elab - enc, n_resamples=n_bootstrap, seed=seed).iloc[0]
        ps = [
            mann_whitney(elab, enc).iloc[0]["p_value"],
            mann_whitney(elab, outp).iloc[0]["p_value"],
        ]
        q = fdr_bh(np.array(ps))["q_value"].to_numpy()
        m = [float(np.mean(v)) for v in means]
        out.update(
            difference=float(np.mean(elab - enc)),
            diff_low=d["ci_low"],
            diff_high=d["ci_high"],
            p=float(np.max(q)),
            ordered=m[0] < m[2] < m[1],
            band_means=m,
        )
    else:  # too few blocks for three bands
        out.update(
            difference=np.nan,
            diff_low=np.nan,
            diff_high=np.nan,
            p=None,
            ordered=None,
            band_means=[float(np.mean(v)) for v in means],
        )
    profile = np.nanmean(sim, axis=0)
    bic = detect_phases(profile, method="bic")
    cv = detect_phases(profile, method="cv") if n_blocks >= 4 else bic
    rng = np.random.default_rng(seed)
    ks = np.array(
        [
            detect_phases(np.nanmean(sim[rng.integers(0, len(sim), len(sim))], axis=0)).n_phases
            for _ in range(min(n_bootstrap, 300))
        ]
    )
    out.update(
        k_bic=bic.n_phases,
        k_cv=cv.n_phases,
        change_points=list(bic.change_points),
        detected_bands=bic.bands,
        share_three=float(np.mean(ks == 3)),
        k_low=float(np.percentile(ks, 2.5)),
        k_high=float(np.percentile(ks, 97.5)),
        profile=profile,
    )
    return out


def _ranges_hit(summary: pd.DataFrame) -> int:
    """How many fixed bands have a prompt-mean SIM range overlapping the paper's GPT-2 range."""
    hits = 0
    for (_, row), (lo, hi) in zip(summary.iterrows(), PAPER_SIM_RANGES, strict=False):
        hits += int(row["profile_min"] <= hi and row["profile_max"] >= lo)
    return hits


SPEC = ChapterSpec(
    "three_phase",
    families=("semantic", "analogies", "reasoning", "lexical"),
    required=("family",),
    tables=("profiles", "bands", "controls", "sensitivity"),
    quick=lambda prompts, seed: subsample(prompts, "family", 5, seed),
)


def run_three_phase(config: TrajectoryConfig) -> ExperimentResult:
    """SIM profiles of the semantic, analogy, reasoning and lexical families for every model:
    the paper's fixed bands and data-driven change points (is it three?), with controls and
    sensitivity to the convention."""
    return run_chapter(SPEC, config, analyse_model)


def analyse_model(
    ms: ModelStates, prompts: pd.DataFrame, config: TrajectoryConfig
) -> dict[str, pd.DataFrame]:
    """One model's SIM profile, bands, detected phases, controls, claims and sensitivity (tables as in :data:`SPEC`)."""
    claims: list[dict[str, Any]] = []
    profiles: list[dict[str, Any]] = []
    bands_t: list[pd.DataFrame] = []
    controls: list[pd.DataFrame] = []
    sens: list[dict[str, Any]] = []
    pool, c, pooled = main_pool(ms, config.pooling)
    keep = (
        ~((pooled.n_tokens > 0) & (pooled.n_tokens <= 1))
        if config.exclude_single_token
        else np.ones(len(pooled.n_tokens), bool)
    )
    x, layers = pooled.states(c)
    x = x[keep]
    sim = layerwise_cosine(x)
    s = phase_stats(sim, config.n_bootstrap, config.seed)
    for j, layer in enumerate(layers[:-1]):
        profiles.append(
            {
                "model": ms.name,
                "condition": "real",
                "layer": layer,
                "transition": f"{layer}->{layers[j + 1]}",
                "depth": (j + 0.5) / (len(layers) - 1),
                "sim": s["profile"][j],
                "fixed_band": int(s["bands"][j]),
                "detected_phase": int(s["detected_bands"][j]),
            }
        )
    bands_t.append(s["summary"].assign(model=ms.name))
    rows = [
        {
            "control": "none (real)",
            "k_bic": s["k_bic"],
            "k_cv": s["k_cv"],
            "ordered": s["ordered"],
            "difference": s["difference"],
        }
    ]
    for name, xc in state_controls(x, ms, c, config.seed).items():
        if xc is None:
            continue
        if name == "random-init model":
            xc = ms.control[pool].states(c)[0][keep]
        sc = phase_stats(layerwise_cosine(xc), 10, config.seed)
        rows.append(
            {
                "control": name,
                "k_bic": sc["k_bic"],
                "k_cv": sc["k_cv"],
                "ordered": sc["ordered"],
                "difference": sc["difference"],
            }
        )
        profiles += [
            {
                "model": ms.name,
                "condition": name,
                "layer": layer,
                "transition": f"{layer}->{layers[j + 1]}",
                "depth": (j + 0.5) / (len(layers) - 1),
                "sim": v,
                "fixed_band": -1,
                "detected_phase": -1,
            }
            for j, (layer, v) in enumerate(zip(layers[:-1], sc["profile"], strict=True))
        ]
    table = pd.DataFrame(rows)
    table.insert(0, "model", ms.name)
    controls.append(table)
    hits = _ranges_hit(s["summary"])
    claims += [
        claim_record(
            "three_phase_fixed_bands",
            CLAIM,
            "SIM 0.35-0.55 / 0.70-0.85 / 0.60-0.70 (GPT-2)",
            ms.name,
            s["difference"],
            s["diff_low"],
            s["diff_high"],
            s["p"],
            s["ordered"],
            direction_ok=bool(s["difference"] > 0) if s["p"] is not None else True,
            effect_size=s["difference"],
            effect_name="elaboration - encoding mean SIM",
            convention=c.label,
        ),
        claim_record(
            "three_phase_gpt2_ranges",
            "GPT-2's band SIM ranges are 0.35-0.55, 0.70-0.85 and 0.60-0.70",
            "3 of 3 bands in range",
            ms.name,
            hits,
            verdict_word="reproduced" if hits == 3 else "partially" if hits else "not reproduced",
            effect_name="bands whose SIM range overlaps the paper's",
            convention=c.label,
        ),
        claim_record(
            "three_phase_detected",
            "The data show three phases (change points)",
            "3 phases",
            ms.name,
            s["k_bic"],
            s["k_low"],
            s["k_high"],
            verdict_word="reproduced" if s["k_bic"] == 3 else "not reproduced",
            effect_size=s["share_three"],
            effect_name="share of prompt resamples giving 3 phases",
            convention=c.label,
        ),
    ]

    def measure(xs: np.ndarray, pld: Any, lay: list[int], cv: Convention) -> dict:
        k = ~((pld.n_tokens > 0) & (pld.n_tokens <= 1))
        r = phase_stats(layerwise_cosine(xs[k]), 50, config.seed)
        return {
            "encoding": r["band_means"][0],
            "elaboration": r["band_means"][1],
            "output": r["band_means"][-1],
            "ordered": r["ordered"],
            "k_bic": r["k_bic"],
            "k_cv": r["k_cv"],
            "share_three": r["share_three"],
        }

    sens += sensitivity_rows(ms, measure)
    return {
        "claims": pd.DataFrame(claims),
        "profiles": pd.DataFrame(profiles),
        "bands": concat_tables(bands_t),
        "controls": concat_tables(controls),
        "sensitivity": pd.DataFrame(sens),
    }
