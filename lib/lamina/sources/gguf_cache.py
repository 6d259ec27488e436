"""The fp32 cache of dequantised GGUF models (used by :mod:`lamina.sources.gguf_models`).

One folder per GGUF file, ``<cache>/<stem>-<key>``, where ``key`` hashes the file's SHA-256 and
the versions of the code that dequantised it (transformers, gguf, this format). The entry is
found by its key whatever the stem (:func:`find_entry`): the same GGUF bytes under another
file name, a symlink or a copy, reuse it. A folder is built under a temporary name beside its
final one and renamed into place; its manifest (:mod:`lamina.core.manifest`), written last,
lists every file with its size and SHA-256. :func:`verify` accepts a folder only when every
listed file is present at that size and hashes to that SHA-256, so a folder left by an
interrupted run, or one whose bytes were damaged later, is rebuilt, never loaded. The full
hash runs on the first load after any change to the files (:func:`lamina.core.manifest.
check_folder`). Scratch folders that a killed build leaves behind are removed by the next
build of the same entry (:func:`clean_scratch`).

Before anything is cached, :func:`check_tensors` compares the GGUF's tensor table with the
tensors the architecture needs (names and shapes from Hugging Face's own GGUF name map): a
missing or misshapen tensor is an error naming the tensor and the file, never a randomly
initialised weight.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn

from lamina.core.manifest import MANIFEST, verify_folder, write_manifest
from lamina.core.progress import library_bars_off
from lamina.core.provenance import data_dir, env_dir
from lamina.sources.gguf_dequant import patched_dequantize, shared_gguf_reader

__all__ = [
    "MANIFEST",
    "GGUFTensorError",
    "assemble",
    "build_cache",
    "build_lock",
    "cache_key",
    "check_tensors",
    "clean_scratch",
    "complete",
    "find_entry",
    "gguf_cache_dir",
    "verify",
]

CACHE_FORMAT = 2  # 2: the manifest records each file's SHA-256


class GGUFTensorError(ValueError):
    """A GGUF file whose tensor table lacks a tensor the architecture needs, or holds one of
    the wrong shape, or that has no tokenizer."""


def gguf_cache_dir() -> Path:
    """``$LAMINA_GGUF_CACHE``, else ``<data>/cache/gguf`` (absolute; see
    :func:`lamina.core.provenance.env_dir`)."""
    if os.environ.get("LAMINA_GGUF_CACHE"):
        return env_dir("LAMINA_GGUF_CACHE")
    return data_dir() / "cache" / "gguf"


def cache_key(sha: str) -> str:
    from importlib.metadata import version

    import transformers

    key = f"{sha}|transformers {transformers.__version__}|gguf {version('gguf')}|{CACHE_FORMAT}"
    return hashlib.sha256(key.encode()).hexdigest()[:20]


def verify(folder: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(manifest, None) when every file the manifest of ``folder`` lists is present with its
    size and SHA-256; (None, why) naming the damaged file otherwise; (None, None) when there is
    no folder at all (:func:`lamina.core.manifest.verify_folder`: hashed on the first check
    after any change to the files, a few ``stat`` calls otherwise)."""
    return verify_folder(folder)


def complete(folder: Path) -> dict[str, Any] | None:
    """The manifest of a cache folder if every file it lists is intact (:func:`verify`)."""
    return verify(folder)[0]


def find_entry(cache: Path, key: str) -> Path | None:
    """The cache folder of the GGUF whose :func:`cache_key` is ``key``, whatever the name of
    the file it was built from (``<any stem>-<key>``), or None. An intact one (its manifest
    checks) is preferred; else the first found, which the caller rebuilds."""
    found = sorted(p for p in cache.glob(f"*-{key}") if p.is_dir() and not p.name.startswith("."))
    for path in found:
        if complete(path) is not None:
            return path
    return found[0] if found else None


def clean_scratch(target: Path) -> list[Path]:
    """Remove the scratch folders of ``target`` that a killed build left beside it (the
    ``.<name>.*.tmp`` build folder and the ``.assemble-<name>-*`` folder of chunked GGUFs).
    Call only while holding :func:`build_lock` for ``target``: then no live build owns them.
    Returns the folders removed."""
    removed = []
    for pattern in (f".{target.name}.*.tmp", f".assemble-{target.name}-*"):
        for path in target.parent.glob(pattern):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _save_plain(model: nn.Module, folder: Path) -> None:
    """Write ``model`` as a plain (unquantised) fp32 Hugging Face folder: ``config.json`` without
    the GGUF quantisation record, ``generation_config.json`` and ``model.safetensors`` (tied
    tensors stored once)."""
    from safetensors.torch import save_model

    config = getattr(model, "config")  # noqa: B009 (a PretrainedConfig; Any to the checker)
    config_dict = config.to_dict()
    config_dict.pop("quantization_config", None)
    config_dict["dtype"] = "float32"
    (folder / "config.json").write_text(json.dumps(config_dict, indent=2, default=str))
    if getattr(model, "generation_config", None) is not None:
        getattr(model, "generation_config").save_pretrained(folder)  # noqa: B009
    save_model(model, str(folder / "model.safetensors"), metadata={"format": "pt"})


