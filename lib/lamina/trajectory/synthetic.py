"""Known-answer sources for paper 1's chapters: ``synthetic-null``, ``synthetic-planted`` and
``synthetic-planted-half``: realistic states (:mod:`lamina.trajectory.realistic`: a background
fitted to SmolLM2's states, the paper's effects planted at full and half size), dispatched by
:func:`synthetic_states`. The isotropic sources below (kinds "isotropic-null" and
"isotropic-planted") are the earlier, easy ones, kept for comparison only.

Both return states (n, L+1, d) for any prompt table of lamina's families, so the trajectory
chapters run on them exactly as on a model (``load_model_states`` dispatches here). They
know nothing about tokens: a prompt's ``n_tokens`` is its number of whitespace words.

**Null** (``kind="null"``): every prompt's trajectory is an independent stationary Gaussian
AR(1) walk, h(0) ~ N(0, I_d), h(l) = rho h(l-1) + sqrt(1 - rho^2) e(l), rho = 0.7. Nothing
depends on the family, the category or the pair: no convergence, no curvature gap, no
bifurcation, a flat expected SIM (no phases).

**Planted** (``kind="planted"``): the abstract's four effects at the paper's stated sizes.

* Paths: h(l) = a + w(l), a a random unit offset, w(0) = 0 and w(l) = w(l-1) + s(l) u(l)
  with unit steps u(l) that turn by theta each layer (theta_i(l) ~ N(theta_f, 0.02^2)), so a
  prompt's mean curvature is theta_f: reasoning 0.77 rad, lexical 0.29 rad (the middles of
  0.71-0.83 and 0.27-0.31), other families 0.5. Step lengths s(l) are solved so that
  SIM(l) = cos(h(l-1), h(l)) equals the band target of ``fixed_phase_bands``: 0.45, 0.78,
  0.65 (the middles of GPT-2's quoted ranges). A path that turns by theta per layer sees
  at most about theta + (pi/2)/L radians per layer from the origin, so a family whose
  theta is too small for those angles has its band angles scaled down by one factor (its
  SIM bands keep their order, encoding < output preparation < elaboration, nearer to 1).
* Convergence (families ``semantic*``): h_i(l) += g(l) |h_i(l)| mu_c, mu_c orthonormal category
  directions, g(l) chosen so the expected convergence index is
  CI(l) = 0.495 exp(-((l - 0.67 L) / (0.25 L))^2) (peak 0.495, the middle of 0.41-0.58, at
  two thirds of the depth), from CI = sqrt(2) (1 - 1/sqrt(1 + g^2)) for independent
  directions.
* Bifurcation (rows with ``role`` "ambiguous" / "control" and a ``pair_id``): the pair's two
  contexts are p(l) +/- e(l) |p(l)| z(l), z(l) a unit vector orthogonal to p(l), so the
  normalised distance is delta(l) = 2 e / sqrt(1 + e^2). Homographs: delta = 0.15 up to layer
  2, then rising as ((l - 2) / (L - 2))^0.8 to 5.6 x 0.15 at layer L; controls: linear from
  0.15 to 1.1 x 0.15. Each pair's profile is scaled by exp(N(0, 0.05^2)) at every layer.

The random-init model and the random-input-embedding states of a synthetic source are null
states (other seeds): the planted structure belongs to the "trained model" and its inputs.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import pandas as pd

from lamina.trajectory.phases import fixed_phase_bands
from lamina.trajectory.realistic import KINDS, realistic_states

__all__ = ["SYNTHETIC", "SyntheticSpec", "synthetic_states", "word_counts"]

SYNTHETIC = ("synthetic-null", "synthetic-planted", "synthetic-planted-half")


class SyntheticSpec:
    """Sizes and planted values (module docstring). Class attributes, in radians / units."""

    n_layers = 12
    d_model = 64
    rho = 0.7
    theta = {"reasoning": 0.77, "lexical": 0.29}
    theta_other = 0.5
    theta_sd = 0.02
    sim_bands = (0.45, 0.78, 0.65)
    sim_sd = 0.02
    ci_peak = 0.495
    ci_peak_depth = 0.67
    ci_width = 0.25
    delta0 = 0.15
    ratio_ambiguous = 5.6
    ratio_control = 1.1
    delta_sd = 0.05


def word_counts(prompts: pd.DataFrame) -> np.ndarray:
    """(n,) whitespace words per prompt: the synthetic sources' token counts."""
    return np.array([len(str(p).split()) for p in prompts["prompt"]], dtype=int)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / max(float(np.linalg.norm(v)), 1e-30)


def _orth(v: np.ndarray, ref: np.ndarray) -> np.ndarray:
    r = _unit(ref)
    return v - (v @ r) * r


def _null(rng: np.random.Generator, n: int, spec: type[SyntheticSpec]) -> np.ndarray:
    out = np.empty((n, spec.n_layers + 1, spec.d_model))
    out[:, 0] = rng.standard_normal((n, spec.d_model))
    for layer in range(1, spec.n_layers + 1):
        eps = rng.standard_normal((n, spec.d_model))
        out[:, layer] = spec.rho * out[:, layer - 1] + np.sqrt(1 - spec.rho**2) * eps
    return out


