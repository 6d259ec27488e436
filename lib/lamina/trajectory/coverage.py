"""Coverage of paper 1's main rows' CIs: how often the interval the book reports contains the
population value, on planted sources where that value is known.

The population value of the peak on a source ``kind`` (:func:`peak_truth`) is

    theta = max_l  E[ CI(l) ],   E over independent draws of the source,

CI(l) the chapter's convergence-index profile (:func:`lamina.trajectory.convergence_stats.
ci_profile`, an item's own prompts left out) of the chapter's own prompts, estimated by the mean
profile over :data:`TRUTH_DRAWS` draws at seeds :data:`TRUTH_SEED` + k (never calibration
seeds). The estimate max_l CI_hat(l) is biased upwards from theta (the layer is chosen on the
noise); a CI covers when ci_low <= theta <= ci_high. Each draw redraws the whole source (the
category directions, the frames, the basis), so theta is the marginal value; the items'
bootstrap treats what the draw shares as fixed, so the check is, if anything, strict.

The other main rows' population values (:func:`main_truth`) are the same plug-in: the row's
statistic on the draws pooled, each draw a whole source at the chapter's own prompts:

* curvature's matched gap, reasoning - lexical within strata of equal length (radians): the
  mean over draws of each draw's gap (linear in the prompts' curvatures, its strata weights
  fixed by the prompts' token counts, the same in every draw);
* three phases' SIM margin, min(mean d1, mean d2) over units: from the band means averaged
  over draws (every draw has the same units);
* bifurcation's excess, the median over pairs of r_amb / r_ctl: the median over the pairs of
  every draw pooled (each draw's ratios at its own baseline layer).

The truths are kept beside the solved levers (``<data>/cache/levers/peak-truth-<key>.json``,
:func:`_truth_file`: keyed on the code that makes the states and the profile, and on the
prompts).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lamina.core.provenance import atomic_write_text, data_dir
from lamina.evidence.calibration import COVERAGE_TARGET, covers
from lamina.trajectory.convergence_stats import ci_profile, distance_stack, item_units
from lamina.trajectory.levers import CODE
from lamina.trajectory.sizes import CHAPTER_POOLING, chapter_mask, chapter_prompts
from lamina.trajectory.stat_tests import paper1_test
from lamina.trajectory.synthetic import synthetic_states, synthetic_tokens

__all__ = ["COVERAGE_TARGET", "MAIN_ROWS", "TRUTH_DRAWS", "TRUTH_SEED", "covers", "main_truth",
           "peak_truth"]  # fmt: skip

TRUTH_DRAWS = 200
TRUTH_SEED = 970_001
# the main rows whose CI coverage the calibration checks besides the convergence peak
MAIN_ROWS = {"curvature": "p1-curvature-gap", "three_phase": "p1-three-phase-bands",
             "bifurcation": "p1-bifurcation-ratio"}  # fmt: skip


def _mean_profile(kind: str, n_draws: int) -> np.ndarray:
    """(L+1,) the mean over ``n_draws`` draws of the convergence chapter's CI profile (chord
    units) on source ``kind``."""
    t = chapter_prompts("convergence")
    lab, units = t["category"].to_numpy(), item_units(t)
    pool = CHAPTER_POOLING["convergence"]
    total = None
    for k in range(n_draws):
        x = synthetic_states(t, kind, TRUTH_SEED + k, pool)
        prof = ci_profile(distance_stack(x), lab, units=units)
        total = prof if total is None else total + prof
    assert total is not None
    return total / n_draws


def _truth_file() -> Path:
    """``<data>/cache/levers/peak-truth-<sha256>.json``: the hash of numpy's version, of the
    modules that solve the levers and make the states (:data:`lamina.trajectory.levers.CODE`,
    and levers, synthetic, sizes, this module and the chapters' statistics) and of the
    chapters' prompts."""
    h = hashlib.sha256(np.__version__.encode())
    here = Path(__file__).resolve().parent
    names = (*CODE, "levers.py", "synthetic.py", "sizes.py", "convergence_stats.py", "coverage.py",
             "curvature_stats.py", "phase_stats.py", "bifurcation_stats.py", "stat_tests.py")
    for name in dict.fromkeys(names):
        h.update(name.encode() + b"\0" + (here / name).read_bytes())
    for chapter in ("convergence", *MAIN_ROWS):
        h.update(pd.util.hash_pandas_object(chapter_prompts(chapter).astype(str)).values.tobytes())
    return data_dir() / "cache" / "levers" / f"peak-truth-{h.hexdigest()[:24]}.json"


@functools.lru_cache(maxsize=8)
def peak_truth(kind: str, n_draws: int = TRUTH_DRAWS) -> float:
    """theta of source ``kind`` (module docstring; chord units), computed once per code
    version and kept on disk."""
    if n_draws < 1:
        raise ValueError(f"n_draws must be >= 1; got {n_draws}")
    return _kept(f"{kind}/{n_draws}", lambda: float(np.nanmax(_mean_profile(kind, n_draws))))


def _kept(key: str, compute: Callable[[], float]) -> float:
    """The truth ``key`` from the truth file (:func:`_truth_file`), computed and added to it
    (atomically, beside the truths already there) when absent."""
    f = _truth_file()
    known = json.loads(f.read_text()) if f.is_file() else {}
    if key not in known:
        known[key] = compute()
        f.parent.mkdir(parents=True, exist_ok=True)
        fresh = json.loads(f.read_text()) if f.is_file() else {}
        atomic_write_text(f, json.dumps(fresh | {key: known[key]}, indent=1, sort_keys=True))
    return float(known[key])




def _pooled(chapter: str, kind: str, n_draws: int) -> float:
    """The main row's statistic of ``chapter`` on ``n_draws`` draws of source ``kind`` pooled
    (module docstring), in the row's unit."""
    t = chapter_prompts(chapter)
    pool = CHAPTER_POOLING[chapter]
    tok = synthetic_tokens(t, pool)
    keep = chapter_mask(chapter, t, tok)
    t, tok = t[keep].reset_index(drop=True), tok[keep]
    parts: list[Any] = []
    for k in range(n_draws):
        x = synthetic_states(t, kind, TRUTH_SEED + k, pool)
        s = paper1_test(chapter, x, t, list(range(x.shape[1])), n_tokens=tok,
                        n_bootstrap=20, n_permutations=20, seed=k)  # fmt: skip
        if chapter == "curvature":
            parts.append(s["matched"])
        elif chapter == "three_phase":
            parts.append(s["band_means"])
        else:  # bifurcation: each pair's r_amb / r_ctl at the draw's own baseline
            da, dc, base = s["delta"], s["control_delta"], s["base_layer"]
            parts.append((da[:, -1] / da[:, base]) / (dc[:, -1] / dc[:, base]))
    if chapter == "curvature":
        return float(np.mean(parts))
    if chapter == "three_phase":
        bm = np.mean(parts, axis=0)  # (3,) encoding, elaboration, output preparation
        return float(min(bm[1] - bm[0], bm[1] - bm[2]))
    return float(np.median(np.concatenate(parts)))


@functools.lru_cache(maxsize=16)
def main_truth(chapter: str, kind: str, n_draws: int = TRUTH_DRAWS) -> float:
    """The population value of ``chapter``'s main row (:data:`MAIN_ROWS`; "convergence": the
    peak, :func:`peak_truth`) on source ``kind``, in the row's unit, computed once per code
    version and kept on disk beside the peak's."""
    if chapter == "convergence":
        return peak_truth(kind, n_draws)
    if chapter not in MAIN_ROWS:
        raise ValueError(f"no main-row truth for chapter {chapter!r}; known: convergence, "
                         f"{', '.join(MAIN_ROWS)}")  # fmt: skip
    if n_draws < 1:
        raise ValueError(f"n_draws must be >= 1; got {n_draws}")
    return _kept(f"{chapter}/{kind}/{n_draws}", lambda: _pooled(chapter, kind, n_draws))
