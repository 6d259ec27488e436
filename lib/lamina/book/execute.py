"""Chapter execution with papermill (the command line is :mod:`lamina.book.cli`).

Chapters are jupytext percent-format ``.py`` files in ``notebooks/``. Executing one converts
it to a fresh ``.ipynb`` in the output folder (the source is never written to), checks what
can be checked before a kernel starts (:mod:`lamina.book.preflight`), runs it with papermill
and the given parameters, and leaves the executed notebook for Jupyter Book.

Where a run lands (:mod:`lamina.states.runs`): the book's own build (``book=True``, what
``make book`` runs) writes ``book/executed/`` and the book's results slot; any other run writes
``book/runs/<model>/<namespace>/`` and ``<results>/<model>/<namespace>/``, the namespace a hash
of the parameters that differ from the book's.

While the kernel runs, lamina's progress lines (GGUF dequantisation, extraction, training) are
printed on the terminal (:mod:`lamina.core.progress`), not into the notebook; the kernel is
reached over Unix sockets (no unencrypted TCP). The last line names the executed notebook and
the results. A run writes its results records as ``<chapter>.unfinished.json`` (status
``running``: :data:`lamina.states.io.UNFINISHED`) beside the last successful run's, and they
replace those only when it ends well (:func:`lamina.states.io.mark_run`). A run that fails
keeps the last successful run's notebook, report and results as they were and writes
``<chapter>.failed.ipynb`` and ``<chapter>.failed.report.json`` beside them; its results
records (if any) are marked ``failed``, those of a run killed before it ended stay
``running``: both are shown as unfinished on the scorecard, beside the last good run's.

A chapter whose inputs have not changed since its last successful run into the same folder is
not executed again: its notebook and results are reused (see :mod:`lamina.book.reuse` for the
input key). ``force`` reruns it.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import sys
import tempfile
import time
from collections.abc import Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any, NamedTuple

from lamina.book.memory import PeakWatch
from lamina.book.params import chapter_defaults, check_parameters
from lamina.book.preflight import check_config, preflight
from lamina.book.reuse import (
    changed_components,
    component_digests,
    describe_reuse,
    file_digest,
    input_key,
    results_files,
    reusable,
)
from lamina.book.runlock import run_lock
from lamina.core import registry
from lamina.core.progress import PROGRESS_ENV, forward, say
from lamina.core.provenance import (
    absolute_env_paths,
    atomic_write_json,
    repo_root,
    temporary_environ,
    writable_folder,
)
from lamina.states.io import ResultsFileError, mark_run, read_result_file, results_dir
from lamina.states.runs import (
    RUN_ENV,
    namespace_of,
    notebooks_dir,
    runs_folder_name,
    varied_parameters,
)

__all__ = ["CHAPTERS", "book_folder", "default_out", "execute_chapter", "fold_injected_parameters",
           "run_namespace"]  # fmt: skip

# Order of execution and of the book (the registry, lamina.core.registry).
CHAPTERS = registry.names()


def run_namespace(
    source: Path, parameters: Mapping[str, Any], book: bool = False
) -> tuple[dict[str, Any], str | None]:
    """(varied, namespace): the parameters that differ from the book's (the chapter's
    ``parameters`` cell; model names and lists included, ``results_root`` aside) and their
    12-hex namespace (:func:`lamina.states.runs.namespace_of`); namespace None only for the
    book's own build (``book``)."""
    varied = varied_parameters(parameters, chapter_defaults(source))
    return varied, (None if book else namespace_of(varied))


def _notebooks_dir() -> Path:
    folder = notebooks_dir()
    if folder is None:
        raise RuntimeError("chapters are executed from a lamina checkout (notebooks/ not found)")
    return folder


def book_folder() -> Path:
    """``book/executed`` of the checkout: written only by the book's own build."""
    return (repo_root() or Path.cwd()) / "book" / "executed"


def default_out(chapter: str, parameters: Mapping[str, Any], book: bool) -> Path:
    """Where a run's notebook goes without ``--out``: ``book/executed`` for the book's build,
    else ``book/runs/<model>/<namespace>/`` (:func:`lamina.states.runs.runs_folder_name`)."""
    if book:
        return book_folder()
    source = _notebooks_dir() / f"{chapter}.py"
    _, namespace = run_namespace(source, parameters)
    model = parameters.get("model", "default")
    return book_folder().parent / "runs" / runs_folder_name(model) / str(namespace)


class _Run(NamedTuple):
    """A chapter execution, checked and keyed (see :func:`_prepare`)."""

    chapter: str
    source: Path  # notebooks/<chapter>.py
    parameters: dict[str, Any]  # checked
    out: Path  # absolute
    key: str
    detail: dict[str, Any]  # the key's components
    book: bool  # the book's own build: the book's results slot

    @property
    def target(self) -> Path:
        return self.out / f"{self.chapter}.ipynb"

    @property
    def report(self) -> Path:
        return self.out / f"{self.chapter}.report.json"

    def env(self) -> str:
        """The ``$LAMINA_RUN`` JSON (:func:`lamina.states.runs.run_record`)."""
        varied, namespace = run_namespace(self.source, self.parameters, self.book)
        quick = self.parameters.get("quick", chapter_defaults(self.source).get("quick", False))
        return json.dumps({"chapter": self.chapter, "book": self.book, "parameters": self.parameters,
                           "varied": varied, "namespace": namespace, "key": self.key,
                           "quick": bool(quick), "staged": True}, default=str)  # fmt: skip


