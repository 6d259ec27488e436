"""Lamina's reuse keys written as files, for a workflow engine to read (the ``Snakefile``).

A Snakemake rule reruns when one of its input files is newer than its outputs. A key file is
rewritten only when its key changes (:func:`write_key`), so a rule that reads it reruns exactly
when lamina's key does, and never because the file was merely recomputed.

* :func:`chapter_key`: a chapter execution's input key (:func:`lamina.book.reuse.input_key`)
  *without* its ``organisms`` component: the organisms' build records are produced by other
  rules of the workflow, so the chapter rule lists them as inputs of their own instead (a key
  computed before they are built would change once they are, and run the chapter twice).
* :func:`calibration_key`: one paper's calibration (:data:`lamina.book.calibration.PAPERS`):
  the number of seeds, the source of every lamina module its calibration module imports
  (:func:`lamina.core.imports.import_closure`), the prompt files and the library versions
  (:data:`lamina.book.reuse.LIBRARIES`). Each seed's rows are also cached by the module itself;
  this key only decides whether the rule runs at all.

Organisms and aligned builds need no key file: their folders are named by their config hash
(:func:`lamina.sources.organisms.organism_dir`), which is lamina's own key for them, so the
rule's output path changes when the config does.

Command line (what a rule or a person runs)::

    python -m lamina.book.keyfile chapter NAME OUT.json [--book] [--model M]
    python -m lamina.book.keyfile calibration PAPER N_SEEDS OUT.json   # PAPER: 1, 2 or 3

Each prints the key and whether the file changed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from lamina.book.calibration import PAPERS
from lamina.book.params import check_parameters
from lamina.book.reuse import LIBRARIES, component_digests, input_key
from lamina.core.imports import import_closure
from lamina.core.provenance import atomic_write_text
from lamina.core.version import __version__
from lamina.sources.prompts import prompts_dir
from lamina.states.runs import notebooks_dir

__all__ = ["EXTERNAL_COMPONENTS", "calibration_key", "chapter_key", "main", "write_key"]

EXTERNAL_COMPONENTS = ("organisms",)
"""Components of a chapter's reuse key that are other rules' outputs (inputs of their own)."""


def _sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _file_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def chapter_key(
    chapter: str, parameters: Mapping[str, Any] | None = None, *, book: bool = True
) -> dict[str, Any]:
    """``{"stage", "chapter", "book", "key", "components"}`` of executing ``chapter`` with
    ``parameters`` (checked as ``lamina run`` checks them): ``key`` is the SHA-256 (hex) of
    the components' digests, the :data:`EXTERNAL_COMPONENTS` left out."""
    folder = notebooks_dir()
    if folder is None:
        raise RuntimeError("chapter keys are computed in a lamina checkout (notebooks/ not found)")
    source = folder / f"{chapter}.py"
    if not source.is_file():
        raise ValueError(f"unknown chapter {chapter!r} (no {source})")
    checked = check_parameters(chapter, source, dict(parameters or {}))
    _, detail = input_key(source, checked, book)
    digests = {k: v for k, v in component_digests(detail).items() if k not in EXTERNAL_COMPONENTS}
    return {"stage": "chapter", "chapter": chapter, "book": book, "key": _sha(digests),
            "components": digests}  # fmt: skip


def calibration_key(paper: int, n_seeds: int) -> dict[str, Any]:
    """``{"stage", "paper", "title", "seeds", "key", "components"}`` of paper ``paper``'s
    calibration (1-based index into :data:`lamina.book.calibration.PAPERS`) over ``n_seeds``
    seeds."""
    if not 1 <= paper <= len(PAPERS):
        raise ValueError(f"paper must be 1..{len(PAPERS)}; got {paper}")
    if n_seeds < 1:
        raise ValueError(f"n_seeds must be >= 1; got {n_seeds}")
    title, module = PAPERS[paper - 1]
    source = Path(str(module.__file__))
    closure = import_closure(source) or {module.__name__: source}
    components = {
        "seeds": _sha(n_seeds),
        "lamina_code": _sha({m: _file_sha(p) for m, p in closure.items()}),
        "prompts": _sha({str(p.relative_to(prompts_dir())): _file_sha(p)
                         for p in sorted(prompts_dir().rglob("*")) if p.is_file()}),  # fmt: skip
        "versions": _sha({"python": platform.python_version(), "lamina": __version__,
                          **{d: _version(d) for d in LIBRARIES}}),  # fmt: skip
    }
    return {"stage": "calibration", "paper": paper, "title": title, "seeds": n_seeds,
            "key": _sha(components), "components": components}  # fmt: skip


def write_key(record: Mapping[str, Any], path: str | os.PathLike) -> bool:
    """Write ``record`` as JSON to ``path`` unless the file already holds the same key (its
    modification time then stays, so a rule that reads it does not rerun); True when written."""
    path = Path(path)
    try:
        if json.loads(path.read_text()).get("key") == record["key"]:
            return False
    except (OSError, ValueError, AttributeError):
        pass  # absent, unreadable or not a key file: write it
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(dict(record), indent=1, sort_keys=True) + "\n")
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m lamina.book.keyfile chapter|calibration ...`` (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m lamina.book.keyfile")
    sub = parser.add_subparsers(dest="command", required=True)
    ch = sub.add_parser("chapter", help="a chapter execution's key")
    ch.add_argument("chapter")
    ch.add_argument("out")
    ch.add_argument("--book", action="store_true", help="the book's own build (make book)")
    ch.add_argument("--model", default=None, help="the same as lamina run --model")
    ca = sub.add_parser("calibration", help="one paper's calibration key")
    ca.add_argument("paper", type=int)
    ca.add_argument("seeds", type=int)
    ca.add_argument("out")
    args = parser.parse_args(argv)
    try:
        if args.command == "chapter":
            params = {} if args.model is None else {"model": args.model}
            record = chapter_key(args.chapter, params, book=args.book)
        else:
            record = calibration_key(args.paper, args.seeds)
    except ValueError as exc:
        parser.error(str(exc))
    changed = write_key(record, args.out)
    print(f"[lamina] {args.out}: {record['key'][:16]} ({'changed' if changed else 'unchanged'})",
          file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
