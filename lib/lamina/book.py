"""Book plumbing: offline Altair charts, glue helpers, and chapter execution with papermill.

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

from lamina.provenance import atomic_write_json, repo_root

__all__ = ["CHAPTERS", "execute_chapter", "glue", "setup_altair", "verdict"]

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


def setup_altair() -> None:
    """Render Altair charts as static SVG (via vl-convert), so the book needs no network:
    the default renderer loads vega from a CDN. Also apply lamina's chart theme
    (``lamina.charts``) and show data frames in scroll containers (``lamina.tables``)."""
    import warnings

    import altair as alt

    # a chapter's page shows results, not library chatter
    warnings.filterwarnings("ignore", message="IProgress not found")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:
        pass
    alt.renderers.enable("svg")
    alt.data_transformers.disable_max_rows()

    from lamina.charts import register_theme
    from lamina.tables import install_table_formatter

    register_theme()
    install_table_formatter()


def glue(name: str, value: Any, *, display: bool = False) -> None:
    """``myst_nb.glue`` when available (inside the book), a no-op otherwise. Returns None,
    so a glue call as the last line of a cell prints nothing."""
    try:
        from myst_nb import glue as _glue
    except ImportError:
        return
    _glue(name, value, display=display)


def verdict(p_value: float | None, effect_ok: bool | None, *, alpha: float = 0.05) -> str:
    """A verdict word from a test's p-value and whether the effect has the claimed sign and
    size: ``reproduced`` (significant and as claimed), ``partially`` (significant but smaller
    than claimed, or as claimed but not significant), ``not reproduced`` or ``not testable``."""
    if p_value is None or effect_ok is None or p_value != p_value:
        return "not testable"
    significant = p_value < alpha
    if significant and effect_ok:
        return "reproduced"
    if significant or effect_ok:
        return "partially"
    return "not reproduced"


# ----------------------------------------------------------------------------------------
# the methods chapter quotes definitions from their single source: the docstrings
# ----------------------------------------------------------------------------------------

METHODS: dict[str, list[str]] = {
    "Representation": ["lamina.extract.extract"],
    "Trajectory geometry (paper 1)": [
        "lamina.geometry.trajectory_length",
        "lamina.geometry.curvature",
        "lamina.geometry.mean_curvature",
        "lamina.geometry.layerwise_cosine",
        "lamina.geometry.convergence_index",
        "lamina.geometry.convergence_index_pooled",
        "lamina.geometry.convergence_index_per_prompt",
        "lamina.geometry.stability",
        "lamina.geometry.bifurcation",
        "lamina.phases.fixed_phase_bands",
        "lamina.phases.detect_phases",
    ],
    "Controls": [
        "lamina.controls.shuffle_layers",
        "lamina.controls.random_embeddings",
        "lamina.controls.random_init_like",
        "lamina.controls.permute_labels",
    ],
    "Weight-update geometry (paper 2)": [
        "lamina.weights.relative_subspace_fraction",
        "lamina.weights.enrichment",
        "lamina.weights.principal_basis",
        "lamina.weights.prediction_basis",
        "lamina.gradients.gradient_geometry",
    ],
    "Layer anatomy (paper 3)": [
        "lamina.anatomy.perplexity",
        "lamina.anatomy.weight_predictability",
        "lamina.anatomy.delta_correlation",
        "lamina.anatomy.layer_structure",
        "lamina.growth.train_with_schedule",
    ],
}


def _resolve_dotted(dotted: str) -> Any:
    import importlib

    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def methods_markdown() -> str:
    """Markdown quoting the docstring of every definition in :data:`METHODS`, verbatim."""
    import inspect

    lines: list[str] = []
    for section, names in METHODS.items():
        found = []
        for dotted in names:
            try:
                obj = _resolve_dotted(dotted)
            except (ImportError, AttributeError):
                continue
            found.append((dotted, obj))
        if not found:
            continue
        lines += [f"## {section}", ""]
        for dotted, obj in found:
            doc = inspect.getdoc(obj) or "(undocumented)"
            lines += [f"### `{dotted}`", "", "```text", doc, "```", ""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------
# execution
# ----------------------------------------------------------------------------------------


def _notebooks_dir() -> Path:
    root = repo_root()
    if root is None:
        raise RuntimeError("chapters are executed from a lamina checkout (notebooks/ not found)")
    return root / "notebooks"


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


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
    """
    import jupytext
    import papermill

    source = _notebooks_dir() / f"{chapter}.py"
    if not source.is_file():
        known = sorted(p.stem for p in _notebooks_dir().glob("*.py"))
        raise ValueError(f"unknown chapter {chapter!r}; chapters: {known}")
    out_dir = Path(out_dir)
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
    return re.sub(r"[^A-Za-z0-9._@-]+", "_", model)


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
        from lamina.scorecard import write_pages

        for path in write_pages(args.root or root, args.results):
            print(f"[lamina] wrote {path}", file=sys.stderr)
        return 0
    if args.command == "methods":
        from lamina.provenance import atomic_write_text

        target = Path(args.out) if args.out else root / "book" / "generated" / "definitions.md"
        atomic_write_text(target, methods_markdown())
        print(f"[lamina] wrote {target}", file=sys.stderr)
        return 0

    chapters = CHAPTERS if args.all else args.chapters
    if not chapters:
        parser.error("name a chapter or pass --all")
    params = {name: _parse_value(value) for name, value in args.p}
    if args.out:
        out = Path(args.out)
    elif "model" in params:
        out = root / "book" / "runs" / _safe_dirname(str(params["model"]))
    else:
        out = root / "book" / "executed"
    return _execute_many(chapters, out, params, jobs=args.jobs)


def _last_seconds(out: Path, chapter: str) -> float:
    """How long ``chapter`` took last time in ``out`` (0 when unknown)."""
    try:
        return float(json.loads((out / f"{chapter}.report.json").read_text())["seconds"])
    except (OSError, ValueError, KeyError):
        return 0.0


def _execute_many(chapters: list[str], out: Path, params: dict[str, Any], *, jobs: int) -> int:
    """Execute ``chapters``; with ``jobs > 1``, several kernels at once, longest (by the last
    run's report) first, so the slow chapters do not queue behind the quick ones."""
    from concurrent.futures import ThreadPoolExecutor

    def run(chapter: str) -> None:
        print(f"[lamina] executing {chapter} -> {out}", file=sys.stderr, flush=True)
        execute_chapter(chapter, out, params, progress=jobs == 1)

    if jobs <= 1:
        for chapter in chapters:
            run(chapter)
        return 0
    order = sorted(chapters, key=lambda c: -_last_seconds(out, c))
    # kernels inherit the environment: share the cores out instead of oversubscribing them
    threads = str(max(1, (os.cpu_count() or 1) // jobs))
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "LAMINA_NUM_THREADS"):
        os.environ.setdefault(name, threads)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for future in [pool.submit(run, c) for c in order]:
            future.result()  # re-raise the first failure
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
