"""The extraction cache: its folder, its key's fingerprints, and reading an entry safely.

A key must change whenever the result could: every byte of the weights, the tokenizer, and
the exact token ids fed to the model (plus the options :func:`lamina.states.extract.extract` adds).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from lamina.core.provenance import data_dir, writable_folder
from lamina.states.trajectories import Trajectories, TrajectoriesFileError

__all__ = [
    "cache_path",
    "cache_root",
    "ids_fingerprint",
    "model_fingerprint",
    "read_cache",
    "tokenizer_fingerprint",
]


def model_fingerprint(model: nn.Module) -> str:
    """A content hash (SHA-256) of every byte of every parameter and buffer, with names, shapes
    and dtypes, so that two models that differ anywhere never share a cache entry. Tensors
    shared between names (tied embeddings) are hashed once."""
    h = hashlib.sha256()  # SHA-NI: about twice BLAKE2b's speed here
    seen: dict[tuple[int, int, tuple[int, ...]], str] = {}
    for name, p in model.state_dict(keep_vars=False).items():
        t = p.detach()
        h.update(f"{name}|{tuple(t.shape)}|{t.dtype}|".encode())
        tied = (t.data_ptr(), t.storage_offset(), tuple(t.stride()))
        if t.numel() and tied in seen:
            h.update(f"tied:{seen[tied]}".encode())
            continue
        seen[tied] = name
        raw = t.contiguous().cpu().reshape(-1).view(torch.uint8).numpy()
        for start in range(0, raw.size, 1 << 26):  # 64 MiB chunks
            h.update(memoryview(raw[start : start + (1 << 26)]))
    return h.hexdigest()


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """A hash of what decides the token ids: the full tokenizer definition (vocabulary,
    merges, normaliser, pre-tokeniser, post-processor and added tokens, for a fast tokenizer)
    or the vocabulary and merges (slow), plus the special tokens and their settings."""
    h = hashlib.blake2b(digest_size=16)
    h.update(type(tokenizer).__name__.encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        h.update(backend.to_str().encode())
    else:
        vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
        h.update(json.dumps(sorted(vocab.items()), default=str).encode())
        ranks = getattr(tokenizer, "bpe_ranks", None)
        if ranks:
            h.update(json.dumps(sorted((str(k), v) for k, v in ranks.items())).encode())
    settings = {
        "special": getattr(tokenizer, "special_tokens_map", {}),
        "added": {
            str(k): str(v)
            for k, v in (getattr(tokenizer, "added_tokens_decoder", {}) or {}).items()
        },
        **{
            a: getattr(tokenizer, a, None)
            for a in ("add_bos_token", "add_eos_token", "do_lower_case", "add_prefix_space")
        },
    }
    h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return h.hexdigest()


def ids_fingerprint(encoded: list[list[int]]) -> str:
    """A hash of the exact token ids fed to the model (after truncation)."""
    h = hashlib.blake2b(digest_size=16)
    for ids in encoded:
        h.update(np.asarray(ids, dtype=np.int64).tobytes())
        h.update(b"|")
    return h.hexdigest()


def cache_root(cache: bool | str | os.PathLike | None) -> Path | None:
    """The cache folder, checked before any work: ``cache=True`` is ``<data>/cache/extract``;
    a path must be a folder or creatable as one."""
    if cache is False or cache is None:
        return None
    if cache is True:
        root = data_dir() / "cache" / "extract"
    elif isinstance(cache, str | os.PathLike):
        root = Path(cache).expanduser()
    else:
        raise TypeError(f"cache must be True, False or a folder path; got {cache!r}")
    return writable_folder(root, f"cache folder {str(root)!r}")


def cache_path(root: Path | None, key: dict[str, Any]) -> Path | None:
    if root is None:
        return None
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:24]
    return root / f"{digest}.safetensors"


def _recorded_hash(path: Path) -> bool:
    """Whether the entry's safetensors header records the SHA-256 of its states."""
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        header = json.loads((f.metadata() or {}).get("lamina", "{}"))
    return isinstance(header, dict) and bool(header.get("sha256"))


def read_cache(path: Path, texts: list[str], layers: list[int]) -> Trajectories | None:
    """The cached result at ``path``, or None (after a warning, the entry deleted) when the
    entry is unreadable, its states differ from the SHA-256 recorded when it was written
    (one flipped bit), it records none (written by an older lamina: it cannot be checked), or
    it does not hold these texts and layers. A damaged entry is never used."""
    import warnings

    try:
        hit = Trajectories.load(path)  # checks the recorded SHA-256
        if not _recorded_hash(path):
            raise TrajectoriesFileError(path, "records no SHA-256 of its states (an older "
                                              "lamina's entry): it cannot be checked")  # fmt: skip
        if hit.texts != texts or list(hit.layers) != layers:
            raise TrajectoriesFileError(path, "holds other texts or layers than its key")
        return hit
    except (TrajectoriesFileError, OSError, ValueError) as exc:
        warnings.warn(
            f"damaged extraction cache entry {path} deleted and recomputed: {exc}",
            RuntimeWarning,
            stacklevel=3,
        )
        path.unlink(missing_ok=True)
        return None
