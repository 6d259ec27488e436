"""Coverage of the convergence peak's CI: how often the interval the book reports contains the
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

The truths are kept beside the solved levers (``<data>/cache/levers/peak-truth-<key>.json``,
:func:`_truth_file`: keyed on the code that makes the states and the profile, and on the
prompts).
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

from lamina.core.provenance import atomic_write_text, data_dir
from lamina.evidence.calibration import COVERAGE_TARGET, covers
from lamina.trajectory.convergence_stats import ci_profile, distance_stack, item_units
from lamina.trajectory.levers import CODE
from lamina.trajectory.sizes import CHAPTER_POOLING, chapter_prompts
from lamina.trajectory.synthetic import synthetic_states

__all__ = ["COVERAGE_TARGET", "TRUTH_DRAWS", "TRUTH_SEED", "covers", "peak_truth"]

TRUTH_DRAWS = 200
TRUTH_SEED = 970_001


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
    and levers, synthetic, sizes, convergence_stats and this module) and of the convergence
    chapter's prompts."""
    h = hashlib.sha256(np.__version__.encode())
    here = Path(__file__).resolve().parent
    names = (*CODE, "levers.py", "synthetic.py", "sizes.py", "convergence_stats.py", "coverage.py")
    for name in dict.fromkeys(names):
        h.update(name.encode() + b"\0" + (here / name).read_bytes())
    h.update(pd.util.hash_pandas_object(chapter_prompts("convergence").astype(str)).values.tobytes())
    return data_dir() / "cache" / "levers" / f"peak-truth-{h.hexdigest()[:24]}.json"


@functools.lru_cache(maxsize=8)
def peak_truth(kind: str, n_draws: int = TRUTH_DRAWS) -> float:
    """theta of source ``kind`` (module docstring; chord units), computed once per code
    version and kept on disk."""
    if n_draws < 1:
        raise ValueError(f"n_draws must be >= 1; got {n_draws}")
    f = _truth_file()
    key = f"{kind}/{n_draws}"
    known = json.loads(f.read_text()) if f.is_file() else {}
    if key not in known:
        known[key] = float(np.nanmax(_mean_profile(kind, n_draws)))
        f.parent.mkdir(parents=True, exist_ok=True)
        fresh = json.loads(f.read_text()) if f.is_file() else {}
        atomic_write_text(f, json.dumps(fresh | {key: known[key]}, indent=1, sort_keys=True))
    return float(known[key])


