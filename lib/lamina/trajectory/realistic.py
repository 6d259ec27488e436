"""Realistic known-answer states: a background with what a real model's pooled states share
(:mod:`lamina.trajectory.background`, fitted to SmolLM2-135M-Instruct:
:mod:`lamina.trajectory.fitted`), and paper 1's four effects planted on it at a chosen size
(:mod:`lamina.trajectory.levers`).

**Background.** For prompt i at layer l = 0..L (L = 12), in d = 128 dimensions:

    h_i(l) = n(l) [ c(l) a(l) + f(l) w_i b(l) + s_i(l) z_i(l) ]
    z_i(l) = sum_k sqrt(w_k(l)) g_k,key_k(i)(l) + sqrt(1 - sum_k w_k(l)) e_i(l)
    s_i(l) = exp(level(l) - slope(l) log T_i)

* a(l), b(l): the common direction and the first-token direction, laid out as the real
  model's (their Gram matrix over layers is the fitted one's), turned further by the null's
  flattening and the phase levers (:func:`compose`); w_i = 1 / T_i under mean pooling,
  [T_i = 1] under last-token pooling (:func:`lamina.trajectory.background.length_weight`),
  T_i = the prompt's tokens, tokens per word x its whitespace words;
* g_k,key: one component per key a prompt holds (a sentence frame, a reasoning template, an
  item across its frames, a lexical base word, a homograph pair's word, a homograph's context
  with its control's, the last word under last-token pooling:
  :func:`lamina.trajectory.background.prompt_keys`), shared by every prompt holding the key
  with weight w_k(l) (a prompt holding keys whose weights sum past 1 has them scaled to 1);
  e_i the prompt's own part. Each is a Gaussian AR(1) over layers with the fitted
  persistence rho(l), spectrum lambda_j ~ j^-alpha in a random basis, E||.||^2 = 1;
* with the fitted ``rotary`` flag (last-token pooling), layer 0 is the last word's component
  alone and f(0) = 0: two prompts ending in one word have delta(0) = 0 (SmolLM2 has no
  position signal at layer 0), so the bifurcation ratio's baseline is layer 1.

**What the null keeps and what it flattens.** It keeps every fitted per-layer value (norms,
the common and first-token parts and how they turn, the size of the own part with length,
persistence, the shares of every key), so it keeps the hazards at the model's strength
(:mod:`lamina.trajectory.hazards`, measured the same way on SmolLM2 and on the null:
:data:`lamina.trajectory.fitted.HAZARDS`): curvature that varies with length, frames shared
across categories, item and base-word clustering, contexts shared by a homograph and its
control, delta(0) = 0. It has no category, family or ambiguity component (the nuisance the fit
estimates and drops). One component is flattened, because it would plant a claim by itself:
SmolLM2's own similarity profile, at the layers the source takes, has elaboration above both
neighbour bands (band means 0.714 / 0.952 / 0.737), so the null turns the fixed part by a
further psi_e per elaboration transition, psi_e solved so that elaboration's mean SIM equals
the higher neighbour's, band means averaged per independent unit as the chapter's test
averages them (the boundary of the claim's null; :func:`lamina.trajectory.levers.neutral_turn`).

**Kinds** (:data:`KINDS`, and :data:`CALIBRATION_KINDS` for the calibration's own): "null";
"planted" (the paper's sizes) and "planted-half" (half of each effect), each effect on its own
lever (:mod:`lamina.trajectory.levers`); "survivor": the
paper's sizes, carried by what the controls keep (one category direction at every layer,
which a trajectory keeps whatever the order of its layers; a homograph separation growing
from 22% of depth, which a shuffled-layers control moves to a random layer but keeps about
half of; the random-embedding control of a survivor source is another survivor draw, not a
null one: :func:`control_kind`), the adversarial source (the null) of the "vanishes under
controls" rows; "removable": the paper's sizes, carried by what the controls remove
(:data:`REMOVABLE`: a category code of each layer's own, a homograph separation confined to
the last transition; its random-embedding control is a null draw), the source on which the
vanish rows' power is measured; "survivor-model" and "removable-model" (:data:`MODEL_KINDS`):
the same two with the convergence peak the fitted model itself has
(:data:`lamina.trajectory.fitted.EFFECTS`; the levers "planted-model"), the size of the
real models' peaks, on which convergence's vanish row is calibrated (there the mix of depths
under shuffled layers dilutes a layer-invariant code too, so the row is undecidable:
:mod:`lamina.trajectory.control_power`); "planted-elsewhere": the planted sizes with the
bifurcation starting at half depth and the convergence bump centred at 1/6 of depth
(:data:`ELSEWHERE`), the conditional null of the location rows.
Deterministic in the seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from lamina.trajectory.background import (
    KEY_KINDS,
    MAX_RANK,
    Background,
    length_weight,
    prompt_keys,
)
from lamina.trajectory.bifurcation_stats import baseline_layer, bifurcation_rows
from lamina.trajectory.metrics import bifurcation
from lamina.trajectory.phases import fixed_phase_bands

__all__ = [
    "CALIBRATION_KINDS",
    "ELSEWHERE",
    "KINDS",
    "MODEL_KINDS",
    "REMOVABLE",
    "Draw",
    "Levers",
    "compose",
    "control_kind",
    "draw",
    "source_tokens",
]

KINDS = ("null", "planted", "planted-half", "survivor")  # the book's synthetic sources
# and the vanish rows' planted source; and the survivor and removable sources at the fitted
# model's own convergence peak (:data:`MODEL_KINDS`), on which convergence's vanish row is calibrated
MODEL_KINDS = ("survivor-model", "removable-model")
CALIBRATION_KINDS = (*KINDS, "removable", *MODEL_KINDS, "planted-elsewhere")
ONSET_DEPTH = 0.22  # the paper's "about 22% of depth": the planted bifurcation starts there
PEAK_DEPTH = 0.67  # the planted convergence bump's centre (middle-to-late, as the paper says)
RESERVED = 2 * MAX_RANK  # basis columns held for the fixed directions and their turned copy


# the "removable" source's levers beside the planted ones: each category's direction drawn
# afresh at every layer (:func:`_category_directions`), the separation growing over the last
# transition alone (11/12 of depth on the 12 blocks of the fitted background)
REMOVABLE = {"renewal": 1.0, "onset": 11 / 12}
# the "planted-elsewhere" source beside the planted one: the paper's sizes, each location moved
# outside its claimed range, the conditional null of the location rows (each keeps its
# precondition, the effect present): the bifurcation's separation starting at half depth (6 of
# the 12 blocks, 0.23 of depth past the claimed 0.17-0.27), the convergence bump centred at
# 1/6 of depth (2 layers in; claimed: middle-to-late, from 1/3)
ELSEWHERE = {"onset": 0.5, "peak_depth": 1 / 6}


def control_kind(kind: str) -> str:
    """The kind whose draw is the random-embedding control of ``kind``'s states: a survivor
    source's own kind (its effects are carried by what a random vocabulary keeps), "null"
    otherwise (a random vocabulary removes what the model learned)."""
    return kind if kind in ("survivor", "survivor-model") else "null"


def source_tokens(table: pd.DataFrame, bg: Background) -> np.ndarray:
    """(n,) int tokens T_i of each prompt on the source: max(1, round(tokens per word x
    whitespace words))."""
    nw = np.array([max(len(str(p).split()), 1) for p in table["prompt"]], dtype=float)
    return np.maximum(np.rint(bg.tokens_per_word * nw), 1).astype(int)


@dataclass(frozen=True)
class Levers:
    """Gains of the planted effects and of the null's flattening (all zero: no effect):
    ``neutral`` psi_e (rad per elaboration transition, the null's), ``phi`` (rad per
    encoding and output transition), ``drift_lexical`` / ``drift_reasoning`` (straight drift
    per layer of the lexical* / reasoning* families, in units of the mean norm of the
    states), ``gain`` (convergence, z units), ``renewal`` (the share of each category's
    direction drawn afresh at every layer: 0, one direction at every layer, which a
    shuffled-layers control keeps; 1, a direction of its own at every layer, which it
    removes: :func:`_category_directions`), ``split`` / ``control_split`` (the planted
    ratio delta(L) / delta(base) of homograph / control pairs: :func:`_separate`; 0 leaves
    the background's separation), ``onset`` (the depth, layer / L, where the planted
    separation starts to grow), ``peak_depth`` (the depth, layer / L, of the centre of the
    convergence bump)."""

    neutral: float = 0.0
    phi: float = 0.0
    drift_lexical: float = 0.0
    drift_reasoning: float = 0.0
    gain: float = 0.0
    renewal: float = 0.0
    split: float = 0.0
    control_split: float = 0.0
    onset: float = ONSET_DEPTH
    peak_depth: float = PEAK_DEPTH

    def but(self, **change: float) -> Levers:
        return Levers(**{**self.__dict__, **change})


def _ar(rng: np.random.Generator, k: int, rho: np.ndarray, dim: int) -> np.ndarray:
    """(k, L+1, dim) unit-variance Gaussian AR(1) over layers with per-layer rho."""
    out = np.empty((k, len(rho), dim))
    out[:, 0] = rng.standard_normal((k, dim))
    for layer in range(1, len(rho)):
        r = rho[layer]
        out[:, layer] = r * out[:, layer - 1] + np.sqrt(1 - r * r) * rng.standard_normal((k, dim))
    return out


def _weights(keys: dict[str, np.ndarray], bg: Background) -> dict[str, np.ndarray]:
    """Per kind, (n, L+1) the weight w_k(l) of each prompt's key (0 without one), scaled per
    prompt and layer so that a prompt's weights sum to at most 1; "own": the rest."""
    m = bg.n_layers + 1
    w = {k: np.where((v != "")[:, None], bg.share(k)[None, :], 0.0) for k, v in keys.items()}
    total = np.sum(list(w.values()), axis=0) if w else np.zeros((0, m))
    scale = np.where(total > 1.0, 1.0 / np.maximum(total, 1e-30), 1.0)
    w = {k: v * scale for k, v in w.items()}
    w["own"] = np.clip(1.0 - np.minimum(total, 1.0), 0.0, 1.0)
    return w


