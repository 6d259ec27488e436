"""Chapter execution with papermill, and the ``python -m lamina.book`` command line.

Chapters are jupytext percent-format ``.py`` files in ``notebooks/``. Executing one converts
it to a fresh ``.ipynb`` in the build folder (the source is never written to), runs it with
papermill and the given parameters, and leaves the executed notebook for Jupyter Book.

CLI::

    python -m lamina.book execute CHAPTER [-p NAME VALUE ...] [--out DIR] [--force]
    python -m lamina.book execute --all

A chapter whose inputs have not changed since its last successful run into the same folder is
not executed again: its notebook and results are reused (see :mod:`lamina.book.reuse` for the
input key). ``--force`` reruns it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

from lamina.book.methods import methods_markdown
from lamina.book.params import (
    MODEL_PARAMETERS,
    ParameterError,
    chapter_defaults,
    check_parameters,
    cli_parameters,
)
from lamina.book.reuse import (
    changed_components,
    component_digests,
    describe_reuse,
    file_digest,
    input_key,
    results_files,
    reusable,
)
from lamina.book.scorecard import write_pages
from lamina.core import registry
from lamina.core.provenance import (
    absolute_env_paths,
    atomic_write_json,
    atomic_write_text,
    repo_root,
    writable_folder,
)
from lamina.states.io import RUN_ENV, ResultsFileError, results_dir

__all__ = ["CHAPTERS", "execute_chapter", "fold_injected_parameters", "main"]

# Order of execution and of the book (the registry, lamina.core.registry).
CHAPTERS = registry.names()


def run_namespace(source: Path, parameters: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """(varied, namespace): the parameters that differ from the book's (the chapter's
    ``parameters`` cell), model names and ``results_root`` aside, and a 12-hex hash of them
    (None when there are none: the run is the book's own). A run with a namespace writes its
    results to ``<results>/<model>/<namespace>/`` (:func:`lamina.states.io.write_results`)."""
    import hashlib

    defaults = chapter_defaults(source)
    skip = (*MODEL_PARAMETERS, "results_root")
    varied = {k: v for k, v in sorted(parameters.items()) if k not in skip and v != defaults.get(k)}
    if not varied:
        return {}, None
    text = json.dumps(varied, sort_keys=True, default=str)
    return varied, hashlib.sha256(text.encode()).hexdigest()[:12]


def _run_env(run: _Run) -> str:
    """The ``$LAMINA_RUN`` JSON for ``run`` (see :func:`lamina.states.io.run_record`)."""
    varied, namespace = run_namespace(run.source, run.parameters)
    quick = bool(run.parameters.get("quick", chapter_defaults(run.source).get("quick", False)))
    return json.dumps(
        {"chapter": run.chapter, "parameters": run.parameters, "varied": varied,
         "namespace": namespace, "key": run.key, "quick": quick},
        default=str,
    )  # fmt: skip


def _check_out(out: Path) -> Path:
    """``out`` as a writable folder (created); ValueError naming it otherwise."""
    try:
        return writable_folder(out, f"--out {str(out)!r}")
    except OSError as exc:
        raise ValueError(str(exc)) from None


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
    force: bool = False,
) -> Path:
    """Execute ``notebooks/<chapter>.py`` with papermill into ``<out_dir>/<chapter>.ipynb``.

    The jupytext source is converted to a temporary notebook first, so the ``.py`` file is
    never modified. Writes ``<out_dir>/<chapter>.report.json`` (parameters, seconds, status,
    the input key with its components, the results files written). ``parameters`` are checked
    against the chapter's parameters cell first (:func:`lamina.book.params.check_parameters`:
    unknown names and wrong types raise ``ParameterError``; relative paths resolve against the
    caller's working directory, as does ``out_dir``).

    Unless ``force``, a chapter whose last run into ``out_dir`` succeeded with the same input
    key (:func:`lamina.book.reuse.input_key`), and whose notebook and results files are still
    as that run wrote them, is not executed again: one line says so and the notebook is
    returned. When it reruns after an earlier run, one line says which inputs changed.
    """
    absolute_env_paths()  # the kernel runs in notebooks/: relative LAMINA_* would move
    run = _prepare(chapter, out_dir, parameters)
    if _reuse(run, force):
        return run.target
    return _execute(run, kernel, progress)


class _Run(NamedTuple):
    """A chapter execution, checked and keyed (see :func:`_prepare`)."""

    chapter: str
    source: Path  # notebooks/<chapter>.py
    parameters: dict[str, Any]  # checked
    out: Path  # absolute
    key: str
    detail: dict[str, Any]  # the key's components

    @property
    def target(self) -> Path:
        return self.out / f"{self.chapter}.ipynb"

    @property
    def report(self) -> Path:
        return self.out / f"{self.chapter}.report.json"


def _prepare(chapter: str, out_dir: str | os.PathLike, parameters: dict[str, Any] | None) -> _Run:
    """The chapter's source, checked parameters, absolute output folder and input key."""
    source = _notebooks_dir() / f"{chapter}.py"
    if not source.is_file():
        known = sorted(p.stem for p in _notebooks_dir().glob("*.py"))
        raise ValueError(f"unknown chapter {chapter!r}; chapters: {known}")
    checked = check_parameters(chapter, source, parameters or {})
    out = Path(out_dir).resolve()  # papermill's cwd= changes the process's directory
    key, detail = input_key(source, checked)
    return _Run(chapter, source, checked, out, key, detail)


def _reuse(run: _Run, force: bool) -> bool:
    """Whether the last run can be reused (printing the line that says so); else print why
    the chapter runs again, when it ran before."""
    previous, why = reusable(run.report, run.target, run.key)
    if previous is not None and not force:
        print(describe_reuse(run.chapter, previous), file=sys.stderr, flush=True)
        return True
    if why == "no previous run":
        return False
    if force:
        why = "--force"
    elif why == "inputs changed":
        try:
            old = json.loads(run.report.read_text())
        except (OSError, ValueError):
            old = {}
        new = {"key_components": component_digests(run.detail), "key_detail": run.detail}
        why = "changed: " + ("; ".join(changed_components(old, new)) or "the key's format")
    print(f"[lamina] {run.chapter}: rerunning ({why})", file=sys.stderr, flush=True)
    return False


def _execute(run: _Run, kernel: str, progress: bool) -> Path:
    """Run the chapter with papermill and write its report (see :func:`execute_chapter`)."""
    import jupytext
    import papermill

    chapter, out_dir, target = run.chapter, run.out, run.target
    _check_out(out_dir)
    staged = out_dir / f".{chapter}.src.ipynb"
    jupytext.write(jupytext.read(run.source), staged, fmt="ipynb")
    tmp_target = out_dir / f".{chapter}.running.ipynb"
    results_root = Path(run.parameters.get("results_root") or results_dir())
    started = time.time() - 1.0  # mtimes of files written during the run (coarse clocks)
    start = time.perf_counter()
    status = "ok"
    written: dict[str, str] = {}
    previous_run_env = os.environ.get(RUN_ENV)
    os.environ[RUN_ENV] = _run_env(run)  # the kernel inherits it: write_results records it
    try:
        papermill.execute_notebook(
            str(staged),
            str(tmp_target),
            parameters=run.parameters,
            kernel_name=kernel,
            progress_bar=progress,
            cwd=str(_notebooks_dir()),
        )
        fold_injected_parameters(tmp_target)
        os.replace(tmp_target, target)
        written = results_files(chapter, results_root, started)
        namespace = json.loads(os.environ[RUN_ENV])["namespace"]
        for folder in results_root.glob(f"*/{namespace}") if namespace else []:
            written.update(results_files(chapter, folder.parent, started))
    except BaseException:
        status = "failed"
        raise
    finally:
        if previous_run_env is None:
            os.environ.pop(RUN_ENV, None)
        else:
            os.environ[RUN_ENV] = previous_run_env
        staged.unlink(missing_ok=True)
        atomic_write_json(
            run.report,
            {
                "chapter": chapter,
                "parameters": run.parameters,
                "seconds": round(time.perf_counter() - start, 2),
                "status": status,
                "output": str(target if status == "ok" else tmp_target),
                "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "key": run.key,
                "key_components": component_digests(run.detail),
                "key_detail": run.detail,
                "notebook_sha256": file_digest(target) if status == "ok" else None,
                "results": written,
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


def _parser() -> argparse.ArgumentParser:
    """The command line of ``python -m lamina.book``: execute, pages, methods."""
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
    ex.add_argument(
        "--force",
        action="store_true",
        help="execute even chapters whose inputs are unchanged since their last run in --out",
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
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)

    absolute_env_paths()  # relative LAMINA_* folders: against the caller's directory
    root = repo_root() or Path.cwd()
    if args.command == "pages":
        if args.results is not None and not Path(args.results).is_dir():
            parser.error(f"--results {args.results!r}: no such results folder")
        try:
            paths = write_pages(args.root or root, args.results)
        except (FileNotFoundError, ResultsFileError) as exc:
            parser.error(str(exc))
        for path in paths:
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
            out = _check_out(Path(args.out).resolve())
        elif models:
            names = models[0] if isinstance(models[0], list) else [models[0]]
            out = root / "book" / "runs" / "+".join(_safe_dirname(str(m)) for m in names)
        else:
            out = root / "book" / "executed"
    except (ParameterError, ValueError) as exc:
        parser.error(str(exc))
    return _execute_many(chapters, out, params, jobs=args.jobs, force=args.force)


TYPICAL_SECONDS: dict[str, float] = {c.name: c.typical_seconds for c in registry.REGISTRY}
"""Each chapter's ``typical_seconds`` (:class:`lamina.core.registry.ChapterRecord`): only the
order of a first run, before any report exists (longest first)."""


def _last_seconds(out: Path, chapter: str) -> float:
    """How long ``chapter`` took last time in ``out``; else :data:`TYPICAL_SECONDS` (0 for a
    chapter not listed there)."""
    try:
        return float(json.loads((out / f"{chapter}.report.json").read_text())["seconds"])
    except (OSError, ValueError, KeyError):
        return float(TYPICAL_SECONDS.get(chapter, 0.0))


def _run_chapter(
    chapter: str, out: Path, params: dict[str, Any], progress: bool, force: bool, check: bool
) -> str:
    """One chapter, in :func:`_execute_many` or a worker process of it: reused when ``check``
    finds its inputs unchanged (and not ``force``), else executed."""
    run = _prepare(chapter, out, params)
    if check and _reuse(run, force):
        return chapter
    print(f"[lamina] executing {chapter} -> {out}", file=sys.stderr, flush=True)
    _execute(run, "python3", progress)
    return chapter


def _execute_many(
    chapters: list[str],
    out: Path,
    params: dict[str, dict[str, Any]],
    *,
    jobs: int,
    force: bool = False,
) -> int:
    """Execute ``chapters`` into ``out`` (made absolute), ``params[chapter]`` for each, reusing
    those whose inputs are unchanged unless ``force``. With ``jobs > 1``, the reusable ones are
    found first, here; each other chapter runs in its own process (papermill changes the
    working directory of the process that runs it), several at once, longest (by the last
    run's report) first, so the slow chapters do not queue behind the quick ones."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    out = Path(out).resolve()
    per = {c: params.get(c, {}) for c in chapters}
    if jobs <= 1:
        for chapter in chapters:
            _run_chapter(chapter, out, per[chapter], True, force, check=True)
        return 0
    todo = [c for c in chapters if not _reuse(_prepare(c, out, per[c]), force)]
    if not todo:
        return 0
    order = sorted(todo, key=lambda c: -_last_seconds(out, c))
    # kernels inherit the environment: share the cores out instead of oversubscribing them
    threads = str(max(1, (os.cpu_count() or 1) // jobs))
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "LAMINA_NUM_THREADS"):
        os.environ.setdefault(name, threads)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = [pool.submit(_run_chapter, c, out, per[c], False, force, False) for c in order]
        for future in futures:
            future.result()  # re-raise the first failure
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
