"""Calibration of paper 3's claims: every declared layer-anatomy and Growth Training claim run
on its known-answer sources, seed by seed, for the calibration page
(:mod:`lamina.book.calibration`).

:func:`calibration_runs` returns the rows of :data:`lamina.evidence.calibration.RUN_COLUMNS`
(one per claim, source and seed). The sources are :mod:`lamina.anatomy.calibration_sources`
(skip sweeps, robustness sweeps, recovery times), :mod:`lamina.anatomy.calibration_weights`
(weight stacks) and :mod:`lamina.anatomy.growth_calibration` (one run's comparison tables);
:data:`CALIBRATION_SOURCES` says what each null keeps. Each seed's rows are cached under
``<data>/cache/calibration/paper3-<key>-<seed>.json``, keyed by the source of
:mod:`lamina.anatomy` and :mod:`lamina.evidence` and the library versions, with a SHA-256 of the
rows: a damaged entry is recomputed with a warning.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from lamina.anatomy import claims as anatomy_claims
from lamina.anatomy import growth_claims
from lamina.anatomy.calibration_sources import (
    N_RECOVERY,
    N_ROBUST_UNITS,
    N_UNITS,
    SOURCES,
    run_rows,
    seed_rows,
)
from lamina.anatomy.calibration_weights import weight_rows
from lamina.anatomy.growth_calibration import growth_rows
from lamina.core.provenance import atomic_write_json, data_dir
from lamina.core.threads import one_thread_process
from lamina.evidence.calibration import COVERAGE_COLUMN, RUN_COLUMNS
from lamina.evidence.declare import ClaimSpec

__all__ = ["CALIBRATION_SOURCES", "CLAIMS", "cache_key", "calibration_runs", "seed_runs"]

CLAIMS: tuple[ClaimSpec, ...] = (*anatomy_claims.CLAIMS, *growth_claims.CLAIMS)
"""Every declared claim of paper 3: layer anatomy, then Growth Training."""

CALIBRATION_SOURCES: dict[str, str] = {
    "skip sweeps": f"30 layers on {N_UNITS} units at the chapter's noise (fitted on SmolLM2's "
    "sweep); "
    "null: a smooth random importance profile (AR(1) over depth, phi 0.8: neighbours alike, the "
    "threat to a test that treats layers as exchangeable) with 3 layers of no effect and no "
    "core; planted: the paper's core (+63,419%), its 10^7 range and anti-layers at L14, L17 "
    "(-5%, lamina's size); half: half of each",
    "robustness sweeps": f"14 layers on {N_ROBUST_UNITS} units, per-unit t(3) noise; predicted weights' median change at "
    "+100% (null, skewed), +1,000% (planted); joint / summed increase 1 (null), 2 (planted); "
    "the worst scaled layer at +5% (null), +1% (planted); \"only scaling\" (judged only where "
    "scaling preserves) on its conditional null, one-other: scaling's worst layer at +1% and "
    "noise's at +1%",
    "recovery times": f"{N_RECOVERY} layers whose initial damage importance drives (the threat: importance "
    "might only predict the damage); null: time driven by the damage alone; planted: partial "
    "rho 0.6 (lamina's size)",
    "weight stacks": "30 layers x 7 matrix types, heavy tails; R2 null: layers sharing a "
    "pattern, their scales a smooth random profile over depth (raw entries earn R2 from the "
    "scale alone; the claims read each layer at unit RMS); summary and delta null: independent "
    "layers with random scales (no depth order); planted: a depth polynomial with R2 0.91 of "
    "the scaled entries (its noise fitted by code), summaries following depth, an alternating "
    "component 0.2 below independence",
    "growth runs": "3 seeds with the chapter's spread, t(3) noise; null: no gain, no order "
    "effect, no saving; planted: 4.7x, 13% faster, 54% fewer FLOPs, an order effect of 1.1x",
}

_CODE = ("anatomy", "evidence")  # under lib/lamina


def cache_key() -> str:
    """sha256 (hex) of what a seed's rows depend on: the source of :mod:`lamina.anatomy` and
    :mod:`lamina.evidence` and the numpy / scipy / pandas / torch versions."""
    import scipy
    import torch

    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]
    for part in _CODE:
        for f in sorted((root / part).rglob("*.py")):
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    versions = (np.__version__, scipy.__version__, pd.__version__, torch.__version__)
    h.update(repr(versions).encode())
    return h.hexdigest()


def seed_runs(seed: int) -> list[dict[str, object]]:
    """Every paper-3 source's rows for one seed (RUN_COLUMNS)."""
    weights = [r for source in SOURCES for r in weight_rows(source, seed, run_rows)]
    return [*seed_rows(seed), *weights, *growth_rows(seed)]


def _digest(rows: list[dict[str, object]]) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()


def _cached(seed: int, key: str, cache: Path | None) -> tuple[list[dict[str, object]], float, bool]:
    """(rows, seconds of their computation, read from the cache) of one seed."""
    path = None if cache is None else cache / f"paper3-{key[:20]}-{seed}.json"
    if path is not None and path.is_file():
        try:
            entry = json.loads(path.read_text())
            if entry["sha256"] == _digest(entry["rows"]):
                return entry["rows"], float(entry["seconds"]), True
            raise ValueError("its SHA-256 does not match its rows")
        except (ValueError, KeyError, TypeError) as exc:
            warnings.warn(f"calibration cache {path} is damaged ({exc}); recomputed", stacklevel=3)
    t0 = time.process_time()  # CPU time: the cost on an idle core, whatever the machine's load
    rows = seed_runs(seed)
    seconds = time.process_time() - t0
    if path is not None:
        atomic_write_json(path, {"rows": rows, "sha256": _digest(rows), "seconds": seconds})
    return rows, seconds, False


def _one(args: tuple[int, str, Path | None]) -> tuple[list[dict[str, object]], float, bool]:
    one_thread_process()
    return _cached(*args)


def calibration_runs(
    n_seeds: int, *, jobs: int = 1, cache: Path | None | str = "default"
) -> pd.DataFrame:
    """The runs of every claim of :data:`CLAIMS` that has known-answer sources, over seeds
    0..n_seeds-1 (RUN_COLUMNS and COVERAGE_COLUMN: whether a planted row's CI covers its known
    value, NaN where not checked), in ``jobs`` worker processes of one thread each; ``cache``: a
    folder, None (not cached) or "default" (``<data>/cache/calibration``). ``attrs["seconds"]``:
    each seed's computation time (CPU seconds of one thread; recorded with a cached seed),
    ``attrs["cached"]``: whether each seed was read from the cache."""
    if n_seeds < 1:
        raise ValueError(f"n_seeds must be at least 1; got {n_seeds}")
    folder = data_dir() / "cache" / "calibration" if cache == "default" else cache
    key = cache_key()
    args = [(s, key, None if folder is None else Path(folder)) for s in range(n_seeds)]
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            done = list(pool.map(_one, args))
    else:
        done = [_cached(*a) for a in args]
    out = pd.DataFrame([r for rows, _, _ in done for r in rows],
                       columns=[*RUN_COLUMNS, COVERAGE_COLUMN])
    out.attrs["seconds"] = [s for _, s, _ in done]
    out.attrs["cached"] = [c for _, _, c in done]
    return out