@dataclass
class Draw:
    """Everything random of one (table, seed, background): the basis Q (d, d) (its first
    :data:`RESERVED` columns hold the fixed directions, the rest the fluctuations), the fluctuations z
    (n, L+1, d), each prompt's tokens T (n,), and planted directions ``extra``."""

    Q: np.ndarray
    z: np.ndarray
    tokens: np.ndarray
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def rest(self) -> np.ndarray:
        return self.Q[:, RESERVED:]


def _orth_unit(rng: np.random.Generator, rest: np.ndarray, k: int) -> np.ndarray:
    """(k, d) random unit vectors in the span of ``rest`` (d, d')."""
    v = rng.standard_normal((k, rest.shape[1])) @ rest.T
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def draw(table: pd.DataFrame, seed: int, bg: Background) -> Draw:
    """One draw of the background's randomness for the rows of ``table`` (module docstring)."""
    t = table.reset_index(drop=True)
    rng = np.random.default_rng([seed, 7_417])
    d, n = bg.d_model, len(t)
    Q = np.linalg.qr(rng.standard_normal((d, d)))[0]
    lam = np.arange(1, d - RESERVED + 1) ** -bg.alpha
    scale = np.sqrt(lam / lam.sum())  # E||z||^2 = 1
    rho = np.asarray(bg.rho)
    keys = prompt_keys(t, bg.pool)
    w = _weights(keys, bg)
    mix = np.sqrt(w["own"])[..., None] * _ar(rng, n, rho, d - RESERVED)
    for kind in KEY_KINDS:  # drawn for every kind, so the draw does not depend on the shares
        has = keys[kind] != ""
        if has.any():
            _, inv = np.unique(keys[kind][has], return_inverse=True)
            comp = _ar(rng, int(inv.max()) + 1, rho, d - RESERVED)[inv]
            mix[has] += np.sqrt(w[kind][has])[..., None] * comp
    tokens = source_tokens(t, bg)
    size = np.exp(np.asarray(bg.noise_level)[None, :]
                  - np.asarray(bg.noise_slope)[None, :] * np.log(tokens)[:, None])  # (n, L+1)
    z = (mix * scale * size[..., None]) @ Q[:, RESERVED:].T
    rest = Q[:, RESERVED:]
    extra = {"drift": _orth_unit(rng, rest, n), "pairs": _orth_unit(rng, rest, n)}
    cats = sorted(set(t["category"].dropna().astype(str))) if "category" in t else []
    if cats:
        mu = np.linalg.qr(rng.standard_normal((rest.shape[1], len(cats))))[0].T
        extra["categories"] = mu @ rest.T  # (K, d) orthonormal
        fresh = [np.linalg.qr(rng.standard_normal((rest.shape[1], len(cats))))[0].T
                 for _ in range(bg.n_layers + 1)]  # drawn last: the draws above are unchanged
        extra["categories_by_layer"] = np.stack(fresh) @ rest.T  # (L+1, K, d) orthonormal per layer
    return Draw(Q, z, tokens, extra)


