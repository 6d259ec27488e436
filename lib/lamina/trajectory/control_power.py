"""Can the shuffled-layers control decide the convergence claim? A positive and a negative
control for the control, measured on the source's own states.

A vanish row is evidence only when its control could have kept the effect. Shuffling a
trajectory's layers removes what is specific to each layer; a convergence carried by one
category code at every layer should survive it. But the convergence index compares states of
one layer, and after a shuffle two prompts' states at a layer come from different depths,
whose common directions and norms differ: on the background fitted to SmolLM2's states
(:mod:`lamina.trajectory.realistic`), the code planted below, matched to the paper's peak,
keeps 45-46% of it under shuffled layers (``tests/trajectory/test_control_power.py``). Then
"the shuffled control removes convergence" is true of a layer-invariant convergence too, and
says nothing about depth. On the real models' own states, whose peaks are 3-25 times smaller,
it kept 59-96% when written (SmolLM2, Gemma 3, MiniLM, paper 1's GPT-2 states). There a
second threat takes over: the shuffle's own floor, below.

The check (:func:`invariant_share`), on states x (n, m, d) of the chapter's prompts:

1. labels y' that are unrelated to the real categories: the categories of the independent
   units (items) permuted over units, so category sizes and item clustering are kept;
2. a layer-invariant code for y': one random orthonormal direction v_k per category k, the
   same at every layer, scaled to each layer's mean state norm r(l):
   x'_i(l) = x_i(l) + g r(l) v_{y'_i};
3. g solved by bisection so that the peak of the convergence-index profile of x' under y'
   (:func:`lamina.trajectory.convergence_stats.ci_profile`, items left out as in the test)
   equals the real effect's peak;
4. the share of that peak that remains after shuffling the layers of x' (the chapter's
   shuffled-layers control), averaged over :data:`N_SHUFFLES` shuffles;
5. the same for a code of each layer's own (an independent random orthonormal set of
   directions per layer, the same gain: each layer's profile has the same distribution, the
   draws being rotation invariant), which the control should remove: its share kept is the
   shuffle's own floor at this effect's size (a mix of depths at one "layer" makes distances
   noisier, and the profile's maximum over layers picks that noise up).

The control can fail when the invariant share is at least one half (rule 7 of
:mod:`lamina.evidence.decide` would then read "survives" for a layer-invariant code), and it
can remove when the per-layer code's share is below one half (rule 7 would read "removes" for
a convergence tied to its layers). Where either does not hold, the control is declared unable
to decide on this source (:func:`shuffled_cannot_fail`, :func:`shuffled_cannot_remove`), and
the vanish row is "undecidable at this design". On the background at the peak SmolLM2 itself
has at the background's layers (0.016, :data:`lamina.trajectory.fitted.EFFECTS`), the
per-layer code keeps 112% and 180% of its peak (seeds 0 and 1), because a shuffle of these
states gives a peak of about that size by chance (``tests/trajectory/test_control_power.py``);
on the real models' states it kept 19-84% when written (MiniLM 19%, paper 1's GPT-2 states
28%, SmolLM2 39%, Gemma 3 84%).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lamina.states.controls import shuffle_layers
from lamina.trajectory.convergence_stats import ci_profile, distance_stack, item_units

__all__ = ["N_SHUFFLES", "InvariantCheck", "invariant_share", "shuffled_cannot_fail",
           "shuffled_cannot_remove"]

N_SHUFFLES = 3  # shuffles averaged for the share (its spread over shuffles is about 0.01)
_STEPS = 14  # bisection steps on the gain: the matched peak within 2^-14 of the bracket
_MAX_GAIN = 64.0  # gains tried (x each layer's mean norm) before the peak is declared unreachable


@dataclass(frozen=True)
class InvariantCheck:
    """The check's outcome: gain g (x each layer's mean state norm), the matched peak (chord
    units), the share of it that a layer-invariant code keeps under shuffled layers and
    whether the control can fail (share >= 0.5), the share a code of each layer's own keeps
    and whether the control can remove it (specific_share < 0.5); ``reason`` when the check
    could not run."""

    gain: float
    peak: float
    share: float
    can_fail: bool | None
    reason: str = ""
    specific_share: float = float("nan")
    can_remove: bool | None = None


def _relabel(labels: np.ndarray, units: np.ndarray | None, rng: np.random.Generator) -> np.ndarray:
    """(n,) labels permuted over units: each unit keeps one label, category sizes are kept."""
    n = len(labels)
    u = np.arange(n).astype(str) if units is None else np.asarray(units).astype(str)
    _, first, inv = np.unique(u, return_index=True, return_inverse=True)
    return rng.permutation(labels[first])[inv.reshape(n)]


def _peak(x: np.ndarray, labels: np.ndarray, units: np.ndarray | None) -> float:
    return float(np.nanmax(ci_profile(distance_stack(x), labels, units=units)))


def invariant_share(x: np.ndarray, table: Any, effect: float, seed: int = 0) -> InvariantCheck:
    """The module's check on states x (n, m, d) of the rows of ``table`` (column ``category``;
    ``item`` where the prompts of one item share its word) for a real convergence peak
    ``effect`` (chord units). Deterministic in ``seed``."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 3 or x.shape[0] != len(table):
        raise ValueError(f"states must be (n, m, d) with n = {len(table)} rows; got {x.shape}")
    if not (np.isfinite(effect) and effect > 0):
        return InvariantCheck(np.nan, np.nan, np.nan, None, f"no positive peak ({effect:.3g})")
    rng = np.random.default_rng([seed, 90_210])
    labels = table["category"].astype(str).to_numpy()
    units = item_units(table)
    y = _relabel(labels, units, rng)
    cats, code = np.unique(y, return_inverse=True)
    if len(cats) > x.shape[2]:
        return InvariantCheck(np.nan, np.nan, np.nan, None, "more categories than dimensions")
    v = np.linalg.qr(rng.standard_normal((x.shape[2], len(cats))))[0].T  # (K, d) orthonormal
    r = np.linalg.norm(x, axis=-1).mean(0)  # (m,) each layer's mean state norm
    spike = r[None, :, None] * v[code.reshape(-1)][:, None, :]  # (n, m, d)

    def peak(g: float) -> float:
        return _peak(x + g * spike, y, units)

    lo, hi = 0.0, 0.05
    while peak(hi) < effect:
        lo, hi = hi, 2 * hi
        if hi > _MAX_GAIN:
            return InvariantCheck(np.nan, np.nan, np.nan, None,
                                  f"no gain up to {_MAX_GAIN:g} reaches the peak {effect:.3g}")
    for _ in range(_STEPS):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if peak(mid) < effect else (lo, mid)
    g = (lo + hi) / 2
    matched = _peak(x + g * spike, y, units)
    share = _kept(x + g * spike, y, units, seed) / matched
    own = np.linalg.qr(rng.standard_normal((x.shape[1], x.shape[2], len(cats))))[0]  # (m, d, K)
    # (n, m, d): prompt i at layer l gets layer l's own direction of its category
    layered = r[None, :, None] * own.transpose(0, 2, 1)[:, code.reshape(-1)].transpose(1, 0, 2)
    specific = _kept(x + g * layered, y, units, seed) / _peak(x + g * layered, y, units)
    return InvariantCheck(float(g), matched, share, bool(share >= 0.5),
                          specific_share=specific, can_remove=bool(specific < 0.5))


