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

States come from forward hooks on the blocks named by the architecture adapter; the LM head
never runs and the forward pass stops after the deepest requested layer.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from torch import nn

from lamina.core.provenance import provenance
from lamina.core.types import BoolMask, TokenStates
from lamina.sources.models import get_adapter, hf_config
from lamina.states.extract_cache import (
    cache_path,
    cache_root,
    ids_fingerprint,
    model_fingerprint,
    read_cache,
    tokenizer_fingerprint,
)
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
    from tqdm.auto import tqdm

    texts = _validate_texts(texts)
    if pool not in POOLS:
        raise ValueError(f"unknown pool {pool!r}; choose one of {POOLS}")
    batch_size = _positive_int("batch_size", batch_size)
    if max_length is not None:
        max_length = _positive_int("max_length", max_length)
    if nonfinite not in ("raise", "warn"):
        raise ValueError(f"nonfinite must be 'raise' or 'warn'; got {nonfinite!r}")
    root = cache_root(cache)
    adapter = get_adapter(model)
    blocks = adapter.block_list(model)
    n_layers = len(blocks)
    wanted = list(range(n_layers + 1)) if layers is None else _layer_list(layers)
    wanted = [n_layers + 1 + x if x < 0 else x for x in wanted]
    if not wanted or any(not 0 <= x <= n_layers for x in wanted):
        raise ValueError(
            f"layers must lie in 0..{n_layers} (negative counts from the end); got {layers}"
        )
    if len(set(wanted)) != len(wanted):
        raise ValueError(f"layers has duplicates: {layers}")
    slot = {layer: i for i, layer in enumerate(wanted)}
    deepest = max(wanted)

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
    vocab = adapter.embedding_module(model)
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

    dtype = next(model.parameters()).dtype
    meta = provenance(
        model=getattr(model, "lamina_name", hf_config(model)._name_or_path),
        revision=getattr(model, "lamina_revision", None),
        model_type=hf_config(model).model_type,
        dtype=str(dtype).removeprefix("torch."),
        pool=pool,
        n_layers=n_layers,
        d_model=adapter.d_model(model),
        max_length=max_length,
        add_special_tokens=add_special_tokens,
        truncated=truncated,
        convention="layer 0 = embedding output; layer l = residual stream after block l, before the final norm",
        source=getattr(model, "lamina_source", None),  # GGUF file, SHA-256, quantisation type
        quantization=getattr(model, "lamina_quantization", {}).get("qtype"),  # lamina.sources.quantize
    )
    key = {
        "fingerprint": model_fingerprint(model) if root else None,
        "tokenizer": tokenizer_fingerprint(tokenizer) if root else None,
        "ids": ids_fingerprint(encoded) if root else None,
        "model": meta["model"],
        "revision": meta["revision"],
        "texts": texts,
        "pool": pool,
        "layers": wanted,
        "dtype": meta["dtype"],
        "max_length": max_length,
        "special": add_special_tokens,
        "lamina": meta["lamina_version"],
    }
    path = cache_path(root, key)
    if path is not None and path.is_file():
        hit = read_cache(path, texts, wanted)
        if hit is not None:
            return hit

    n, d = len(texts), adapter.d_model(model)
    pooled = np.zeros((n, len(wanted), d), np.float32) if pool != "none" else None
    ragged: list[list[np.ndarray | None]] = [[None] * len(wanted) for _ in range(n)]
    device = next(model.parameters()).device
    current: dict[str, Any] = {}
    bad_rows: list[tuple[int, int]] = []  # (text index, layer) with a non-finite state

    def check(layer: int, hidden: torch.Tensor, mask: torch.Tensor, rows: list[int]) -> None:
        finite = torch.where(mask[..., None], torch.isfinite(hidden), True).all(-1).all(-1)
        for b in (~finite).nonzero().flatten().tolist():
            if nonfinite == "raise":
                raise NonFiniteStatesError(
                    f"non-finite (NaN or inf) hidden state at layer {layer} for texts[{rows[b]}] "
                    f"({texts[rows[b]][:60]!r}): are the model's weights finite?"
                )
            bad_rows.append((rows[b], layer))

    def capture(layer: int, hidden: torch.Tensor) -> None:
        mask = current["mask"]  # (batch, T) bool
        rows = current["rows"]
        check(layer, hidden, mask, rows)
        if pool == "last":
            positions = torch.arange(mask.shape[1], device=mask.device)
            last = torch.where(mask, positions, -1).argmax(-1)  # (batch,)
            vec = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
            cast(np.ndarray, pooled)[rows, slot[layer]] = vec.float().cpu().numpy()  # pool != none
        elif pool == "mean":
            summed = torch.where(mask[..., None], hidden, 0).sum(1, dtype=torch.float32)
            vec = summed / mask.sum(1, keepdim=True)
            cast(np.ndarray, pooled)[rows, slot[layer]] = vec.cpu().numpy()
        else:
            for b, r in enumerate(rows):
                ragged[r][slot[layer]] = hidden[b][mask[b]].float().cpu().numpy()
        if layer == deepest:
            raise _Stop

    def pre_hook(module: nn.Module, args: tuple, kwargs: dict) -> None:
        hidden = args[0] if args else kwargs["hidden_states"]
        capture(0, hidden)

    def make_hook(layer: int):
        def hook(module: nn.Module, args: tuple, output: Any) -> None:
            hidden = output[0] if isinstance(output, tuple) else output
            capture(layer, hidden)

        return hook

    handles = []
    if 0 in slot:
        handles.append(blocks[0].register_forward_pre_hook(pre_hook, with_kwargs=True))
    for layer in wanted:
        if layer > 0:
            handles.append(blocks[layer - 1].register_forward_hook(make_hook(layer)))

    order = np.argsort([len(ids) for ids in encoded], kind="stable")
    batches = [order[i : i + batch_size] for i in range(0, n, batch_size)]
    base = adapter.base(model)
    modes = [(m, m.training) for m in model.modules()]
    model.eval()  # dropout off: states must not depend on the caller's train mode
    try:
        with torch.inference_mode():
            for rows in tqdm(batches, desc="extract", disable=not progress, leave=False):
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
                current.update(mask=mask, rows=[int(r) for r in rows])
                try:
                    base(**inputs)
                except _Stop:
                    pass
    finally:
        for handle in handles:
            handle.remove()
        for module, training in modes:
            module.training = training
    if bad_rows:
        import warnings

        i, layer = bad_rows[0]
        warnings.warn(
            f"{len(bad_rows)} non-finite hidden states, first at layer {layer} for texts[{i}] "
            f"({texts[i][:60]!r}); listed in meta['nonfinite']",
            RuntimeWarning,
            stacklevel=2,
        )
        meta["nonfinite"] = [{"text": i, "layer": layer} for i, layer in sorted(bad_rows)]

    states: np.ndarray | list[np.ndarray]
    if pool == "none":
        states = [np.stack(per_layer) for per_layer in ragged]  # type: ignore[arg-type]
    else:
        states = pooled  # type: ignore[assignment]
    result = Trajectories(states, texts, wanted, meta)
    if path is not None:
        result.save(path)
    return result


