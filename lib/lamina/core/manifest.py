"""Manifests and seals: what lamina wrote, checked when it is read back.

One rule for every file lamina writes and later reads (weights it trained or dequantised,
caches, results): record on write what the bytes must be, check on read, and never use bytes
that disagree.

* A **folder** (a GGUF cache entry, an organism checkpoint, an aligned build) ends with
  ``lamina-manifest.json``, written last: every file with its size and SHA-256 and, for a
  safetensors file, every tensor's dtype and shape, plus a record of what the folder is.
  :func:`check_folder` raises :class:`ManifestError` naming the folder or file and what is
  wrong (no manifest, a file missing, of another size, or whose bytes changed).
* A **JSON file** (a calibration cache entry, a results record) carries its own seal: the
  SHA-256 of its canonical JSON (sorted keys, no spaces) in the field ``"sha256"``
  (:func:`seal`, :func:`check_seal`, :func:`write_sealed_json`, :func:`read_sealed_json`).
* An **array file** records the SHA-256 of its arrays' bytes (:func:`sha256_arrays`), e.g. in
  its safetensors header (:class:`lamina.states.trajectories.Trajectories`).

Hashing stays cheap: a folder is hashed in full on the first check after any change to its
files' stat signature (size, mtime, ctime, inode: every write, copy or ``touch`` changes the
ctime, which no user can set back). The signature of the last verified state is kept in
``.lamina-verified.json`` beside the manifest; a check that finds it unchanged costs a few
``stat`` calls. Damage that bypasses the filesystem (bit rot under an unchanged inode) is not
seen until the signature changes. Hashing SmolLM2's 538 MB fp32 cache takes 1.6-1.7 s on the
2-core development machine.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from lamina.core.provenance import atomic_write_text, json_default

__all__ = [
    "MANIFEST",
    "VERIFIED",
    "ManifestError",
    "check_folder",
    "check_seal",
    "read_cache_entry",
    "read_sealed_json",
    "safetensors_table",
    "seal",
    "sha256_arrays",
    "sha256_file",
    "verify_folder",
    "write_manifest",
    "write_sealed_json",
]

MANIFEST = "lamina-manifest.json"
VERIFIED = ".lamina-verified.json"
SEAL = "sha256"


class ManifestError(ValueError):
    """A file or folder whose bytes are not those lamina recorded when it wrote them (or that
    has no record to check them against): ``path`` and ``reason`` say which and why."""

    def __init__(self, path: str | os.PathLike, reason: str):
        self.path, self.reason = Path(path), reason
        super().__init__(f"{path}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.reason))


# ----------------------------------------------------------------------------------------
# hashes
# ----------------------------------------------------------------------------------------


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    """SHA-256 (hex) of one file's bytes, streamed in 4 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sha256_arrays(arrays: Iterable[np.ndarray]) -> str:
    """SHA-256 (hex) of arrays in order: each one's dtype, shape and C-order bytes."""
    digest = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        digest.update(f"{a.dtype.str}|{a.shape}|".encode())
        digest.update(a.data)  # the C-order bytes, no copy
    return digest.hexdigest()


