"""Chapter execution with papermill, and the ``python -m lamina.book`` command line.

Chapters are jupytext percent-format ``.py`` files in ``notebooks/``. Executing one converts
it to a fresh ``.ipynb`` in the build folder (the source is never written to), runs it with
papermill and the given parameters, and leaves the executed notebook for Jupyter Book.

CLI::

    python -m lamina.book execute CHAPTER [-p NAME VALUE ...] [--out DIR]
    python -m lamina.book execute --all
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from lamina.book.methods import methods_markdown
from lamina.book.params import ParameterError, check_parameters, cli_parameters
from lamina.book.scorecard import write_pages
from lamina.provenance import atomic_write_json, atomic_write_text, repo_root

__all__ = ["CHAPTERS", "execute_chapter", "fold_injected_parameters", "main"]

# Order of execution and of the book.
CHAPTERS = [
    "trajectory_tour",
    "convergence",
    "curvature",
    "bifurcation",
    "three_phase",
    "reanalysis",
    "weight_update_signature",
    "layer_anatomy",
    "growth_training",
    "organisms",
]


def _notebooks_dir() -> Path:
    """``$LAMINA_NOTEBOOKS`` (for tests), else the checkout's ``notebooks/``."""
    if os.environ.get("LAMINA_NOTEBOOKS"):
        return Path(os.environ["LAMINA_NOTEBOOKS"]).resolve()
    root = repo_root()
    if root is None:
        raise RuntimeError("chapters are executed from a lamina checkout (notebooks/ not found)")
    return root / "notebooks"


def execute_chapter(
    chapter: str,
    out_dir: str | os.PathLike,
    parameters: dict[str, Any] | None = None,
    *,
    kernel: str = "python3",
    progress: bool = True,
) -> Path:
    """Execute ``notebooks/<chapter>.py`` with papermill into ``<out_dir>/<chapter>.ipynb``.

    The jupytext source is converted to a temporary notebook first, so the ``.py`` file is
    never modified. Writes ``<out_dir>/<chapter>.report.json`` (parameters, seconds, status).
    ``parameters`` are checked against the chapter's parameters cell first
    (:func:`lamina.book.params.check_parameters`: unknown names and wrong types raise
    ``ParameterError``; relative paths resolve against the caller's working directory, as
    does ``out_dir``).
    """
    import jupytext
    import papermill

    source = _notebooks_dir() / f"{chapter}.py"
    if not source.is_file():
        known = sorted(p.stem for p in _notebooks_dir().glob("*.py"))
        raise ValueError(f"unknown chapter {chapter!r}; chapters: {known}")
    parameters = check_parameters(chapter, source, parameters or {})
    out_dir = Path(out_dir).resolve()  # papermill's cwd= changes the process's directory
    out_dir.mkdir(parents=True, exist_ok=True)
    staged = out_dir / f".{chapter}.src.ipynb"
    jupytext.write(jupytext.read(source), staged, fmt="ipynb")
    target = out_dir / f"{chapter}.ipynb"
    tmp_target = out_dir / f".{chapter}.running.ipynb"
    start = time.perf_counter()
    status = "ok"
    try:
        papermill.execute_notebook(
            str(staged),
            str(tmp_target),
            parameters=parameters or {},
            kernel_name=kernel,
            progress_bar=progress,
            cwd=str(_notebooks_dir()),
        )
        fold_injected_parameters(tmp_target)
        os.replace(tmp_target, target)
    except BaseException:
        status = "failed"
        raise
    finally:
        staged.unlink(missing_ok=True)
        atomic_write_json(
            out_dir / f"{chapter}.report.json",
            {
                "chapter": chapter,
                "parameters": parameters or {},
                "seconds": round(time.perf_counter() - start, 2),
                "status": status,
                "output": str(target if status == "ok" else tmp_target),
            },
        )
    return target


