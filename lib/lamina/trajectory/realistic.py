"""Realistic known-answer states: a background with the statistics of a real model's states,
fitted to SmolLM2-135M-Instruct, and paper 1's four effects planted on it at a chosen size.

**Background** (every kind). For prompt i at layer l = 0..L (L = 12), in d = 128 dimensions:

    h_i(l) = n(l) [ (c(l) + f(l) / T_i) u(l) + z_i(l) ]
    z_i(l) = sqrt(w(l)) a_unit(i)(l) + sqrt(s_i) b_context(i)(l) + sqrt(1 - w(l) - s_i) e_i(l),
    a, b, e ~ AR(1) over layers

* a common direction u(l) with share c(l) (the mean state's projection over the spread of
  the states around it), and a first-token outlier along it that mean pooling divides by the
  prompt's length: f(l) / T_i, T_i = tokens per word x the prompt's whitespace words;
* fluctuations z with E||z||^2 = 1 and covariance spectrum lambda_k ~ k^-alpha in a random
  basis (alpha the mean log-log slope of the real centred states' top 60 eigenvalues);
* item clustering: prompts of one unit (the item of a semantic prompt across its frames; the
  base word of a lexical variant; a homograph pair's two contexts, a control pair's two)
  share the component a with weight w(l); e is each prompt's own;
* shared context (bifurcation prompts only): a homograph's context and its matched control's
  are one sentence with the last word changed, so the two share the component b with weight
  s_i = :func:`context_share` (s_i = 0 for every other prompt). s is solved so that, on the
  null, the Pearson correlation over pairs of log r_amb and log r_ctl (r = delta(L) /
  delta(0), the chapter's per-pair ratios) is :data:`CONTEXT_CORRELATION`, SmolLM2's;
* persistence: a(l) = rho(l) a(l-1) + sqrt(1 - rho(l)^2) eps(l) (and b, e alike), rho(l) the
  real states' mean cosine of the centred states of consecutive layers;
* n(l): the real RMS norm of the states, over that of layer 0.

**The fit** (:func:`fit_background`, numbers in :data:`SMOLLM2_FIT`): mean-pooled states of
SmolLM2-135M-Instruct (GGUF Q4_1 dequantised to fp32; 30 blocks) for lamina's own prompts
(semantic 60, semantic_neutral 120, reasoning 40, lexical 48, analogies 36, the 160
bifurcation texts: 464 prompts), taken with ``lamina.extract(pool="mean")``. Per layer: u =
the mean state's direction; the projection on u regressed on 1/T (tokens) gives c and f in
units of s = the RMS norm of the states' part orthogonal to u; rho, w (mean cosine of the
orthogonal parts within a unit minus that between units of one category / family: the shared
item component, category effects removed) and alpha from those parts. The per-layer values are
interpolated from relative depth l/30 onto l/12. SmolLM2 rather than the released GPT-2
states: its states are lamina's own prompts, so items, base words and pairs are known (the
release's prompts carry no items), and extracting them took about 70 s.

**Null** (``kind="null"``): the background only. No category, family or ambiguity effect; u
fixed, so the SIM profile is the fitted model's.

**Planted** (``"planted"`` at the paper's sizes, ``"planted-half"`` at half of each effect),
each effect on its own lever, the lever's gain solved by bisection on a reference sample of
the chapter's own prompt set (:mod:`lamina.trajectory.sizes`; two reference seeds, fixed;
the bifurcation's levers :data:`BIFURCATION_DRAWS`) so that the expected measured effect
equals the target:

* three phases: u(l) turns in a fixed plane by phi per transition in the encoding and output
  bands (none in elaboration), so that elaboration's mean SIM exceeds each neighbour band's by
  the margin 0.125 (GPT-2's quoted band middles 0.45, 0.775, 0.65; half: 0.0625);
* curvature: each lexical prompt gets a straight drift, lever x l along its own random
  direction, the lever solved so that the reasoning - lexical gap of mean curvature is 0.48
  rad (the gap of the quoted ranges' middles, 0.77 - 0.29; half: 0.24). Only the gap is
  planted: the families' levels stay the background's (about 1.27 and 0.79 rad at the
  paper's size, seeds 0-2), above the quoted ranges 0.71-0.83 and 0.27-0.31, so the two
  range rows cannot read "reproduced" on this source (not a power of their rule);
* convergence: category directions mu_k (orthonormal) added with gain g exp(-((l/L - 0.67) /
  0.25)^2) to the semantic prompts, g solved so the peak of the convergence-index profile
  is 0.495 (the middle of 0.41-0.58; half 0.2475);
* bifurcation: a homograph pair's two contexts get +/- D(l)/2 v along a pair direction v,
  D rising linearly from layer round(0.22 L) - 1 to L; a control pair's get the same with
  their own D_c along their own direction. D_c(L) is solved so that the median over pairs of
  r_ctl is the paper's 1.1 (half: 1.05; r = delta(L) / delta(0)), then D(L) so that the
  median over pairs of r_amb / r_ctl is 5.6 / 1.1 (half: 3.3 / 1.05): homographs at 5.6x
  (half: 3.3x). (Before, control pairs got nothing, so r_ctl stayed at the background's
  0.99 and the homographs' ratio equalled the excess, 5.09x by design and 4.8x as realised
  on seeds 0-19, below the paper's 5.6x.) Both are medians of 20 per-pair ratios, noisy
  between draws, so they are refined on :data:`BIFURCATION_DRAWS` reference draws, not 2.
  A homograph pair and its control pair share their contexts' component b (background), so
  per pair log r_amb and log r_ctl correlate as on the real model (before, they drew
  independent noise: correlation about 0, log(r_amb / r_ctl) spread with sd about 0.36 over
  pairs against SmolLM2's 0.22, and the excess's CI over 20 pairs was wider than on a real
  model).

All planted directions are orthogonal to the plane of u. Deterministic in the seed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from lamina.trajectory.metrics import bifurcation, layerwise_cosine, mean_curvature
from lamina.trajectory.phases import fixed_phase_bands
from lamina.trajectory.sizes import chapter_prompts
from lamina.trajectory.stat_tests import bifurcation_rows, ci_profile, distance_stack

__all__ = [
    "CONTEXT_CORRELATION",
    "KINDS",
    "SMOLLM2_FIT",
    "Background",
    "context_keys",
    "context_share",
    "fit_background",
    "pair_ratio_correlation",
    "realistic_states",
    "targets",
    "unit_keys",
]

KINDS = ("null", "planted", "planted-half")


@dataclass(frozen=True)
class Background:
    """Fitted background parameters (module docstring), each per layer l = 0..L (tuples of
    L+1 floats; rho[0] unused); alpha the spectrum's slope; tokens_per_word the real
    tokenizer's median tokens per whitespace word."""

    common: tuple[float, ...]
    first: tuple[float, ...]
    first_cos: tuple[float, ...]
    rho: tuple[float, ...]
    item: tuple[float, ...]
    norm: tuple[float, ...]
    alpha: float
    tokens_per_word: float
    d_model: int = 128
    source: str = ""

    @property
    def n_layers(self) -> int:
        return len(self.common) - 1