def _prepare(
    chapter: str, out_dir: str | os.PathLike | None, parameters: Mapping[str, Any] | None, book: bool
) -> _Run:
    """The chapter's source, checked parameters, absolute output folder and input key."""
    source = _notebooks_dir() / f"{chapter}.py"
    known = sorted(p.stem for p in _notebooks_dir().glob("*.py"))
    if chapter not in known:  # a name, never a path (../x)
        raise ValueError(f"unknown chapter {chapter!r}; chapters: {known}")
    checked = check_parameters(chapter, source, dict(parameters or {}))
    check_config(chapter, checked, chapter_defaults(source))  # ranges and choices, no kernel
    out = Path(out_dir).resolve() if out_dir is not None else default_out(chapter, checked, book)
    key, detail = input_key(source, checked, book)
    return _Run(chapter, source, checked, out, key, detail, book)


def execute_chapter(
    chapter: str,
    out_dir: str | os.PathLike | None = None,
    parameters: dict[str, Any] | None = None,
    *,
    kernel: str = "python3",
    progress: bool = True,
    force: bool = False,
    book: bool = False,
) -> Path:
    """Execute ``notebooks/<chapter>.py`` with papermill into ``<out_dir>/<chapter>.ipynb``
    (default :func:`default_out`) and return that path.

    ``parameters`` are checked against the chapter's parameters cell first
    (:func:`lamina.book.params.check_parameters`), then the run is checked before the kernel
    starts (:func:`lamina.book.preflight.preflight`); relative paths resolve against the
    caller's working directory. ``book``: this is the book's own build (``make book``), whose
    results go to the book's slot; any other run's go to their namespace. Writes
    ``<out_dir>/<chapter>.report.json`` (parameters, seconds, status, the input key with its
    components, the results files written). Unless ``force``, a chapter whose last run into
    ``out_dir`` succeeded with the same input key, and whose notebook and results files are
    still as that run wrote them, is reused (one line says so)."""
    absolute_env_paths()  # the kernel runs in notebooks/: relative LAMINA_* would move
    run = _prepare(chapter, out_dir, parameters, book)
    preflight(chapter, run.parameters)
    if _reuse(run, force):
        return run.target
    return _execute(run, kernel, progress)


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


def _kernel_manager() -> type:
    """A kernel manager whose kernels listen on Unix sockets (IPC) in a private temporary
    folder: no unencrypted TCP ports, so no "Kernel is running over TCP" warning. TCP where
    there are no Unix sockets (Windows)."""
    from jupyter_client.manager import AsyncKernelManager

    class IPCKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs: Any) -> None:
            if os.name == "posix":
                kwargs.setdefault("transport", "ipc")
                kwargs.setdefault("ip", os.path.join(_socket_folder(), "kernel"))
            super().__init__(**kwargs)

    return IPCKernelManager


@functools.cache
def _socket_folder() -> str:
    """A private temporary folder for this process's kernel sockets, removed at exit."""
    import atexit
    import shutil

    folder = tempfile.mkdtemp(prefix="lamina-kernel-")
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _records_of(run: _Run, root: Path, since: float) -> tuple[dict[str, str], list[Path]]:
    """({path: SHA-256} of the results files ``run`` wrote under ``root`` since ``since``: in
    the book's slot for the book's build, else in the run's namespace; and the results
    records among them that carry this run's key)."""
    namespace = json.loads(run.env())["namespace"]
    if namespace is None:
        written = results_files(run.chapter, root, since)
    else:
        written = {}
        for folder in sorted(root.glob(f"*/{namespace}")) if root.is_dir() else []:
            written.update(results_files(run.chapter, folder.parent, since))
    mine = []
    for path in (Path(p) for p in written if p.endswith(".json")):
        try:
            if (read_result_file(path).get("run") or {}).get("key") == run.key:
                mine.append(path)
        except ResultsFileError:
            continue
    return written, mine


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def _execute(run: _Run, kernel: str, progress: bool) -> Path:
    """Run the chapter with papermill and write its report (see the module docstring), holding
    its lock (:func:`lamina.book.runlock.run_lock`: a second run of it refuses)."""
    writable_folder(run.out, f"output folder {str(run.out)!r}")
    with run_lock(run.out, run.chapter):
        return _execute_locked(run, kernel, progress)


