"""Paper 1, claim 2, on one source: reasoning prompts turn more sharply than lexical variations.

The claim's test compares the families at equal length (:mod:`lamina.trajectory.curvature_stats`:
mean curvature moves with length, and the paper's families do not overlap in length); the
independent unit of the lexical families is the base word. Trajectory length, the first of
paper 1's five metrics, is reported per family beside curvature.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, cast

import numpy as np
import pandas as pd

from lamina.evidence.claims import claims_frame
from lamina.evidence.stats import index_bootstrap
from lamina.trajectory.analyses.shared import Options, control_effects, main_pool, sensitivity_rows
from lamina.trajectory.judging import judge_chapter
from lamina.trajectory.metrics import curvature, mean_curvature, trajectory_length
from lamina.trajectory.model_states import Convention, ModelStates, PooledStates
from lamina.trajectory.sizes import chapter_mask
from lamina.trajectory.stat_tests import Resampling, paper1_test, units_of

__all__ = ["analyse", "keep_rows"]


def keep_rows(pooled: PooledStates, exclude_single: bool) -> np.ndarray:
    """(n,) bool: the families ``reasoning*`` and ``lexical*``, without single-token prompts
    when ``exclude_single`` (``n_tokens == 1``: from the tokenizer, the released
    ``metadata.parquet``, or a position-0 state flagged by its norm; 0 = unknown, kept):
    :func:`lamina.trajectory.sizes.chapter_mask`."""
    return chapter_mask("curvature", pooled.prompts, pooled.n_tokens, exclude_single)


def _length_rows(ms: ModelStates, x: np.ndarray, t: pd.DataFrame, seed: int) -> list[dict]:
    """Trajectory length (raw and on normalised states) per family, mean with a unit bootstrap."""
    rows = []
    units = units_of(t)
    for normalize in (False, True):
        ln = trajectory_length(x, normalize=normalize)
        for f in sorted(t["family"].unique()):
            m = (t["family"] == f).to_numpy()
            if m.sum() < 2:
                continue
            stat = cast(Callable[[np.ndarray], float], lambda i, v=ln[m]: float(np.mean(v[i])))
            b = index_bootstrap(stat, int(m.sum()), 500, seed, clusters=units[m])
            rows.append({"model": ms.name, "family": f, "normalised": normalize,
                         "length": b["estimate"], "ci_low": b["ci_low"], "ci_high": b["ci_high"]})
    return rows


def _control_rows(model: str, s: dict[str, Any], effects: dict[str, dict[str, Any]],
                  fractions: dict[str, tuple[float, float | None]]) -> list[dict[str, Any]]:  # fmt: skip
    """The ``controls`` table: the real gap, then each control's."""
    def row(name: str, v: dict[str, Any], frac: tuple[float, float | None]) -> dict[str, Any]:
        return {"model": model, "control": name, "matched": v.get("matched", np.nan),
                "reasoning": v["reasoning"], "lexical": v["lexical"],
                "difference": v["difference"], "p": v["effect_p"], "fraction_remaining": frac[0],
                "share_upper_bound": frac[1]}
    return [row("none (real)", s, (1.0, None))] + [row(k, v, fractions[k]) for k, v in effects.items()]


def _sensitivity(ms: ModelStates, opt: Options) -> list[dict[str, Any]]:
    """The ``sensitivity`` table: the gaps and the main verdict in every convention, with the
    single-token prompts excluded and included."""
    sens = []
    for exclude in (True, False):

        def measure(xs: np.ndarray, pld: Any, lay: list[int], cv: Convention,
                    exclude: bool = exclude) -> dict:
            k = keep_rows(pld, exclude)
            tk = pld.prompts[k].reset_index(drop=True)
            r = paper1_test("curvature", xs[k], tk, lay, n_tokens=pld.n_tokens[k],
                            n_bootstrap=500, n_permutations=2_000, seed=opt.seed)
            main = judge_chapter("curvature", r, ms.name, cv.label)[0]
            return {"single_token_prompts": "excluded" if exclude else "included",
                    "n_prompts": int(k.sum()), "matched": r.get("matched", np.nan),
                    "matched_low": r.get("matched_low", np.nan),
                    "matched_high": r.get("matched_high", np.nan),
                    "reasoning": r["reasoning"], "lexical": r["lexical"],
                    "difference": r["difference"], "p": main.p, "verdict": main.verdict}  # fmt: skip

        sens += sensitivity_rows(ms, measure)
    return sens


def analyse(ms: ModelStates, prompts: pd.DataFrame, opt: Options) -> dict[str, pd.DataFrame]:
    """One source's curvature by family at equal length and at all lengths, trajectory
    length, the per-layer angle profile, controls, claims and sensitivity."""
    pool, c, pooled = main_pool(ms, opt.pooling)
    keep = keep_rows(pooled, opt.exclude_single_token)
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
    kw: Resampling = {"n_bootstrap": min(opt.n_bootstrap, 5_000), "n_permutations": opt.n_permutations,
          "seed": opt.seed}  # fmt: skip
    s = paper1_test("curvature", x, t, layers, n_tokens=n_tok, **kw)
    excluded = int((pooled.n_tokens == 1).sum()) if opt.exclude_single_token else 0
    conv = c.label + (f", {excluded} single-token prompts excluded" if excluded else "")
    kappa = curvature(x)  # (n, m-2): the angle at layers[1..m-2]
    profiles = [
        {"model": ms.name, "family": f, "layer": layer,
         "kappa": float(np.nanmean(kappa[fam == f, j]))}
        for f in sorted(set(fam))
        for j, layer in enumerate(layers[1:-1])
    ]
    per_prompt = pd.DataFrame({"model": ms.name, "family": fam, "prompt": t["prompt"],
                               "n_tokens": n_tok, "mean_curvature": mean_curvature(x)})
    effects, results = control_effects("curvature", s, x, ms, c, t, layers, opt.seed, keep, n_tok)
    claims = judge_chapter("curvature", s, ms.name, conv, controls=results)
    fractions = {k: (v.fraction, v.share_high) for k, v in results.items()}
    return {
        "claims": claims_frame(claims),
        "profiles": pd.DataFrame(profiles),
        "per_prompt": per_prompt,
        "length": pd.DataFrame(_length_rows(ms, x, t, opt.seed)),
        "controls": pd.DataFrame(_control_rows(ms.name, s, effects, fractions)),
        "sensitivity": pd.DataFrame(_sensitivity(ms, opt) if opt.sensitivity else []),
    }