def unit_keys(table: pd.DataFrame) -> np.ndarray:
    """(n,) the unit whose component a prompt shares: "item:<category>:<item>" for a prompt
    with an item, "base:<base>" for a lexical variant, "<role>:<pair_id>" for the two contexts
    of a homograph or control pair, else "row:<i>" (its own)."""
    t = table.reset_index(drop=True)
    out = np.array([f"row:{i}" for i in range(len(t))], dtype=object)
    for i, r in t.iterrows():
        if "item" in t and pd.notna(r.get("item")) and "category" in t:
            out[i] = f"item:{r['category']}:{r['item']}"
        elif "base" in t and pd.notna(r.get("base")) and r.get("family") == "lexical":
            out[i] = f"base:{r['base']}"
        elif {"role", "pair_id"} <= set(t.columns) and pd.notna(r.get("pair_id")):
            out[i] = f"{r['role']}:{r['pair_id']}"
    return out.astype(str)


def _groups(table: pd.DataFrame) -> np.ndarray:
    """(n,) the comparison group of a unit (category, else family, else role)."""
    t = table.reset_index(drop=True)
    g = pd.Series([""] * len(t))
    for col in ("role", "family", "category"):  # later columns win where present
        if col in t:
            g = t[col].astype(str).where(t[col].notna(), g)
    return g.to_numpy().astype(str)


