"""The bifurcation claim's tests: homograph pairs against their matched control pairs.

Pairs are the independent unit. The ratio's baseline layer is 0 unless some pair has
delta(0) = 0 (a model without position signal in its embedding layer, e.g. rotary: a word's
layer-0 state is its embedding alone), then 1. The onset is where the paired difference
delta_homograph - delta_control starts to rise, fitted by a ramp whose place does not depend
on its height (:func:`ramp_onset`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lamina.evidence.stats import index_bootstrap, wilcoxon
from lamina.trajectory.metrics import bifurcation as _bifurcation

__all__ = ["baseline_layer", "bifurcation_rows", "bifurcation_test", "ramp_onset", "ramp_onsets"]


def baseline_layer(da: np.ndarray, dc: np.ndarray) -> int:
    """The ratio's baseline: 0 when every homograph and control pair has delta(0) > 1e-6
    (da, dc (pairs, m)), else 1."""
    return 0 if (np.all(da[:, 0] > 1e-6) and np.all(dc[:, 0] > 1e-6)) else 1


def _ramps(m: int, base: int) -> tuple[np.ndarray, np.ndarray]:
    """Candidate ramps over layers base..m-1: (starts (C,), r (C, m - base)), r the ramp
    rising linearly from 0 at its start to 1 at its end, on a grid of max(0.25, (m-1)/48)
    layers (start < end, both in [base, m - 1])."""
    step = max(0.25, (m - 1) / 48)
    grid = np.arange(base, m - 1 + 1e-9, step)
    s, e = np.meshgrid(grid, grid, indexing="ij")
    keep = e > s + 1e-9
    s, e = s[keep], e[keep]
    layers = np.arange(base, m)[None, :]
    return s, np.clip((layers - s[:, None]) / (e - s)[:, None], 0.0, 1.0)


def ramp_onsets(diff: np.ndarray, base: int) -> np.ndarray:
    """:func:`ramp_onset` of B profiles at once: diff (B, m)  ->  (B,) layers (NaN: none)."""
    y = np.asarray(diff, float)[:, base:]  # (B, k)
    starts, r = _ramps(diff.shape[1], base)
    X = np.stack([1.0 - r, r], axis=-1)  # (C, k, 2): level before, level after
    pinv = np.linalg.pinv(X)  # (C, 2, k)
    coef = np.einsum("cjk,bk->bcj", pinv, y)  # (B, C, 2)
    fit = np.einsum("ckj,bcj->bck", X, coef)
    sse = np.sum((fit - y[:, None, :]) ** 2, axis=2)  # (B, C)
    sse = np.where(coef[..., 1] > coef[..., 0], sse, np.inf)  # a rise, not a fall
    best = np.argmin(sse, axis=1)
    return np.where(np.isfinite(sse.min(1)), starts[best], np.nan)


def ramp_onset(diff: np.ndarray, base: int) -> float:
    """Onset layer of a separation profile: the start of the best-fitting ramp.

    diff (m,), e.g. the mean over pairs of delta_amb - delta_ctl, is fitted from layer
    ``base`` on by least squares with a level a up to layer s, a linear rise from s to e and
    a level t >= a after e (t > a: a rise); the onset is s (a layer index, on a grid of a
    quarter layer). Multiplying the profile by any k > 0 leaves s unchanged (the squared
    errors scale by k^2), so the onset does not move with the size of the effect; noise
    aside. NaN when no ramp rises."""
    return float(ramp_onsets(np.asarray(diff, float)[None], base)[0])


def bifurcation_rows(table: Any) -> tuple[np.ndarray, ...]:
    """Row indices (a, b, ca, cb) of each homograph pair's two contexts and of its control
    pair's, matched by ``pair_id``, in a long table with columns role ("ambiguous" /
    "control"), pair_id and sense ("ctx1" / "ctx2")."""
    t = table.reset_index(drop=True)
    cols = []
    for role in ("ambiguous", "control"):
        r = t[t["role"] == role]
        for sense in ("ctx1", "ctx2"):
            s = r[r["sense"] == sense]
            cols.append(dict(zip(s["pair_id"], s.index, strict=True)))
    common = [p for p in cols[0] if all(p in c for c in cols[1:])]
    return tuple(np.array([c[p] for p in common], dtype=int) for c in cols)


def _ci_keys(boot: dict[str, Any], name: str) -> dict[str, float]:
    """``{name}_low`` / ``{name}_high``: the CI of a bootstrap result."""
    return {f"{name}_low": boot["ci_low"], f"{name}_high": boot["ci_high"]}


def bifurcation_test(
    a: np.ndarray,
    b: np.ndarray,
    ca: np.ndarray,
    cb: np.ndarray,
    *,
    n_bootstrap: int = 2_000,
    seed: int = 0,
) -> dict[str, Any]:
    """Homograph pairs (a[i], b[i]) against their matched control pairs (ca[i], cb[i]).

    Each array (n_pairs, m, d), row i of all four from the same pair_id. delta(l) per pair
    from ``lamina.trajectory.bifurcation``; the paper's ratio r = delta(last) / delta(base)
    (:func:`baseline_layer`; ``base_defined`` False when it is 1: on a model without position
    signal at layer 0, delta(1) is one block of context mixing for homographs and controls
    alike, so r is large for *any* pair and the paper's ratio is undefined). ``excess`` =
    median over pairs of r_amb / r_ctl (the quantity the Wilcoxon tests; about 1 when
    controls separate as homographs do, whatever the base), with a percentile bootstrap CI
    over pairs. Paired over all pairs: two-sided Wilcoxon signed-rank of log r_amb - log
    r_ctl (``p``, rank-biserial) and its one-sided p the other way (``p_opposite``:
    homographs separating less than their controls). Medians of the ratios with percentile
    bootstrap CIs over pairs. Onset: :func:`ramp_onset` of the mean over pairs of
    delta_amb - delta_ctl from the ratio's base, as a fraction of the last layer index, with
    a bootstrap CI over pairs. CIs two-sided 95%. ``ratio_ceiling``: the largest median
    homograph ratio the model's baseline allows, median over pairs of 2 / delta_amb(base)
    (delta is a chord distance, at most 2, so r_amb <= 2 / delta_amb(base) for every pair and
    the median ratio cannot exceed this); ``base_separation``: median delta_amb(base) (chord).
    """
    if not (len(a) == len(b) == len(ca) == len(cb)) or len(a) < 2:
        raise ValueError("bifurcation_test needs >= 2 pairs, each with its matched control pair")
    da, dc = _bifurcation(a, b).delta, _bifurcation(ca, cb).delta  # (n, m)
    base = baseline_layer(da, dc)
    ra, rc = da[:, -1] / da[:, base], dc[:, -1] / dc[:, base]
    w = wilcoxon(np.log(ra), np.log(rc)).iloc[0]
    less = wilcoxon(np.log(ra), np.log(rc), alternative="less").iloc[0]
    n, last = len(ra), da.shape[1] - 1
    kw: dict[str, Any] = {"n_resamples": n_bootstrap, "seed": seed}
    ba = index_bootstrap(lambda i: float(np.median(ra[i])), n, **kw)
    bc = index_bootstrap(lambda i: float(np.median(rc[i])), n, **kw)
    be = index_bootstrap(lambda i: float(np.median(ra[i] / rc[i])), n, **kw)
    diff = da - dc

    def onsets(idx: list[np.ndarray]) -> np.ndarray:
        return ramp_onsets(np.stack([diff[i].mean(0) for i in idx]), base) / last

    bo = index_bootstrap(lambda i: float(onsets([i])[0]), n, many=onsets, **kw)
    return {
        "ratio": float(np.median(ra)),
        **_ci_keys(ba, "ratio"),
        "control_ratio": float(np.median(rc)),
        **_ci_keys(bc, "control"),
        "excess": be["estimate"],
        **_ci_keys(be, "excess"),
        "log_ratio_difference": float(w["median_difference"]),
        "p": float(w["p_value"]),
        "p_opposite": float(less["p_value"]),
        "rank_biserial": float(w["rank_biserial"]),
        "onset": bo["estimate"],
        **_ci_keys(bo, "onset"),
        "ratio_ceiling": float(np.median(2.0 / np.maximum(da[:, base], 1e-12))),
        "base_separation": float(np.median(da[:, base])),
        "base_layer": base,
        "base_defined": base == 0,
        "n_zero_base": int(np.sum((da[:, 0] <= 1e-6) | (dc[:, 0] <= 1e-6))),
        "n_pairs": n,
        "delta": da,
        "control_delta": dc,
    }
