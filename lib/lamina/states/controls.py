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


def random_embeddings(states: States, seed: Seed = None) -> np.ndarray:
    """Moment-matched Gaussian states (a state-level stand-in, not paper 1's control).

    Paper 1's random-embedding control feeds random input embeddings through the model; that
    is :func:`random_input_states`. This draw is i.i.d. over prompts, so every label effect
    vanishes under it by construction; lamina uses it only where no model exists.

    For each layer l, with mu_l = mean_i h_i(l) and Sigma_l = X_l^T X_l / (n-1), X_l the (n, d)
    centred states: out_i(l) ~ N(mu_l, Sigma_l), i.i.d. over prompts and independent across layers.
    Sampled exactly without forming Sigma_l when n <= d, as mu_l + z X_l / sqrt(n-1) with
    z ~ N(0, I_n) (cost O(n^2 d) per layer); otherwise via eigh(Sigma_l) = V diag(lam) V^T as
    mu_l + z diag(sqrt(lam)) V^T with z ~ N(0, I_d) (cost O(d^3) per layer). Rank of Sigma_l
    (<= n-1) is preserved.

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


def random_input_states(
    model: torch.nn.Module, n_tokens: Any, seed: int = 0, batch_size: int = 16
) -> list[np.ndarray]:
    """Random-embedding control (paper 1): random input embeddings fed through the model.

    For prompt i with T_i = n_tokens[i] tokens, inputs e_t ~ N(mu, diag(sigma^2)) i.i.d. over
    positions, with mu and sigma the per-dimension mean and standard deviation of the model's
    token-embedding matrix (moment matching); they replace the token embeddings (the model
    still adds its position embeddings), in the model's dtype. Layer 0 is the first block's
    input, layer l the residual stream after block l before any final norm (the convention of
    ``lamina.extract``). The draws are made prompt by prompt, in order (so they do not depend
    on ``batch_size``); prompts of similar length then run ``batch_size`` at a time, padded on
    the right and masked (a padded position is never attended to by a real one).

    model: a Hugging Face model; n_tokens: (n,) ints >= 1  ->  list of n float32 arrays
    (L+1, T_i, d_model). Deterministic in ``seed``.
    """
    import torch

    sizes = [int(t) for t in np.asarray(n_tokens).ravel()]
    if not sizes or min(sizes) < 1:
        raise ValueError(f"n_tokens must be positive integers; got {sizes[:5]}...")
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    adapter = get_adapter(model)
    blocks = adapter.block_list(model)
    weight = weight_of(input_embeddings(model)).detach().float().cpu()  # (vocab, d)
    mu, sd = weight.mean(0), weight.std(0)
    param = next(model.parameters())
    gen = torch.Generator().manual_seed(int(seed))
    draws = [mu + sd * torch.randn((t, weight.shape[1]), generator=gen) for t in sizes]
    names = ["block.0.in", *[f"block.{i}.out" for i in range(len(blocks))]]  # layers 0..L
    out: list[np.ndarray] = [np.empty(0)] * len(sizes)
    order = np.argsort(sizes, kind="stable")
    with hooks.capture(model, names) as grabbed, torch.inference_mode():
        for start in range(0, len(order), int(batch_size)):
            rows = order[start : start + int(batch_size)]
            T = max(sizes[i] for i in rows)
            e = torch.zeros((len(rows), T, weight.shape[1]))  # (batch, T, d_model)
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