def safetensors_table(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """``{tensor name: {"dtype": "F32", "shape": [...]}}`` of a safetensors file, read from its
    header only (no tensor data). Raises :class:`ManifestError` naming the file when it is not
    a readable safetensors file."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            if not 0 < size <= min(100 << 20, max(0, path.stat().st_size - 8)):
                raise ValueError(f"header length {size} does not fit the file")
            header = json.loads(f.read(size))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise ManifestError(path, f"not a readable safetensors file ({exc})") from exc
    if not isinstance(header, dict):
        raise ManifestError(path, "not a readable safetensors file (its header is not an object)")
    return {
        name: {"dtype": str(info.get("dtype")), "shape": [int(d) for d in info.get("shape", [])]}
        for name, info in sorted(header.items())
        if name != "__metadata__" and isinstance(info, dict)
    }


# ----------------------------------------------------------------------------------------
# folders
# ----------------------------------------------------------------------------------------


def _listed(folder: Path) -> list[str]:
    """The files of ``folder`` a manifest lists: every regular file but the manifest, the
    verified signature and hidden temporaries (names starting with a dot)."""
    return sorted(
        p.name for p in folder.iterdir() if p.is_file() and not p.name.startswith(".") and p.name != MANIFEST
    )


def write_manifest(
    folder: str | os.PathLike, record: dict[str, Any] | None = None, files: Iterable[str] | None = None
) -> dict[str, Any]:
    """Write ``<folder>/lamina-manifest.json`` (atomically; call it last): ``record`` plus
    ``files``: ``{name: {"size", "sha256"[, "tensors"]}}`` for ``files`` (default: every
    file of the folder, hidden ones aside), a safetensors file with its tensor table
    (:func:`safetensors_table`). Returns the manifest."""
    folder = Path(folder)
    entries: dict[str, Any] = {}
    for name in sorted(files) if files is not None else _listed(folder):
        path = folder / name
        entry: dict[str, Any] = {"size": path.stat().st_size, "sha256": sha256_file(path)}
        if name.endswith(".safetensors"):
            entry["tensors"] = safetensors_table(path)
        entries[name] = entry
    manifest = {**(record or {}), "files": entries}
    atomic_write_text(folder / MANIFEST, json.dumps(manifest, indent=1, default=str) + "\n")
    (folder / VERIFIED).unlink(missing_ok=True)
    return manifest


def _signature(folder: Path, names: Iterable[str]) -> dict[str, list[int]]:
    """``{name: [size, mtime_ns, ctime_ns, inode]}`` of ``names`` and the manifest."""
    out = {}
    for name in [*sorted(names), MANIFEST]:
        st = (folder / name).stat()
        out[name] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    return out


def check_folder(folder: str | os.PathLike, *, extra_files: bool = True) -> dict[str, Any]:
    """The manifest of ``folder`` when every file it lists is present with its size and
    SHA-256 (and a safetensors file with its tensor table); else :class:`ManifestError`
    naming the folder or file and what is wrong. ``extra_files=False`` also refuses files
    the manifest does not list. The hashes are skipped when the files' stat signature equals
    the one recorded after the last full check (see the module docstring)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ManifestError(folder, "no such folder")
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        files = manifest["files"]
        if not isinstance(files, dict) or not all(isinstance(e, dict) for e in files.values()):
            raise ValueError("its 'files' is not a table of files")
    except FileNotFoundError:
        raise ManifestError(folder, f"has no {MANIFEST} (an interrupted write, or written by "
                                    "an older lamina): its bytes cannot be checked") from None
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise ManifestError(folder / MANIFEST, f"unreadable ({exc.__class__.__name__}: {exc})") from exc
    for name, entry in files.items():
        path = folder / name
        if not path.is_file():
            raise ManifestError(path, "listed in its folder's manifest but missing")
        if path.stat().st_size != entry.get("size"):
            raise ManifestError(
                path, f"has {path.stat().st_size} bytes, its manifest says {entry.get('size')} "
                "(truncated, replaced or an interrupted copy)"
            )  # fmt: skip
    if not extra_files:
        extra = sorted(set(_listed(folder)) - set(files))
        if extra:
            raise ManifestError(folder, f"holds files its manifest does not list: {extra[:5]}")
    signature = _signature(folder, files)
    try:
        if json.loads((folder / VERIFIED).read_text()) == signature:
            return manifest
    except (OSError, ValueError):
        pass
    for name, entry in files.items():
        if sha256_file(folder / name) != entry.get("sha256"):
            raise ManifestError(
                folder / name, "its bytes do not match the SHA-256 in its folder's manifest "
                "(damaged or edited after it was written)"
            )  # fmt: skip
        if "tensors" in entry and safetensors_table(folder / name) != entry["tensors"]:
            raise ManifestError(folder / name, "its tensor table differs from its manifest's")
    try:  # best effort: a read-only folder is hashed on every check
        atomic_write_text(folder / VERIFIED, json.dumps(signature))
    except OSError:
        pass
    return manifest


def verify_folder(folder: str | os.PathLike) -> tuple[dict[str, Any] | None, str | None]:
    """(manifest, None) when :func:`check_folder` accepts ``folder``; (None, why) naming the
    damage otherwise; (None, None) when there is no folder at all (nothing to rebuild)."""
    if not Path(folder).exists():
        return None, None
    try:
        return check_folder(folder), None
    except ManifestError as exc:
        return None, str(exc)


# ----------------------------------------------------------------------------------------
# sealed JSON
# ----------------------------------------------------------------------------------------


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()


def seal(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as it will read back from JSON, with ``"sha256"``: the SHA-256 of its canonical
    JSON (sorted keys, no spaces), the seal field itself left out."""
    plain = json.loads(json.dumps(obj, default=json_default))
    plain.pop(SEAL, None)
    return {**plain, SEAL: hashlib.sha256(_canonical(plain)).hexdigest()}


def check_seal(obj: Any, path: str | os.PathLike) -> dict[str, Any]:
    """``obj`` (read from the JSON file ``path``) when its seal matches its content; else
    :class:`ManifestError` naming ``path``: not an object, no seal, or content changed."""
    if not isinstance(obj, dict):
        raise ManifestError(path, f"holds {type(obj).__name__}, not a JSON object")
    if SEAL not in obj:
        raise ManifestError(path, "carries no SHA-256 seal (written by an older lamina or "
                                  "by hand): its content cannot be checked")  # fmt: skip
    body = {k: v for k, v in obj.items() if k != SEAL}
    if hashlib.sha256(_canonical(body)).hexdigest() != obj[SEAL]:
        raise ManifestError(path, "its content does not match its SHA-256 seal (edited or "
                                  "damaged after it was written)")  # fmt: skip
    return obj


def write_sealed_json(path: str | os.PathLike, obj: dict[str, Any], indent: int | None = 1) -> Path:
    """Write ``obj`` with its :func:`seal` to ``path`` atomically."""
    return atomic_write_text(path, json.dumps(seal(obj), indent=indent) + "\n")


def read_sealed_json(path: str | os.PathLike) -> dict[str, Any]:
    """The JSON object at ``path`` when it is readable and its seal matches (the seal field
    removed); else :class:`ManifestError` naming ``path`` (``FileNotFoundError`` when
    missing)."""
    path = Path(path)
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ManifestError(path, f"not readable JSON ({exc.__class__.__name__}: {exc})") from exc
    body = check_seal(obj, path)
    return {k: v for k, v in body.items() if k != SEAL}


def read_cache_entry(path: str | os.PathLike) -> dict[str, Any] | None:
    """A cache entry written by :func:`write_sealed_json`: its content, or None when there is
    none, or when it is damaged (unreadable, unsealed or changed since it was written): then
    after a warning naming the file and why, with the entry deleted, so that the caller
    recomputes it. A damaged entry is never used."""
    import warnings

    path = Path(path)
    if not path.is_file():
        return None
    try:
        return read_sealed_json(path)
    except ManifestError as exc:
        warnings.warn(f"damaged cache entry deleted and recomputed: {exc}", RuntimeWarning,
                      stacklevel=2)  # fmt: skip
        path.unlink(missing_ok=True)
        return None
