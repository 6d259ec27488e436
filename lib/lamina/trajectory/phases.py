"""Three phases of the layerwise-similarity profile: the paper's fixed bands and data-driven change points.

Re-exported by :mod:`lamina.trajectory`. A profile is indexed by SIM index l = 0..L-1, where
SIM(l) = cos(h(l), h(l+1)) (see ``lamina.trajectory.metrics.layerwise_cosine``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, cast

import numpy as np
import pandas as pd

from lamina.core.arrays import to_numpy
from lamina.core.types import LayerBands, MeanProfile, Profile

__all__ = ["PHASE_NAMES", "PhaseDetection", "detect_phases", "fixed_phase_bands", "phase_summary"]

PHASE_NAMES: tuple[str, str, str] = ("encoding", "elaboration", "output preparation")


def fixed_phase_bands(n_blocks: int) -> LayerBands:
    """The paper's fixed proportional phase bands over the SIM profile.

    For SIM index l = 0..L-1 (L = n_blocks):  phase 0 "encoding" if l <= floor(L/4);
    phase 1 "elaboration" if floor(L/4) < l <= floor(3L/4); phase 2 "output preparation" otherwise.

    n_blocks: L >= 1  ->  (L,) int phase ids in {0, 1, 2}; names in ``PHASE_NAMES``.
    """
    if int(n_blocks) != n_blocks or n_blocks < 1:
        raise ValueError(f"n_blocks must be a positive integer; got {n_blocks}")
    l = np.arange(int(n_blocks))
    return np.where(l <= n_blocks // 4, 0, np.where(l <= (3 * n_blocks) // 4, 1, 2))


def phase_summary(
    sim: Profile | MeanProfile, bands: LayerBands, names: Sequence[str] | None = None
) -> pd.DataFrame:
    """Summary of a similarity profile within each phase band (one row per phase).

    For phase k with SIM indices B_k: mean = mean over prompts and l in B_k of SIM_i(l);
    profile_min / profile_max = min / max over l in B_k of the prompt-mean profile mean_i SIM_i(l)
    (the form of the paper's quoted ranges); sd_prompts = SD over prompts of mean_{l in B_k} SIM_i(l).

    sim: (n, L) or (L,), dimensionless; bands: (L,) int phase ids (e.g. ``fixed_phase_bands(L)``
    or ``detect_phases(...).bands``)  ->  DataFrame with columns phase, name, first_index,
    last_index, n_indices, mean, profile_min, profile_max, sd_prompts.
    """
    s = to_numpy(sim, "sim").astype(np.float64)
    s = s[None] if s.ndim == 1 else s
    bd = np.asarray(bands)
    if s.ndim != 2 or bd.shape != (s.shape[1],):
        raise ValueError(f"sim must be (n, L) or (L,) and bands (L,); got {s.shape}, {bd.shape}")
    phases = np.unique(bd)
    if names is None:
        names = PHASE_NAMES if set(phases) <= {0, 1, 2} else [f"phase {p}" for p in phases]
    profile = np.nanmean(s, axis=0)
    rows = []
    for k, p in enumerate(phases):
        idx = np.flatnonzero(bd == p)
        per_prompt = np.nanmean(s[:, idx], axis=1)
        rows.append(
            {
                "phase": int(p),
                "name": names[int(p)] if int(p) < len(names) else names[k],
                "first_index": int(idx[0]),
                "last_index": int(idx[-1]),
                "n_indices": int(idx.size),
                "mean": float(np.nanmean(s[:, idx])),
                "profile_min": float(profile[idx].min()),
                "profile_max": float(profile[idx].max()),
                "sd_prompts": float(per_prompt.std(ddof=1)) if s.shape[0] > 1 else np.nan,
            }
        )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class PhaseDetection:
    """Result of ``detect_phases``: the chosen segmentation and the criterion for every k."""

    n_phases: int
    change_points: tuple[int, ...]
    bands: LayerBands
    segment_means: np.ndarray
    criterion: dict[int, float] = field(default_factory=dict)
    method: str = "bic"


def _segment(y: np.ndarray, k_max: int, min_size: int) -> list[list[int] | None]:
    """Exact least-squares segmentation by dynamic programming, for k = 1..k_max segments.

    Minimises sum over segments of sum_{t in seg} (y_t - mean(seg))^2; returns, for each k, the
    first index of every segment after the first (None where k segments of >= min_size points
    cannot be formed; index 0 of the list is unused). O(k_max * T^2) time.
    """
    t = y.size
    c1 = np.concatenate([[0.0], np.cumsum(y)])
    c2 = np.concatenate([[0.0], np.cumsum(y * y)])
    i, j = np.meshgrid(np.arange(t + 1), np.arange(t + 1), indexing="ij")
    size = np.maximum(j - i, 1)
    cost = np.maximum((c2[j] - c2[i]) - (c1[j] - c1[i]) ** 2 / size, 0.0)  # segment y[i:j]
    cost[j - i < min_size] = np.inf
    best = np.full((k_max + 1, t + 1), np.inf)
    arg = np.zeros((k_max + 1, t + 1), dtype=int)
    best[1] = cost[0]
    for k in range(2, k_max + 1):
        tot = best[k - 1][:, None] + cost
        arg[k] = np.argmin(tot, axis=0)
        best[k] = tot[arg[k], np.arange(t + 1)]
    out: list[list[int] | None] = [None]
    for k in range(1, k_max + 1):
        cps, end = [], t
        for kk in range(k, 1, -1):
            end = int(arg[kk, end])
            cps.append(end)
        out.append(sorted(cps) if np.isfinite(best[k, t]) else None)
    return out


def _fit(y: np.ndarray, cps: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Segment ids (T,) and segment means (k,) for change points ``cps``."""
    bands = np.zeros(y.size, dtype=int)
    for c in cps:
        bands[c:] += 1
    return bands, np.array([y[bands == b].mean() for b in range(len(cps) + 1)])


def _bic_criteria(
    y: np.ndarray, segs: list[list[int] | None], max_phases: int, penalty: float
) -> dict[int, float]:
    """{k: T log(RSS_k / T) + penalty (k - 1) log T} for every feasible k (see
    :func:`detect_phases`; RSS floored at T 1e-12 mean(y^2))."""
    t = y.size
    floor = t * 1e-12 * max(float(np.mean(y * y)), 1e-300)
    crit: dict[int, float] = {}
    for k in range(1, max_phases + 1):
        seg = segs[k]
        if seg is not None:
            bands, means = _fit(y, seg)
            rss = max(float(np.sum((y - means[bands]) ** 2)), floor)
            crit[k] = t * np.log(rss / t) + penalty * (k - 1) * np.log(t)
    return crit


def _cv_criteria(
    y: np.ndarray, segs: list[list[int] | None], max_phases: int, min_size: int
) -> dict[int, float]:
    """{k: summed squared error of order-preserved sample splitting} for every k feasible on
    the whole profile and on both halves (see :func:`detect_phases`)."""
    halves = [(y[0::2], y[1::2]), (y[1::2], y[0::2])]
    fits = [(tr, te, _segment(tr, max_phases, max(1, min_size // 2))) for tr, te in halves]
    crit: dict[int, float] = {}
    for k in range(1, max_phases + 1):
        if segs[k] is None or any(f[2][k] is None for f in fits):
            continue
        err = 0.0
        for tr, te, sg in fits:
            bands, means = _fit(tr, cast(list[int], sg[k]))  # not None: checked above
            m = min(tr.size, te.size)
            err += float(np.sum((te[:m] - means[bands][:m]) ** 2))
        crit[k] = err
    return crit


def detect_phases(
    profile: Profile | MeanProfile,
    max_phases: int = 6,
    method: Literal["bic", "cv"] = "bic",
    min_size: int = 2,
    penalty: float = 3.0,
) -> PhaseDetection:
    """Phases found from the data: exact piecewise-constant least-squares change-point segmentation.

    For each k = 1..max_phases, dynamic programming finds the k contiguous segments (each of
    >= min_size points) minimising RSS_k = sum_t (y_t - mean of y over t's segment)^2, where y is the
    profile (its mean over rows when given (n, L)). The number of phases k is chosen by
      - "bic": argmin_k  T log(RSS_k / T) + penalty * (k - 1) * log T,  T = len(y). Each change
        point costs penalty * log T; the default 3 counts its segment mean plus 2 for the searched
        location (plain BIC, 2, over-segments short profiles: in simulation it reports > 1 phase
        in ~17% of flat noisy profiles of length 30; 3 gives ~4%). RSS is floored at
        T * 1e-12 * mean(y^2), so a noise-free profile prefers the smallest exact k.
      - "cv": order-preserved sample splitting (Zou, Wang & Li 2020): segment the even-indexed
        points and score the squared error of the odd-indexed points against the fitted value of
        the preceding even point, then swap the halves; argmin_k of the summed error (min_size is
        halved for the halves). More liberal than "bic".
    Ties go to the smaller k. The piecewise-constant model and the penalty are reimplementation
    choices.

    profile: (L,) or (n, L) dimensionless, e.g. SIM  ->  ``PhaseDetection`` with n_phases,
    change_points (the first index of each segment after the first), bands (L,) int segment ids,
    segment_means (n_phases,), and the criterion value of every feasible k.
    """
    p = to_numpy(profile, "profile").astype(np.float64)
    if p.ndim not in (1, 2) or p.shape[-1] < 2 or not np.all(np.isfinite(p)):
        raise ValueError(f"profile must be a finite (L,) or (n, L) array, L >= 2; got {p.shape}")
    if method not in ("bic", "cv"):
        raise ValueError(f"method must be 'bic' or 'cv'; got {method!r}")
    if max_phases < 1 or min_size < 1:
        raise ValueError(f"max_phases and min_size must be >= 1; got {max_phases}, {min_size}")
    y = p.mean(axis=0) if p.ndim == 2 else p
    t = y.size
    segs = _segment(y, max_phases, min_size)
    if method == "bic":
        crit = _bic_criteria(y, segs, max_phases, penalty)
    else:
        crit = _cv_criteria(y, segs, max_phases, min_size)
    if not crit:
        raise ValueError(f"a profile of length {t} cannot be split with min_size={min_size}")
    k_best = min(crit, key=lambda k: (crit[k], k))
    bands, means = _fit(y, segs[k_best] or [])
    return PhaseDetection(k_best, tuple(segs[k_best] or []), bands, means, crit, method)