def _category_directions(dr: Draw, renewal: float) -> np.ndarray:
    """(L+1, K, d) the planted direction of each category at each layer:
    u_k(l) = sqrt(1 - r) mu_k + sqrt(r) nu_k(l), r = ``renewal`` in [0, 1], mu_k (K, d) one
    orthonormal set for every layer, nu_k(l) an orthonormal set drawn afresh at each layer
    (unit vectors for r in {0, 1}; the two sets are independent, so for 0 < r < 1 only
    E||u||^2 = 1). r = 0: a category keeps its direction at every layer, so a state carries
    it whichever layer it sits at, and permuting a trajectory's layers keeps the category
    clusters; r = 1: the category code of one layer is not another's (states of distinct
    layers share none of it), the code a shuffled-layers control destroys."""
    if not 0.0 <= renewal <= 1.0:
        raise ValueError(f"renewal must lie in [0, 1]; got {renewal}")
    mu, nu = dr.extra["categories"], dr.extra["categories_by_layer"]
    return np.sqrt(1.0 - renewal) * mu[None] + np.sqrt(renewal) * nu


def _col(t: pd.DataFrame, name: str) -> np.ndarray:
    if name not in t:
        return np.full(len(t), "", dtype=object).astype(str)
    return np.array(["" if pd.isna(v) else str(v) for v in t[name]])


