"""Hidden-state extraction at the cost of one forward pass.

Conventions (every chapter relies on them):

* layer 0 is the embedding output, the input of the first block (token plus learned
  position embeddings for GPT-2, after the embedding LayerNorm for BERT);
* layer l (1 ≤ l ≤ L) is the residual stream after block l, **before** any final norm.
  Hugging Face's last ``hidden_states`` entry of a causal LM has already passed through the
  final norm (``ln_f``/``norm``); lamina never mixes that state in;
* ``pool="last"`` takes the last non-padding token, ``pool="mean"`` averages non-padding
  tokens, ``pool="none"`` keeps every token;
* :func:`pool_token_states` pools ``pool="none"`` states for the trajectory chapters: "mean"
  over every token, "last" = the last *content* token (:func:`content_token_mask`: the last
  token the tokenizer does not mark special, so an encoder's trailing ``[SEP]`` is skipped, as
  in paper 1's released code), and the final state also after the model's final norm
  (Hugging Face's post-norm ``hidden_states[-1]``). All pooling rules live in this module.

States come from forward hooks on the points ``block.0.in`` and ``block.{l-1}.out`` of
:mod:`lamina.states.hooks` (blocks named by the architecture adapter); the LM head
never runs and the forward pass stops after the deepest requested layer.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from torch import nn

from lamina.core.progress import bar
from lamina.core.provenance import provenance
from lamina.sources.models import get_adapter, hf_config
from lamina.states import hooks
from lamina.states.extract_cache import (
    cache_path,
    cache_root,
    ids_fingerprint,
    model_fingerprint,
    read_cache,
    tokenizer_fingerprint,
)
from lamina.states.hooks import HookFn
from lamina.states.pooling import content_token_mask, pool_token_states
from lamina.states.trajectories import Trajectories, TrajectoriesFileError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "POOLS",
    "NonFiniteStatesError",
    "Trajectories",
    "TrajectoriesFileError",
    "content_token_mask",
    "extract",
    "pool_token_states",
]

POOLS = ("last", "mean", "none")


class NonFiniteStatesError(FloatingPointError):
    """A forward pass produced NaN or infinite hidden states (e.g. NaN weights)."""


class _Stop(Exception):
    """Raised inside a hook once the deepest requested layer has been captured."""


def _validate_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings, not a single string")
    texts = list(texts)
    if not texts:
        raise ValueError("texts is empty: extract needs at least one text")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] is {type(t).__name__}, not str")
        if not t.strip():
            raise ValueError(f"texts[{i}] is an empty or blank string")
    return texts


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
    return int(value)


def _layer_list(layers: Any) -> list[int]:
    if isinstance(layers, str | bytes) or not isinstance(layers, Sequence | np.ndarray):
        raise TypeError(
            f"layers must be a list of layer indices (e.g. [{layers!r}]); got {type(layers).__name__}"
        )
    out = []
    for x in layers:
        if isinstance(x, bool) or not isinstance(x, int | np.integer):
            raise TypeError(
                f"layers must hold integers; got {x!r} ({type(x).__name__}) in {layers!r}"
            )
        out.append(int(x))
    return out


def _context_limit(model: nn.Module) -> int | None:
    cfg = model.config
    for name in ("n_positions", "max_position_embeddings"):
        value = getattr(cfg, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def extract(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    *,
    pool: str = "last",
    layers: Sequence[int] | None = None,
    batch_size: int = 32,
    max_length: int | None = None,
    add_special_tokens: bool = True,
    progress: bool = True,
    cache: bool | str | os.PathLike = False,
    nonfinite: str = "raise",
) -> Trajectories:
    """Hidden states of ``texts`` at every requested layer, in one forward pass per batch.

    Returns :class:`Trajectories` with ``states`` of shape (n_texts, len(layers), d_model)
    (float32) for ``pool`` in {"last", "mean"}, or a list of (len(layers), T_i, d_model)
    arrays for ``pool="none"``. ``layers`` defaults to 0..L (L+1 states). A text longer than
    the model's context raises unless ``max_length`` is given, in which case it keeps its
    first ``max_length`` tokens (recorded in ``meta["truncated"]``). Results do not depend on
    batch composition or ``tokenizer.padding_side``: position ids follow the attention mask.
    ``cache=True`` (or a folder path) stores results under ``<data>/cache/extract`` keyed by
    a hash of every byte of the weights, the tokenizer and the exact token ids, plus revision,
    texts, pool, layers, dtype and lamina version; a corrupt entry is warned about, deleted and
    recomputed. The model runs in eval mode (no dropout); the caller's train/eval mode of
    every submodule is restored afterwards. A NaN or infinite state raises
    :class:`NonFiniteStatesError` naming the text and layer (``nonfinite="warn"``: a warning,
    and the (text, layer) pairs are listed in ``meta["nonfinite"]``).
    """
    texts, batch_size, max_length = _check_options(texts, pool, batch_size, max_length, nonfinite)
    root = cache_root(cache)
    adapter = get_adapter(model)
    n_layers = adapter.n_layers(model)
    wanted = _wanted_layers(layers, n_layers)
    encoded, truncated = _encode(model, tokenizer, texts, max_length, add_special_tokens)
    meta = _provenance(model, pool, max_length, add_special_tokens, truncated)
    key = _cache_key(model, tokenizer, encoded, meta, texts, wanted, hashed=root is not None)
    path = cache_path(root, key)
    if path is not None and path.is_file():
        hit = read_cache(path, texts, wanted)
        if hit is not None:
            return hit

    collector = _Collector(texts, pool, wanted, adapter.d_model(model), nonfinite)
    _run_batches(model, tokenizer, encoded, batch_size, collector, progress)
    if collector.bad_rows:
        _warn_nonfinite(collector.bad_rows, texts, meta)
    result = Trajectories(collector.states(), texts, wanted, meta)
    if path is not None:
        result.save(path)
    return result


def _cache_key(
    model: nn.Module,
    tokenizer: Any,
    encoded: list[list[int]],
    meta: dict[str, Any],
    texts: list[str],
    wanted: list[int],
    *,
    hashed: bool,
) -> dict[str, Any]:
    """Everything an extraction depends on: hashes of every byte of the weights, of the
    tokenizer and of the token ids (``hashed=False``: None, no cache is used), plus the
    model's name and revision, the texts, pool, layers, dtype, options and lamina version."""
    return {
        "fingerprint": model_fingerprint(model) if hashed else None,
        "tokenizer": tokenizer_fingerprint(tokenizer) if hashed else None,
        "ids": ids_fingerprint(encoded) if hashed else None,
        "model": meta["model"],
        "revision": meta["revision"],
        "texts": texts,
        "pool": meta["pool"],
        "layers": wanted,
        "dtype": meta["dtype"],
        "max_length": meta["max_length"],
        "special": meta["add_special_tokens"],
        "lamina": meta["lamina_version"],
    }


