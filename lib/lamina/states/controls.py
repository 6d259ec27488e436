"""Null controls for trajectory geometry: shuffled layers, moment-matched random states,
a randomly initialised model of the same architecture, and permuted labels.

``states`` follow the shared convention (n, L+1, d): n prompts, L+1 layer boundaries, width d.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np

from lamina.core.arrays import Labels, to_numpy
from lamina.core.types import States
from lamina.sources.models import get_adapter, input_embeddings, weight_of
from lamina.states import hooks

if TYPE_CHECKING:
    import torch

__all__ = [
    "permute_labels",
    "random_embeddings",
    "random_init_like",
    "random_input_states",
    "random_vocabulary",
    "shuffle_layers",
]

Seed = int | np.random.Generator | None


def _states(states: Any) -> np.ndarray:
    arr = to_numpy(states, "states")
    if arr.ndim != 3 or min(arr.shape) < 1:
        raise ValueError(f"states must have shape (n, L+1, d); got shape {arr.shape}")
    return arr


def shuffle_layers(states: States, seed: Seed = None) -> np.ndarray:
    """Shuffled-layers control: an independent random permutation of the layer order of each trajectory.

    out[i, l] = states[i, pi_i(l)], with pi_i a uniform random permutation of 0..L drawn
    independently for each prompt i. Each trajectory visits the same points in a random order, so
    per-state statistics are kept and the ordering (length, curvature, SIM) is destroyed.

    states: (n, L+1, d)  ->  (n, L+1, d), same dtype. seed: int, Generator or None.
    """
    x = _states(states)
    rng = np.random.default_rng(seed)
    perm = np.argsort(rng.random(x.shape[:2]), axis=1)
    return np.take_along_axis(x, perm[:, :, None], axis=1)


def random_embeddings(states: States, seed: Seed = None, units: Labels | None = None) -> np.ndarray:
    """Moment-matched Gaussian states (a state-level stand-in, not paper 1's control).

    Paper 1's random-embedding control feeds random input embeddings through the model; that
    is :func:`random_input_states`, whose random vocabulary gives identical tokens identical
    inputs. This stand-in is for sources without a model.

    ``units`` None: for each layer l, with mu_l = mean_i h_i(l) and Sigma_l = X_l^T X_l / (n-1),
    X_l the (n, d) centred states: out_i(l) ~ N(mu_l, Sigma_l), i.i.d. over prompts and
    independent across layers, so every label effect vanishes by construction. Sampled exactly
    without forming Sigma_l when n <= d, as mu_l + z X_l / sqrt(n-1) with z ~ N(0, I_n) (cost
    O(n^2 d) per layer); otherwise via eigh(Sigma_l) = V diag(lam) V^T as mu_l + z diag(sqrt(lam))
    V^T with z ~ N(0, I_d) (cost O(d^3) per layer). Rank of Sigma_l (<= n-1) is preserved.

    ``units`` (n,) labels (the state-level analogue of shared tokens: the item of a prompt, the
    base word of a lexical variant, the pair of a homograph's two contexts): the draws are
    shared within a unit. With M_l the (U, d) centred unit means and R_l the (n, d) residuals
    from them, out_i(l) = mu_l + a_u(i) M_l / sqrt(U-1) + e_i R_l / sqrt(n-U), a ~ N(0, I_U) one
    draw per unit (shared by its prompts), e ~ N(0, I_n) per prompt (the second term omitted
    when every prompt is its own unit). The between-unit and within-unit covariances are kept;
    any structure across units (a category of items) is not, unless it lives in what the units
    share: the control can fail. Cost O(n^2 d) per layer.

    states: (n, L+1, d), n >= 2  ->  (n, L+1, d), dtype of the input (float64 for integer input).
    """
    x = _states(states)
    n, m, d = x.shape
    if n < 2:
        raise ValueError(
            f"random_embeddings needs at least 2 prompts to estimate a covariance; got {n}"
        )
    rng = np.random.default_rng(seed)
    dtype = x.dtype if np.issubdtype(x.dtype, np.floating) else np.float64
    if units is not None:
        return _unit_shared(x, _unit_index(units, n), rng).astype(dtype, copy=False)
    out = np.empty((n, m, d), dtype=dtype)
    for layer in range(m):
        h = np.asarray(x[:, layer], dtype=np.float64)
        mu = h.mean(axis=0)
        xc = h - mu
        if n <= d:
            sample = rng.standard_normal((n, n)) @ xc / np.sqrt(n - 1)
        else:
            lam, vec = np.linalg.eigh(xc.T @ xc / (n - 1))
            root = vec * np.sqrt(np.clip(lam, 0.0, None))
            sample = rng.standard_normal((n, d)) @ root.T
        out[:, layer] = mu + sample
    return out


def _unit_index(units: Labels, n: int) -> np.ndarray:
    """(n,) int unit index 0..U-1 of each prompt, in order of first appearance; U >= 2."""
    lab = np.asarray(units.detach().cpu().numpy() if hasattr(units, "detach") else units)
    if lab.shape != (n,):
        raise ValueError(f"units must have shape ({n},), one per prompt; got {lab.shape}")
    _, first, idx = np.unique(lab.astype(str), return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))  # relabel units by first appearance
    idx = order[idx.ravel()]
    if idx.max() < 1:
        raise ValueError("units must name at least 2 different units; got one for every prompt")
    return idx


def _unit_shared(x: np.ndarray, idx: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The ``units`` draw of :func:`random_embeddings`: x (n, m, d), idx (n,) unit of each
    prompt -> (n, m, d) float64."""
    n, m, d = x.shape
    n_units = int(idx.max()) + 1
    count = np.bincount(idx, minlength=n_units).astype(np.float64)  # (U,)
    out = np.empty((n, m, d))
    for layer in range(m):
        h = np.asarray(x[:, layer], dtype=np.float64)
        mu = h.mean(axis=0)
        means = np.zeros((n_units, d))
        np.add.at(means, idx, h)
        means /= count[:, None]  # (U, d)
        shared = rng.standard_normal((n_units, n_units)) @ (means - mu) / np.sqrt(n_units - 1)
        sample = shared[idx]  # (n, d): one draw per unit
        if n > n_units:
            resid = h - means[idx]  # (n, d)
            sample += rng.standard_normal((n, n)) @ resid / np.sqrt(n - n_units)
        out[:, layer] = mu + sample
    return out


def random_init_like(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Random-init control: the same Hugging Face architecture, freshly initialised.

    Returns ``type(model)(deepcopy(model.config))`` built under ``torch.manual_seed(seed)`` (inside
    ``torch.random.fork_rng``, so the caller's RNG state is untouched), moved to the model's
    device and dtype, in eval mode. Same shapes and config; no trained weights.

    model: a ``transformers.PreTrainedModel``  ->  a new model of the same class.
    """
    import torch

    config = getattr(model, "config", None)
    if config is None:
        raise ValueError(
            f"random_init_like needs a Hugging Face model with .config; got {type(model)}"
        )
    param = next(model.parameters())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        fresh = type(model)(copy.deepcopy(config))
    return fresh.to(device=param.device, dtype=param.dtype).eval()


def permute_labels(labels: Labels, seed: Seed = None) -> np.ndarray:
    """Label-permutation null: the same labels in a uniformly random order.

    out = labels[pi], pi a uniform random permutation of 0..n-1; category sizes are preserved.

    labels: (n,) any dtype  ->  (n,) numpy array. seed: int, Generator or None.
    """
    lab = np.asarray(labels.detach().cpu().numpy() if hasattr(labels, "detach") else labels)
    if lab.ndim != 1:
        raise ValueError(f"labels must be one-dimensional; got shape {lab.shape}")
    return lab[np.random.default_rng(seed).permutation(lab.shape[0])]


def random_vocabulary(model: torch.nn.Module, token_ids: Any, seed: int = 0) -> list[torch.Tensor]:
    """Random input embeddings for token sequences, one random vector per token id.

    e(t) = mu + sigma * z_t, z_t ~ N(0, I_d) drawn from a generator seeded by (seed, t), with mu
    and sigma the per-dimension mean and standard deviation of the model's token-embedding
    matrix (moment matching). The same token id gets the same vector in every prompt (a random
    vocabulary), and the draw of a token does not depend on the other prompts or on the
    vocabulary's size.

    token_ids: sequence of n non-empty integer sequences  ->  n float32 tensors (T_i, d_model).
    """
    import torch

    seqs = _token_lists(token_ids)
    weight = weight_of(input_embeddings(model)).detach().float().cpu()  # (vocab, d)
    mu, sd = weight.mean(0), weight.std(0)
    table: dict[int, torch.Tensor] = {}
    for tok in sorted({t for seq in seqs for t in seq}):
        z = np.random.default_rng([int(seed), tok]).standard_normal(weight.shape[1])
        table[tok] = mu + sd * torch.from_numpy(z.astype(np.float32))
    return [torch.stack([table[t] for t in seq]) for seq in seqs]


def _token_lists(token_ids: Any) -> list[list[int]]:
    """Validate token-id sequences: a clear error for lengths (the old interface), empty
    prompts or negative ids."""
    seqs = list(token_ids)
    if not seqs:
        raise ValueError("token_ids must hold at least one prompt's token ids; got none")
    out = []
    for i, seq in enumerate(seqs):
        if np.ndim(seq) != 1:
            raise ValueError(
                f"token_ids[{i}] must be a sequence of token ids (the random vocabulary shares "
                f"draws across prompts by token); got {seq!r}"
            )
        ids = [int(t) for t in np.asarray(seq).ravel()]
        if not ids or min(ids) < 0:
            raise ValueError(f"token_ids[{i}] must be non-empty, ids >= 0 (positive length); got {ids[:5]}")
        out.append(ids)
    return out


def random_input_states(
    model: torch.nn.Module, token_ids: Any, seed: int = 0, batch_size: int = 16
) -> list[np.ndarray]:
    """Random-embedding control (paper 1): random input embeddings fed through the model.

    Prompt i's tokens t_1..t_T are replaced by :func:`random_vocabulary`'s vectors e(t): a
    random embedding per token id, moment-matched to the model's embedding matrix and shared
    by every prompt that holds the token. What the learned embeddings carry is gone; what the
    prompts share token by token (an item word, a template, a homograph's two contexts) stays,
    so an effect that lives in token overlap survives and the control can fail. (Draws made
    independently per prompt would remove every category or pair effect by construction.)
    The model still adds its position embeddings. Layer 0 is the first block's input, layer l
    the residual stream after block l before any final norm (the convention of
    ``lamina.extract``). Prompts of similar length run ``batch_size`` at a time, padded on the
    right and masked (a padded position is never attended to by a real one); the result does
    not depend on ``batch_size``.

    model: a Hugging Face model; token_ids: n non-empty int sequences (T_i ids)  ->  list of n
    float32 arrays (L+1, T_i, d_model). Deterministic in ``seed``.
    """
    import torch

    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    draws = random_vocabulary(model, token_ids, seed)  # n x (T_i, d_model)
    sizes = [len(e) for e in draws]
    adapter = get_adapter(model)
    blocks = adapter.block_list(model)
    d_model = draws[0].shape[1]
    param = next(model.parameters())
    names = ["block.0.in", *[f"block.{i}.out" for i in range(len(blocks))]]  # layers 0..L
    out: list[np.ndarray] = [np.empty(0)] * len(sizes)
    order = np.argsort(sizes, kind="stable")
    with hooks.capture(model, names) as grabbed, torch.inference_mode():
        for start in range(0, len(order), int(batch_size)):
            rows = order[start : start + int(batch_size)]
            T = max(sizes[i] for i in rows)
            e = torch.zeros((len(rows), T, d_model))  # (batch, T, d_model)
            mask = torch.zeros((len(rows), T), dtype=torch.long)
            for r, i in enumerate(rows):
                e[r, : sizes[i]], mask[r, : sizes[i]] = draws[i], 1
            kw: dict[str, Any] = {"inputs_embeds": e.to(param.device, param.dtype)}
            kw["attention_mask"] = mask.to(param.device)
            if adapter.causal:
                kw["use_cache"] = False
            else:
                kw["token_type_ids"] = torch.zeros_like(mask, device=param.device)
            grabbed.clear()
            adapter.base(model)(**kw)
            states = torch.stack([grabbed[n] for n in names]).float().cpu()  # (L+1, b, T, d)
            for r, i in enumerate(rows):
                out[i] = states[:, r, : sizes[i]].numpy().copy()
    return out
