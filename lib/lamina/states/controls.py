"""Null controls for trajectory geometry: shuffled layers, random input embeddings (a random
vocabulary fed through the model), a randomly initialised model of the same architecture, and
permuted labels. (The known-answer sources' random-embedding control is their own random
vocabulary: :func:`lamina.trajectory.synthetic.control_states`.)

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


def shuffle_layers(
    states: States, seed: Seed = None, *, fixed: Any = (), groups: Labels | None = None
) -> np.ndarray:
    """Shuffled-layers control: a random permutation of the layer order of each trajectory.

    out[i, l] = states[i, pi_g(i)(l)], with pi_g a uniform random permutation of the layers
    not in ``fixed`` (those stay in place), drawn independently for each group g: each prompt
    its own group (``groups`` None), or one permutation shared by the prompts of a group
    (``groups`` (n,) labels, e.g. a homograph pair's two contexts and its control pair's, so
    that a distance between two of them still compares states of one layer). Each trajectory
    visits the same points in a random order, so per-state statistics are kept and the
    ordering (length, curvature, SIM) is destroyed. ``fixed`` keeps a baseline in place
    (e.g. the layer a ratio delta(L) / delta(base) divides by): shuffling it away would make
    delta(L) and delta(base) exchangeable, and the ratio's control could not fail.

    states: (n, L+1, d)  ->  (n, L+1, d), same dtype. seed: int, Generator or None.
    """
    x = _states(states)
    n, m = x.shape[:2]
    rng = np.random.default_rng(seed)
    keep = sorted({int(v) for v in fixed})
    if any(v < 0 or v >= m for v in keep):
        raise ValueError(f"fixed layers must lie in 0..{m - 1}; got {keep}")
    free = np.array([v for v in range(m) if v not in keep], dtype=int)
    if groups is None:
        inv, n_groups = np.arange(n), n
    else:
        g = np.asarray(groups.detach().cpu().numpy() if hasattr(groups, "detach") else groups)
        if g.shape != (n,):
            raise ValueError(f"groups must have shape ({n},), one per prompt; got {g.shape}")
        _, inv = np.unique(g.astype(str), return_inverse=True)
        inv = inv.reshape(n)
        n_groups = int(inv.max()) + 1
    perm = np.tile(np.arange(m), (n_groups, 1))
    perm[:, free] = free[np.argsort(rng.random((n_groups, free.size)), axis=1)]
    return np.take_along_axis(x, perm[inv][:, :, None], axis=1)


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