def _path(rng: np.random.Generator, theta: float, spec: type[SyntheticSpec]) -> np.ndarray:
    """(L+1, d) one planted path: turning angle ~theta per layer, SIM on the band targets."""
    L, d = spec.n_layers, spec.d_model
    bands = fixed_phase_bands(L)  # (L,) band of each transition l-1 -> l
    angles = np.arccos(np.asarray(spec.sim_bands))[bands]  # (L,) target SIM angles
    # a path turning theta per layer sees at most ~theta + (pi/2)/L of angle per layer from
    # the origin: scale the band angles down when needed (the band order is kept)
    scale = min(1.0, 0.9 * (theta + np.pi / 2 / L) / float(np.mean(angles)))
    h = np.empty((L + 1, d))
    h[0] = _unit(rng.standard_normal(d))
    u = _unit(_orth(rng.standard_normal(d), h[0]))
    for layer in range(1, L + 1):
        if layer > 1:  # turn by theta, towards -h (the path curls round the origin)
            th = theta + spec.theta_sd * rng.standard_normal()
            away = _orth(-h[layer - 1] + 0.3 * rng.standard_normal(d), u)
            u = np.cos(th) * u + np.sin(th) * _unit(away)
        target = np.cos(scale * angles[layer - 1]) + spec.sim_sd * rng.standard_normal()
        beta = np.arccos(np.clip(target, -1, 1))
        r = float(np.linalg.norm(h[layer - 1]))
        alpha = np.arccos(np.clip(_unit(h[layer - 1]) @ u, -1, 1))
        t = np.sin(beta) / np.sin(alpha - beta) if alpha - beta > 0.05 else 2.0
        h[layer] = h[layer - 1] + min(t, 2.0) * r * u
    return h


def _ci_gain(spec: type[SyntheticSpec]) -> np.ndarray:
    """(L+1,) g(l) giving the planted convergence-index profile."""
    depth = np.arange(spec.n_layers + 1) / spec.n_layers
    ci = spec.ci_peak * np.exp(-(((depth - spec.ci_peak_depth) / spec.ci_width) ** 2))
    return np.sqrt(1.0 / (1.0 - ci / np.sqrt(2.0)) ** 2 - 1.0)


def _delta_profile(ratio: float, onset_layer: int, power: float, spec: type[SyntheticSpec]):
    layers = np.arange(spec.n_layers + 1)
    frac = np.clip((layers - onset_layer) / (spec.n_layers - onset_layer), 0, 1) ** power
    return spec.delta0 * (1 + (ratio - 1) * frac)


def _separate(
    rng: np.random.Generator, p: np.ndarray, delta: np.ndarray, spec: type[SyntheticSpec]
) -> tuple[np.ndarray, np.ndarray]:
    z0 = cast(np.ndarray, rng.standard_normal(p.shape[1]))  # an int size gives an array
    delta = delta * np.exp(spec.delta_sd * rng.standard_normal(delta.shape))
    e = delta / np.sqrt(4 - delta**2)
    a, b = np.empty_like(p), np.empty_like(p)
    for layer in range(p.shape[0]):
        z = _unit(_orth(z0, p[layer]))
        off = e[layer] * np.linalg.norm(p[layer]) * z
        a[layer], b[layer] = p[layer] + off, p[layer] - off
    return a, b


def synthetic_states(
    prompts: pd.DataFrame, kind: str, seed: int = 0, spec: type[SyntheticSpec] = SyntheticSpec
) -> np.ndarray:
    """States (n, L+1, d) float64 for the rows of ``prompts`` (columns ``prompt`` and, where
    present, ``family``, ``category``, ``item``, ``base``, ``role``, ``pair_id``, ``sense``).
    kind "null", "planted" or "planted-half": the realistic sources
    (:func:`lamina.trajectory.realistic.realistic_states`); "isotropic-null" /
    "isotropic-planted": the isotropic ones of this module's docstring. Deterministic in
    ``seed``."""
    if kind in KINDS:
        return realistic_states(prompts, kind, seed)
    if kind not in ("isotropic-null", "isotropic-planted"):
        known = (*KINDS, "isotropic-null", "isotropic-planted")
        raise ValueError(f"synthetic kind must be one of {known}; got {kind!r}")
    kind = kind.removeprefix("isotropic-")
    n = len(prompts)
    if n == 0:
        raise ValueError("synthetic_states needs at least one prompt")
    rng = np.random.default_rng([seed, 0 if kind == "null" else 1])
    if kind == "null":
        return _null(rng, n, spec)
    t = prompts.reset_index(drop=True)
    fam = t["family"].astype(str).to_numpy() if "family" in t else np.full(n, "")
    out = np.stack([_path(rng, spec.theta.get(f, spec.theta_other), spec) for f in fam])
    semantic = np.char.startswith(fam.astype(str), "semantic")  # topical and neutral frames
    if "category" in t and semantic.any():
        sem = np.flatnonzero(semantic)
        cats = t.loc[sem, "category"].astype(str).to_numpy()
        names = sorted(set(cats))
        mu = np.linalg.qr(rng.standard_normal((spec.d_model, len(names))))[0].T
        g = _ci_gain(spec)  # (L+1,)
        for i, c in zip(sem, cats, strict=True):
            norms = np.linalg.norm(out[i], axis=1, keepdims=True)
            out[i] = out[i] + g[:, None] * norms * mu[names.index(c)]
    if {"role", "pair_id", "sense"} <= set(t.columns):
        profiles = {
            "ambiguous": _delta_profile(spec.ratio_ambiguous, 2, 0.8, spec),
            "control": _delta_profile(spec.ratio_control, 0, 1.0, spec),
        }
        for (role, _pair), rows in t.groupby(["role", "pair_id"], sort=False).groups.items():
            rows = list(rows)
            one = [r for r in rows if t.at[r, "sense"] == "ctx1"]
            two = [r for r in rows if t.at[r, "sense"] == "ctx2"]
            if not one or not two or role not in profiles:
                continue
            base = _path(rng, spec.theta_other, spec)
            out[one[0]], out[two[0]] = _separate(rng, base, profiles[role], spec)
    return out