def _check_options(
    texts: Sequence[str], pool: str, batch_size: Any, max_length: Any, nonfinite: str
) -> tuple[list[str], int, int | None]:
    """Check :func:`extract`'s arguments -> (texts as a list, batch_size, max_length)."""
    texts = _validate_texts(texts)
    if pool not in POOLS:
        raise ValueError(f"unknown pool {pool!r}; choose one of {POOLS}")
    batch_size = _positive_int("batch_size", batch_size)
    if max_length is not None:
        max_length = _positive_int("max_length", max_length)
    if nonfinite not in ("raise", "warn"):
        raise ValueError(f"nonfinite must be 'raise' or 'warn'; got {nonfinite!r}")
    return texts, batch_size, max_length


def _wanted_layers(layers: Any, n_layers: int) -> list[int]:
    """The requested layer indices in 0..n_layers (negative ones counted from the end),
    in the order given; default all n_layers + 1 of them."""
    wanted = list(range(n_layers + 1)) if layers is None else _layer_list(layers)
    wanted = [n_layers + 1 + x if x < 0 else x for x in wanted]
    if not wanted or any(not 0 <= x <= n_layers for x in wanted):
        raise ValueError(
            f"layers must lie in 0..{n_layers} (negative counts from the end); got {layers}"
        )
    if len(set(wanted)) != len(wanted):
        raise ValueError(f"layers has duplicates: {layers}")
    return wanted