def fold_injected_parameters(path: str | os.PathLike) -> None:
    """Tag papermill's injected-parameters cell ``hide-input`` in the notebook at ``path``,
    so its code is folded like the chapter's own parameters cell (one click away)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    changed = False
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags and "hide-input" not in tags:
            cell.metadata["tags"] = [*tags, "hide-input"]
            changed = True
    if changed:
        nbformat.write(nb, path)


def _safe_dirname(model: str) -> str:
    """The runs folder named after ``model``: a local folder's own name, else the hub name
    with unsafe characters replaced; never ``.`` or ``..``."""
    name = Path(model).name if Path(model).is_absolute() else model
    name = re.sub(r"[^A-Za-z0-9._@-]+", "_", name)
    if name.strip(".") == "":
        raise ValueError(f"model {model!r} gives no usable folder name; pass --out")
    return name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lamina.book")
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("execute", help="execute chapters with papermill")
    ex.add_argument("chapters", nargs="*", help="chapter names (notebooks/<name>.py)")
    ex.add_argument("--all", action="store_true", help="every chapter of the book, in order")
    ex.add_argument("--out", default=None, help="output folder (default book/executed)")
    ex.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    ex.add_argument(
        "--jobs", type=int, default=1, help="chapters executed at once (each kernel is separate)"
    )
    pg = sub.add_parser(
        "pages", help="write the scorecard, abstract, comparison and reproducibility pages"
    )
    pg.add_argument("--root", default=None, help="book root (default: the checkout)")
    pg.add_argument(
        "--results", default=None, help="results folder (default: $LAMINA_RESULTS or data/results)"
    )
    me = sub.add_parser("methods", help="write the methods page's quoted definitions")
    me.add_argument("--out", default=None, help="default book/generated/definitions.md")
    args = parser.parse_args(argv)

    root = repo_root() or Path.cwd()
    if args.command == "pages":
        if args.results is not None and not Path(args.results).is_dir():
            parser.error(f"--results {args.results!r}: no such results folder")
        for path in write_pages(args.root or root, args.results):
            print(f"[lamina] wrote {path}", file=sys.stderr)
        return 0
    if args.command == "methods":
        target = Path(args.out) if args.out else root / "book" / "generated" / "definitions.md"
        atomic_write_text(target, methods_markdown())
        print(f"[lamina] wrote {target}", file=sys.stderr)
        return 0

    chapters = CHAPTERS if args.all else args.chapters
    if not chapters:
        parser.error("name a chapter or pass --all")
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1; got {args.jobs}")
    try:
        params = cli_parameters(chapters, args.p, _notebooks_dir())
        models = [p["model"] for p in params.values() if "model" in p]
        if args.out:
            out = Path(args.out).resolve()
        elif models:
            names = models[0] if isinstance(models[0], list) else [models[0]]
            out = root / "book" / "runs" / "+".join(_safe_dirname(str(m)) for m in names)
        else:
            out = root / "book" / "executed"
    except ParameterError as exc:
        parser.error(str(exc))
    return _execute_many(chapters, out, params, jobs=args.jobs)


def _last_seconds(out: Path, chapter: str) -> float:
    """How long ``chapter`` took last time in ``out`` (0 when unknown)."""
    try:
        return float(json.loads((out / f"{chapter}.report.json").read_text())["seconds"])
    except (OSError, ValueError, KeyError):
        return 0.0


def _run_chapter(chapter: str, out: Path, params: dict[str, Any], progress: bool) -> str:
    """One chapter, in a worker process of :func:`_execute_many`."""
    print(f"[lamina] executing {chapter} -> {out}", file=sys.stderr, flush=True)
    execute_chapter(chapter, out, params, progress=progress)
    return chapter


def _execute_many(
    chapters: list[str], out: Path, params: dict[str, dict[str, Any]], *, jobs: int
) -> int:
    """Execute ``chapters`` into ``out`` (made absolute), ``params[chapter]`` for each. With
    ``jobs > 1``, each chapter runs in its own process (papermill changes the working
    directory of the process that runs it), several at once, longest (by the last run's
    report) first, so the slow chapters do not queue behind the quick ones."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    out = Path(out).resolve()
    per = {c: params.get(c, {}) for c in chapters}
    if jobs <= 1:
        for chapter in chapters:
            _run_chapter(chapter, out, per[chapter], True)
        return 0
    order = sorted(chapters, key=lambda c: -_last_seconds(out, c))
    # kernels inherit the environment: share the cores out instead of oversubscribing them
    threads = str(max(1, (os.cpu_count() or 1) // jobs))
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "LAMINA_NUM_THREADS"):
        os.environ.setdefault(name, threads)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = [pool.submit(_run_chapter, c, out, per[c], False) for c in order]
        for future in futures:
            future.result()  # re-raise the first failure
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
