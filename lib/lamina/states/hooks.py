"""One hook grammar: named points inside a model, and context managers that hook them.

Every forward hook in lamina goes through this module (a test fails on a bare
``register_*_hook`` call anywhere else in ``lib/``), in the spirit of TransformerLens' hook
points and tuned-lens' context managers: a hook is attached for the duration of a ``with``
block and always removed on exit, also when the block or the hook raises.

Point names, resolved per architecture through the adapter table of
:mod:`lamina.sources.models` (``i`` counts blocks from 0 to L-1; every tensor is
(batch, T, width) in the model's dtype):

=========================  =====================================================================
``embed``                  output of the token-embedding lookup, (batch, T, d_model): before
                           position embeddings (GPT-2, BERT); Gemma 3's includes its √d scale
``block.{i}.in``           the residual stream entering block i, (batch, T, d_model);
                           ``block.0.in`` is layer 0 of :func:`lamina.states.extract.extract`
``block.{i}.out``          the residual stream leaving block i, before any final norm
                           (layer i+1 of ``extract``), (batch, T, d_model)
``block.{i}.attn.in``      the tensor the attention's read maps (Q, K, V) take in: the normed
                           stream for a pre-LN block, (batch, T, d_model)
``block.{i}.mlp.in``       the tensor the MLP's read maps (up, gate) take in, (batch, T, d_model)
``block.{i}.{role}.in``    input of one linear map of the adapter's ``read``/``write`` table
                           (``q k v mlp_gate mlp_up attn_out mlp_out``; GPT-2: ``qkv mlp_up
                           attn_out mlp_out``, with ``q k v`` naming the fused ``c_attn``),
                           (batch, T, d_in)
``block.{i}.{role}.out``   its output, (batch, T, d_out) (GPT-2's ``q``/``k``/``v``/``qkv``: the
                           fused (batch, T, 3 d_model))
``final_norm``             output of the final norm (causal LMs): Hugging Face's last
                           ``hidden_states`` entry, (batch, T, d_model)
``unembed.in``             input of the unembedding (causal LMs), (batch, T, d_model)
``unembed``                the logits, (batch, T, vocab)
=========================  =====================================================================

A *hook function* takes the tensor at its point and returns ``None`` (leave it) or a tensor
of the same shape that replaces it downstream. For a block the tensor is its hidden state
(the first positional argument or ``hidden_states=``; the first element of a tuple output):
the rest of the call and of the output is passed through unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from lamina.sources.models import ArchAdapter, get_adapter, hf_config

__all__ = [
    "HookFn",
    "Point",
    "attached",
    "capture",
    "map_point",
    "patch",
    "points",
    "resolve",
]

HookFn = Callable[[torch.Tensor], "torch.Tensor | None"]
Side = Literal["in", "out"]
_SIDES: dict[str, Side] = {"in": "in", "out": "out"}

_BLOCK = re.compile(r"block\.(0|[1-9][0-9]*)\.(.+)")


@dataclass(frozen=True)
class Point:
    """A resolved hook point: ``module`` and which side of it (``in``: its input, hooked
    with a forward pre-hook; ``out``: its output, hooked with a forward hook)."""

    name: str
    module: nn.Module
    side: Side


def _roles(adapter: ArchAdapter) -> dict[str, str]:
    """Role name -> dotted path inside a block, from the adapter's read/write table; the
    fused Q/K/V module (GPT-2's ``c_attn``) is also reachable as ``q``, ``k`` and ``v``."""
    roles = {**adapter.read, **adapter.write}
    if adapter.fused_qkv is not None:
        roles.update(dict.fromkeys(("q", "k", "v"), adapter.fused_qkv))
    return roles


def _token_embedding(model: nn.Module, adapter: ArchAdapter) -> nn.Module:
    embed = adapter.embedding_module(model)
    words = getattr(embed, "word_embeddings", None)  # BERT: the embeddings block holds the table
    return words if isinstance(words, nn.Module) else embed


def _grammar(model: nn.Module, adapter: ArchAdapter) -> str:
    """The valid point names of ``model``, as patterns, for error messages."""
    n = adapter.n_layers(model)
    names = ["embed", "block.{i}.in", "block.{i}.out", "block.{i}.attn.in", "block.{i}.mlp.in"]
    names += ["block.{i}.{role}.in", "block.{i}.{role}.out"]
    if adapter.final_norm_module(model) is not None:
        names.append("final_norm")
    if adapter.unembedding_module(model) is not None:
        names += ["unembed.in", "unembed"]
    roles = ", ".join(sorted(_roles(adapter)))
    return f"{', '.join(names)}; with i in 0..{n - 1} and role in ({roles})"


def _block_point(adapter: ArchAdapter, block: nn.Module, rest: str) -> tuple[nn.Module, Side] | None:
    """The (module, side) that ``block.{i}.<rest>`` names inside ``block``, or None."""
    if rest in _SIDES:
        return block, _SIDES[rest]
    part, _, side = rest.rpartition(".")
    if side not in _SIDES:
        return None
    shared = {"attn": adapter.fused_qkv or adapter.read.get("q"), "mlp": adapter.read.get("mlp_up")}
    path = shared.get(part) if side == "in" else None
    path = path or _roles(adapter).get(part)
    return None if path is None else (block.get_submodule(path), _SIDES[side])


def resolve(model: nn.Module, name: str) -> Point:
    """The module and side that point ``name`` names in ``model`` (grammar: module docstring).

    Raises ``ValueError`` naming ``name`` and listing the valid points for an unknown name,
    a block index outside 0..L-1, or a point the model lacks (``final_norm``/``unembed`` of
    an encoder); ``TypeError`` for a name that is not a str.
    """
    if not isinstance(name, str):
        raise TypeError(f"a hook point is a str such as 'block.0.out'; got {name!r}")
    adapter = get_adapter(model)
    found: tuple[nn.Module | None, Side] | None = None
    if name == "embed":
        found = (_token_embedding(model, adapter), "out")
    elif name == "final_norm":
        found = (adapter.final_norm_module(model), "out")
    elif name in ("unembed", "unembed.in"):
        found = (adapter.unembedding_module(model), "in" if name.endswith(".in") else "out")
    elif (match := _BLOCK.fullmatch(name)) is not None:
        blocks = adapter.block_list(model)
        i = int(match.group(1))
        if i < len(blocks):
            found = _block_point(adapter, blocks[i], match.group(2))
    if found is None or found[0] is None:
        raise ValueError(
            f"unknown hook point {name!r} for this {hf_config(model).model_type} model; "
            f"valid points: {_grammar(model, adapter)}"
        )
    return Point(name, found[0], found[1])


def points(model: nn.Module) -> list[str]:
    """Every valid point name of ``model``: the embedding, each block in turn, the head."""
    adapter = get_adapter(model)
    roles = sorted(_roles(adapter))
    names = ["embed"]
    for i in range(adapter.n_layers(model)):
        names += [f"block.{i}.in", f"block.{i}.attn.in", f"block.{i}.mlp.in"]
        names += [f"block.{i}.{r}.{s}" for r in roles for s in ("in", "out")]
        names.append(f"block.{i}.out")
    if adapter.final_norm_module(model) is not None:
        names.append("final_norm")
    if adapter.unembedding_module(model) is not None:
        names += ["unembed.in", "unembed"]
    return names


def map_point(layer: int | None, role: str, side: Side) -> str:
    """The point of one linear map's input or output: ``map_point(3, "q", "in")`` ->
    ``"block.3.q.in"``; a map outside the blocks (``layer=None``) is named by its role
    (``map_point(None, "unembed", "in")`` -> ``"unembed.in"``; its output: ``"unembed"``)."""
    if layer is None:
        return role if side == "out" else f"{role}.in"
    return f"block.{layer}.{role}.{side}"


def _in_hook(fn: HookFn) -> Callable[..., Any]:
    """A pre-hook passing ``fn`` the module's input: its first positional argument, else its
    ``hidden_states=`` (else only) keyword argument."""

    def hook(module: nn.Module, args: tuple, kwargs: dict) -> Any:
        if not args and not kwargs:
            raise TypeError(f"{type(module).__name__} was called without an input to hook")
        key = None if args else ("hidden_states" if "hidden_states" in kwargs else next(iter(kwargs)))
        new = fn(args[0] if key is None else kwargs[key])
        if new is None:
            return None
        return ((new, *args[1:]), kwargs) if key is None else (args, {**kwargs, key: new})

    return hook


def _out_hook(fn: HookFn) -> Callable[..., Any]:
    """A forward hook passing ``fn`` the module's output (the first element of a tuple)."""

    def hook(module: nn.Module, args: tuple, output: Any) -> Any:
        new = fn(output[0] if isinstance(output, tuple) else output)
        if new is None:
            return None
        return (new, *output[1:]) if isinstance(output, tuple) else new

    return hook


@contextmanager
def attached(
    model: nn.Module,
    hooks: Mapping[str, Callable[..., Any]] | Iterable[tuple[str, Callable[..., Any]]],
    *,
    raw: bool = False,
) -> Iterator[None]:
    """Attach ``hooks`` ({point: hook function}, or (point, function) pairs to hook one point
    more than once) for the duration of the ``with`` block; every hook is removed on exit,
    also when the block or a hook raises. All names are resolved before any hook is attached,
    so an unknown point attaches nothing. Hooks on one module run in the order given.

    A hook function maps the tensor at its point, (batch, T, width), to ``None`` or its
    replacement (module docstring). ``raw=True`` passes torch's own hook arguments instead,
    with keyword arguments: ``fn(module, args, kwargs)`` for an ``.in`` point (return
    ``None`` or new ``(args, kwargs)``) and ``fn(module, args, kwargs, output)`` for an
    output point (return ``None`` or a new output): for hooks that need a block's whole call.
    """
    pairs = list(hooks.items()) if isinstance(hooks, Mapping) else list(hooks)
    resolved = [(resolve(model, name), fn) for name, fn in pairs]
    handles: list[torch.utils.hooks.RemovableHandle] = []
    try:
        for point, fn in resolved:
            if point.side == "in":
                hook = fn if raw else _in_hook(fn)
                handles.append(point.module.register_forward_pre_hook(hook, with_kwargs=True))
            else:
                hook = fn if raw else _out_hook(fn)
                handles.append(point.module.register_forward_hook(hook, with_kwargs=raw))
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def capture(
    model: nn.Module, names: str | Sequence[str], *, detach: bool = True
) -> Iterator[dict[str, torch.Tensor]]:
    """Record the tensor at each point in ``names`` while the ``with`` block runs the model.

    Yields a dict {point: tensor (batch, T, width), model dtype and device}, filled as the
    model runs; after several forward passes each point holds the latest one. The tensors are
    the model's own (``detach=True``: detached from the graph, sharing storage, not copied).
    ``block.{i}.out`` equals Hugging Face's ``output_hidden_states[i + 1]`` for every block
    but the last of a model with a final norm, whose last entry is ``final_norm``.
    """
    wanted = [names] if isinstance(names, str) else list(names)
    cache: dict[str, torch.Tensor] = {}

    def recorder(name: str) -> HookFn:
        def record(x: torch.Tensor) -> None:
            cache[name] = x.detach() if detach else x

        return record

    with attached(model, [(name, recorder(name)) for name in wanted]):
        yield cache


@contextmanager
def patch(model: nn.Module, name: str, fn: HookFn) -> Iterator[None]:
    """Replace the tensor at point ``name`` by ``fn(tensor)`` (same shape (batch, T, width),
    same dtype) in every forward pass of the ``with`` block; ``fn`` returning ``None`` leaves
    it unchanged. Removed on exit, also on an exception."""
    with attached(model, {name: fn}):
        yield