def _encode(
    model: nn.Module,
    tokenizer: Any,
    texts: list[str],
    max_length: int | None,
    add_special_tokens: bool,
) -> tuple[list[list[int]], list[int]]:
    """Token ids of every text, each cut to ``max_length`` when given -> (ids per text, the
    indices of the texts that were cut). A text longer than the model's context (without
    ``max_length``), with no tokens, or with an id outside the vocabulary raises."""
    encoded = tokenizer(texts, add_special_tokens=add_special_tokens)["input_ids"]
    limit = _context_limit(model)
    if max_length is not None and limit is not None and max_length > limit:
        raise ValueError(f"max_length={max_length} exceeds the model's context of {limit} tokens")
    truncated = []
    for i, ids in enumerate(encoded):
        if len(ids) == 0:
            raise ValueError(f"texts[{i}] tokenises to zero tokens: {texts[i]!r}")
        if max_length is not None and len(ids) > max_length:
            encoded[i] = ids[:max_length]
            truncated.append(i)
        elif max_length is None and limit is not None and len(ids) > limit:
            raise ValueError(
                f"texts[{i}] has {len(ids)} tokens, more than the model's context of {limit}; "
                "pass max_length to truncate it"
            )
    _check_vocabulary(model, texts, encoded)
    return encoded, truncated


def _check_vocabulary(model: nn.Module, texts: list[str], encoded: list[list[int]]) -> None:
    """Raise when a token id lies outside the embedding table (a foreign tokenizer)."""
    vocab = get_adapter(model).embedding_module(model)
    vocab_size = getattr(vocab, "num_embeddings", None) or getattr(
        getattr(vocab, "word_embeddings", None), "num_embeddings", None
    )
    for i, ids in enumerate(encoded):
        bad = [t for t in ids if t < 0 or (vocab_size is not None and t >= vocab_size)]
        if bad:
            raise ValueError(
                f"texts[{i}] ({texts[i][:60]!r}) has token id {bad[0]}, outside the model's "
                f"vocabulary of {vocab_size}: is the tokenizer the model's own?"
            )


def _provenance(
    model: nn.Module,
    pool: str,
    max_length: int | None,
    add_special_tokens: bool,
    truncated: list[int],
) -> dict[str, Any]:
    """The ``meta`` of an extraction: model, revision, dtype, options and conventions."""
    adapter = get_adapter(model)
    return provenance(
        model=getattr(model, "lamina_name", hf_config(model)._name_or_path),
        revision=getattr(model, "lamina_revision", None),
        model_type=hf_config(model).model_type,
        dtype=str(next(model.parameters()).dtype).removeprefix("torch."),
        pool=pool,
        n_layers=adapter.n_layers(model),
        d_model=adapter.d_model(model),
        max_length=max_length,
        add_special_tokens=add_special_tokens,
        truncated=truncated,
        convention="layer 0 = embedding output; layer l = residual stream after block l, before the final norm",
        source=getattr(model, "lamina_source", None),  # GGUF file, SHA-256, quantisation type
        quantization=getattr(model, "lamina_quantization", {}).get("qtype"),  # lamina.sources.quantize
    )


