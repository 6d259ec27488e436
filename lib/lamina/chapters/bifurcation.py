"""Paper 1, claim 3: an ambiguous word's two senses separate across layers; controls do not.

Every homograph pair is kept with its matched control pair (same frame, the homograph
replaced by an unambiguous word), and the test is paired over all pairs: Wilcoxon
signed-rank of log(ratio_homograph) - log(ratio_control). The onset is read from the paired
difference delta_homograph - delta_control, with the same baseline layer as the ratio.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lamina.chapters.results import ExperimentResult
from lamina.chapters.skeleton import ChapterSpec, control_effects, main_pool, run_chapter
from lamina.chapters.states import ModelStates
from lamina.chapters.trajectory import CONVENTIONS, Convention, TrajectoryConfig
from lamina.evidence.claims import claims_frame
from lamina.sources.prompts import bifurcation_prompts
from lamina.trajectory.stat_tests import paper1_test
from lamina.trajectory.verdicts import (
    bifurcation_claims,
    vanish_claim,
)

__all__ = ["analyse_model", "bifurcation_prompts", "pair_mask", "run_bifurcation"]


def _quick(table: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The first 8 homograph pairs (quick mode)."""
    return table[table["pair_id"].isin(table["pair_id"].unique()[:8])]


def _with_controls(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`bifurcation_prompts` with each text's row number (``_row``)."""
    return bifurcation_prompts(table).assign(_row=lambda t: np.arange(len(t)))


SPEC = ChapterSpec(
    "bifurcation",
    required=("pair_id", "sense", "control_prompt"),
    tables=("profiles", "controls", "sensitivity"),
    quick=_quick,
    prepare=_with_controls,
    peer=False,
)


def run_bifurcation(config: TrajectoryConfig) -> ExperimentResult:
    """Bifurcation of the ambiguous family's homograph pairs vs their matched control pairs for
    every model (paper 1 released no ambiguous states, so peer-gpt2 is skipped), paired over
    pairs. Last-token pooling uses the ``word_last`` pairs (the homograph is the last token
    in both contexts); mean pooling uses every pair."""
    return run_chapter(SPEC, config, analyse_model)


def pair_mask(prompts: pd.DataFrame, conv: Convention) -> np.ndarray:
    """(n,) bool: the rows a convention uses (``word_last`` pairs for last-token pooling)."""
    if conv.pool == "last" and "word_last" in prompts:
        return prompts["word_last"].astype(bool).to_numpy()
    return np.ones(len(prompts), bool)


def analyse_model(
    ms: ModelStates, prompts: pd.DataFrame, config: TrajectoryConfig
) -> dict[str, pd.DataFrame]:
    """One model's homograph and control separation, controls, claims and sensitivity (tables
    as in :data:`SPEC`); ``prompts`` has the rows of :func:`bifurcation_prompts`."""
    pool, c, pooled = main_pool(ms, config.pooling)
    x, layers = pooled.states(c)
    keep = pair_mask(pooled.prompts, c)
    x, t = x[keep], pooled.prompts[keep].reset_index(drop=True)
    kw = {"n_bootstrap": min(config.n_bootstrap, 5_000), "seed": config.seed}
    s = paper1_test("bifurcation", x, t, layers, **kw)
    conv = c.label + f"; ratio baseline layer {s['base_layer']}; {s['n_pairs']} pairs"
    claims = bifurcation_claims(s, ms.name, conv)
    depth = np.asarray(layers) / layers[-1]
    diff = s["delta"] - s["control_delta"]  # (pairs, m) paired difference
    profiles = [
        {"model": ms.name, "condition": cond, "layer": layer, "depth": dd,
         "delta": float(np.mean(d[:, j])), "delta_sd": float(np.std(d[:, j]))}
        for cond, d in (("ambiguous", s["delta"]), ("control", s["control_delta"]),
                        ("difference", diff))
        for j, (layer, dd) in enumerate(zip(layers, depth, strict=True))
    ]
    effects = control_effects("bifurcation", s, x, ms, c, t, layers, config, keep)
    controls = [{"model": ms.name, "control": "none (real)", "excess": s["excess"],
                 "ratio": s["ratio"],
                 "control_ratio": s["control_ratio"], "p": s["p"], "fraction_remaining": 1.0}]
    controls += [{"model": ms.name, "control": k, "excess": v["excess"], "ratio": v["ratio"],
                  "control_ratio": v["control_ratio"], "p": v["p"],
                  "fraction_remaining": v["fraction"]} for k, v in effects.items()]
    claims.append(vanish_claim("bifurcation", "Bifurcation", claims[0],
                               {k: (v["fraction"], v["p"]) for k, v in effects.items()}))
    sens = []
    for name, cv in CONVENTIONS.items() if config.sensitivity else ():
        if cv.pool not in ms.pools:
            continue
        xs, lay = ms.pools[cv.pool].states(cv)
        k = pair_mask(ms.pools[cv.pool].prompts, cv)
        r = paper1_test("bifurcation", xs[k], ms.pools[cv.pool].prompts[k].reset_index(drop=True),
                        lay, n_bootstrap=500, seed=config.seed)
        sens.append({"model": ms.name, "convention": name, "definition": cv.label,
                     "n_pairs": r["n_pairs"], "base_layer": r["base_layer"],
                     "excess": r["excess"], "ratio": r["ratio"],
                     "control_ratio": r["control_ratio"],
                     "onset": r["onset"], "p": r["p"],
                     "verdict": bifurcation_claims(r, ms.name, cv.label)[0].verdict})
    return {
        "claims": claims_frame(claims),
        "profiles": pd.DataFrame(profiles),
        "controls": pd.DataFrame(controls),
        "sensitivity": pd.DataFrame(sens),
    }
