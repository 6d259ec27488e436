"""Vectorised dequantisation of the GGUF block types of the book's models (Q4_K, Q5_0, Q6_K, Q8_0).

gguf-py's reader (:func:`gguf.quants.dequantize`) dequantises 16 rows at a time
(``_apply_over_grouped_rows``), splitting each block into several temporary arrays and
concatenating the groups at the end. Here a whole tensor is done in chunks of
:data:`CHUNK_BLOCKS` blocks, each unpacked with bit operations on ``uint8`` views and scaled by
ufuncs that write straight into the preallocated float32 output (the integer to float32 cast
happens inside the ufunc, no float copy of the integers is made).

The values are **bit-identical** to gguf-py's: every float32 product and difference is the same
IEEE operation on the same operands in the same order (``(d * sc) * q - dmin * m`` for Q4_K,
``d * q`` for Q5_0 and Q8_0, ``(d * scale) * q`` for Q6_K), with numpy's unfused ufuncs;
``tests/sources/test_gguf_dequant.py`` checks that on random blocks against gguf-py.

:func:`fast_dequantize` is a drop-in for :func:`gguf.quants.dequantize`;
:func:`patched_dequantize` makes Hugging Face's GGUF loader use it while the fp32 cache is built
(:func:`lamina.sources.gguf_cache.build_cache`). Other block types go to gguf-py unchanged.

The dequantisation is a small part of a first load (1.9 s of 87 s for Gemma 3, see
``benchmarks/README.md``): most of it is gguf-py's ``GGUFReader`` parsing the file's fields,
about 20 s for Gemma's 262,144-token vocabulary, and a first load opened the file six times
(the file check, the tensor check and its config, then Hugging Face's config, model and
tokenizer loaders). :func:`shared_gguf_reader` makes every ``gguf.GGUFReader(path)`` opened while
it is active return one reader per unchanged file, so the file is parsed once.

Block layouts (llama.cpp ``ggml-common.h``; ``QK_K`` = 256 values per super-block):

* Q8_0, 34 bytes per 32 values: fp16 ``d``, 32 int8 ``qs``; ``x = d * qs``.
* Q5_0, 22 bytes per 32 values: fp16 ``d``, uint32 ``qh`` (the 5th bit of each value),
  16 bytes ``qs`` (low nibbles: values 0-15, high nibbles: values 16-31);
  ``x = d * ((nibble | bit << 4) - 16)``.
* Q4_K, 144 bytes per 256 values: fp16 ``d``, fp16 ``dmin``, 12 bytes of eight 6-bit scales
  and eight 6-bit mins, 128 bytes of nibbles (four 64-value groups: 32 low nibbles, then 32
  high); ``x = (d * sc) * q - dmin * m`` per 32-value sub-block.
* Q6_K, 210 bytes per 256 values: 128 bytes ``ql`` (low 4 bits), 64 bytes ``qh`` (high 2
  bits), 16 int8 scales (one per 16 values), fp16 ``d``; ``x = (d * scale) * (q - 32)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

__all__ = [
    "CHUNK_BLOCKS",
    "FAST_TYPES",
    "dequantize_q4_k",
    "dequantize_q5_0",
    "dequantize_q6_k",
    "dequantize_q8_0",
    "fast_dequantize",
    "patched_dequantize",
    "shared_gguf_reader",
]

CHUNK_BLOCKS = 1 << 14
"""Blocks dequantised at once: bounds the integer temporaries (a few MiB) whatever the tensor."""

_U8 = np.uint8
_SHIFT_NIBBLE = np.array([0, 4], dtype=_U8).reshape(1, 1, 2, 1)
_SHIFT_Q6_HIGH = np.array([0, 2, 4, 6], dtype=_U8).reshape(1, 1, 4, 1)
_BITS32 = np.arange(32, dtype=np.uint32).reshape(1, 32)


def _f16(blocks: np.ndarray, start: int) -> np.ndarray:
    """(n, 1) float32: the fp16 field at byte ``start`` of each (n, bytes) block."""
    return blocks[:, start : start + 2].copy().view(np.float16).astype(np.float32)


def dequantize_q8_0(blocks: np.ndarray, out: np.ndarray) -> None:
    """(n, 34) uint8 Q8_0 blocks -> ``out`` (n, 32) float32, in place."""
    d = _f16(blocks, 0)
    np.multiply(blocks[:, 2:].view(np.int8), d, out=out, dtype=np.float32)


def dequantize_q5_0(blocks: np.ndarray, out: np.ndarray) -> None:
    """(n, 22) uint8 Q5_0 blocks -> ``out`` (n, 32) float32, in place."""
    n = blocks.shape[0]
    d = _f16(blocks, 0)
    qh = blocks[:, 2:6].copy().view(np.uint32)  # (n, 1), little-endian as in the file
    high = ((qh >> _BITS32) & np.uint32(1)).astype(_U8) << _U8(4)  # (n, 32)
    low = (blocks[:, 6:22].reshape(n, 1, 1, 16) >> _SHIFT_NIBBLE) & _U8(0x0F)  # (n, 1, 2, 16)
    q = (low.reshape(n, 32) | high).view(np.int8) - np.int8(16)
    np.multiply(d, q, out=out, dtype=np.float32)


def _q4_k_scales(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, 12) uint8 packed 6-bit scales and mins -> ((n, 8), (n, 8)) uint8 (llama.cpp
    ``get_scale_min_k4``)."""
    n = scales.shape[0]
    s = scales.reshape(n, 3, 4)
    d, m, md = s[:, 0], s[:, 1], s[:, 2]
    sc = np.concatenate([d & _U8(0x3F), (md & _U8(0x0F)) | ((d >> _U8(2)) & _U8(0x30))], axis=1)
    mn = np.concatenate([m & _U8(0x3F), (md >> _U8(4)) | ((m >> _U8(2)) & _U8(0x30))], axis=1)
    return sc, mn