def _separate(t: pd.DataFrame, h: np.ndarray, L: int, lv: Levers) -> None:
    """The planted bifurcation, in place on ``h`` (n, L+1, d): every pair's half-difference
    e(l) = (h_1(l) - h_2(l)) / 2 about its midpoint is scaled by
    (1 + (rho - 1) ramp(l)) / G(l) for l after the ratio's baseline layer, rho = ``split``
    (homograph pairs) or ``control_split`` (control pairs), ramp rising linearly from
    ``lv.onset`` x L (:data:`ONSET_DEPTH` unless set) to 1 at L, G(l) the median over the control pairs of the pair's
    class of the background's delta(l) / delta(base): the background's own growth of every
    pair's separation is replaced by the planted one, each pair keeping its own deviation
    from its class's median (so a homograph pair and its control pair still move together).

    A pair's class is its ``word_last`` value (one class without the column): a last-token
    convention reads only the ``word_last`` pairs (:func:`lamina.trajectory.analyses.
    bifurcation.pair_mask`), whose background growth from layer 1 is not the other pairs',
    so each class carries the planted ratio by itself, whichever other pairs share the
    table (the levers are solved on the ``word_last`` pairs alone)."""
    a, b, ca, cb = bifurcation_rows(t)
    if len(a) < 2:
        return
    da, dc = bifurcation(h[a], h[b]).delta, bifurcation(h[ca], h[cb]).delta
    base = baseline_layer(da, dc)
    layers = np.arange(L + 1)
    cls = _col(t, "word_last")[a]
    growth = np.ones((len(a), L + 1))  # (pairs, L+1): G(l) of each pair's class
    with np.errstate(invalid="ignore", divide="ignore"):
        for c in np.unique(cls):
            k = cls == c
            growth[k] = np.median(dc[k] / dc[k, base : base + 1], axis=0)
    growth = np.where(growth > 0, growth, 1.0)
    ramp = np.clip((layers - lv.onset * L) / (L - lv.onset * L), 0, 1)
    for (r1, r2), rho in (((a, b), lv.split), ((ca, cb), lv.control_split)):
        if rho <= 0:
            continue
        f = np.where(layers[None, :] > base, (1 + (rho - 1) * ramp)[None, :] / growth, 1.0)
        mid, half = 0.5 * (h[r1] + h[r2]), 0.5 * (h[r1] - h[r2])
        h[r1], h[r2] = mid + f[..., None] * half, mid - f[..., None] * half