def _layer_fit(x: np.ndarray, inv_t: np.ndarray) -> tuple[float, float, float, np.ndarray]:
    """(c, f, kappa, R) at one layer: x (n, d) = A + B / T_i + R_i by least squares (R: what
    length does not explain); c = |A| / s, f = |B| / s with s the RMS norm of R, kappa =
    cos(A, B)."""
    X = np.column_stack([np.ones_like(inv_t), inv_t])  # (n, 2)
    coef = np.linalg.lstsq(X, x, rcond=None)[0]  # (2, d)
    r = x - X @ coef
    s = float(np.sqrt(np.mean(np.sum(r**2, axis=1))))
    na, nb = (float(np.linalg.norm(v)) for v in coef)
    return na / s, nb / s, float(coef[0] @ coef[1] / max(na * nb, 1e-30)), r


def _unit_cos(r: np.ndarray) -> np.ndarray:
    return r / np.linalg.norm(r, axis=1, keepdims=True).clip(1e-30)


def fit_background(
    states: np.ndarray, table: pd.DataFrame, n_tokens: Any, n_layers: int = 12,
    source: str = "",
) -> Background:
    """Fit :class:`Background` to mean-pooled real states (n, L_real+1, d) of the rows of
    ``table`` with ``n_tokens`` (n,) tokens each; per-layer values interpolated onto
    ``n_layers`` + 1 layers by relative depth (module docstring)."""
    x = np.asarray(states, dtype=np.float64)
    tok = np.asarray(n_tokens, dtype=float)
    inv_t = 1.0 / tok
    units, groups = unit_keys(table), _groups(table)
    # the shared component is measured on lexical base words (variants of one sentence):
    # semantic items sit in different frames, and frame, not item, dominates their cosines
    base = np.char.startswith(units, "base:")
    pick = base if base.sum() > 2 else np.ones(len(units), bool)
    same_unit = (units[:, None] == units[None, :]) & pick[:, None] & pick[None, :]
    same_group = (groups[:, None] == groups[None, :]) & ~same_unit & pick[:, None] & pick[None, :]
    np.fill_diagonal(same_unit, False)
    m = x.shape[1]
    c, f, kap, w, rho, alpha, norm = (np.zeros(m) for _ in range(7))
    prev = None
    for layer in range(m):
        c[layer], f[layer], kap[layer], r = _layer_fit(x[:, layer], inv_t)
        ur = _unit_cos(r)
        g = ur @ ur.T
        w[layer] = max(float(g[same_unit].mean() - g[same_group].mean()), 0.0)
        if prev is not None:
            rho[layer] = float(np.mean(np.sum(prev * ur, axis=1)))
        prev = ur
        lam = np.linalg.svd(r - r.mean(0), compute_uv=False) ** 2
        k = np.arange(1, 61)
        alpha[layer] = -np.polyfit(np.log(k), np.log(lam[:60]), 1)[0]
        norm[layer] = float(np.sqrt(np.mean(np.sum(x[:, layer] ** 2, axis=1))))
    words = np.array([max(len(str(p).split()), 1) for p in table["prompt"]])
    real, syn = np.arange(m) / (m - 1), np.arange(n_layers + 1) / n_layers

    def on(v: np.ndarray) -> tuple[float, ...]:
        return tuple(float(round(y, 4)) for y in np.interp(syn, real, v))

    rho[0] = rho[1]
    return Background(
        common=on(c), first=on(f), first_cos=on(kap), rho=on(np.clip(rho, 0.0, 0.999)), item=on(w),
        norm=on(norm / norm[0]), alpha=round(float(alpha.mean()), 4),
        tokens_per_word=round(float(np.median(tok / words)), 4), source=source,
    )