def dequantize_q4_k(blocks: np.ndarray, out: np.ndarray) -> None:
    """(n, 144) uint8 Q4_K super-blocks -> ``out`` (n, 256) float32, in place."""
    n = blocks.shape[0]
    d, dmin = _f16(blocks, 0), _f16(blocks, 2)
    sc, mn = _q4_k_scales(blocks[:, 4:16])
    scale = np.multiply(d, sc, dtype=np.float32).reshape(n, 8, 1)
    offset = np.multiply(dmin, mn, dtype=np.float32).reshape(n, 8, 1)
    q = (blocks[:, 16:].reshape(n, 4, 1, 32) >> _SHIFT_NIBBLE) & _U8(0x0F)  # (n, 4, 2, 32)
    view = out.reshape(n, 8, 32)
    np.multiply(scale, q.reshape(n, 8, 32), out=view, dtype=np.float32)
    np.subtract(view, offset, out=view)


def dequantize_q6_k(blocks: np.ndarray, out: np.ndarray) -> None:
    """(n, 210) uint8 Q6_K super-blocks -> ``out`` (n, 256) float32, in place."""
    n = blocks.shape[0]
    scale = np.multiply(
        _f16(blocks, 208), blocks[:, 192:208].view(np.int8), dtype=np.float32
    ).reshape(n, 16, 1)
    low = (blocks[:, :128].reshape(n, 2, 1, 64) >> _SHIFT_NIBBLE) & _U8(0x0F)  # (n, 2, 2, 64)
    high = (blocks[:, 128:192].reshape(n, 2, 1, 32) >> _SHIFT_Q6_HIGH) & _U8(0x03)  # (n,2,4,32)
    q = (low.reshape(n, 8, 32) | (high.reshape(n, 8, 32) << _U8(4))).view(np.int8) - np.int8(32)
    np.multiply(scale, q.reshape(n, 16, 16), out=out.reshape(n, 16, 16), dtype=np.float32)


