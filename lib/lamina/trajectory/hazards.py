"""What threatens each of paper 1's claims, measured the same way on a real model's states and
on a known-answer source, so that a null can be checked to keep each hazard at the strength
real states have (:mod:`lamina.trajectory.fitted` holds SmolLM2's values).

Each hazard is measured on the chapter's own prompt set under its pooling:

* ``length_curvature``: Spearman correlation of mean curvature with log(tokens) over the
  curvature chapter's prompts (single-token prompts left out, as the chapter does), and
  ``paper_gap``: the paper's reasoning - lexical difference of mean curvature (rad) on them;
* ``sibling_bias``: how much an item's own prompts in other frames raise the convergence
  peak: the peak of the convergence-index profile counting them as within-category
  neighbours minus the peak leaving them out (chord units);
* ``frame_pull``: among the neutral-frame prompts, the mean chord distance between prompts of
  different frames minus that between prompts of one frame (items differ; mean over layers);
* ``zero_base_pairs``: the bifurcation pairs with delta(0) = 0 (their ratio's baseline is
  then layer 1), ``base_separation``: the median over homograph pairs of delta(base),
  ``control_ratio``: the median over control pairs of delta(L) / delta(base), and
  ``pair_ratio_correlation``: the Pearson correlation over pairs of log r_amb and log r_ctl
  at the chapter's baseline;
* ``band_means`` and ``margin``: the mean SIM of the three fixed bands, and the margin by
  which elaboration exceeds both neighbours.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from lamina.trajectory.bifurcation_stats import baseline_layer, bifurcation_rows
from lamina.trajectory.convergence_stats import ci_profile, distance_stack, item_units
from lamina.trajectory.metrics import bifurcation, layerwise_cosine, mean_curvature
from lamina.trajectory.phases import fixed_phase_bands

__all__ = ["HAZARDS", "hazards", "pair_ratio_correlation"]

HAZARDS = ("length_curvature", "paper_gap", "sibling_bias", "frame_pull", "zero_base_pairs",
           "base_separation", "control_ratio", "pair_ratio_correlation", "margin")  # fmt: skip

# states (n, L+1, d), their table and tokens (n,) for a chapter's prompt set
StatesOf = Callable[[str], tuple[np.ndarray, pd.DataFrame, np.ndarray]]


def pair_ratio_correlation(states: np.ndarray, table: pd.DataFrame) -> float:
    """Pearson correlation over pairs (dimensionless) of log r_amb and log r_ctl, r =
    delta(L) / delta(base) of a homograph pair and of its matched control pair
    (:func:`lamina.trajectory.bifurcation_stats.bifurcation_rows`), base the chapter's
    baseline layer (:func:`lamina.trajectory.bifurcation_stats.baseline_layer`: 1 where some
    pair has delta(0) = 0), in states (n, L+1, d) of the rows of ``table``: how much a pair's
    ratio and its control's move together (their contexts are one sentence)."""
    t = table.reset_index(drop=True)
    x = np.asarray(states, dtype=np.float64)
    a, b, ca, cb = bifurcation_rows(t)
    da, dc = bifurcation(x[a], x[b]).delta, bifurcation(x[ca], x[cb]).delta
    base = baseline_layer(da, dc)
    return float(np.corrcoef(np.log(da[:, -1] / da[:, base]), np.log(dc[:, -1] / dc[:, base]))[0, 1])


def _curvature(x: np.ndarray, t: pd.DataFrame, tok: np.ndarray) -> dict[str, float]:
    keep = t["family"].astype(str).str.match(r"^(reasoning|lexical)").to_numpy() & (tok > 1)
    mc = mean_curvature(x[keep])
    fam = t["family"].to_numpy()[keep]
    rho = spearmanr(mc, np.log(tok[keep])).statistic
    gap = mc[fam == "reasoning"].mean() - mc[fam == "lexical"].mean()
    return {"length_curvature": float(rho), "paper_gap": float(gap)}


def _convergence(x: np.ndarray, t: pd.DataFrame) -> dict[str, float]:
    D = distance_stack(x)
    lab = t["category"].to_numpy()
    with_siblings = np.nanmax(ci_profile(D, lab))
    out = {"sibling_bias": float(with_siblings - np.nanmax(ci_profile(D, lab, units=item_units(t))))}
    if "frame" in t:
        fr = t["frame"].fillna("").astype(str).to_numpy()
        item = t["item"].astype(str).to_numpy()
        neutral = fr != ""
        same = (fr[:, None] == fr[None, :]) & (item[:, None] != item[None, :])
        diff = fr[:, None] != fr[None, :]
        both = neutral[:, None] & neutral[None, :]
        out["frame_pull"] = float(np.mean([Dl[both & diff].mean() - Dl[both & same].mean()
                                           for Dl in D]))  # fmt: skip
    return out


def _bifurcation(x: np.ndarray, t: pd.DataFrame) -> dict[str, float]:
    a, b, ca, cb = bifurcation_rows(t)
    da, dc = bifurcation(x[a], x[b]).delta, bifurcation(x[ca], x[cb]).delta
    zero = int(np.sum((da[:, 0] <= 1e-6) | (dc[:, 0] <= 1e-6)))
    base = baseline_layer(da, dc)
    return {"zero_base_pairs": float(zero), "baseline_layer": float(base),
            "base_separation": float(np.median(da[:, base])),
            "control_ratio": float(np.median(dc[:, -1] / dc[:, base])),
            "pair_ratio_correlation": pair_ratio_correlation(x, t)}


def _phases(x: np.ndarray) -> dict[str, Any]:
    m = np.asarray(layerwise_cosine(x)).mean(0)
    bands = fixed_phase_bands(x.shape[1] - 1)
    b = [float(m[bands == k].mean()) for k in range(3)]
    return {"band_means": tuple(round(v, 4) for v in b), "margin": float(min(b[1] - b[0], b[1] - b[2]))}


def hazards(states_of: StatesOf, only: str | None = None) -> dict[str, Any]:
    """Every hazard of the module docstring (``only``: those of one chapter);
    ``states_of(chapter)`` gives the chapter's states (n, L+1, d) under its pooling, its
    prompt table and each prompt's tokens (n,). Floats rounded to 4 decimals."""
    out: dict[str, Any] = {}
    for chapter in ("curvature", "convergence", "bifurcation", "three_phase"):
        if only is not None and chapter != only:
            continue
        x, t, tok = states_of(chapter)
        if chapter == "curvature":
            out |= _curvature(x, t, tok)
        elif chapter == "convergence":
            out |= _convergence(x, t)
        elif chapter == "bifurcation":
            out |= _bifurcation(x, t)
        else:
            out |= _phases(x[tok > 1])
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}
