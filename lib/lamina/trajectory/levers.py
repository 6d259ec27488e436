"""The levers of the realistic sources (:class:`lamina.trajectory.realistic.Levers`), solved
so that each effect, measured as its chapter measures it, has a chosen size.

Every lever is solved by bisection on reference draws of its chapter's own prompt set
(:func:`lamina.trajectory.sizes.chapter_prompts`) under the chapter's pooling, the mean over
:data:`REFERENCE_DRAWS` draws (seeds 990_001, 990_002, ... never used as calibration seeds):

* ``neutral`` (every kind, the null's flattening): the extra turn per elaboration transition
  at which elaboration's mean SIM equals the higher neighbour band's (margin 0; 0 when the
  fitted background has no margin to remove), with band means averaged per independent unit
  as the chapter's test averages them (:func:`lamina.trajectory.phase_stats.unit_band_means`:
  a lexical variant's unit is its base word; solved on the prompt-weighted margin instead,
  the null kept a unit-weighted margin of about +0.010 with a CI above 0, and the bands row
  read present on 4 of 4 null seeds);
* ``phi`` (three phases): the margin by which elaboration's mean SIM exceeds both neighbours
  (weighted the same way) is 0.125 (GPT-2's quoted band middles 0.45, 0.775, 0.65; half: 0.0625);
* ``drift_lexical`` / ``drift_reasoning`` (curvature): the paper's families' mean curvature
  (single-token prompts excluded, as the chapter does) are the middles of the quoted ranges,
  0.29 and 0.77 rad (half: 0.41 and 0.65 rad, the gap halved about the same middle);
* ``gain`` (convergence): the peak of the convergence-index profile (own items left out) is
  0.495, the middle of 0.41-0.58 (half: 0.2475); the "removable" source keeps the gain with
  a category direction of each layer's own (``renewal`` 1): each layer's profile has the same
  distribution either way, the draws being rotation invariant. "planted-model" is "planted"
  with the gain alone solved again, for the peak the fitted model itself has
  (:data:`lamina.trajectory.fitted.EFFECTS`), the size of the real models' convergence;
* ``control_split`` then ``split`` (bifurcation, :func:`lamina.trajectory.realistic.compose`):
  the median over pairs of the control pairs' ratio r_ctl = delta(L) / delta(base) is the
  paper's 1.1 (half: 1.05), then the median of r_amb / r_ctl is 5.6 / 1.1 (half:
  3.3 / 1.05), with the chapter's baseline layer.

On the positional background (:data:`lamina.trajectory.fitted.POSITIONAL`, organism-gpt2's,
which carries the bifurcation ratio rows alone) only ``neutral`` and the two bifurcation levers
are solved, ``split`` for the rows that background carries: the median homograph ratio
r_amb itself is the paper's 5.6 (half: 3.3), not the excess. (The chord distance is at most 2,
so a pair's r_amb is at most 2 / delta(0): with the pairs' median delta(0) near 0.3 chord, 5.6
needs ``split`` near 9 where the excess would need 8.)

The drift and gain levers enter the states linearly, so a draw's states are computed once
with the lever at 0 and at 1 (:func:`_linear`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from lamina.core.provenance import atomic_write_text, data_dir
from lamina.trajectory import convergence_stats
from lamina.trajectory.background import Background
from lamina.trajectory.bifurcation_stats import baseline_layer, bifurcation_rows
from lamina.trajectory.claims import PAPER_RATIO
from lamina.trajectory.convergence_stats import (
    ci_profile,
    ci_profiles,
    distance_stack,
    item_units,
    label_codes,
    unit_rows,
)
from lamina.trajectory.fitted import EFFECTS, POSITIONAL, background
from lamina.trajectory.metrics import bifurcation, layerwise_cosine, mean_curvature
from lamina.trajectory.phase_stats import unit_band_means
from lamina.trajectory.realistic import Levers, compose, draw, source_tokens
from lamina.trajectory.sizes import CHAPTER_POOLING, chapter_mask, chapter_prompts
from lamina.trajectory.stat_tests import units_of

__all__ = ["REFERENCE_DRAWS", "levers", "neutral_turn", "statistic", "targets"]

REFERENCE_DRAWS = 12
REFERENCE_SEED = 990_001


def targets(kind: str) -> dict[str, float]:
    """The planted sizes of ``kind`` ("planted" and "survivor": the paper's; "planted-half":
    half of each effect; "planted-model": the paper's, but the convergence peak the fitted
    model has): SIM margin (cosine), the paper's families' mean curvature (rad),
    peak CI (chord), the control pairs' ratio, the excess r_amb / r_ctl and the homograph
    pairs' ratio r_amb."""
    if kind in ("planted", "survivor"):
        return {"margin": 0.125, "reasoning": 0.77, "lexical": 0.29, "peak": 0.495,
                "control": 1.1, "excess": PAPER_RATIO / 1.1, "ratio": PAPER_RATIO}
    if kind == "planted-half":
        return {"margin": 0.0625, "reasoning": 0.65, "lexical": 0.41, "peak": 0.2475,
                "control": 1.05, "excess": 3.3 / 1.05, "ratio": 3.3}
    if kind == "planted-model":
        return targets("planted") | {"peak": EFFECTS["convergence_peak"]}
    raise ValueError(f"no planted sizes for kind {kind!r}; choose 'planted', 'planted-half', "
                     "'planted-model' or 'survivor'")


