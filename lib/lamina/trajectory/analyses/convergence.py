"""Paper 1, claim 1, on one source: semantically related prompts converge in middle-to-late
layers.

The claim's test is the label-permutation null of the profile's maximum (the peak is chosen
from the data, so its p must account for the choice); the CI resamples items within their
category and re-selects the peak each time; alpha is the claim's own, 0.001. The paper's
"p<0.001, Mann-Whitney U" is, in its released code, a test of between- vs within-category
distances at the final layer (``convergence_tests.csv``); the ``tests`` table reports that
test beside the claim's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from lamina.evidence.claims import claims_frame
from lamina.evidence.stats import mann_whitney, resample_indices
from lamina.trajectory.analyses.shared import Options, control_effects, main_pool, sensitivity_rows
from lamina.trajectory.control_power import (
    invariant_share,
    shuffled_cannot_fail,
    shuffled_cannot_remove,
)
from lamina.trajectory.convergence_stats import ci_profiles, distance_stack, item_units
from lamina.trajectory.judging import judge_chapter
from lamina.trajectory.model_states import Convention, ModelStates
from lamina.trajectory.stat_tests import Resampling, paper1_test

__all__ = ["LAYER_BAND_RESAMPLES", "MAX_PEAK_BOOTSTRAP", "SENSITIVITY_PERMUTATIONS", "analyse",
           "frames", "layer_band", "paper_test"]

MAX_PEAK_BOOTSTRAP = 2_000  # the re-selecting bootstrap reruns the whole profile each time
SENSITIVITY_PERMUTATIONS = 1_000  # the sensitivity table's p (no verdict: 0.001 needs 9,999)
LAYER_BAND_RESAMPLES = 500  # the figure's per-layer band (no verdict reads it)
BAND_BATCH = 64  # resamples whose profiles are computed at once (memory, not result)


def frames(prompts: pd.DataFrame) -> pd.DataFrame:
    """The topical sentences (``semantic``) and the neutral frames (``semantic_neutral``):
    column ``frame_type`` = "topical" / "neutral"."""
    out = prompts.copy()
    fam = out["family"] if "family" in out else pd.Series("semantic", index=out.index)
    out["frame_type"] = np.where(fam == "semantic_neutral", "neutral", "topical")
    return out


def paper_test(x: np.ndarray, labels: Any) -> dict[str, float]:
    """The released code's test: two-sided Mann-Whitney U of all between-category vs all
    within-category pair distances (L2-normalised states) at the last layer. Pairs share
    prompts, so its p treats dependent distances as independent."""
    D = distance_stack(x[:, -1:])[0]
    lab = np.asarray(labels)
    iu = np.triu_indices(len(lab), 1)
    same = (lab[:, None] == lab[None, :])[iu]
    mw = mann_whitney(D[iu][~same], D[iu][same]).iloc[0]
    return {"p": float(mw["p_value"]), "effect": float(mw["rank_biserial"])}


def layer_band(x: np.ndarray, table: pd.DataFrame, seed: int,
               n_resamples: int = LAYER_BAND_RESAMPLES,
               confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The figure's band: at each layer, the central ``confidence`` percentile interval of
    the profile its line draws, over resamples of the claim's unit.

    x: (n, m, d) states of the n prompts of ``table`` (``category``; ``item``, the unit) at m
    layers. The profile is :func:`lamina.trajectory.convergence_stats.ci_profile` (chord
    units; each prompt's own item left out of its within-category mean), the claim's
    estimator; each resample draws items within their category
    (:func:`lamina.evidence.stats.resample_indices`), as the claim's bootstrap does. The
    layer is fixed, not re-selected: a band per layer, not the peak's CI. Returns (low, high),
    each (m,), chord units.
    """
    lab = table["category"].to_numpy()
    units = item_units(table)
    D = distance_stack(np.asarray(x, dtype=np.float64))  # (m, n, n)
    n = len(lab)
    rng = np.random.default_rng(seed)
    draws = []
    for start in range(0, n_resamples, BAND_BATCH):
        idx = [resample_indices(n, rng, strata=lab, clusters=units)
               for _ in range(min(BAND_BATCH, n_resamples - start))]  # fmt: skip
        counts = np.stack([np.bincount(i, minlength=n) for i in idx]).astype(float)  # (B, n)
        draws.append(ci_profiles(D, np.broadcast_to(lab, counts.shape), counts, units))
    profiles = np.concatenate(draws)  # (n_resamples, m)
    tail = 100 * (1 - confidence) / 2
    return np.nanpercentile(profiles, tail, 0), np.nanpercentile(profiles, 100 - tail, 0)


def _test_rows(model: str, s: dict[str, Any], pt: dict[str, float]) -> list[dict[str, Any]]:
    """The ``tests`` table: the claim's test beside the paired Wilcoxon and the released
    code's Mann-Whitney U (``pt``, :func:`paper_test`)."""
    return [
        {"model": model, "test": "claim: label permutation of the maximum over layers",
         "role": "the claim's test (peak selection corrected)", "p": s["p"],
         "effect": s["peak"]},
        {"model": model, "test": "Wilcoxon signed-rank, peak vs first layer (per prompt)",
         "role": "paired, not corrected for choosing the peak", "p": s["p_wilcoxon"],
         "effect": s["rank_biserial"]},
        {"model": model, "test": "Mann-Whitney U, between- vs within-category distances, "
         "last layer", "role": "the released code's test (dependent pairs)", "p": pt["p"],
         "effect": pt["effect"]},
    ]  # fmt: skip