# GGMLQuantizationType value -> (bytes per block, values per block, kernel)
_KERNELS: dict[int, tuple[int, int, Callable[[np.ndarray, np.ndarray], None]]] = {
    8: (34, 32, dequantize_q8_0),  # Q8_0
    6: (22, 32, dequantize_q5_0),  # Q5_0
    12: (144, 256, dequantize_q4_k),  # Q4_K
    14: (210, 256, dequantize_q6_k),  # Q6_K
}
FAST_TYPES = ("Q8_0", "Q5_0", "Q4_K", "Q6_K")
"""The GGUF block types :func:`fast_dequantize` does itself."""


def fast_dequantize(data: np.ndarray, qtype: object) -> np.ndarray:
    """The float32 values of the GGUF tensor bytes ``data`` (..., bytes per row) of block type
    ``qtype`` (a :class:`gguf.GGMLQuantizationType`): shape (..., values per row), as
    :func:`gguf.quants.dequantize` returns, bit for bit. Types other than :data:`FAST_TYPES`
    (F32, F16 and the rest) are passed to gguf-py."""
    from gguf import quants

    kernel = _KERNELS.get(int(qtype))  # type: ignore[call-overload]
    if kernel is None:
        return quants.dequantize(data, qtype)  # type: ignore[arg-type]
    type_size, block_size, fn = kernel
    raw = np.ascontiguousarray(data).view(_U8)
    if raw.shape[-1] % type_size:
        raise ValueError(
            f"{qtype}: {raw.shape[-1]} bytes per row is not a multiple of the {type_size}-byte block"
        )
    blocks = raw.reshape(-1, type_size)
    out = np.empty((blocks.shape[0], block_size), dtype=np.float32)
    for start in range(0, blocks.shape[0], CHUNK_BLOCKS):
        stop = start + CHUNK_BLOCKS
        fn(blocks[start:stop], out[start:stop])
    return out.reshape(*raw.shape[:-1], raw.shape[-1] // type_size * block_size)


@contextmanager
def patched_dequantize() -> Iterator[None]:
    """While open, ``gguf.dequantize`` (which Hugging Face's GGUF loader imports when it loads a
    checkpoint) is :func:`fast_dequantize`, and that loader's own per-tensor progress bar
    (a plain ``tqdm``, which transformers' ``disable_progress_bar`` does not reach) is off:
    the caller reports the step (:mod:`lamina.core.progress`). Both restored on exit."""
    import functools

    import gguf
    import transformers.modeling_gguf_pytorch_utils as hf_gguf

    original, bar = gguf.dequantize, hf_gguf.tqdm
    gguf.dequantize = fast_dequantize
    hf_gguf.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        gguf.dequantize, hf_gguf.tqdm = original, bar


@contextmanager
def shared_gguf_reader() -> Iterator[None]:
    """While open, ``gguf.GGUFReader(path)`` (read-only mode) returns one reader per file
    (resolved path, size and modification time), parsed once; Hugging Face's loaders and
    lamina's checks import it from ``gguf`` when they run. Re-entrant; restored on exit."""
    import gguf

    original = gguf.GGUFReader
    if getattr(original, "lamina_shared", False):  # an outer block already shares them
        yield
        return
    readers: dict[tuple[str, int, int], Any] = {}

    def shared(path: str | os.PathLike, mode: str = "r") -> Any:
        if mode != "r":
            return original(path, mode)  # type: ignore[arg-type]
        st = os.stat(path)
        key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
        if key not in readers:
            readers[key] = original(path)
        return readers[key]

    shared.lamina_shared = True  # type: ignore[attr-defined]
    gguf.GGUFReader = shared  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        gguf.GGUFReader = original  # type: ignore[misc]
        readers.clear()
