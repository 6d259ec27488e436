"""The fp32 cache of dequantised GGUF models (used by :mod:`lamina.sources.gguf_models`).

One folder per GGUF file, ``<cache>/<stem>-<key>``, where ``key`` hashes the file's SHA-256 and
the versions of the code that dequantised it (transformers, gguf, this format). A folder is
built under a temporary name beside its final one and renamed into place; its manifest, written
last, lists every file with its size. :func:`complete` accepts a folder only when every listed
file is present at that size, so a folder left by an interrupted run is rebuilt, never loaded.
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

from lamina.core.provenance import data_dir

__all__ = [
    "MANIFEST",
    "assemble",
    "build_cache",
    "build_lock",
    "cache_key",
    "complete",
    "gguf_cache_dir",
]

CACHE_FORMAT = 1
MANIFEST = "lamina-manifest.json"


def gguf_cache_dir() -> Path:
    """``$LAMINA_GGUF_CACHE``, else ``<data>/cache/gguf``."""
    env = os.environ.get("LAMINA_GGUF_CACHE")
    return Path(env).expanduser() if env else data_dir() / "cache" / "gguf"


def cache_key(sha: str) -> str:
    from importlib.metadata import version

    import transformers

    key = f"{sha}|transformers {transformers.__version__}|gguf {version('gguf')}|{CACHE_FORMAT}"
    return hashlib.sha256(key.encode()).hexdigest()[:20]


def complete(folder: Path) -> dict[str, Any] | None:
    """The manifest of a cache folder if every file it lists is present at its size."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        for name, size in manifest["files"].items():
            if (folder / name).stat().st_size != size:
                return None
        return manifest
    except (OSError, ValueError, KeyError, TypeError):
        return None


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
    with open(target.parent / f".{target.name}.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_cache(target: Path, gguf_path: Path, record: dict[str, Any]) -> None:
    """Dequantise ``gguf_path`` to fp32 and write model + tokenizer + manifest into a temporary
    folder beside ``target``, then rename it into place."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.perf_counter()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        folder, name = str(gguf_path.parent), gguf_path.name
        model = AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=name, dtype=torch.float32, local_files_only=True
        )
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
        _save_plain(model, tmp)
        tokenizer.save_pretrained(tmp)
        files = {}
        for p in tmp.iterdir():
            os.chmod(p, 0o644)  # safetensors writes 0600 files
            files[p.name] = p.stat().st_size
        manifest = {
            **record,
            "files": files,
            "n_params": sum(p.numel() for p in model.parameters()),
            "build_seconds": round(time.perf_counter() - start, 1),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, default=str))
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
