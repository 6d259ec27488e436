"""Paper 1, claim 4: layerwise similarity has three phases (encoding, elaboration, output).

The main claim is tested paired within prompts: elaboration's mean SIM must exceed both
neighbouring bands (``lamina.trajectory.stat_tests.three_phase_test``). GPT-2's quoted band
ranges are a claim about GPT-2 and are issued for GPT-2 models only. Stability, the fifth of
paper 1's metrics, is measured on the perturbation pairs (``perturbations.jsonl``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pandas as pd

from lamina.chapters.results import ExperimentResult
from lamina.chapters.skeleton import (
    ChapterSpec,
    control_effects,
    main_pool,
    run_chapter,
    sensitivity_rows,
)
from lamina.chapters.states import ModelStates
from lamina.chapters.trajectory import Convention, TrajectoryConfig, subsample
from lamina.evidence.claims import Claim, claim_id, claims_frame
from lamina.evidence.stats import index_bootstrap
from lamina.sources.prompts import load_prompts
from lamina.trajectory import (
    detect_phases,
    fixed_phase_bands,
    layerwise_cosine,
    phase_summary,
    stability,
)
from lamina.trajectory.sizes import CHAPTER_FAMILIES
from lamina.trajectory.stat_tests import paper1_test
from lamina.trajectory.verdicts import (
    PAPER_SIM_RANGES,
    three_phase_claims,
    universal_claim,
    vanish_claim,
)

__all__ = ["PAPER_SIM_RANGES", "analyse_model", "detected_phases", "run_three_phase"]

FAMILIES = CHAPTER_FAMILIES["three_phase"]


def _with_perturbations(prompts: pd.DataFrame) -> pd.DataFrame:
    """The chapter's prompts plus the perturbation pairs of ``perturbations.jsonl`` as rows
    of family "stability" (``pair_id``; ``sense`` "original" / "perturbed"), for stability."""
    try:
        pert = load_prompts("perturbations")
    except FileNotFoundError:  # no perturbation file: no stability table
        return prompts
    rows = []
    for r in pert.itertuples():
        for sense, text in (("original", r.prompt), ("perturbed", r.perturbed)):
            rows.append({"id": f"{r.id}-{sense}", "family": "stability", "prompt": text,
                         "pair_id": r.id, "sense": sense, "kind": r.kind})
    return pd.concat([prompts, pd.DataFrame(rows)], ignore_index=True)


def _quick(prompts: pd.DataFrame, seed: int) -> pd.DataFrame:
    return subsample(prompts, "family", 8, seed)


SPEC = ChapterSpec(
    "three_phase",
    required=("family",),
    tables=("profiles", "bands", "controls", "stability", "sensitivity"),
    quick=_quick,
    prepare=_with_perturbations,
)


def run_three_phase(config: TrajectoryConfig) -> ExperimentResult:
    """SIM profiles of the semantic, analogy, reasoning and lexical families for every model:
    the paper's fixed bands (tested paired), GPT-2's band ranges (GPT-2 models only),
    data-driven change points (is it three?), controls, stability on the perturbation pairs,
    and sensitivity to the convention; then "universal across architectures" as its own row
    over the sources run (``lamina.trajectory.verdicts.universal_claim``)."""
    result = run_chapter(SPEC, config, analyse_model)
    c = result.claims
    if len(c) and "claim_id" in c:
        main = c[(c["claim_id"] == "p1-three-phase-bands") & ~c["model"].str.contains(r"\+Q")]
        fields = [f for f in main.columns if f in Claim.__dataclass_fields__]
        rows = [Claim(**{k: r[k] for k in fields}) for _, r in main.iterrows()]
        result.claims = pd.concat([c, claims_frame([universal_claim(rows)])], ignore_index=True)
    return result


def detected_phases(sim: np.ndarray, n_resamples: int, seed: int) -> dict[str, Any]:
    """``detect_phases`` (BIC and CV) on the prompt-mean SIM profile (sim: (n, L)), and the
    number of phases over ``n_resamples`` prompt resamples: its 2.5-97.5 percentiles and the
    share of resamples giving 3."""
    profile = np.nanmean(sim, axis=0)
    bic = detect_phases(profile, method="bic")
    cv = detect_phases(profile, method="cv") if sim.shape[1] >= 4 else bic
    rng = np.random.default_rng(seed)
    ks = np.array([
        detect_phases(np.nanmean(sim[rng.integers(0, len(sim), len(sim))], axis=0)).n_phases
        for _ in range(n_resamples)
    ])
    return {"k_bic": bic.n_phases, "k_cv": cv.n_phases, "detected_bands": bic.bands,
            "share_three": float(np.mean(ks == 3)), "k_low": float(np.percentile(ks, 2.5)),
            "k_high": float(np.percentile(ks, 97.5)), "profile": profile}


def is_gpt2(name: str) -> bool:
    """Whether a source is a GPT-2 model (GPT-2's band ranges apply): "gpt2" in its name."""
    return "gpt2" in name.lower().replace("-", "")


def _range_claims(ms: ModelStates, sim: np.ndarray, conv: str, seed: int) -> list[Claim]:
    bands = fixed_phase_bands(sim.shape[1])
    names = ("encoding", "elaboration", "output")
    out = []
    for k, (lo, hi) in enumerate(PAPER_SIM_RANGES):
        v = np.nanmean(sim[:, bands == k], axis=1)
        b = index_bootstrap(cast(Callable[[np.ndarray], float], lambda i, v=v: float(np.mean(v[i]))), len(v), 1000, seed)
        out.append(Claim.tested(
            claim_id=claim_id(1, "three-phase", f"gpt2-{names[k]}"),
            claim=f"GPT-2's {names[k]} band has SIM {lo:g}-{hi:g}",
            paper_value=f"{lo:g}-{hi:g}", model=ms.name, measured=b["estimate"],
            ci_low=b["ci_low"], ci_high=b["ci_high"], effect_name="mean SIM in the band",
            unit="cosine",
            claimed=(lo, hi), convention=conv))
    return out


def _stability_rows(ms: ModelStates, pooled: Any, c: Convention, seed: int) -> list[dict]:
    t = pooled.prompts
    if "pair_id" not in t or not (t["family"] == "stability").any():
        return []
    x, layers = pooled.states(c)
    st = t[t["family"] == "stability"]
    a = st[st["sense"] == "original"].reset_index().set_index("pair_id")
    b = st[st["sense"] == "perturbed"].reset_index().set_index("pair_id")
    common = a.index.intersection(b.index)
    stab = stability(x[a.loc[common, "index"].to_numpy()], x[b.loc[common, "index"].to_numpy()])
    kinds = a.loc[common, "kind"].to_numpy()
    rng = np.random.default_rng(seed)
    rows = []
    for kind in ("all", *sorted(set(kinds))):
        v = stab if kind == "all" else stab[kinds == kind]
        boots = np.stack([v[rng.integers(0, len(v), len(v))].mean(0) for _ in range(500)])
        lo, hi = np.percentile(boots, [2.5, 97.5], axis=0)
        rows += [{"model": ms.name, "kind": kind, "n_pairs": len(v), "layer": layer,
                  "depth": layer / layers[-1], "stability": float(v[:, j].mean()),
                  "ci_low": float(lo[j]), "ci_high": float(hi[j])}
                 for j, layer in enumerate(layers)]
    return rows


def _control_rows(
    model: str, s: dict[str, Any], effects: dict[str, dict[str, Any]], layers: list[int],
    transitions: list[str], depth: list[float],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:  # fmt: skip
    """(``controls`` rows: the real margin, then each control's; the controls' mean SIM
    profiles as ``profiles`` rows)."""
    controls = [{"model": model, "control": "none (real)", "margin": s["margin"], "p": s["p"],
                 "ordered": s["ordered"], "fraction_remaining": 1.0}]  # fmt: skip
    profiles: list[dict[str, Any]] = []
    for name, v in effects.items():
        controls.append({"model": model, "control": name, "margin": v["margin"], "p": v["p"],
                         "ordered": v["ordered"], "fraction_remaining": v["fraction"]})  # fmt: skip
        prof = np.nanmean(layerwise_cosine(v["states"]), axis=0)
        profiles += [
            {"model": model, "condition": name, "layer": layer, "transition": tr, "depth": d,
             "sim": float(val), "fixed_band": -1, "detected_phase": -1}
            for layer, tr, d, val in zip(layers[:-1], transitions, depth, prof, strict=True)
        ]  # fmt: skip
    return controls, profiles


def _sensitivity(ms: ModelStates, config: TrajectoryConfig) -> list[dict[str, Any]]:
    """The ``sensitivity`` table: band means, margin and verdict in every convention."""

    def measure(xs: np.ndarray, pld: Any, lay: list[int], cv: Convention) -> dict:
        k = pld.prompts["family"].isin(FAMILIES).to_numpy() & (pld.n_tokens != 1)
        r = paper1_test("three_phase", xs[k], pld.prompts[k], lay, n_bootstrap=200,
                        seed=config.seed)
        bm = r["band_means"] or [math.nan] * 3
        return {"encoding": bm[0], "elaboration": bm[1], "output": bm[2],
                "margin": r["margin"], "p": r["p"], "ordered": r["ordered"],
                "verdict": three_phase_claims(r, ms.name, cv.label)[0].verdict}

    return sensitivity_rows(ms, measure)


def analyse_model(
    ms: ModelStates, prompts: pd.DataFrame, config: TrajectoryConfig
) -> dict[str, pd.DataFrame]:
    """One model's SIM profile, bands, detected phases, stability, controls, claims and
    sensitivity (tables as in :data:`SPEC`)."""
    pool, c, pooled = main_pool(ms, config.pooling)
    keep = pooled.prompts["family"].isin(FAMILIES).to_numpy().copy()
    if config.exclude_single_token:
        keep &= pooled.n_tokens != 1
    x, layers = pooled.states(c)
    x, t = x[keep], pooled.prompts[keep].reset_index(drop=True)
    sim = np.asarray(layerwise_cosine(x))
    s = paper1_test("three_phase", x, t, layers, n_bootstrap=min(config.n_bootstrap, 5_000),
                    seed=config.seed)
    claims = three_phase_claims(s, ms.name, c.label)
    if is_gpt2(ms.name):
        claims += _range_claims(ms, sim, c.label, config.seed)
    det = detected_phases(sim, min(config.n_bootstrap, 300), config.seed)
    claims.append(Claim.tested(
        claim_id=claim_id(1, "three-phase", "detected"),
        claim="The data show three phases (change points, BIC)", paper_value="3 phases",
        model=ms.name, measured=float(det["k_bic"]), ci_low=det["k_low"],
        ci_high=det["k_high"], effect_size=det["share_three"],
        effect_name="phases found; effect size: share of prompt resamples giving 3",
        unit="phases",
        claimed=(3.0, 3.0), convention=c.label))
    effects = control_effects("three_phase", s, x, ms, c, t, layers, config, keep)
    claims.append(vanish_claim("three-phase", "The three-phase structure", claims[0],
                               {k: (v["fraction"], v["p"]) for k, v in effects.items()}))
    bands = fixed_phase_bands(sim.shape[1])
    transitions = [f"{a}->{b}" for a, b in zip(layers[:-1], layers[1:], strict=True)]
    depth = [(j + 0.5) / (len(layers) - 1) for j in range(len(layers) - 1)]
    profiles = [
        {"model": ms.name, "condition": "real", "layer": layer, "transition": tr, "depth": d,
         "sim": v, "fixed_band": int(b), "detected_phase": int(p)}
        for layer, tr, d, v, b, p in zip(layers[:-1], transitions, depth, det["profile"], bands,
                                          det["detected_bands"], strict=True)
    ]
    controls, control_profiles = _control_rows(ms.name, s, effects, layers, transitions, depth)
    profiles += control_profiles
    return {
        "claims": claims_frame(claims),
        "profiles": pd.DataFrame(profiles),
        "bands": phase_summary(sim, bands).assign(model=ms.name),
        "controls": pd.DataFrame(controls),
        "stability": pd.DataFrame(_stability_rows(ms, pooled, c, config.seed)),
        "sensitivity": pd.DataFrame(_sensitivity(ms, config) if config.sensitivity else []),
    }
