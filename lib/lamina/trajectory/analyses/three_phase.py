"""Paper 1, claim 4, on one source: layerwise similarity has three phases (encoding,
elaboration, output preparation).

The main claim is tested paired within units: elaboration's mean SIM must exceed both
neighbouring bands (:func:`lamina.trajectory.phase_stats.three_phase_test`). GPT-2's quoted
band values are a claim about GPT-2 and are judged on GPT-2 sources only. Stability, the fifth
of paper 1's metrics, is measured on the perturbation pairs (``perturbations.jsonl``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pandas as pd

from lamina.evidence.claims import claims_frame
from lamina.evidence.decide import Measurement
from lamina.evidence.stats import index_bootstrap
from lamina.sources.prompts import load_prompts
from lamina.trajectory.analyses.shared import Options, control_effects, main_pool, sensitivity_rows
from lamina.trajectory.claims import GPT2_BANDS
from lamina.trajectory.judging import judge_chapter
from lamina.trajectory.metrics import layerwise_cosine, stability
from lamina.trajectory.model_states import Convention, ModelStates
from lamina.trajectory.phase_stats import detected_phases
from lamina.trajectory.phases import fixed_phase_bands, phase_summary
from lamina.trajectory.sizes import chapter_mask
from lamina.trajectory.stat_tests import paper1_test

__all__ = ["analyse", "is_gpt2", "with_perturbations"]


def with_perturbations(prompts: pd.DataFrame) -> pd.DataFrame:
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


def is_gpt2(name: str) -> bool:
    """Whether a source is a GPT-2 model (GPT-2's band values apply): "gpt2" in its name."""
    return "gpt2" in name.lower().replace("-", "")


def _gpt2_bands(sim: np.ndarray, seed: int) -> dict[str, Measurement]:
    """GPT-2's three band levels: mean SIM per band, bootstrap 95% CI over prompts."""
    bands = fixed_phase_bands(sim.shape[1])
    out = {}
    for k, spec in enumerate(GPT2_BANDS):
        v = np.nanmean(sim[:, bands == k], axis=1)
        stat = cast(Callable[[np.ndarray], float], lambda i, v=v: float(np.mean(v[i])))
        b = index_bootstrap(stat, len(v), 1000, seed)
        out[spec.id] = Measurement(estimate=b["estimate"], ci_low=b["ci_low"],
                                   ci_high=b["ci_high"], sided="two-sided")
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
                 for j, layer in enumerate(layers)]  # fmt: skip
    return rows


def _control_rows(model: str, s: dict[str, Any], effects: dict[str, dict[str, Any]],
                  fractions: dict[str, tuple[float, float | None]], layers: list[int], transitions: list[str],
                  depth: list[float]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:  # fmt: skip
    """(``controls`` rows: the real margin, then each control's; the controls' mean SIM
    profiles as ``profiles`` rows)."""
    controls = [{"model": model, "control": "none (real)", "margin": s["margin"], "p": s["p"],
                 "ordered": s["ordered"], "fraction_remaining": 1.0,
                 "share_upper_bound": None}]  # fmt: skip
    profiles: list[dict[str, Any]] = []
    for name, v in effects.items():
        controls.append({"model": model, "control": name, "margin": v["margin"], "p": v["p"],
                         "ordered": v["ordered"], "fraction_remaining": fractions[name][0],
                         "share_upper_bound": fractions[name][1]})  # fmt: skip
        prof = np.nanmean(layerwise_cosine(v["states"]), axis=0)
        profiles += [
            {"model": model, "condition": name, "layer": layer, "transition": tr, "depth": d,
             "sim": float(val), "fixed_band": -1, "detected_phase": -1}
            for layer, tr, d, val in zip(layers[:-1], transitions, depth, prof, strict=True)
        ]  # fmt: skip
    return controls, profiles


def _sensitivity(ms: ModelStates, opt: Options) -> list[dict[str, Any]]:
    """The ``sensitivity`` table: band means, margin and the main verdict per convention."""

    def measure(xs: np.ndarray, pld: Any, lay: list[int], cv: Convention) -> dict:
        k = chapter_mask("three_phase", pld.prompts, pld.n_tokens)
        r = paper1_test("three_phase", xs[k], pld.prompts[k], lay, n_bootstrap=200, seed=opt.seed)
        bm = r["band_means"] or [np.nan] * 3
        main = judge_chapter("three_phase", r, ms.name, cv.label)[0]
        return {"encoding": bm[0], "elaboration": bm[1], "output": bm[2],
                "margin": r["margin"], "p": r["p"], "ordered": r["ordered"],
                "verdict": main.verdict}  # fmt: skip

    return sensitivity_rows(ms, measure)


def analyse(ms: ModelStates, prompts: pd.DataFrame, opt: Options) -> dict[str, pd.DataFrame]:
    """One source's SIM profile, bands, detected phases, stability, controls, claims and
    sensitivity."""
    _, c, pooled = main_pool(ms, opt.pooling)
    keep = chapter_mask("three_phase", pooled.prompts, pooled.n_tokens, opt.exclude_single_token)
    x, layers = pooled.states(c)
    x, t = x[keep], pooled.prompts[keep].reset_index(drop=True)
    sim = np.asarray(layerwise_cosine(x))
    s = paper1_test("three_phase", x, t, layers, n_bootstrap=min(opt.n_bootstrap, 5_000),
                    seed=opt.seed)
    s["phases"] = det = detected_phases(sim, min(opt.n_bootstrap, 300), opt.seed)
    effects, results = control_effects("three_phase", s, x, ms, c, t, layers, opt.seed, keep)
    extra = _gpt2_bands(sim, opt.seed) if is_gpt2(ms.name) else None
    claims = judge_chapter("three_phase", s, ms.name, c.label, controls=results, extra=extra)
    bands = fixed_phase_bands(sim.shape[1])
    transitions = [f"{a}->{b}" for a, b in zip(layers[:-1], layers[1:], strict=True)]
    depth = [(j + 0.5) / (len(layers) - 1) for j in range(len(layers) - 1)]
    profiles = [
        {"model": ms.name, "condition": "real", "layer": layer, "transition": tr, "depth": d,
         "sim": v, "fixed_band": int(b), "detected_phase": int(p)}
        for layer, tr, d, v, b, p in zip(layers[:-1], transitions, depth, det["profile"], bands,
                                          det["detected_bands"], strict=True)
    ]  # fmt: skip
    fractions = {k: (v.fraction, v.share_high) for k, v in results.items()}
    controls, control_profiles = _control_rows(ms.name, s, effects, fractions, layers,
                                               transitions, depth)  # fmt: skip
    return {
        "claims": claims_frame(claims),
        "profiles": pd.DataFrame(profiles + control_profiles),
        "bands": phase_summary(sim, bands).assign(model=ms.name),
        "controls": pd.DataFrame(controls),
        "stability": pd.DataFrame(_stability_rows(ms, pooled, c, opt.seed)),
        "sensitivity": pd.DataFrame(_sensitivity(ms, opt) if opt.sensitivity else []),
    }
