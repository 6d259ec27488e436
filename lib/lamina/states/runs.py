"""Where a chapter run lands: the book's own slot, or a namespace of the parameters it varied.

One rule for every way of running a chapter (``make book``, ``lamina run``, ``make chapter``,
the Python API, papermill or Jupyter directly):

* Only the book's own build (``make book``, whose Snakemake rules run ``lamina run CHAPTER
  --book``) writes the book's slot, ``<results>/<model>/<chapter>.json``, and ``book/executed/``.
* Every other run writes ``<results>/<model>/<namespace>/<chapter>.json``, where the
  namespace is a 12-hex hash of every parameter that differs from the book's (the chapter's
  ``parameters`` cell), model names and lists included, ``results_root`` aside
  (:func:`namespace_of`). The same parameters give the same namespace, however the chapter
  was run; a run with the book's parameters outside ``make book`` gets the namespace of
  ``{}``, so it never replaces the book's results either.
* Folder names are collision-free: a plain model name (letters, digits and ``._@~+-``) is its
  own folder; any other (a path, a hub name ``org/name``) is a readable slug plus 8 hex of
  the SHA-256 of the full name (:func:`model_folder`), so ``/a/exp_1/m.gguf`` and
  ``/a/exp/1/m.gguf`` never share one.

``lamina.book.execute`` tells the kernel which run it is through ``$LAMINA_RUN`` (JSON:
``book``, ``parameters``, ``varied``, ``namespace``, ``key``, ``quick``, ``staged``: its results
wait beside the last finished run's until it ends, ``lamina.states.io.write_results``); without it
(Python, papermill, Jupyter) :func:`run_record` compares the chapter's config with the book's
parameters itself.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lamina.core.provenance import json_default, repo_root

__all__ = [
    "RUN_ENV",
    "book_defaults",
    "model_folder",
    "namespace_of",
    "notebooks_dir",
    "parameters_cell",
    "run_record",
    "runs_folder_name",
    "varied_parameters",
]

RUN_ENV = "LAMINA_RUN"
"""The environment variable through which ``lamina.book.execute`` tells the chapter's kernel
which run it is (JSON); see :func:`run_record`."""

NOT_NAMESPACED = ("results_root",)
"""Parameters that say where results go, not what they are: never part of a namespace."""

_PLAIN = re.compile(r"[A-Za-z0-9._@~+-]+")


def notebooks_dir() -> Path | None:
    """``$LAMINA_NOTEBOOKS`` (for tests), else the checkout's ``notebooks/``; None outside a
    checkout."""
    if os.environ.get("LAMINA_NOTEBOOKS"):
        return Path(os.environ["LAMINA_NOTEBOOKS"]).resolve()
    root = repo_root()
    return root / "notebooks" if root is not None else None


def parameters_cell(source: str | os.PathLike) -> dict[str, Any]:
    """``{name: default}`` of the cell tagged ``parameters`` of the jupytext percent-format
    notebook ``source`` (read as text: no Jupyter needed). A default that is not a literal maps
    to ``...``. ValueError naming the file when it has no such cell or it does not parse."""
    lines = Path(source).read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("# %%")]
    for k, i in enumerate(starts):
        header = lines[i]
        if "tags=" in header and re.search(r"""["']parameters["']""", header):
            end = starts[k + 1] if k + 1 < len(starts) else len(lines)
            try:
                tree = ast.parse("\n".join(lines[i + 1 : end]))
            except SyntaxError as exc:
                raise ValueError(f"{source}: its parameters cell does not parse ({exc})") from exc
            out: dict[str, Any] = {}
            for node in tree.body:
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            try:
                                out[target.id] = ast.literal_eval(node.value)
                            except ValueError:
                                out[target.id] = ...
            return out
    raise ValueError(f"{source}: no cell tagged 'parameters'")


def book_defaults(chapter: str) -> dict[str, Any] | None:
    """The book's parameters of ``chapter`` (its notebook's parameters cell), or None when
    there is no notebook to read (lamina installed outside a checkout)."""
    folder = notebooks_dir()
    path = folder / f"{chapter}.py" if folder is not None else None
    if path is None or not path.is_file():
        return None
    return parameters_cell(path)


def _json(value: Any) -> Any:
    try:
        return json_default(value)
    except TypeError:  # anything else a config may hold (a set, a dtype): its text
        return str(value)


def _plain(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples as lists, numpy scalars as numbers, other
    objects as their text)."""
    return json.loads(json.dumps(value, default=_json))


def varied_parameters(parameters: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters whose value differs from the book's ``defaults`` (names the defaults
    lack are ignored), model names and lists included, :data:`NOT_NAMESPACED` aside; sorted
    by name, as plain JSON values."""
    out = {}
    for name in sorted(parameters):
        if name in NOT_NAMESPACED or name not in defaults or defaults[name] is ...:
            continue
        value = _plain(parameters[name])
        if value != _plain(defaults[name]):
            out[name] = value
    return out


def namespace_of(varied: Mapping[str, Any]) -> str:
    """The 12-hex namespace of a run that varied ``varied`` (the SHA-256 of its sorted JSON)."""
    text = json.dumps(_plain(dict(varied)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def model_folder(model: str) -> str:
    """The results folder name of ``model``: the name itself when it is plain (letters,
    digits, ``._@~+-``, not only dots), else a readable slug (a path's last part, other
    characters as ``_``) plus ``-`` and 8 hex of the SHA-256 of the full name."""
    name = str(model)
    if _PLAIN.fullmatch(name) and name.strip("."):
        return name
    base = Path(name).name if "/" in name and Path(name).name else name
    slug = re.sub(r"[^A-Za-z0-9._@~+-]+", "_", base).strip("._") or "model"
    return f"{slug[:60]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def runs_folder_name(model: Any) -> str:
    """The ``book/runs/`` folder of a run of ``model`` (a name, or a list of names): their
    :func:`model_folder` names joined by ``+`` (shortened with a hash beyond 100 characters);
    ``default`` for the chapter's default model set."""
    names = [str(m) for m in model] if isinstance(model, list | tuple) else [str(model)]
    text = "+".join(model_folder(m) for m in names) or "default"
    if len(text) > 100:
        text = f"{text[:60]}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"
    return text


def run_record(chapter: str, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The run a results file comes from: what ``lamina.book.execute`` put in ``$LAMINA_RUN``
    (``via: "lamina.book execute"``; ``book``: the book's own build; ``parameters``,
    ``varied``, ``namespace`` (None only for the book's build), ``key``, ``quick``, ``staged``,
    ``status`` "running" until the executor marks it "ok" or "failed"), else a record of a
    run from Python, papermill or Jupyter (``via: "python"``): its ``config`` compared with
    the book's parameters of ``chapter`` (:func:`varied_parameters`; every field of the config
    when there is no notebook to compare with), always namespaced."""
    text = os.environ.get(RUN_ENV)
    if text:
        try:
            run = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"${RUN_ENV} is not valid JSON ({exc}): {text[:200]!r}") from exc
        if not isinstance(run, dict):
            raise ValueError(f"${RUN_ENV} is not a JSON object: {text[:200]!r}")
        if not run.get("book") and not run.get("namespace"):
            raise ValueError(f"${RUN_ENV} names no namespace for a run outside the book: {text[:200]!r}")
        return {"via": "lamina.book execute", "status": "running", **run}
    config = dict(config or {})
    defaults = book_defaults(chapter)
    varied = varied_parameters(config, defaults) if defaults is not None else {
        k: v for k, v in _plain(config).items() if k not in NOT_NAMESPACED}  # fmt: skip
    return {"via": "python", "book": False, "parameters": None, "varied": varied,
            "namespace": namespace_of(varied), "key": None, "quick": config.get("quick"),
            "status": None}  # fmt: skip