def _kept(xs: np.ndarray, y: np.ndarray, units: np.ndarray | None, seed: int) -> float:
    """The mean peak of ``xs`` (n, m, d) over :data:`N_SHUFFLES` shuffles of its layers."""
    return float(np.mean([_peak(shuffle_layers(xs, np.random.default_rng([seed, k])), y, units)
                          for k in range(N_SHUFFLES)]))  # fmt: skip


def shuffled_cannot_fail(check: InvariantCheck) -> dict[str, str]:
    """{"shuffled layers": why} when ``check`` (:func:`invariant_share`) found that the
    shuffled-layers control removes half or more of a layer-invariant convergence of the real
    effect's size (the control cannot fail on this source), else {}: the ``cannot_fail`` of
    :class:`lamina.evidence.decide.Measurement`."""
    if check.can_fail is not False:
        return {}
    return {"shuffled layers": (
        f"a category code of one direction at every layer, at this effect's peak "
        f"({check.peak:.3g}) on these states, keeps {check.share:.0%} of it under shuffled "
        f"layers, below one half: the control removes a layer-invariant convergence too. More "
        f"prompts only estimate that share more precisely: it is set by the effect's size "
        f"against each layer's own structure")}  # fmt: skip


def shuffled_cannot_remove(check: InvariantCheck) -> str:
    """Why the shuffled-layers control cannot remove a convergence of each layer's own at the
    real effect's size, when ``check`` (:func:`invariant_share`) found it keeps half or more
    of one (its floor is of the effect's size), else "": the ``cannot_remove`` of
    :func:`lamina.trajectory.judging.judge_chapter` (the row is "undecidable at this
    design")."""
    if check.can_remove is not False:
        return ""
    return (f"the shuffled layers control cannot remove a convergence tied to its layers: a "
            f"category code of each layer's own direction, at this effect's peak "
            f"({check.peak:.3g}) on these states, keeps {check.specific_share:.0%} of it under "
            f"shuffled layers, not below one half; the shuffle's own floor (the peak that a mix "
            f"of depths gives by chance) is of the effect's size")  # fmt: skip