class _Collector:
    """Pools the hidden state each hook sees into the rows of the current batch.

    ``pooled``: (n_texts, len(wanted), d_model) float32 for pool "last"/"mean"; ``ragged``:
    per text, per wanted layer, the (T_i, d_model) float32 states for pool "none". The batch's
    ``mask`` (batch, T) bool and ``rows`` (its text indices) are set before each forward pass.
    Capturing the deepest wanted layer raises :class:`_Stop` (the rest of the pass is skipped).
    """

    def __init__(
        self, texts: list[str], pool: str, wanted: list[int], d_model: int, nonfinite: str
    ) -> None:
        n = len(texts)
        self.texts, self.pool, self.nonfinite = texts, pool, nonfinite
        self.slot = {layer: i for i, layer in enumerate(wanted)}
        self.deepest = max(wanted)
        self.pooled = np.zeros((n, len(wanted), d_model), np.float32) if pool != "none" else None
        self.ragged: list[list[np.ndarray | None]] = [[None] * len(wanted) for _ in range(n)]
        self.mask = torch.zeros(0, 0, dtype=torch.bool)
        self.rows: list[int] = []
        self.bad_rows: list[tuple[int, int]] = []  # (text index, layer) with a non-finite state

    def hooks(self) -> dict[str, HookFn]:
        """{hook point: function} capturing every wanted layer: layer 0 is the input of
        block 0, layer l the output of block l - 1."""
        return {
            ("block.0.in" if layer == 0 else f"block.{layer - 1}.out"): partial(self.capture, layer)
            for layer in self.slot
        }

    def check(self, layer: int, hidden: torch.Tensor) -> None:
        """Raise (or record, ``nonfinite="warn"``) a non-finite state at a non-padding token."""
        mask, rows = self.mask, self.rows
        finite = torch.where(mask[..., None], torch.isfinite(hidden), True).all(-1).all(-1)
        for b in (~finite).nonzero().flatten().tolist():
            if self.nonfinite == "raise":
                raise NonFiniteStatesError(
                    f"non-finite (NaN or inf) hidden state at layer {layer} for texts[{rows[b]}] "
                    f"({self.texts[rows[b]][:60]!r}): are the model's weights finite?"
                )
            self.bad_rows.append((rows[b], layer))

    def capture(self, layer: int, hidden: torch.Tensor) -> None:
        """Pool ``hidden`` (batch, T, d_model) of ``layer`` into the current batch's rows."""
        mask, rows, slot = self.mask, self.rows, self.slot  # mask: (batch, T) bool
        self.check(layer, hidden)
        if self.pool == "last":
            positions = torch.arange(mask.shape[1], device=mask.device)
            last = torch.where(mask, positions, -1).argmax(-1)  # (batch,)
            vec = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
            cast(np.ndarray, self.pooled)[rows, slot[layer]] = vec.float().cpu().numpy()
        elif self.pool == "mean":
            summed = torch.where(mask[..., None], hidden, 0).sum(1, dtype=torch.float32)
            vec = summed / mask.sum(1, keepdim=True)
            cast(np.ndarray, self.pooled)[rows, slot[layer]] = vec.cpu().numpy()
        else:
            for b, r in enumerate(rows):
                self.ragged[r][slot[layer]] = hidden[b][mask[b]].float().cpu().numpy()
        if layer == self.deepest:
            raise _Stop

    def states(self) -> np.ndarray | list[np.ndarray]:
        """(n_texts, len(wanted), d_model) float32, or per text (len(wanted), T_i, d_model)."""
        if self.pool == "none":
            return [np.stack(per_layer) for per_layer in self.ragged]  # type: ignore[arg-type]
        return cast(np.ndarray, self.pooled)


def _run_batches(
    model: nn.Module,
    tokenizer: Any,
    encoded: list[list[int]],
    batch_size: int,
    collector: _Collector,
    progress: bool,
) -> None:
    """One forward pass of the bare transformer per batch of similar-length texts (padded,
    position ids following the attention mask), in eval mode and without gradients, with
    ``collector``'s hooks attached; the caller's train/eval modes are restored afterwards."""
    adapter = get_adapter(model)
    device = next(model.parameters()).device
    order = np.argsort([len(ids) for ids in encoded], kind="stable")
    batches = [order[i : i + batch_size] for i in range(0, len(encoded), batch_size)]
    base = adapter.base(model)
    modes = [(m, m.training) for m in model.modules()]
    model.eval()  # dropout off: states must not depend on the caller's train mode
    try:
        with hooks.attached(model, collector.hooks()), torch.inference_mode():
            name = getattr(model, "lamina_name", None) or type(model).__name__
            for rows in bar(batches, desc=f"extract {name}", disable=not progress):
                batch = tokenizer.pad(
                    {"input_ids": [encoded[r] for r in rows]}, return_tensors="pt"
                )
                mask = batch["attention_mask"].to(device).bool()
                inputs = {
                    "input_ids": batch["input_ids"].to(device),
                    "attention_mask": mask.long(),
                    "position_ids": (mask.long().cumsum(-1) - 1).clamp(min=0),
                }
                if adapter.causal:
                    inputs["use_cache"] = False
                else:
                    inputs["token_type_ids"] = torch.zeros_like(inputs["input_ids"])
                collector.mask, collector.rows = mask, [int(r) for r in rows]
                try:
                    base(**inputs)
                except _Stop:
                    pass
    finally:
        for module, training in modes:
            module.training = training


def _warn_nonfinite(bad_rows: list[tuple[int, int]], texts: list[str], meta: dict) -> None:
    """Warn about non-finite states and list them in ``meta["nonfinite"]`` (text, layer)."""
    import warnings

    i, layer = bad_rows[0]
    warnings.warn(
        f"{len(bad_rows)} non-finite hidden states, first at layer {layer} for texts[{i}] "
        f"({texts[i][:60]!r}); listed in meta['nonfinite']",
        RuntimeWarning,
        stacklevel=3,
    )
    meta["nonfinite"] = [{"text": i, "layer": layer} for i, layer in sorted(bad_rows)]
