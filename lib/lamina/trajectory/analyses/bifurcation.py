"""Paper 1, claim 3, on one source: an ambiguous word's two senses separate across layers;
controls do not.

Every homograph pair is kept with its matched control pair (same frame, the homograph
replaced by an unambiguous word), and the test is paired over all pairs: Wilcoxon signed-rank
of log(ratio_homograph) - log(ratio_control). The onset is the start of a ramp fitted to the
paired difference delta_homograph - delta_control, from the ratio's baseline layer.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lamina.evidence.claims import claims_frame
from lamina.trajectory.analyses.shared import Options, control_effects, main_pool
from lamina.trajectory.judging import judge_chapter
from lamina.trajectory.model_states import CONVENTIONS, Convention, ModelStates
from lamina.trajectory.stat_tests import paper1_test

__all__ = ["analyse", "pair_mask"]


def pair_mask(prompts: pd.DataFrame, conv: Convention) -> np.ndarray:
    """(n,) bool: the rows a convention uses (``word_last`` pairs for last-token pooling)."""
    if conv.pool == "last" and "word_last" in prompts:
        return prompts["word_last"].astype(bool).to_numpy()
    return np.ones(len(prompts), bool)


def _sensitivity(ms: ModelStates, opt: Options) -> list[dict]:
    """The ``sensitivity`` table: the excess, ratios, onset and main verdict per convention."""
    rows = []
    for name, cv in CONVENTIONS.items():
        if cv.pool not in ms.pools:
            continue
        xs, lay = ms.pools[cv.pool].states(cv)
        k = pair_mask(ms.pools[cv.pool].prompts, cv)
        r = paper1_test("bifurcation", xs[k], ms.pools[cv.pool].prompts[k].reset_index(drop=True),
                        lay, n_bootstrap=500, seed=opt.seed)
        main = judge_chapter("bifurcation", r, ms.name, cv.label)[0]
        rows.append({"model": ms.name, "convention": name, "definition": cv.label,
                     "n_pairs": r["n_pairs"], "base_layer": r["base_layer"],
                     "excess": r["excess"], "ratio": r["ratio"],
                     "control_ratio": r["control_ratio"], "onset": r["onset"], "p": r["p"],
                     "verdict": main.verdict})  # fmt: skip
    return rows


def analyse(ms: ModelStates, prompts: pd.DataFrame, opt: Options) -> dict[str, pd.DataFrame]:
    """One source's homograph and control separation, controls, claims and sensitivity;
    ``prompts`` has the rows of :func:`lamina.sources.prompts.bifurcation_prompts`."""
    _, c, pooled = main_pool(ms, opt.pooling)
    x, layers = pooled.states(c)
    keep = pair_mask(pooled.prompts, c)
    x, t = x[keep], pooled.prompts[keep].reset_index(drop=True)
    s = paper1_test("bifurcation", x, t, layers, n_bootstrap=min(opt.n_bootstrap, 5_000),
                    seed=opt.seed)
    conv = c.label + f"; ratio baseline layer {s['base_layer']}; {s['n_pairs']} pairs"
    depth = np.asarray(layers) / layers[-1]
    diff = s["delta"] - s["control_delta"]  # (pairs, m) paired difference
    profiles = [
        {"model": ms.name, "condition": cond, "layer": layer, "depth": dd,
         "delta": float(np.mean(d[:, j])), "delta_sd": float(np.std(d[:, j]))}
        for cond, d in (("ambiguous", s["delta"]), ("control", s["control_delta"]),
                        ("difference", diff))
        for j, (layer, dd) in enumerate(zip(layers, depth, strict=True))
    ]  # fmt: skip
    effects, results = control_effects("bifurcation", s, x, ms, c, t, layers, opt.seed, keep)
    controls = [{"model": ms.name, "control": "none (real)", "excess": s["excess"],
                 "ratio": s["ratio"], "control_ratio": s["control_ratio"], "p": s["p"],
                 "fraction_remaining": 1.0, "share_upper_bound": None}]
    controls += [{"model": ms.name, "control": k, "excess": v["excess"], "ratio": v["ratio"],
                  "control_ratio": v["control_ratio"], "p": v["p"],
                  "fraction_remaining": results[k].fraction,
                  "share_upper_bound": results[k].share_high} for k, v in effects.items()]  # fmt: skip
    claims = judge_chapter("bifurcation", s, ms.name, conv, controls=results)
    return {
        "claims": claims_frame(claims),
        "profiles": pd.DataFrame(profiles),
        "controls": pd.DataFrame(controls),
        "sensitivity": pd.DataFrame(_sensitivity(ms, opt) if opt.sensitivity else []),
    }