def compose(table: pd.DataFrame, dr: Draw, bg: Background, lv: Levers) -> np.ndarray:
    """States (n, L+1, d) of one draw with the levers ``lv`` (module docstring).

    The fixed part of prompt i, F_i(l) = c(l) a(l) + f(l) / T_i b(l) (a, b the fitted unit
    directions, in the basis' first R columns), is turned by Phi(l) (the accumulated extra
    turn: the null's psi_e per elaboration transition, the planted phi per encoding and
    output transition) towards its copy in the next R columns:
    cos Phi F_i(l) + sin Phi F'_i(l)."""
    t = table.reset_index(drop=True)
    L = bg.n_layers
    a_dir, b_dir = bg.fixed()  # (L+1, R)
    R = a_dir.shape[1]
    w = length_weight(dr.tokens, bg.pool)[:, None]  # (n, 1)
    F = (np.asarray(bg.common)[None, :, None] * a_dir[None]
         + (np.asarray(bg.first)[None, :] * w)[..., None] * b_dir[None])
    band = fixed_phase_bands(L)  # (L,) band of transition l -> l+1
    extra = np.where(band == 1, lv.neutral, lv.phi)  # radians per transition
    Phi = np.concatenate([[0.0], np.cumsum(extra)])[None, :, None]  # (1, L+1, 1)
    Q = dr.Q
    h = dr.z + np.cos(Phi) * (F @ Q[:, :R].T) + np.sin(Phi) * (F @ Q[:, R : 2 * R].T)
    layers = np.arange(L + 1)
    fam = _col(t, "family")
    if lv.gain and "categories" in dr.extra:
        cat = _col(t, "category")
        sem = np.flatnonzero(np.char.startswith(fam, "semantic") & (cat != ""))
        names = sorted(set(cat) - {""})
        k = np.array([names.index(c) for c in cat[sem]], dtype=int)
        bump = np.exp(-(((layers / L - lv.peak_depth) / 0.25) ** 2))
        u = _category_directions(dr, lv.renewal)  # (L+1, K, d)
        h[sem] += lv.gain * bump[None, :, None] * u[:, k].transpose(1, 0, 2)
    norm = np.asarray(bg.norm)
    h = h * norm[None, :, None]
    for prefix, gain in (("lexical", lv.drift_lexical), ("reasoning", lv.drift_reasoning)):
        rows = np.char.startswith(fam, prefix)
        if gain and rows.any():  # a straight line in the states' own units
            h[rows] += gain * norm.mean() * layers[None, :, None] * dr.extra["drift"][rows][:, None, :]
    if (lv.split or lv.control_split) and {"role", "pair_id", "sense"} <= set(t.columns):
        _separate(t, h, L, lv)
    return h