def _paper_family(t: pd.DataFrame, name: str, tok: np.ndarray) -> np.ndarray:
    return (t["family"] == name).to_numpy() & (tok > 1)


def statistic(name: str, table: pd.DataFrame, bg: Background) -> Callable[[np.ndarray], float]:
    """The measured effect ``name`` on states (n, L+1, d) of ``table``, as the chapters
    measure it: "margin", "reasoning", "lexical", "peak", "control", "excess", "ratio"
    (module docstring); row selections are computed once."""
    t = table.reset_index(drop=True)
    if name == "margin":  # on the rows and units the chapter's test reads (one-token prompts
        rows = chapter_mask("three_phase", t, source_tokens(t, bg))  # left out; a lexical
        unit_ids = units_of(t[rows])  # variant's unit is its base word), weighted as it weighs them

        def margin(x: np.ndarray) -> float:
            m = unit_band_means(np.asarray(layerwise_cosine(x[rows])), unit_ids).mean(0)  # (3,)
            return float(min(m[1] - m[0], m[1] - m[2]))
        return margin
    if name in ("reasoning", "lexical"):
        rows = _paper_family(t, name, source_tokens(t, bg))
        return lambda x: float(mean_curvature(x[rows]).mean())
    if name == "peak":
        lab, units = t["category"].to_numpy(), item_units(t)
        return lambda x: float(np.nanmax(ci_profile(distance_stack(x), lab, units=units)))
    a, b, ca, cb = bifurcation_rows(t)

    def ratios(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        da, dc = bifurcation(x[a], x[b]).delta, bifurcation(x[ca], x[cb]).delta
        base = baseline_layer(da, dc)
        return da[:, -1] / da[:, base], dc[:, -1] / dc[:, base]

    if name == "control":
        return lambda x: float(np.median(ratios(x)[1]))
    if name == "excess":
        return lambda x: float(np.median(np.divide(*ratios(x))))
    if name == "ratio":
        return lambda x: float(np.median(ratios(x)[0]))
    raise ValueError(f"unknown lever statistic {name!r}")


def _bisect(f: Callable[[float], float], target: float, hi: float, iters: int = 20,
            lo: float = 0.0, cap: float = 1e6) -> float:  # fmt: skip
    """x in [lo, hi] with f(x) = target, f increasing (f(lo) >= target: lo; the search widens
    hi up to ``cap``, which it returns when f stays below the target)."""
    if f(lo) >= target:
        return lo
    while f(hi) < target:
        if hi >= cap:
            return cap
        lo, hi = hi, min(2 * hi, cap)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return 0.5 * (lo + hi)


def _reference(chapter: str, pool: str) -> tuple[pd.DataFrame, Background, list]:
    t = chapter_prompts(chapter)
    bg = background(pool)
    return t, bg, [draw(t, REFERENCE_SEED + k, bg) for k in range(REFERENCE_DRAWS)]


def _linear(chapter: str, pool: str, knob: str, lv: Levers) -> tuple[list, pd.DataFrame, Background]:
    """Per reference draw, (states with ``knob`` at 0, their change per unit of ``knob``)."""
    t, bg, draws = _reference(chapter, pool)
    out = []
    for dr in draws:
        x0 = compose(t, dr, bg, lv.but(**{knob: 0.0}))
        out.append((x0, compose(t, dr, bg, lv.but(**{knob: 1.0})) - x0))
    return out, t, bg


def _solve_linear(chapter: str, pool: str, knob: str, stat: str, target: float, lv: Levers,
                  hi: float) -> float:  # fmt: skip
    pairs, t, bg = _linear(chapter, pool, knob, lv)
    f = statistic(stat, t, bg)
    sign = -1.0 if stat in ("reasoning", "lexical") else 1.0  # drift lowers curvature
    return _bisect(lambda v: sign * float(np.mean([f(x0 + v * dx) for x0, dx in pairs])),
                   sign * target, hi)


def _margin(pool: str, lv: Levers) -> Callable[..., float]:
    """``m(v, knob)``: the mean SIM margin over 8 reference draws of the three-phase prompts
    with lever ``knob`` at v (the others as in ``lv``)."""
    t, bg, draws = _reference("three_phase", pool)
    f = statistic("margin", t, bg)

    def m(v: float, knob: str) -> float:
        return float(np.mean([f(compose(t, dr, bg, lv.but(**{knob: v}))) for dr in draws[:8]]))

    return m


@functools.lru_cache(maxsize=4)
def neutral_turn(pool: str) -> float:
    """The null's extra turn per elaboration transition (rad; module docstring)."""
    m = _margin(pool, Levers())
    if m(0.0, "neutral") <= 0:
        return 0.0
    return _bisect(lambda v: -m(v, "neutral"), 0.0, 0.25, iters=16, cap=2.0)


def _solve_ratio(pool: str, knob: str, stat: str, target: float, lv: Levers) -> float:
    """A bifurcation lever (the planted ratio of homograph or control pairs) by bisection on
    8 reference draws (it is not linear in the states)."""
    t, bg, draws = _reference("bifurcation", pool)
    f = statistic(stat, t, bg)

    def measured(v: float) -> float:
        return float(np.mean([f(compose(t, dr, bg, lv.but(**{knob: v}))) for dr in draws[:8]]))

    return _bisect(measured, target, 8.0, iters=14, lo=0.5, cap=MAX_RATIO)


def _solve(kind: str, pool: str) -> Levers:
    """Solve ``kind``'s levers under ``pool`` (module docstring): the null's flattening, then
    each effect's lever with the others in place, twice (the levers interact a little: the
    curvature drift straightens the three-phase prompts of its families, the phase turn bends
    every trajectory)."""
    if kind == "planted-model":  # the planted levers, the convergence gain solved again
        lv = levers("planted", pool)
        return lv.but(gain=_solve_linear("convergence", pool, "gain", "peak",
                                         targets(kind)["peak"], lv, 2.0))
    lv = Levers(neutral=neutral_turn(pool))
    if kind == "null":
        return lv
    goal = targets(kind)
    every = pool != POSITIONAL  # the positional background carries the bifurcation rows alone
    for _ in range(2):
        for knob, stat in (("drift_lexical", "lexical"), ("drift_reasoning", "reasoning")):
            if every:
                lv = lv.but(**{knob: _solve_linear("curvature", pool, knob, stat, goal[stat], lv,
                                                   1.0)})  # fmt: skip
        if every:
            lv = lv.but(gain=_solve_linear("convergence", pool, "gain", "peak", goal["peak"], lv,
                                           2.0))  # fmt: skip
        for knob, stat in (("control_split", "control"), ("split", "excess" if every else "ratio")):
            lv = lv.but(**{knob: _solve_ratio(pool, knob, stat, goal[stat], lv)})
        if every:
            m = _margin(pool, lv)
            lv = lv.but(phi=_bisect(partial(m, knob="phi"), goal["margin"], 0.25, iters=16,
                                    cap=2.0))  # fmt: skip
    return lv


MAX_RATIO = 64.0  # the planted ratio's cap (a mean-pooled pair's delta(base) can be too large
#                   for the paper's ratio: the chord distance is at most 2)
CODE = ("fitted.py", "fitted_positional.py", "realistic.py", "levers.py", "background.py",
        "metrics.py", "phases.py")
# functions of other modules that the levers' statistics call (their source is hashed, not
# their whole module's, so that an edit elsewhere in those modules keeps the solved levers)
FUNCTIONS = (baseline_layer, bifurcation_rows, ci_profile, ci_profiles, distance_stack, item_units,
             label_codes, unit_rows, chapter_prompts, chapter_mask, unit_band_means,
             units_of)  # fmt: skip


def _cache_file() -> Path:
    """``<data>/cache/levers/<sha256 of CODE, FUNCTIONS, the chapters' prompts, numpy's
    version>.json``."""
    import inspect

    h = hashlib.sha256(np.__version__.encode())
    here = Path(__file__).resolve().parent
    for name in CODE:
        h.update(name.encode() + b"\0" + (here / name).read_bytes())
    for fn in (*FUNCTIONS, convergence_stats._unit_codes):
        h.update(inspect.getsource(fn).encode())
    for chapter in CHAPTER_POOLING:
        h.update(pd.util.hash_pandas_object(chapter_prompts(chapter).astype(str)).values.tobytes())
    return data_dir() / "cache" / "levers" / f"{h.hexdigest()[:24]}.json"


@functools.lru_cache(maxsize=8)
def levers(kind: str, pool: str) -> Levers:
    """The levers of ``kind`` ("null": the flattening alone) under ``pool``'s background
    (module docstring), solved once per code version and kept in ``<data>/cache/levers``
    (solving every kind and pooling takes about 10 CPU-minutes); cached per process."""
    f = _cache_file()
    key = f"{kind}/{pool}"
    known: dict[str, dict[str, float]] = {}
    if f.is_file():
        try:
            known = json.loads(f.read_text())
        except ValueError:
            known = {}
    if key not in known:
        known[key] = dataclasses.asdict(_solve(kind, pool))
        f.parent.mkdir(parents=True, exist_ok=True)
        fresh = json.loads(f.read_text()) if f.is_file() else {}
        atomic_write_text(f, json.dumps(fresh | {key: known[key]}, indent=1, sort_keys=True))
    return Levers(**known[key])


def pool_of(chapter: str) -> str:
    """The pooling of ``chapter``'s main convention (:data:`CHAPTER_POOLING`)."""
    return CHAPTER_POOLING[chapter]