def _execute_locked(run: _Run, kernel: str, progress: bool) -> Path:
    import jupytext
    import papermill

    chapter, out = run.chapter, run.out
    tag = f"{os.getpid()}"  # temporary names unique per process
    staged, running = out / f".{chapter}.{tag}.src.ipynb", out / f".{chapter}.{tag}.running.ipynb"
    jupytext.write(jupytext.read(run.source), staged, fmt="ipynb")
    root = Path(run.parameters.get("results_root") or results_dir())
    lines = Path(tempfile.mkstemp(prefix=f"lamina-{chapter}-", suffix=".progress")[1])
    started, start = time.time() - 1.0, time.perf_counter()
    status, failure = "ok", None
    say_ = say if progress else (lambda _: None)
    say_(f"[lamina] {chapter}: starting a kernel (notebook -> {run.target})")
    shown = forward(lines, f"[lamina] {chapter}: ") if progress else nullcontext()
    watch = PeakWatch()
    try:
        with temporary_environ({RUN_ENV: run.env(), PROGRESS_ENV: str(lines)}), shown, watch:
            papermill.execute_notebook(
                str(staged), str(running), parameters=run.parameters, kernel_name=kernel,
                progress_bar=False, cwd=str(_notebooks_dir()),
                kernel_manager_class=_kernel_manager(),
            )  # fmt: skip
        fold_injected_parameters(running)
    except BaseException as exc:  # noqa: BLE001 (re-raised below, after the report)
        status, failure = "failed", exc
    finally:
        staged.unlink(missing_ok=True)
        lines.unlink(missing_ok=True)
    written, mine = _records_of(run, root, started)
    try:  # "running" until now (a killed run stays so); "ok" moves them into place
        mark_run(mine, status)
        if status == "ok":
            os.replace(running, run.target)
    except OSError as exc:  # a full disk: the last good run's results stand, these stay unfinished
        status, failure = "failed", failure or exc
    written, _ = _records_of(run, root, started)
    seconds, peak = time.perf_counter() - start, watch.peak_gib
    report = {
        "chapter": chapter, "parameters": run.parameters, "seconds": round(seconds, 2),
        "peak_memory_gib": None if peak is None else round(peak, 2),
        "status": status, "output": str(run.target if status == "ok" else out / f"{chapter}.failed.ipynb"),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "key": run.key,
        "key_components": component_digests(run.detail), "key_detail": run.detail,
        "notebook_sha256": file_digest(run.target) if status == "ok" else None, "results": written,
    }  # fmt: skip
    if status == "ok":
        atomic_write_json(run.report, report)
        for stale in (f"{chapter}.failed.ipynb", f"{chapter}.failed.report.json"):
            (out / stale).unlink(missing_ok=True)
        folders = sorted({str(Path(p).parent) for p in written if p.endswith(".json")})
        where = {0: "none written", 1: folders[0] if folders else ""}.get(
            len(folders), f"{len(folders)} folders under {root}")  # fmt: skip
        memory = "" if peak is None else f", peak memory {peak:.1f} GiB"
        say_(f"[lamina] {chapter}: done in {_minutes(seconds)}{memory}; notebook {run.target}; "
             f"results {where}")  # fmt: skip
        return run.target
    partial = out / f"{chapter}.failed.ipynb"
    partial.unlink(missing_ok=True)
    if running.is_file():
        os.replace(running, partial)
    atomic_write_json(out / f"{chapter}.failed.report.json", report)
    kept = f"partial notebook {partial}" if partial.is_file() else "no notebook was written"
    say_(f"[lamina] {chapter}: failed after {_minutes(seconds)} ({type(failure).__name__}"
         f"{'' if peak is None else f', peak memory {peak:.1f} GiB'}); "
         f"{kept}; the last successful run's notebook and report, if any, are kept")  # fmt: skip
    assert failure is not None
    raise failure


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


def _run_chapter(run: _Run, force: bool) -> str:
    """One prepared chapter: reused when its inputs are unchanged (and not ``force``), else
    executed, with progress on the terminal."""
    if _reuse(run, force):
        return run.chapter
    print(f"[lamina] executing {run.chapter} -> {run.out}", file=sys.stderr, flush=True)
    _execute(run, "python3", True)
    return run.chapter


def _execute_many(
    chapters: list[str],
    out: Path | None,
    params: dict[str, dict[str, Any]],
    *,
    force: bool = False,
    book: bool = False,
) -> int:
    """Execute ``chapters`` into ``out`` (None: each chapter's :func:`default_out`), one after
    another, ``params[chapter]`` for each, reusing those whose inputs are unchanged unless
    ``force``. Every chapter is checked (:func:`lamina.book.preflight.preflight`) before the
    first kernel starts. Chapters side by side are the workflow's to schedule (``make book``:
    Snakemake runs one ``lamina run CHAPTER --book`` per chapter within the machine's cores
    and memory, each chapter's ``mem_mb`` its :func:`lamina.book.memory.last_peak`)."""
    out = Path(out).resolve() if out is not None else None
    per = {c: params.get(c, {}) for c in chapters}
    start = time.perf_counter()
    runs = {c: _prepare(c, out, per[c], book) for c in chapters}
    for c, run in runs.items():
        preflight(c, run.parameters)
    print(f"[lamina] checked the parameters, models and folders of {', '.join(chapters)} "
          f"({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)  # fmt: skip
    for chapter in chapters:
        _run_chapter(runs[chapter], force)
    return 0
