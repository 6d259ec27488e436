"""The background of the realistic known-answer sources: what a real model's pooled states
share across prompts and layers, fitted layer by layer.

**Description** of pooled states h_i(l) (prompt i = 1..n, layer l = 0..L) of one pooling:

    h_i(l) = A(l) + B(l) w_i + r_i(l)

A(l) and B(l) (d,) by least squares over prompts, w_i the weight of the first token in the
pooled state (:func:`length_weight`: 1 / T_i under mean pooling, T_i the prompt's tokens, so
B / T is the first-token outlier that mean pooling divides by the length; [T_i = 1] under
last-token pooling), r_i(l) what length does not explain. Per layer, in units of s(l) = the RMS norm of r(l):

* ``common`` c = |A| / s and ``first`` f = |B| / s, and ``directions``: coordinates of the
  unit directions of A(l) and B(l) at every layer whose Gram matrix is the real one's (its
  best approximation of rank :data:`MAX_RANK`): how A and B turn from layer to layer and
  how they lie to each other;
* ``noise_level`` and ``noise_slope``: the size of r with length, log(|r_i| / s) =
  level - slope log T_i by least squares (mean pooling averages T_i tokens, so a longer
  prompt's own part is smaller and its trajectory follows A more closely);
* ``norm``: the RMS norm of h(l) over that of h(0);
* ``rho``: the persistence of r, the mean over prompts of cos(r_i(l-1), r_i(l));
* ``shares``: for each kind of key two prompts can share (:func:`prompt_keys`: a sentence
  frame, a reasoning template, an item, a lexical base word, a homograph pair's word, a
  homograph's context with its control's, the last word under last-token pooling), the
  share w_k(l) of r's variance that the prompts holding one key have in common: the
  coefficient of "shares key k" in the least-squares regression over prompt pairs of
  cos(r_i(l), r_j(l)) on an intercept, one indicator per kind of key, and two nuisance
  indicators (same category, same family; estimated, not kept: a category's or a family's
  shared part is what the claims are about). Clipped to [0, 1];
* ``alpha``: the slope of r's covariance spectrum (the mean over layers of the log-log slope
  of its top 60 eigenvalues).

Two shares are then tuned so that the source built on the fit shows two hazards at the
model's strength (:mod:`lamina.trajectory.fit`).

``rotary``: whether every two prompts whose last-token states share their last word have
delta(0) = 0 (no position signal at layer 0, as with rotary position embeddings; measured,
not assumed). The source has ``n_layers`` (12) blocks: its layer l is the real layer nearest
to the same depth, round(l L_real / n_layers); every per-layer value (rho too: between the
sampled layers) is taken there.

:func:`fit_background` fits one pooling; :func:`lamina.trajectory.fit.fit_model` extracts a
model's states for paper 1's prompt tables, fits both poolings and tunes them
(``python -m lamina.trajectory.fit MODEL`` prints the result, as
:mod:`lamina.trajectory.fitted` holds it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "KEY_KINDS",
    "Background",
    "fit_background",
    "layer_fit",
    "length_weight",
    "prompt_keys",
    "sampled_layers",
    "same_key",
    "words",
]

KEY_KINDS = ("frame", "template", "item", "base", "pair", "context", "last")


def words(text: str) -> list[str]:
    """Lower-case words (letters, digits, apostrophes) of ``text``."""
    return re.findall(r"[a-z0-9']+", str(text).lower())


def _col(table: pd.DataFrame, name: str) -> np.ndarray:
    """(n,) column ``name`` as str ("" where missing or absent)."""
    if name not in table:
        return np.full(len(table), "", dtype=object).astype(str)
    return np.array(["" if pd.isna(v) else str(v) for v in table[name]])


def prompt_keys(table: pd.DataFrame, pool: str) -> dict[str, np.ndarray]:
    """The keys each prompt holds, per kind of :data:`KEY_KINDS`: (n,) str, "" for none.

    frame "frame:<frame>" (a sentence frame shared by several prompts: ``frame`` column);
    template "template:<family>:<subtype>" (reasoning and analogy prompts of one subtype share
    a template); item "item:<category>:<item>" (an item's prompts across frames); base
    "base:<base>" (a lexical base word's variants); pair "<role>:<pair_id>" (the two contexts
    of a homograph pair share the homograph, a control pair its control word; under
    ``pool`` "last" only where that word is not the last: then it is ``last``'s); context
    "ctx:<pair_id>:<sense>" (a homograph's context and its matched control's: one sentence
    with one word changed); last "last:<word>" (``pool`` "last" only, rows of a pair only: the
    last word, the token whose state last-token pooling reads)."""
    t = table.reset_index(drop=True)
    n = len(t)
    out = {k: np.full(n, "", dtype=object) for k in KEY_KINDS}
    fam, frame, sub = _col(t, "family"), _col(t, "frame"), _col(t, "subtype")
    out["frame"] = np.where(frame != "", "frame:" + frame, "")
    out["template"] = np.where((sub != "") & (frame == ""), "template:" + fam + ":" + sub, "")
    cat, item, base = _col(t, "category"), _col(t, "item"), _col(t, "base")
    out["item"] = np.where(item != "", "item:" + cat + ":" + item, "")
    out["base"] = np.where((base != "") & (item == ""), "base:" + base, "")
    role, pid, sense = _col(t, "role"), _col(t, "pair_id"), _col(t, "sense")
    paired = (role != "") & (pid != "")
    last_word = np.array([(words(p) or [""])[-1] for p in t["prompt"]])
    if "word_last" in t and pool == "last":
        paired &= ~t["word_last"].fillna(False).astype(bool).to_numpy()
    out["pair"] = np.where(paired, role + ":" + pid, "")
    out["context"] = np.where((pid != "") & (sense != "") & (role != ""),
                              "ctx:" + pid + ":" + sense, "")
    out["last"] = (np.where(pid != "", "last:" + last_word, "") if pool == "last"
                   else np.full(n, "", dtype=object))
    return {k: np.broadcast_to(np.asarray(v, dtype=object), (n,)).astype(str)
            for k, v in out.items()}


def same_key(keys: np.ndarray) -> np.ndarray:
    """(n, n) bool: prompts i != j holding the same non-empty key."""
    k = np.asarray(keys).astype(str)
    m = (k[:, None] == k[None, :]) & (k[:, None] != "")
    np.fill_diagonal(m, False)
    return m


@dataclass(frozen=True)
class Background:
    """Fitted background of one pooling (module docstring). Per-layer values are tuples of
    L+1 floats (l = 0..L; ``rho[0]`` unused); ``directions``: 2(L+1) rows of R coordinates,
    the unit directions of A(0..L) then B(0..L) (their Gram matrix is the real one's);
    ``shares`` pairs each kind of
    key with its per-layer share; ``alpha`` the spectrum's slope; ``tokens_per_word`` the real
    tokenizer's median tokens per whitespace word; ``rotary``: delta(0) = 0 for prompts
    sharing their last word (last-token pooling)."""

    pool: str
    common: tuple[float, ...]
    first: tuple[float, ...]
    noise_level: tuple[float, ...]
    noise_slope: tuple[float, ...]
    directions: tuple[tuple[float, ...], ...]
    rho: tuple[float, ...]
    norm: tuple[float, ...]
    shares: tuple[tuple[str, tuple[float, ...]], ...]
    alpha: float
    tokens_per_word: float
    rotary: bool = False
    d_model: int = 128
    source: str = ""

    @property
    def n_layers(self) -> int:
        return len(self.common) - 1

    def fixed(self) -> tuple[np.ndarray, np.ndarray]:
        """(A (L+1, R), B (L+1, R)): the unit directions of A and B in R coordinates."""
        v = np.asarray(self.directions, dtype=float)
        return v[: self.n_layers + 1], v[self.n_layers + 1 :]

    def share(self, kind: str) -> np.ndarray:
        """(L+1,) the share of key kind ``kind`` (zeros when not fitted)."""
        return np.asarray(dict(self.shares).get(kind, (0.0,) * len(self.common)), dtype=float)


def length_weight(n_tokens: Any, pool: str) -> np.ndarray:
    """(n,) the weight of the first-token direction in each prompt's pooled state: 1 / T_i
    under mean pooling (the first token is one of T_i averaged), [T_i = 1] under last-token
    pooling (the last token is the first only in a one-token prompt)."""
    tok = np.asarray(n_tokens, dtype=float)
    return 1.0 / tok if pool == "mean" else (tok == 1).astype(float)


def layer_fit(x: np.ndarray, inv_t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A (d,), B (d,), R (n, d)) at one layer: x (n, d) = A + B / T_i + R_i by least squares
    over prompts (inv_t (n,) = 1 / T_i; B = 0 when every T_i is equal)."""
    if np.ptp(inv_t) == 0:
        a = x.mean(0)
        return a, np.zeros_like(a), x - a
    X = np.column_stack([np.ones_like(inv_t), inv_t])  # (n, 2)
    coef = np.linalg.lstsq(X, x, rcond=None)[0]  # (2, d)
    return coef[0], coef[1], x - X @ coef


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True).clip(1e-30)


def _strata(table: pd.DataFrame) -> np.ndarray:
    """(n, n) int stratum of each prompt pair: its unordered pair of families and whether the
    two share a category (the comparison a key's pairs are matched on)."""
    fam = _col(table, "family")
    _, f = np.unique(fam, return_inverse=True)
    lo, hi = np.minimum(f[:, None], f[None, :]), np.maximum(f[:, None], f[None, :])
    cat = same_key(_col(table, "category")).astype(int)
    return (lo * (f.max() + 1) + hi) * 2 + cat


def _shares(g: np.ndarray, keys: dict[str, np.ndarray], strata: np.ndarray) -> dict[str, float]:
    """Per kind of key: the mean of the pair cosines g (n, n) over pairs sharing only that
    kind's key, minus the mean over pairs sharing no key in the same stratum
    (:func:`_strata`), weighted by the first's count per stratum (module docstring)."""
    shared = np.sum(list(keys.values()), axis=0)  # (n, n) kinds of key shared
    none = shared == 0
    np.fill_diagonal(none, False)
    out = {}
    for kind, same in keys.items():
        only = same & (shared == 1)
        num = den = 0.0
        for s in np.unique(strata[only]):
            base = none & (strata == s)
            if base.any():
                k = only & (strata == s)
                num += k.sum() * (g[k].mean() - g[base].mean())
                den += k.sum()
        if den:
            out[kind] = float(np.clip(num / den, 0.0, 1.0))
    return out


def _delta0_zero(x0: np.ndarray, table: pd.DataFrame) -> bool:
    """Whether every two prompts of two or more words with the same last word have identical
    normalised layer-0 states (x0 (n, d)): delta(0) = 0, no position signal (rotary). (A
    one-word prompt's word is its first token, which tokenizers often spell differently.)"""
    long = np.array([len(words(p)) > 1 for p in table["prompt"]])
    same = same_key(prompt_keys(table, "last")["last"]) & long[:, None] & long[None, :]
    if not same.any():
        return False
    u = _unit(x0)
    i, j = np.nonzero(np.triu(same))
    return bool(np.all(np.linalg.norm(u[i] - u[j], axis=1) < 1e-4))


def fit_background(
    states: np.ndarray, table: pd.DataFrame, n_tokens: Any, pool: str,
    n_layers: int = 12, source: str = "",
) -> Background:  # fmt: skip
    """Fit :class:`Background` (module docstring) to pooled real states (n, L_real+1, d) of
    the rows of ``table`` (columns ``prompt`` and, where present, ``family``, ``category``,
    ``item``, ``base``, ``frame``, ``subtype``, ``role``, ``pair_id``, ``sense``,
    ``word_last``), with ``n_tokens`` (n,) tokens each, pooled by ``pool`` ("mean" or
    "last"); per-layer values interpolated onto ``n_layers`` + 1 layers by relative depth."""
    x = np.asarray(states, dtype=np.float64)
    t = table.reset_index(drop=True)
    if x.ndim != 3 or x.shape[0] != len(t) or len(t) < 8:
        raise ValueError(f"fit_background needs states (n, L+1, d) for n >= 8 rows of the "
                         f"table; got {x.shape} for {len(t)} rows")
    tok = np.asarray(n_tokens, dtype=float)
    if tok.shape != (len(t),) or np.any(tok < 1):
        raise ValueError("n_tokens must give every prompt's number of tokens (>= 1)")
    keys = {k: same_key(v) for k, v in prompt_keys(t, pool).items()}
    strata = _strata(t)
    picked = sampled_layers(x.shape[1] - 1, n_layers)
    m = len(picked)
    per: dict[str, np.ndarray] = {k: np.zeros(m) for k in
                                  ("common", "first", "rho", "norm", "alpha", "level", "slope")}
    share = {k: np.zeros(m) for k in KEY_KINDS}
    dirs = np.zeros((2 * m, x.shape[2]))
    prev_u = None
    for j, layer in enumerate(picked):
        a, b, r = layer_fit(x[:, layer], length_weight(tok, pool))
        s = float(np.sqrt(np.mean(np.sum(r**2, axis=1))))
        per["common"][j], per["first"][j] = np.linalg.norm(a) / s, np.linalg.norm(b) / s
        size = np.polyfit(np.log(tok), np.log(np.linalg.norm(r, axis=1).clip(1e-30) / s), 1)
        per["slope"][j], per["level"][j] = -size[0], size[1]
        dirs[j], dirs[m + j] = _unit(a), _unit(b)
        u = _unit(r)
        if prev_u is not None:
            per["rho"][j] = float(np.mean(np.sum(prev_u * u, axis=1)))
        prev_u = u
        for k, v in _shares(u @ u.T, keys, strata).items():
            share[k][j] = v
        lam = np.linalg.svd(r - r.mean(0), compute_uv=False) ** 2
        k60 = np.arange(1, min(61, len(lam)) + 1)
        per["alpha"][j] = -np.polyfit(np.log(k60), np.log(lam[: len(k60)].clip(1e-30)), 1)[0]
        per["norm"][j] = float(np.sqrt(np.mean(np.sum(x[:, layer] ** 2, axis=1))))
    per["rho"][0] = per["rho"][1]
    rotary = pool == "last" and _delta0_zero(x[:, 0], t)
    if rotary:  # layer 0 is the last token's embedding: no length term, the last word alone
        per["first"][0] = per["level"][0] = per["slope"][0] = 0.0
        dirs[m] = 0.0
        share = {k: np.where(np.arange(m) == 0, float(k == "last"), v) for k, v in share.items()}
    nwords = np.array([max(len(str(p).split()), 1) for p in t["prompt"]])

    def r4(v: Any) -> tuple[float, ...]:
        return tuple(float(round(y, 4)) for y in np.asarray(v, dtype=float))

    return Background(
        pool=pool, common=r4(per["common"]), first=r4(per["first"]),
        noise_level=r4(per["level"]), noise_slope=r4(per["slope"]),
        directions=tuple(r4(row) for row in _coordinates(dirs)),
        rho=r4(np.clip(per["rho"], 0.0, 0.999)), norm=r4(per["norm"] / per["norm"][0]),
        shares=tuple((k, r4(v)) for k, v in share.items() if np.any(v > 0)),
        alpha=round(float(per["alpha"].mean()), 4),
        tokens_per_word=round(float(np.median(tok / nwords)), 4), rotary=rotary, source=source,
    )


MAX_RANK = 8  # coordinates kept for the fixed directions


def _coordinates(dirs: np.ndarray) -> np.ndarray:
    """(k, R) coordinates of k unit vectors (k, d) (zero rows allowed) whose Gram matrix is
    the best rank-R approximation of theirs (R <= :data:`MAX_RANK`, eigenvalues above 1e-3 of
    the largest), rows renormalised to unit length."""
    lam, vec = np.linalg.eigh(dirs @ dirs.T)
    order = np.argsort(lam)[::-1][:MAX_RANK]
    order = order[lam[order] > 1e-3 * lam[order[0]]]
    c = vec[:, order] * np.sqrt(lam[order])
    n = np.linalg.norm(c, axis=1, keepdims=True)
    return np.where(n > 1e-12, c / np.maximum(n, 1e-12), 0.0)


def sampled_layers(n_real: int, n_layers: int = 12) -> np.ndarray:
    """(n_layers + 1,) the real layers (of 0..n_real) a source of ``n_layers`` blocks takes:
    round(l n_real / n_layers)."""
    return np.rint(np.arange(n_layers + 1) * n_real / n_layers).astype(int)