def _frame_rows(model: str, c: Convention, x: np.ndarray, table: pd.DataFrame,
                layers: list[int], kw: Resampling) -> list[dict[str, Any]]:  # fmt: skip
    """The ``frames`` table: the claim's test on the topical sentences and on the neutral
    frames separately (a frame with < 4 prompts or one category is left out)."""
    rows = []
    for frame in ("topical", "neutral"):
        sub = (table["frame_type"] == frame).to_numpy() if "frame_type" in table else np.zeros(0, bool)
        if sub.sum() < 4 or table.loc[sub, "category"].nunique() < 2:
            continue
        r = paper1_test("convergence", x[sub], table[sub], layers, **kw)
        row = judge_chapter("convergence", r, model, c.label)[0]
        rows.append({"model": model, "frame": frame, "n_prompts": int(sub.sum()),
                     "peak": r["peak"], "ci_low": r["ci_low"], "ci_high": r["ci_high"],
                     "peak_layer": r["peak_layer"], "p": r["p"], "verdict": row.verdict})  # fmt: skip
    return rows


def _sensitivity(ms: ModelStates, opt: Options) -> list[dict[str, Any]]:
    """The ``sensitivity`` table: the peak, its CI and p in every convention, without a
    verdict (:data:`SENSITIVITY_PERMUTATIONS` permutations cannot decide at 0.001)."""

    def measure(xs: np.ndarray, pld: Any, lay: list[int], cv: Convention) -> dict:
        r = paper1_test("convergence", xs, pld.prompts, lay, n_bootstrap=200, seed=opt.seed,
                        n_permutations=min(opt.n_permutations, SENSITIVITY_PERMUTATIONS))
        return {"peak": r["peak"], "peak_layer": r["peak_layer"],
                "peak_fraction": r["peak_fraction"], "ci_low": r["ci_low"],
                "ci_high": r["ci_high"], "p": r["p"], "n_permutations": r["n_permutations"]}  # fmt: skip

    return sensitivity_rows(ms, measure)


def analyse(ms: ModelStates, prompts: pd.DataFrame, opt: Options) -> dict[str, pd.DataFrame]:
    """One source's profile, controls, tests, frames, claims and sensitivity."""
    _, c, pooled = main_pool(ms, opt.pooling)
    x, layers = pooled.states(c)
    table = frames(pooled.prompts)
    kw: Resampling = {"n_bootstrap": min(opt.n_bootstrap, MAX_PEAK_BOOTSTRAP),
          "n_permutations": opt.n_permutations, "seed": opt.seed}  # fmt: skip
    s = paper1_test("convergence", x, table, layers, **kw)
    depth = np.asarray(layers) / layers[-1]
    lo, hi = layer_band(x, table, opt.seed)
    profiles = [
        {"model": ms.name, "condition": "real", "layer": layer, "depth": d, "ci": v,
         "ci_low": a, "ci_high": b}
        for layer, d, v, a, b in zip(layers, depth, s["profile"], lo, hi, strict=True)
    ]
    effects, results = control_effects("convergence", s, x, ms, c, table, layers, opt.seed)
    check = invariant_share(x, table, s["effect"], opt.seed)  # can the shuffled control decide?
    controls = []
    for name, sc in effects.items():
        controls.append({"model": ms.name, "control": name, "peak": sc["peak"],
                         "peak_layer": sc["peak_layer"], "p": sc["p"],
                         "fraction_remaining": results[name].fraction,
                         "share_upper_bound": results[name].share_high,
                         "invariant_share_kept": check.share if name == "shuffled layers"
                         else np.nan,
                         "specific_share_kept": check.specific_share
                         if name == "shuffled layers" else np.nan})  # fmt: skip
        profiles += [
            {"model": ms.name, "condition": name, "layer": layer, "depth": d, "ci": v,
             "ci_low": np.nan, "ci_high": np.nan}
            for layer, d, v in zip(layers, depth, sc["profile"], strict=True)
        ]
    claims = judge_chapter("convergence", s, ms.name, c.label, controls=results,
                           cannot_fail=shuffled_cannot_fail(check),
                           cannot_remove=shuffled_cannot_remove(check))  # fmt: skip
    return {
        "claims": claims_frame(claims),
        "profiles": pd.DataFrame(profiles),
        "controls": pd.DataFrame(controls),
        "tests": pd.DataFrame(_test_rows(ms.name, s, paper_test(x, table["category"].to_numpy()))),
        "frames": pd.DataFrame(_frame_rows(ms.name, c, x, table, layers, kw)),
        "sensitivity": pd.DataFrame(_sensitivity(ms, opt) if opt.sensitivity else []),
    }