SMOLLM2_FIT = Background(
    common=(0.9499, 1.9566, 1.8509, 2.0073, 3.1321, 0.1869, 0.2061, 0.2499, 0.2809, 0.3865,
            0.6766, 0.9192, 1.3332),
    first=(2.5191, 12.3001, 16.8893, 15.8482, 3.8681, 50.0551, 49.8922, 49.7527, 49.5961,
           49.2392, 48.5384, 47.4246, 11.8243),
    first_cos=(-0.4104, 0.7745, 0.8087, 0.7902, 0.0137, -0.2781, -0.0444, 0.0309, 0.2222,
               0.4901, 0.3867, 0.2728, 0.2965),
    rho=(0.0538, 0.6887, 0.9677, 0.9681, 0.8863, 0.6746, 0.9886, 0.9864, 0.9789, 0.9651,
         0.9715, 0.9642, 0.7579),
    item=(0.3335, 0.1156, 0.1737, 0.1819, 0.3071, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    norm=(1.0, 131.0328, 188.9516, 189.5662, 95.4345, 4457.7464, 4459.5283, 4454.8464,
          4458.7127, 4479.2565, 4489.0462, 4472.3, 1231.0406),
    alpha=1.3217,
    tokens_per_word=1.0,
    source="smollm2-135m-instruct, mean pooling, 464 prompts (fit_background)",
)
"""The fit to SmolLM2-135M-Instruct (module docstring), as printed by :func:`fit_background`."""


# ----------------------------------------------------------------------------- generation
@dataclass
class _Frame:
    """One draw's fixed directions: basis Q (d, d); u0, u1 span the plane of u; v the
    first-token direction's part orthogonal to u0; rest: the other columns."""

    Q: np.ndarray
    scale: np.ndarray  # (d - 3,) sqrt of the spectrum

    @property
    def rest(self) -> np.ndarray:
        return self.Q[:, 4:]


def _ar(rng: np.random.Generator, k: int, rho: np.ndarray, dim: int) -> np.ndarray:
    """(k, L+1, dim) unit-variance Gaussian AR(1) over layers with per-layer rho."""
    out = np.empty((k, len(rho), dim))
    out[:, 0] = rng.standard_normal((k, dim))
    for layer in range(1, len(rho)):
        r = rho[layer]
        out[:, layer] = r * out[:, layer - 1] + np.sqrt(1 - r * r) * rng.standard_normal((k, dim))
    return out


def context_keys(table: pd.DataFrame) -> np.ndarray:
    """(n,) "ctx:<pair_id>:<sense>" for a prompt of a homograph or control pair (a homograph's
    context and its matched control's are one sentence with the last word changed: they share
    the key), else "" (no shared context)."""
    if not {"pair_id", "sense"} <= set(table.columns):
        return np.full(len(table), "", dtype=object).astype(str)
    pid, sense = _col(table, "pair_id"), _col(table, "sense")
    return np.where((pid != "") & (sense != ""), "ctx:" + pid + ":" + sense, "").astype(str)


@dataclass
class _Noise:
    """The raw AR(1) components of one draw (module docstring), each (n, L+1, d-4) in the
    frame's rest basis: a (per unit), b (per shared context; zero where none), e (own); w
    (1, L+1, 1) the item weight; has (n,) rows with a shared context."""

    a: np.ndarray
    b: np.ndarray
    e: np.ndarray
    w: np.ndarray
    has: np.ndarray

    def z(self, share: float, frame: _Frame) -> np.ndarray:
        """(n, L+1, d) the fluctuations z at context share ``share``."""
        w = self.w
        if not 0.0 <= share < 1.0 - float(w.max()):
            raise ValueError(f"context share must be in [0, {1 - float(w.max()):.3f}); got {share}")
        s_i = np.where(self.has, share, 0.0)[:, None, None]
        mix = np.sqrt(w) * self.a + np.sqrt(s_i) * self.b + np.sqrt(1 - w - s_i) * self.e
        return (mix * frame.scale) @ frame.rest.T


def _background(
    rng: np.random.Generator, table: pd.DataFrame, bg: Background
) -> tuple[_Noise, np.ndarray, _Frame]:
    """(noise, coef (n, L+1, 2): weights of u and of the first-token direction, frame) of the
    module docstring's background; ``noise.z(share)`` the fluctuations."""
    d = bg.d_model
    Q = np.linalg.qr(rng.standard_normal((d, d)))[0]
    lam = np.arange(1, d - 3) ** -bg.alpha
    frame = _Frame(Q, np.sqrt(lam / lam.sum()))
    units = unit_keys(table)
    _, inv = np.unique(units, return_inverse=True)
    rho = np.asarray(bg.rho)
    a = _ar(rng, int(inv.max()) + 1, rho, d - 4)[inv]  # (n, L+1, d-4)
    e = _ar(rng, len(table), rho, d - 4)
    ctx = context_keys(table)
    has = ctx != ""
    b = np.zeros_like(e)
    if has.any():  # drawn whatever the share, so that the draw does not depend on it
        _, cinv = np.unique(ctx[has], return_inverse=True)
        b[has] = _ar(rng, int(cinv.max()) + 1, rho, d - 4)[cinv]
    noise = _Noise(a, b, e, np.asarray(bg.item)[None, :, None], has)
    T = bg.tokens_per_word * _words(table)
    coef = np.stack(np.broadcast_arrays(
        np.asarray(bg.common)[None, :], np.asarray(bg.first)[None, :] / T[:, None]), axis=-1)
    return noise, coef, frame


def _col(table: pd.DataFrame, name: str) -> np.ndarray:
    """(n,) column ``name`` as str ("" where missing or absent)."""
    if name not in table:
        return np.full(len(table), "", dtype=object).astype(str)
    return np.array(["" if pd.isna(v) else str(v) for v in table[name]])


def _words(table: pd.DataFrame) -> np.ndarray:
    return np.array([max(len(str(p).split()), 1) for p in table["prompt"]], dtype=float)


def _orth_unit(rng: np.random.Generator, frame: _Frame, k: int) -> np.ndarray:
    """(k, d) random unit vectors in the span of ``frame.rest`` (orthogonal to u0, u1, v)."""
    v = rng.standard_normal((k, frame.rest.shape[1])) @ frame.rest.T
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@dataclass
class _Draw:
    """Everything random of one (table, seed): the background and the planted directions."""

    z: np.ndarray
    coef: np.ndarray
    frame: _Frame
    noise: _Noise
    extra: dict[str, np.ndarray] = field(default_factory=dict)


def _draw(table: pd.DataFrame, seed: int, bg: Background, share: float | None = None) -> _Draw:
    """One draw; ``share`` the context share (None: :func:`context_share`, solved once, for
    tables with shared contexts; 0 otherwise)."""
    rng = np.random.default_rng([seed, 7_417])
    noise, coef, frame = _background(rng, table, bg)
    if share is None:
        share = context_share() if noise.has.any() else 0.0
    z = noise.z(share, frame)
    n = len(table)
    extra = {"drift": _orth_unit(rng, frame, n)}
    cats = sorted(set(_col(table, "category")) - {""})
    if cats:
        mu = np.linalg.qr(rng.standard_normal((frame.rest.shape[1], len(cats))))[0].T
        extra["categories"] = mu @ frame.rest.T  # (K, d) orthonormal
    extra["pairs"] = _orth_unit(rng, frame, n)  # one per row; a pair uses its ctx1 row's
    return _Draw(z, coef, frame, noise, extra)


def flat(bg: Background) -> Background:
    """``bg`` with every per-layer value replaced by its mean over layers 1..L (norm: 1): the
    background both kinds use, so that the null has no phase structure of its own."""
    def m(v: tuple[float, ...]) -> tuple[float, ...]:
        return (float(np.mean(v[1:])),) * len(v)
    return Background(common=m(bg.common), first=m(bg.first), first_cos=m(bg.first_cos),
                      rho=m(bg.rho), item=m(bg.item), norm=(1.0,) * len(bg.norm),
                      alpha=bg.alpha, tokens_per_word=bg.tokens_per_word, d_model=bg.d_model,
                      source=f"depth-averaged {bg.source}")


@dataclass(frozen=True)
class Levers:
    """The planted effects' gains (module docstring): phi (rad per transition, encoding and
    output bands), drift (lexical drift per layer, z units), gain (convergence), split
    (bifurcation D(L) of homograph pairs, z units), control_split (the same for control pairs).
    All zero: the null."""

    phi: float = 0.0
    drift: float = 0.0
    gain: float = 0.0
    split: float = 0.0
    control_split: float = 0.0


def _split(t: pd.DataFrame, draw: _Draw, h: np.ndarray, role: str, D: np.ndarray) -> None:
    """Add +/- D(l)/2 v to the two contexts of each pair of ``role`` in ``h`` (n, L+1, d), in
    place; v is the pair direction drawn for the pair's ctx1 row."""
    for _pair, rows in t[t["role"] == role].groupby("pair_id").groups.items():
        r1 = [r for r in rows if t.at[r, "sense"] == "ctx1"]
        r2 = [r for r in rows if t.at[r, "sense"] == "ctx2"]
        if r1 and r2:
            v = draw.extra["pairs"][r1[0]]
            h[r1[0]] += 0.5 * D[:, None] * v
            h[r2[0]] -= 0.5 * D[:, None] * v


def _compose(t: pd.DataFrame, draw: _Draw, bg: Background, lv: Levers) -> np.ndarray:
    """States (n, L+1, d) of one draw with the levers ``lv``."""
    L = bg.n_layers
    Q = draw.frame.Q
    kap = np.asarray(bg.first_cos)
    # fixed part in the (Q0, Q2) plane, its copy in (Q1, Q3); turned by Phi(l)
    a0 = draw.coef[..., 0] + draw.coef[..., 1] * kap  # (n, L+1) along Q0
    a2 = draw.coef[..., 1] * np.sqrt(1 - kap**2)  # along Q2
    steps = np.where(fixed_phase_bands(L) == 1, 0.0, lv.phi)  # transition l -> l+1
    Phi = np.concatenate([[0.0], np.cumsum(steps)])  # (L+1,)
    cos, sin = np.cos(Phi)[None, :, None], np.sin(Phi)[None, :, None]
    h = draw.z + cos * (a0[..., None] * Q[:, 0] + a2[..., None] * Q[:, 2])
    h = h + sin * (a0[..., None] * Q[:, 1] + a2[..., None] * Q[:, 3])
    layers = np.arange(L + 1)
    fam = _col(t, "family")
    lex = fam == "lexical"
    h[lex] += lv.drift * layers[None, :, None] * draw.extra["drift"][lex][:, None, :]
    if lv.gain and "categories" in draw.extra:
        sem = np.flatnonzero(np.char.startswith(fam, "semantic") & (_col(t, "category") != ""))
        names = sorted(set(_col(t, "category")) - {""})
        k = np.array([names.index(c) for c in _col(t, "category")[sem]], dtype=int)
        bump = np.exp(-(((layers / L - 0.67) / 0.25) ** 2))
        h[sem] += lv.gain * bump[None, :, None] * draw.extra["categories"][k][:, None, :]
    if (lv.split or lv.control_split) and {"role", "pair_id", "sense"} <= set(t.columns):
        start = round(0.22 * L) - 1
        ramp = np.clip((layers - start) / (L - start), 0, 1)  # (L+1,)
        _split(t, draw, h, "ambiguous", lv.split * ramp)
        _split(t, draw, h, "control", lv.control_split * ramp)
    return h * np.asarray(bg.norm)[None, :, None]


# ----------------------------------------------------------------------------- targets
def targets(kind: str) -> dict[str, float]:
    """The planted sizes of ``kind``: SIM margin (cosine), curvature gap (rad), peak CI
    (chord), excess r_amb / r_ctl and the control pairs' own ratio r_ctl. "planted": the
    paper's (homographs 5.6x over controls 1.1x); "planted-half": half of each effect
    (ratios: 1 + half the excess over 1, each: 3.3x over 1.05x)."""
    if kind == "planted":
        return {"margin": 0.125, "gap": 0.48, "peak": 0.495, "excess": 5.6 / 1.1,
                "control": 1.1}
    if kind == "planted-half":
        return {"margin": 0.0625, "gap": 0.24, "peak": 0.2475, "excess": 3.3 / 1.05,
                "control": 1.05}
    raise ValueError(f"no planted sizes for kind {kind!r}; choose 'planted' or 'planted-half'")


def _bisect(
    f: Callable[[float], float], target: float, hi: float, iters: int = 28, lo: float = 0.0
) -> float:
    """x in [lo, hi] with f(x) = target, f increasing (f(lo) >= target: lo)."""
    if f(lo) >= target:
        return lo
    while f(hi) < target and hi < 1e6:
        hi *= 2
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return 0.5 * (lo + hi)


REFERENCE_SEEDS = (990_001, 990_002)  # the reference draws the levers are solved on
# The bifurcation's statistics are medians over 20 pairs of per-pair ratios: between draws
# their log varies with sd about 0.13 (excess) and 0.08 (control ratio), so a mean over the 2
# reference draws misses its expectation by about 9% (1 SE); at those 2 draws the excess
# planted at 5.09 came out at 4.72 on seeds 0-19. Its two levers are refined on
# BIFURCATION_DRAWS draws (seeds 990_001, 990_002, ...): 1 SE about 1.6% and 1.0%.
BIFURCATION_DRAWS = 64
FLAT = flat(SMOLLM2_FIT)


def _stats(name: str) -> Callable[[np.ndarray, pd.DataFrame], float]:
    """The measured effect of each lever on a chapter's states (as the chapters measure it)."""

    def margin(x: np.ndarray, t: pd.DataFrame) -> float:
        bands = fixed_phase_bands(x.shape[1] - 1)
        m = np.asarray(layerwise_cosine(x)).mean(0)
        b = [m[bands == k].mean() for k in range(3)]
        return float(min(b[1] - b[0], b[1] - b[2]))

    def gap(x: np.ndarray, t: pd.DataFrame) -> float:
        mc, fam = mean_curvature(x), t["family"].to_numpy()
        return float(mc[fam == "reasoning"].mean() - mc[fam == "lexical"].mean())

    def peak(x: np.ndarray, t: pd.DataFrame) -> float:
        return float(np.nanmax(ci_profile(distance_stack(x), t["category"].to_numpy())))

    def excess(x: np.ndarray, t: pd.DataFrame) -> float:
        a, b, ca, cb = bifurcation_rows(t)
        da, dc = bifurcation(x[a], x[b]).delta, bifurcation(x[ca], x[cb]).delta
        return float(np.median((da[:, -1] / da[:, 0]) / (dc[:, -1] / dc[:, 0])))

    def control(x: np.ndarray, t: pd.DataFrame) -> float:
        _, _, ca, cb = bifurcation_rows(t)
        dc = bifurcation(x[ca], x[cb]).delta
        return float(np.median(dc[:, -1] / dc[:, 0]))

    def pair_correlation(x: np.ndarray, t: pd.DataFrame) -> float:
        a, b, ca, cb = bifurcation_rows(t)
        da, dc = bifurcation(x[a], x[b]).delta, bifurcation(x[ca], x[cb]).delta
        return float(np.corrcoef(np.log(da[:, -1] / da[:, 0]), np.log(dc[:, -1] / dc[:, 0]))[0, 1])

    return {"three_phase": margin, "curvature": gap, "convergence": peak,
            "bifurcation": excess, "bifurcation_control": control,
            "pair_correlation": pair_correlation}[name]


def _solve(chapter: str, knob: str, target: float, hi: float, lv: Levers,
           stat_name: str | None = None) -> float:
    """The value of lever ``knob`` (others as in ``lv``) whose mean effect (statistic
    ``stat_name``, default the chapter's) over the reference draws of ``chapter``'s prompt
    set is ``target``."""

    t = chapter_prompts(chapter)
    draws = [_draw(t, s, FLAT) for s in REFERENCE_SEEDS]
    stat = _stats(stat_name or chapter)

    def f(v: float) -> float:
        trial = Levers(**{**lv.__dict__, knob: v})
        return float(np.mean([stat(_compose(t, dr, FLAT, trial), t) for dr in draws]))

    return _bisect(f, target, hi, iters=20)


def _refine(knob: str, stat_name: str, target: float, start: float, lv: Levers) -> float:
    """A bifurcation lever (``split`` or ``control_split``, which enter the states linearly)
    re-solved on :data:`BIFURCATION_DRAWS` draws, bisecting in [start / 2, 2 start] (12
    steps) around the 2-draw solution ``start``."""
    t = chapter_prompts("bifurcation")
    stat = _stats(stat_name)
    pairs = []  # (states at 0, states at 1 - states at 0) per draw: linear in the lever
    for s in range(REFERENCE_SEEDS[0], REFERENCE_SEEDS[0] + BIFURCATION_DRAWS):
        dr = _draw(t, s, FLAT)
        x0 = _compose(t, dr, FLAT, Levers(**{**lv.__dict__, knob: 0.0}))
        pairs.append((x0, _compose(t, dr, FLAT, Levers(**{**lv.__dict__, knob: 1.0})) - x0))

    def f(v: float) -> float:
        return float(np.mean([stat(x0 + v * dx, t) for x0, dx in pairs]))

    if start <= 0:
        return _bisect(f, target, 4.0, iters=20)
    return _bisect(f, target, 2 * start, iters=12, lo=0.5 * start)


# Pearson correlation over the 20 pairs of log r_amb and log r_ctl on SmolLM2-135M-Instruct's
# states as the bifurcation chapter takes them (last token); the book's other models
# 0.45-0.98. :func:`lamina.trajectory.realistic.pair_ratio_correlation` measures it.
CONTEXT_CORRELATION = 0.69


def pair_ratio_correlation(states: np.ndarray, table: pd.DataFrame) -> float:
    """Pearson correlation over pairs (dimensionless) of log r_amb and log r_ctl, r = delta(L)
    / delta(0) of a homograph pair and of its matched control pair (:func:`bifurcation_rows`),
    in states (n, L+1, d) of the rows of ``table``: how much a pair's ratio and its control's
    move together (their contexts are one sentence)."""
    return _stats("pair_correlation")(np.asarray(states, dtype=np.float64),
                                      table.reset_index(drop=True))


@functools.lru_cache(maxsize=1)
def context_share() -> float:
    """The context share s (module docstring) at which the mean over
    :data:`BIFURCATION_DRAWS` null draws of the bifurcation chapter's prompts of
    :func:`pair_ratio_correlation` is :data:`CONTEXT_CORRELATION` (bisection, 14 steps; it
    rises with s); cached per process."""
    t = chapter_prompts("bifurcation")
    stat = _stats("pair_correlation")
    parts = []  # (states less their fluctuations, noise, frame) per draw: z varies with s
    for seed in range(REFERENCE_SEEDS[0], REFERENCE_SEEDS[0] + BIFURCATION_DRAWS):
        dr = _draw(t, seed, FLAT, 0.0)
        parts.append((_compose(t, dr, FLAT, Levers()) - dr.z, dr.noise, dr.frame))

    def f(v: float) -> float:
        return float(np.mean([stat(fixed + noise.z(v, frame), t) for fixed, noise, frame in parts]))

    hi = 0.999 * (1.0 - max(FLAT.item))
    if f(hi) < CONTEXT_CORRELATION:
        raise ValueError(f"no context share reaches a pair correlation of {CONTEXT_CORRELATION}")
    return _bisect(f, CONTEXT_CORRELATION, hi, iters=14)


@functools.lru_cache(maxsize=4)
def levers(kind: str) -> Levers:
    """The levers that plant ``kind``'s :func:`targets`, solved by bisection on the chapters'
    own prompt sets at :data:`REFERENCE_SEEDS` (mean over the seeds), twice (the levers
    interact a little); the two bifurcation levers then refined on :data:`BIFURCATION_DRAWS`
    draws (controls first: the excess is over them); cached per process."""
    goal = targets(kind)
    lv = Levers()
    plan = (("three_phase", "phi", "margin", 0.5, None),
            ("curvature", "drift", "gap", 0.5, None),
            ("convergence", "gain", "peak", 2.0, None),
            ("bifurcation", "control_split", "control", 1.0, "bifurcation_control"),
            ("bifurcation", "split", "excess", 4.0, None))
    for chapter, knob, key, hi, stat in plan * 2:
        lv = Levers(**{**lv.__dict__, knob: _solve(chapter, knob, goal[key], hi, lv, stat)})
    for knob, key, stat in (("control_split", "control", "bifurcation_control"),
                            ("split", "excess", "bifurcation")):
        lv = Levers(**{**lv.__dict__, knob: _refine(knob, stat, goal[key], getattr(lv, knob), lv)})
    return lv


def realistic_states(prompts: pd.DataFrame, kind: str, seed: int = 0) -> np.ndarray:
    """States (n, L+1, d) float64 for the rows of ``prompts`` (columns ``prompt`` and, where
    present, ``family``, ``category``, ``item``, ``base``, ``role``, ``pair_id``,
    ``sense``); kind in :data:`KINDS` (module docstring). Deterministic in ``seed``."""
    if kind not in KINDS:
        raise ValueError(f"realistic kind must be one of {KINDS}; got {kind!r}")
    t = prompts.reset_index(drop=True)
    if len(t) == 0:
        raise ValueError("realistic_states needs at least one prompt")
    lv = Levers() if kind == "null" else levers(kind)
    return _compose(t, _draw(t, seed, FLAT), FLAT, lv)
