"""Paper 1, claim 2: reasoning prompts turn more sharply than lexical variations.

The independent unit of the lexical family is the base word (8 words x 6 variants), so its
CIs resample base words and the test compares unit means. Lexical prompts are 1-3 words and
reasoning prompts 6-25, so the gap is also reported adjusted for length (OLS on
log(tokens)), with the number of prompts whose length both families share. Trajectory
length, the first of paper 1's five metrics, is reported per family beside curvature.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, cast

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
from lamina.chapters.states import ModelStates, PooledStates
from lamina.chapters.trajectory import Convention, TrajectoryConfig, subsample
from lamina.evidence.claims import claims_frame
from lamina.evidence.stats import index_bootstrap
from lamina.trajectory import curvature, mean_curvature, trajectory_length
from lamina.trajectory.stat_tests import paper1_test, units_of
from lamina.trajectory.verdicts import curvature_claims, vanish_claim

__all__ = ["analyse_model", "keep_rows", "run_curvature"]


def keep_rows(pooled: PooledStates, exclude_single: bool) -> np.ndarray:
    """(n,) bool: reasoning and lexical rows, without single-token prompts when
    ``exclude_single`` (``n_tokens == 1``: from the tokenizer, the released
    ``metadata.parquet``, or a position-0 state flagged by its norm; 0 = unknown, kept)."""
    keep = pooled.prompts["family"].isin(["reasoning", "lexical"]).to_numpy().copy()
    if exclude_single:
        keep &= pooled.n_tokens != 1
    return keep


SPEC = ChapterSpec(
    "curvature",
    required=("family",),
    tables=("profiles", "per_prompt", "length", "controls", "sensitivity"),
    quick=lambda prompts, seed: subsample(prompts, "family", 12, seed),
)


def run_curvature(config: TrajectoryConfig) -> ExperimentResult:
    """Mean curvature of the reasoning and lexical families for every model, with its
    length-adjusted version, trajectory length, controls, the per-layer angle profile, and
    sensitivity to the convention and to single-token prompts."""
    return run_chapter(SPEC, config, analyse_model)


def _length_rows(ms: ModelStates, x: np.ndarray, t: pd.DataFrame, seed: int) -> list[dict]:
    """Trajectory length (raw and on normalised states) per family, mean with a unit bootstrap."""
    rows = []
    units = units_of(t)
    for normalize in (False, True):
        ln = trajectory_length(x, normalize=normalize)
        for f in ("reasoning", "lexical"):
            m = (t["family"] == f).to_numpy()
            if m.sum() < 2:
                continue
            b = index_bootstrap(cast(Callable[[np.ndarray], float], lambda i, v=ln[m]: float(np.mean(v[i]))), int(m.sum()), 500, seed,
                                clusters=units[m])
            rows.append({"model": ms.name, "family": f, "normalised": normalize,
                         "length": b["estimate"], "ci_low": b["ci_low"], "ci_high": b["ci_high"]})
    return rows


def _control_rows(
    model: str, s: dict[str, Any], effects: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The ``controls`` table: the real gap, then each control's (``effects``,
    :func:`lamina.chapters.skeleton.control_effects`)."""
    controls = [{"model": model, "control": "none (real)", "reasoning": s["reasoning"],
                 "lexical": s["lexical"], "difference": s["difference"], "p": s["p"],
                 "fraction_remaining": 1.0}]
    controls += [{"model": model, "control": k, "reasoning": v["reasoning"],
                  "lexical": v["lexical"], "difference": v["difference"], "p": v["p"],
                  "fraction_remaining": v["fraction"]} for k, v in effects.items()]  # fmt: skip
    return controls


def _sensitivity(ms: ModelStates, config: TrajectoryConfig) -> list[dict[str, Any]]:
    """The ``sensitivity`` table: the gap and its verdict in every convention, with the
    single-token prompts excluded and included."""
    sens = []
    for exclude in (True, False):

        def measure(xs: np.ndarray, pld: Any, lay: list[int], cv: Convention,
                    exclude: bool = exclude) -> dict:
            k = keep_rows(pld, exclude)
            tk = pld.prompts[k].reset_index(drop=True)
            r = paper1_test("curvature", xs[k], tk, lay, n_tokens=pld.n_tokens[k],
                            n_bootstrap=500, seed=config.seed)
            rows = curvature_claims(r, ms.name, cv.label)
            return {"single_token_prompts": "excluded" if exclude else "included",
                    "n_prompts": int(k.sum()), "reasoning": r["reasoning"],
                    "lexical": r["lexical"], "difference": r["difference"],
                    "diff_low": r["diff_low"], "diff_high": r["diff_high"],
                    "adjusted": r.get("adjusted", np.nan), "p": r["p"],
                    "verdict": rows[0].verdict}  # fmt: skip

        sens += sensitivity_rows(ms, measure)
    return sens


def analyse_model(
    ms: ModelStates, prompts: pd.DataFrame, config: TrajectoryConfig
) -> dict[str, pd.DataFrame]:
    """One model's curvature by family, length, profile, controls, claims and sensitivity."""
    pool, c, pooled = main_pool(ms, config.pooling)
    keep = keep_rows(pooled, config.exclude_single_token)
    x, layers = pooled.states(c)
    shortest = pooled.states(Convention(cast(Literal["mean", "last"], pool), layer0=False))[0].shape[1]
    if shortest < 3:  # curvature needs two steps, i.e. three states, in every convention
        raise ValueError(
            f"{ms.name}: the curvature chapter needs at least 3 layer states in every "
            f"convention it compares; the 'released code' convention drops layer 0 (the "
            f"embedding output) and leaves {shortest} for this model. Use a model with at "
            "least 3 blocks."
        )
    x, t = x[keep], pooled.prompts[keep].reset_index(drop=True)
    n_tok = pooled.n_tokens[keep]
    fam = t["family"].to_numpy()
    kw = {"n_bootstrap": min(config.n_bootstrap, 5_000), "seed": config.seed}
    s = paper1_test("curvature", x, t, layers, n_tokens=n_tok, **kw)
    excluded = int((pooled.n_tokens == 1).sum()) if config.exclude_single_token else 0
    conv = c.label + (f", {excluded} single-token prompts excluded" if excluded else "")
    claims = curvature_claims(s, ms.name, conv)
    kappa = curvature(x)  # (n, m-2): the angle at layers[1..m-2]
    profiles = [
        {"model": ms.name, "family": f, "layer": layer,
         "kappa": float(np.nanmean(kappa[fam == f, j]))}
        for f in ("reasoning", "lexical")
        for j, layer in enumerate(layers[1:-1])
    ]
    mc = mean_curvature(x)
    per_prompt = pd.DataFrame({"model": ms.name, "family": fam, "prompt": t["prompt"],
                               "n_tokens": n_tok, "mean_curvature": mc})
    effects = control_effects("curvature", s, x, ms, c, t, layers, config, keep)
    controls = _control_rows(ms.name, s, effects)
    claims.append(vanish_claim("curvature", "The curvature difference", claims[0],
                               {k: (v["fraction"], v["p"]) for k, v in effects.items()}))
    sens = _sensitivity(ms, config) if config.sensitivity else []
    return {
        "claims": claims_frame(claims),
        "profiles": pd.DataFrame(profiles),
        "per_prompt": per_prompt,
        "length": pd.DataFrame(_length_rows(ms, x, t, config.seed)),
        "controls": pd.DataFrame(controls),
        "sensitivity": pd.DataFrame(sens),
    }
