"""Trajectory geometry of layer-wise representations (paper 1), vectorised over prompts x layers.

Shared conventions. ``states`` is an array of shape (n, L+1, d): n prompts, layer 0 = embedding
output, layer l = residual stream after block l; h_i(l) is the d-vector of prompt i at layer l and
ĥ = h / ||h||_2 its L2-normalised version. Inputs may be numpy arrays or torch tensors of any float
dtype; they are processed in float64 chunks (torch tensors are first moved to CPU numpy), so float32
or bf16 inputs lose no further precision. Outputs are float64 numpy arrays. A quantity that is
undefined (zero-length step, zero-norm state, one-member category) is NaN, never 0.
The three-phase tools (fixed bands, change points) live in :mod:`lamina.trajectory.phases`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from lamina.core.arrays import Labels, to_numpy
from lamina.core.types import MeanProfile, PerPrompt, Profile, PromptStates, States

__all__ = [
    "Bifurcation",
    "bifurcation",
    "convergence_index",
    "convergence_index_per_prompt",
    "convergence_index_pooled",
    "curvature",
    "layerwise_cosine",
    "mean_curvature",
    "stability",
    "trajectory_length",
]

_CHUNK_BYTES = 4 * 2**20  # float64 working set per chunk of prompts (cache friendly)
_N_THREADS = 2


# ----------------------------------------------------------------------------- input handling
def _states(x: Any, name: str = "states", min_layers: int = 1) -> np.ndarray:
    arr = to_numpy(x, name)
    if arr.ndim != 3:
        raise ValueError(f"{name} must have shape (n, L+1, d); got shape {arr.shape}")
    n, m, d = arr.shape
    if n < 1 or d < 1 or m < min_layers:
        raise ValueError(
            f"{name} must have shape (n, L+1, d) with n >= 1, d >= 1 and at least "
            f"{min_layers} layers; got shape {arr.shape}"
        )
    return arr


def _same_shape(a: np.ndarray, b: np.ndarray, na: str, nb: str) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{na} and {nb} must have the same shape; got {a.shape} and {b.shape}")


def _labels(labels: Labels, n: int) -> tuple[np.ndarray, np.ndarray]:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(labels, torch.Tensor):
        labels = labels.detach().cpu().numpy()
    if isinstance(labels, str):
        raise TypeError(f"labels must be a sequence of labels, not the string {labels!r}")
    items = labels.tolist() if isinstance(labels, np.ndarray) else list(cast(Iterable[Any], labels))
    kinds = set()
    for i, v in enumerate(items):
        if v is None or (isinstance(v, float) and v != v):
            raise ValueError(f"labels[{i}] is {v!r}: every prompt needs a category")
        kinds.add(
            "bool"
            if isinstance(v, bool)
            else "number"
            if isinstance(v, int | float)
            else type(v).__name__
        )
    if len(kinds) > 1:
        raise TypeError(
            f"labels mix types {sorted(kinds)} (e.g. 0 and '0' would be merged); use one type"
        )
    lab = np.asarray(labels)
    if lab.ndim != 1:
        raise ValueError(f"labels must be one-dimensional; got shape {lab.shape}")
    if lab.shape[0] != n:
        raise ValueError(f"labels has length {lab.shape[0]} but states has n={n} prompts")
    uniq, inv = np.unique(lab, return_inverse=True)
    if uniq.size < 2:
        raise ValueError(f"labels must contain at least 2 categories; got {uniq.size}")
    return uniq, inv.reshape(-1)


def _per_prompt(fn: Callable[..., np.ndarray], *arrays: np.ndarray) -> np.ndarray:
    """Apply ``fn`` to float64 chunks of prompts (two threads) and concatenate along axis 0."""
    n, m, d = arrays[0].shape
    step = max(1, _CHUNK_BYTES // (m * d * 8))
    slices = [slice(i, min(i + step, n)) for i in range(0, n, step)]

    def run(s: slice) -> np.ndarray:
        return fn(*(np.asarray(a[s], dtype=np.float64) for a in arrays))

    if len(slices) == 1:
        return run(slices[0])
    with ThreadPoolExecutor(_N_THREADS) as pool:
        return np.concatenate(list(pool.map(run, slices)), axis=0)


def _norms(x: np.ndarray) -> np.ndarray:
    return np.sqrt(np.einsum("...d,...d->...", x, x))


def _cos(dots: np.ndarray, na: np.ndarray, nb: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        c = dots / (na * nb)
    c[(na == 0) | (nb == 0)] = np.nan
    return np.clip(c, -1.0, 1.0)


def _unit(h: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return h / _norms(h)[..., None]


# ----------------------------------------------------------------------------- per-prompt metrics
def trajectory_length(states: States, normalize: bool = False) -> PerPrompt:
    """Length of each trajectory: the sum of its step norms.

    length_i = sum_{l=0}^{L-1} || h_i(l+1) - h_i(l) ||_2 ,  with h replaced by ĥ = h/||h||_2
    when ``normalize=True`` (the released code's default).

    states: (n, L+1, d)  ->  (n,), in the units of the states (chord units of the unit sphere,
    each step in [0, 2], when normalised). Length scales linearly with the states.
    """
    x = _states(states, min_layers=2)

    def fn(h: np.ndarray) -> np.ndarray:
        if normalize:
            h = _unit(h)
        return _norms(h[:, 1:] - h[:, :-1]).sum(axis=1)

    return _per_prompt(fn, x)


def curvature(states: States) -> Profile:
    """Turning angle between consecutive steps of each trajectory.

    v(l) = h(l) - h(l-1)  (l = 1..L);  kappa(l) = arccos(clip(cos(v(l), v(l+1)), -1, 1))  (l = 1..L-1),
    with cos(a, b) = a·b / (||a|| ||b||).

    states: (n, L+1, d)  ->  (n, L-1), radians in [0, pi]; column j is kappa(j+1).
    A straight path gives 0, a right-angle staircase pi/2. A zero-length step (h(l) == h(l-1)
    exactly) has no direction: both angles that involve it are NaN, never 0.
    """
    x = _states(states, min_layers=3)

    def fn(h: np.ndarray) -> np.ndarray:
        v = h[:, 1:] - h[:, :-1]
        nv = _norms(v)
        dots = np.einsum("nld,nld->nl", v[:, :-1], v[:, 1:])
        return np.arccos(_cos(dots, nv[:, :-1], nv[:, 1:]))

    return _per_prompt(fn, x)


def mean_curvature(states: States) -> PerPrompt:
    """Mean turning angle of each trajectory.

    mean_kappa_i = nanmean_{l=1..L-1} kappa_i(l), with kappa from ``curvature`` (NaN angles at
    zero-length steps are skipped; a trajectory with no defined angle gives NaN).

    states: (n, L+1, d)  ->  (n,), radians in [0, pi].
    """
    k = curvature(states)
    out = np.full(k.shape[0], np.nan)
    ok = ~np.all(np.isnan(k), axis=1)
    out[ok] = np.nanmean(k[ok], axis=1)
    return out


def layerwise_cosine(states: States) -> Profile:
    """Layerwise similarity SIM: cosine between consecutive states of each trajectory.

    SIM(l) = cos(h(l), h(l+1)) = h(l)·h(l+1) / (||h(l)|| ||h(l+1)||),  l = 0..L-1.

    states: (n, L+1, d)  ->  (n, L), dimensionless in [-1, 1]; column l is SIM(l).
    A zero-norm state gives NaN.
    """
    x = _states(states, min_layers=2)

    def fn(h: np.ndarray) -> np.ndarray:
        nh = _norms(h)
        dots = np.einsum("nld,nld->nl", h[:, :-1], h[:, 1:])
        return _cos(dots, nh[:, :-1], nh[:, 1:])

    return _per_prompt(fn, x)


def stability(states_a: States, states_b: States) -> Profile:
    """Stability STAB: cosine between a prompt and its perturbation, layer by layer.

    STAB_i(l) = cos(h_{p_i}(l), h_{p'_i}(l)),  l = 0..L, where p'_i is a (lexical) perturbation of
    prompt p_i; row i of ``states_b`` is the perturbation of row i of ``states_a``.

    states_a, states_b: (n, L+1, d) each  ->  (n, L+1), dimensionless in [-1, 1].
    A zero-norm state gives NaN.
    """
    a = _states(states_a, "states_a")
    b = _states(states_b, "states_b")
    _same_shape(a, b, "states_a", "states_b")

    def fn(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return _cos(np.einsum("nld,nld->nl", x, y), _norms(x), _norms(y))

    return _per_prompt(fn, a, b)


# ----------------------------------------------------------------------------- convergence index
def _category_distance_sums(
    states: States, labels: Labels
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """S[l, i, k] = sum_{j in category k, j != i} ||ĥ_i(l) - ĥ_j(l)||, via per-layer Gram matrices."""
    x = _states(states)
    n, m, _ = x.shape
    uniq, inv = _labels(labels, n)
    finite = np.isfinite(x).all(axis=2)  # (n, L+1)
    if not finite.all():
        import warnings

        bad_prompts, bad_layers = np.nonzero(~finite)
        warnings.warn(
            f"states of prompt(s) {sorted(set(bad_prompts.tolist()))[:10]} are NaN or infinite at "
            f"layer(s) {sorted(set(bad_layers.tolist()))[:10]}: the convergence index is NaN "
            "at those layers for every category; drop those prompts first",
            RuntimeWarning,
            stacklevel=3,
        )
    onehot = np.zeros((n, uniq.size))
    onehot[np.arange(n), inv] = 1.0
    sums = np.empty((m, n, uniq.size))
    for layer in range(m):  # loop over layers only; pairs are one matrix product
        u = _unit(np.asarray(x[:, layer], dtype=np.float64))
        dist = np.sqrt(np.clip(2.0 - 2.0 * (u @ u.T), 0.0, None))  # ||a-b||^2 = 2 - 2 a·b
        np.fill_diagonal(dist, 0.0)
        sums[layer] = dist @ onehot
    return sums, uniq, inv


def _within_between(
    states: States, labels: Labels
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-prompt mean within- and between-category distances, (n, L+1) each."""
    sums, uniq, inv = _category_distance_sums(states, labels)
    n = inv.size
    size = np.bincount(inv, minlength=uniq.size)[inv]  # size of each prompt's category
    own = np.take_along_axis(sums, inv[None, :, None], axis=2)[..., 0]  # (L+1, n)
    other = sums.sum(axis=2) - own
    with np.errstate(divide="ignore", invalid="ignore"):
        within = (own / (size - 1)).T
        between = (other / (n - size)).T
    within[size == 1] = np.nan
    return within, between, uniq, inv


def convergence_index_per_prompt(states: States, labels: Labels) -> Profile:
    """Per-prompt convergence index, on L2-normalised states (the unit for bootstraps).

    CI_i(l) = mean_{j: y_j != y_i} ||ĥ_i(l) - ĥ_j(l)||  -  mean_{j: y_j = y_i, j != i} ||ĥ_i(l) - ĥ_j(l)||,
    l = 0..L, where y are the category labels. Pairwise distances come from Gram matrices,
    ||ĥ_i - ĥ_j||^2 = 2 - 2 ĥ_i·ĥ_j. The mean of CI_i over a category's members equals that
    category's ``convergence_index``.

    states: (n, L+1, d), labels: (n,) hashable  ->  (n, L+1), chord units of the unit sphere
    (distances in [0, 2]); positive = the prompt is closer to its own category than to the rest.
    A prompt alone in its category gives NaN. Fewer than 2 categories raises ValueError.
    """
    within, between, _, _ = _within_between(states, labels)
    return between - within


def convergence_index(states: States, labels: Labels) -> dict[Hashable, MeanProfile]:
    """Convergence index of each category, on L2-normalised states.

    CI_c(l) = D_between_c(l) - D_within_c(l), l = 0..L, where, for category c with members M_c
    (m_c = |M_c|) and the n - m_c non-members N_c,
      D_within_c(l)  = mean over pairs i != j in M_c of ||ĥ_i(l) - ĥ_j(l)||_2,
      D_between_c(l) = mean over i in M_c, j in N_c of ||ĥ_i(l) - ĥ_j(l)||_2.
    Pairwise distances come from Gram matrices, ||ĥ_i - ĥ_j||^2 = 2 - 2 ĥ_i·ĥ_j.

    states: (n, L+1, d), labels: (n,) hashable  ->  {label: (L+1,)}, chord units of the unit
    sphere (distances in [0, 2]); positive = the category is tighter than its distance to the rest.
    A category with one member gives NaN. Fewer than 2 categories raises ValueError.
    """
    within, between, uniq, inv = _within_between(states, labels)
    ci = between - within
    keys = [u.item() if isinstance(u, np.generic) else u for u in uniq]
    return {k: ci[inv == c].mean(axis=0) for c, k in enumerate(keys)}


def convergence_index_pooled(states: States, labels: Labels) -> MeanProfile:
    """Convergence index pooled over all categories, on L2-normalised states.

    CI_pooled(l) = mean over pairs i != j with y_i != y_j of ||ĥ_i(l) - ĥ_j(l)||
                 - mean over pairs i != j with y_i = y_j  of ||ĥ_i(l) - ĥ_j(l)||,  l = 0..L,
    i.e. every between-category pair and every within-category pair weighs equally (large
    categories weigh more than in the per-category index). Distances via Gram matrices,
    ||ĥ_i - ĥ_j||^2 = 2 - 2 ĥ_i·ĥ_j.

    states: (n, L+1, d), labels: (n,) hashable  ->  (L+1,), chord units of the unit sphere.
    NaN if every category has one member. Fewer than 2 categories raises ValueError.
    """
    sums, _, inv = _category_distance_sums(states, labels)
    n = inv.size
    own = np.take_along_axis(sums, inv[None, :, None], axis=2)[..., 0].sum(axis=1)
    other = sums.sum(axis=(1, 2)) - own
    counts = np.bincount(inv)
    n_within = float(np.sum(counts * (counts - 1)))
    n_between = float(n * n - np.sum(counts**2))
    with np.errstate(divide="ignore", invalid="ignore"):
        return other / n_between - own / n_within


# ----------------------------------------------------------------------------- bifurcation
@dataclass(frozen=True)
class Bifurcation:
    """Separation of one word in two contexts, layer by layer (see ``bifurcation``).

    delta: (n, L+1) or (L+1,); ratio, onset_layer, onset_fraction: (n,) or scalars.
    """

    delta: np.ndarray
    ratio: np.ndarray | float
    onset_layer: np.ndarray | int
    onset_fraction: np.ndarray | float
    threshold: float


def bifurcation(
    states_ctx1: States | PromptStates,
    states_ctx2: States | PromptStates,
    *,
    threshold: float = 0.1,
) -> Bifurcation:
    """Per-layer separation of one word (homograph) in two contexts, on normalised states.

    delta(l) = ||ĥ_1(l) - ĥ_2(l)||_2,  l = 0..L;   ratio = delta(L) / delta(0).
    Onset (reimplementation choice; the paper does not define it): with rise(l) = delta(l) - delta(0)
    and R = max_l rise(l), onset = the first layer l >= 1 with rise(l) >= threshold * R, if R > 0;
    otherwise -1 (no rise). onset_fraction = onset / L (NaN when onset is -1).

    states_ctx1, states_ctx2: (n, L+1, d) or (L+1, d), same shape -> ``Bifurcation`` with delta
    (n, L+1) or (L+1,) in chord units of the unit sphere ([0, 2]); ratio dimensionless (inf when
    delta(0) = 0 < delta(L), NaN when both are 0); onset_layer an int layer index.
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1]; got {threshold}")
    a, b = to_numpy(states_ctx1, "states_ctx1"), to_numpy(states_ctx2, "states_ctx2")
    single = a.ndim == 2
    if single:
        a = a[None]
        b = b[None] if b.ndim == 2 else b
    a = _states(a, "states_ctx1", min_layers=2)
    b = _states(b, "states_ctx2", min_layers=2)
    _same_shape(a, b, "states_ctx1", "states_ctx2")
    delta = _per_prompt(lambda x, y: _norms(_unit(x) - _unit(y)), a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = delta[:, -1] / delta[:, 0]
    rise = delta - delta[:, :1]
    total = np.nanmax(rise, axis=1)
    hit = (rise[:, 1:] >= threshold * total[:, None]) & (total[:, None] > 0)
    onset = np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, -1)
    n_blocks = delta.shape[1] - 1
    frac = np.where(onset >= 0, onset / n_blocks, np.nan)
    if single:
        return Bifurcation(delta[0], float(ratio[0]), int(onset[0]), float(frac[0]), threshold)
    return Bifurcation(delta, ratio, onset, frac, threshold)