def content_token_mask(
    tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], lengths: Sequence[int]
) -> list[BoolMask]:
    """Per text, a bool (T_i,) mask that is True at its content tokens: those the tokenizer
    does not mark special (``return_special_tokens_mask``). ``lengths``: the T_i actually
    extracted (a text longer than the context was truncated)."""
    special = tokenizer(list(texts), return_special_tokens_mask=True)["special_tokens_mask"]
    return [
        ~np.asarray(mask[:length], dtype=bool)
        for mask, length in zip(special, lengths, strict=True)
    ]


def pool_token_states(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    ragged: Sequence[TokenStates],
) -> dict[str, np.ndarray]:
    """Pool per-token states of ``extract(pool="none")`` (each (L+1, T_i, d)).

    -> "mean" (n, L+1, d): mean over every token; "last" (n, L+1, d): the last content token
    (:func:`content_token_mask`; the last token when a text has none); for a causal LM with a
    final norm also "mean_post" and "last_post" (n, d): the same pooling of the final state
    after the final norm; "n_content" (n,): content tokens per text. float32.
    """
    adapter = get_adapter(model)
    norm = adapter.final_norm_module(model) if adapter.causal else None
    content = content_token_mask(tokenizer, texts, [a.shape[1] for a in ragged])
    dev = next(iter(norm.parameters()), torch.empty(0)).device if norm is not None else None
    out: dict[str, list] = {"mean": [], "last": [], "mean_post": [], "last_post": []}
    for arr, mask in zip(ragged, content, strict=True):
        idx = np.flatnonzero(mask)
        last = int(idx[-1]) if idx.size else arr.shape[1] - 1
        out["mean"].append(arr.mean(axis=1))
        out["last"].append(arr[:, last])
        if norm is not None:
            with torch.inference_mode():
                post = norm(torch.from_numpy(np.ascontiguousarray(arr[-1])).to(dev)).float().cpu().numpy()
            out["mean_post"].append(post.mean(axis=0))
            out["last_post"].append(post[last])
    pooled = {k: np.stack(v).astype(np.float32) for k, v in out.items() if v}
    pooled["n_content"] = np.array([int(m.sum()) for m in content])
    return pooled