@contextmanager
def build_lock(target: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``.<target>.lock`` (POSIX ``flock``; no lock where there is
    none), so that processes loading the same cold model (chapters run side by side) build its
    cache once: the others wait, then load it."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    lock = target.parent / f".{target.name}.lock"
    try:
        handle = open(lock, "a+")  # noqa: SIM115 (closed below, after the lock is released)
    except OSError as exc:
        raise PermissionError(
            f"GGUF cache folder {target.parent} is not writable ({exc.strerror}): the first "
            "load of a GGUF model writes its fp32 copy there; point $LAMINA_GGUF_CACHE at a "
            "writable folder"
        ) from None
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_cache(target: Path, gguf_path: Path, record: dict[str, Any]) -> None:
    """Dequantise ``gguf_path`` to fp32 (:func:`lamina.sources.gguf_dequant.fast_dequantize`)
    and write model + tokenizer + manifest into a temporary
    folder beside ``target``, then rename it into place."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.perf_counter()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        folder, name = str(gguf_path.parent), gguf_path.name
        # the caller reports this step (lamina.core.progress); the blocks are dequantised by
        # lamina's vectorised kernels, bit-identical to gguf-py's (lamina.sources.gguf_dequant)
        with library_bars_off(), patched_dequantize(), shared_gguf_reader():
            model = AutoModelForCausalLM.from_pretrained(
                folder, gguf_file=name, dtype=torch.float32, local_files_only=True
            )
            tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
        _save_plain(model, tmp)
        tokenizer.save_pretrained(tmp)
        for p in tmp.iterdir():
            os.chmod(p, 0o644)  # safetensors writes 0600 files
        write_manifest(tmp, {
            **record,
            "n_params": sum(p.numel() for p in model.parameters()),
            "build_seconds": round(time.perf_counter() - start, 1),
        })  # fmt: skip
        os.chmod(tmp / MANIFEST, 0o644)
        os.chmod(tmp, 0o755)
        if target.exists():  # an incomplete folder left by an interrupted run
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.replace(tmp, target)
        except OSError:  # another process finished the same cache first
            if complete(target) is None:
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def assemble(paths: list[Path], into: Path) -> Path:
    """A single GGUF file for ``paths`` (the file itself when there is one part)."""
    if len(paths) == 1:
        return paths[0]
    out = into / paths[0].name.split(".part")[0]
    with open(out, "wb") as dst:
        for p in paths:
            with open(p, "rb") as src:
                shutil.copyfileobj(src, dst, 1 << 22)
    return out


def check_tensors(gguf_path: Path, label: str | None = None) -> None:
    """Refuse a GGUF whose tensor table does not give every weight the architecture needs.

    The expected tensors are those of the Hugging Face model that ``gguf_path``'s config
    describes (built on the meta device: no memory), renamed to GGUF names by transformers'
    own map; GGUF stores each shape innermost-first, so a weight of HF shape ``(out, in)`` is
    ``(in, out)`` in the file. ``lm_head`` may be absent when the embeddings are tied. Raises
    :class:`GGUFTensorError` naming the file (``label``, default the path) and every missing,
    misshapen tensor, or a missing tokenizer."""
    from gguf import GGUFReader
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import (
        TENSOR_PROCESSORS,
        TensorProcessor,
        get_gguf_hf_weights_map,
    )

    label = label or str(gguf_path)
    reader = GGUFReader(gguf_path)
    if "tokenizer.ggml.model" not in reader.fields or "tokenizer.ggml.tokens" not in reader.fields:
        raise GGUFTensorError(
            f"{label} has no tokenizer (no tokenizer.ggml.model / tokenizer.ggml.tokens keys); "
            "lamina needs the tokenizer stored in the GGUF file"
        )
    have = {t.name: tuple(int(d) for d in reversed(t.shape)) for t in reader.tensors}
    config = AutoConfig.from_pretrained(
        str(gguf_path.parent), gguf_file=gguf_path.name, local_files_only=True
    )
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    arch = str(reader.fields["general.architecture"].contents())
    processor = TENSOR_PROCESSORS.get(arch, TensorProcessor)(config=config.to_dict())
    to_gguf = {hf: g for g, hf in get_gguf_hf_weights_map(model, processor).items()}
    tied = bool(getattr(config, "tie_word_embeddings", False))
    problems = []
    for hf_name, tensor in model.state_dict().items():
        if tied and hf_name == "lm_head.weight":
            continue
        gguf_name = to_gguf.get(hf_name, hf_name)
        want = tuple(tensor.shape)
        if gguf_name not in have:
            problems.append(f"missing tensor {gguf_name!r} ({hf_name}, shape {list(want)})")
        elif have[gguf_name] != want:
            problems.append(
                f"tensor {gguf_name!r} ({hf_name}) has shape {list(have[gguf_name])}, "
                f"the architecture needs {list(want)}"
            )
    if problems:
        raise GGUFTensorError(
            f"{label}: {len(problems)} tensor(s) the {arch} architecture needs are wrong, so "
            f"the model would get random weights: "
            + "; ".join(problems[:6])
            + (f"; ... ({len(problems) - 6} more)" if len(problems) > 6 else "")
        )
