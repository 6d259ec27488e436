"""The command lines ``python -m lamina.book`` (execute, pages, methods) and ``lamina run``.

    lamina run CHAPTER [CHAPTER ...] [--model M] [-p NAME VALUE ...] [--out DIR] [--force]
    lamina run --all [--book]              # every chapter, one after another
    python -m lamina.book execute ...      # the same as lamina run
    python -m lamina.book pages [--root DIR] [--results DIR]
    python -m lamina.book methods [--out FILE]

Every usage error (an unknown chapter or parameter, a value of the wrong type, a parameter
given twice, an unusable folder, a model that does not load here, a bad prompts file) exits
with status 2 and one line naming the value, before any kernel starts. A chapter that fails
while running exits with status 1 and one line naming the error and the partial notebook.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from lamina.book import execute
from lamina.book.methods import methods_markdown
from lamina.book.params import ParameterError, cli_parameters
from lamina.book.preflight import PreflightError, check_environment
from lamina.book.scorecard import write_pages
from lamina.core.provenance import (
    EnvPathError,
    absolute_env_paths,
    atomic_write_text,
    repo_root,
    writable_folder,
)
from lamina.states.io import ResultsFileError, ResultsWriteError

__all__ = ["execute_parser", "main", "run_main"]


def _add_execute_arguments(ex: argparse.ArgumentParser) -> None:
    ex.add_argument("chapters", nargs="*", help="chapter names (notebooks/<name>.py); `lamina chapters` lists them")
    ex.add_argument("--all", action="store_true", help="every chapter of the book, in order")
    ex.add_argument("--model", default=None, metavar="M",
                    help="the model (or source) to run on: the same as -p model M")  # fmt: skip
    ex.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                    help="a parameter of the chapter's parameters cell, e.g. -p quick true")  # fmt: skip
    ex.add_argument("--out", default=None,
                    help="folder for the executed notebooks (default book/runs/<model>/<run>/)")  # fmt: skip
    ex.add_argument("--jobs", default=None, help=argparse.SUPPRESS)  # refused with a pointer
    ex.add_argument("--force", action="store_true",
                    help="execute even chapters whose inputs are unchanged since their last run")  # fmt: skip
    ex.add_argument("--book", action="store_true",
                    help="the book's own build (what `make book` runs): notebooks into book/executed "
                    "and results into the book's slot")  # fmt: skip


def execute_parser(prog: str = "lamina run") -> argparse.ArgumentParser:
    """The parser of ``lamina run`` (and of ``python -m lamina.book execute``)."""
    ex = argparse.ArgumentParser(
        prog=prog,
        description="Execute chapters of the book. A run writes its notebook to "
        "book/runs/<model>/<run>/ and its results to <results>/<model>/<run>/, where <run> "
        "hashes the parameters that differ from the book's; only --book (make book) writes "
        "book/executed/ and the book's own results.",
    )
    _add_execute_arguments(ex)
    return ex


def _parser(prog: str) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The parser of ``prog`` and its subcommands' parsers (each reports its own usage)."""
    parser = argparse.ArgumentParser(prog=prog)
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("execute", help="execute chapters with papermill")
    _add_execute_arguments(ex)
    pg = sub.add_parser("pages", help="write the scorecard, abstract, comparison and reproducibility pages")
    pg.add_argument("--root", default=None, help="book root (default: the checkout)")
    pg.add_argument("--results", default=None, help="results folder (default: $LAMINA_RESULTS or data/results)")
    me = sub.add_parser("methods", help="write the methods page's quoted definitions")
    me.add_argument("--out", default=None, help="default book/generated/definitions.md")
    return parser, {"execute": ex, "pages": pg, "methods": me}


def _pairs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[list[str]]:
    """The ``-p`` pairs with ``--model`` added; a parameter given twice is a usage error."""
    pairs = [list(p) for p in args.p]
    if args.model is not None:
        if not args.model.strip():
            parser.error("--model is empty; give a model name, path or 'default'")
        pairs.append(["model", args.model])
    seen: dict[str, str] = {}
    for name, value in pairs:
        if name in seen:
            how = " (once by --model)" if name == "model" and args.model is not None else ""
            parser.error(f"parameter {name!r} is given twice{how}: {seen[name]!r} and {value!r}; "
                         "give it once")  # fmt: skip
        seen[name] = value
    return pairs


def _refuse_outside_link(parser: argparse.ArgumentParser, given: str, out: Path) -> None:
    """``--out`` through a symbolic link that leads outside the project is refused (exit 2):
    the run would write, and later replace, files in a folder the command line does not name.
    Naming the link's target itself is accepted."""
    root = repo_root()
    plain = Path(os.path.normpath(Path(given).expanduser().absolute()))
    if root is not None and plain != out and not out.is_relative_to(root.resolve()):
        parser.error(f"--out {given!r} leads through a symbolic link to {str(out)!r}, outside the "
                     f"project: pass --out {str(out)!r} itself if the notebooks should go there")  # fmt: skip


def _execute(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    notebooks = sorted(p.stem for p in execute._notebooks_dir().glob("*.py"))
    known = sorted({*execute.CHAPTERS, *notebooks})
    unknown = [c for c in args.chapters if c not in notebooks]  # a name, never a path
    if unknown:
        parser.error(f"unknown chapter {unknown[0]!r}; chapters: {known}")
    if args.all and args.chapters:
        parser.error(f"--all runs every chapter; drop the names {args.chapters} or drop --all")
    chapters = execute.CHAPTERS if args.all else args.chapters
    if not chapters:
        parser.error("name a chapter or pass --all (`lamina chapters` lists them)")
    if args.jobs is not None:
        parser.error("--jobs: lamina run executes its chapters one after another; `make book` "
                     "(Snakemake) runs chapters side by side within the machine's cores and "
                     "memory (make book JOBS=J)")  # fmt: skip
    out = None
    try:
        check_environment()
        params = cli_parameters(chapters, _pairs(parser, args), execute._notebooks_dir())
        if args.out:
            out = Path(args.out).resolve()
            _refuse_outside_link(parser, args.out, out)
            if out == execute.book_folder().resolve() and not args.book:
                parser.error(f"--out {args.out!r} is the book's own folder: only the book's build "
                             "(--book, make book) writes there")  # fmt: skip
            try:
                writable_folder(out, f"--out {args.out!r}")
            except OSError as exc:
                parser.error(str(exc))
        return execute._execute_many(chapters, out, params, force=args.force, book=args.book)
    except (ParameterError, PreflightError, EnvPathError, ValueError) as exc:
        parser.error(str(exc))
    except KeyboardInterrupt:
        print("[lamina] interrupted", file=sys.stderr)
        return 130
    except ResultsWriteError as exc:  # a full disk as a run ended: nothing of the last good run lost
        print(f"[lamina] {parser.prog}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a cell failed in a kernel: one line, the notebook has the rest
        if type(exc).__name__ != "PapermillExecutionError":
            raise
        print(f"[lamina] {parser.prog}: a chapter failed: {getattr(exc, 'ename', '')}: "
              f"{str(getattr(exc, 'evalue', exc))[:300]}", file=sys.stderr)  # fmt: skip
        return 1


def run_main(argv: list[str] | None = None, prog: str = "lamina run") -> int:
    """``lamina run ...``: see the module docstring."""
    parser = execute_parser(prog)
    args = parser.parse_args(argv)
    absolute_env_paths()  # relative LAMINA_* folders: against the caller's directory
    return _execute(parser, args)


def main(argv: list[str] | None = None, prog: str = "python -m lamina.book") -> int:
    """``python -m lamina.book execute|pages|methods ...``; returns the exit status."""
    parser, subs = _parser(prog)
    args = parser.parse_args(argv)
    absolute_env_paths()  # relative LAMINA_* folders: against the caller's directory
    root = repo_root() or Path.cwd()
    parser = subs[args.command]
    if args.command == "execute":
        return _execute(parser, args)
    if args.command == "pages":
        if args.results is not None and not Path(args.results).is_dir():
            parser.error(f"--results {args.results!r}: no such results folder")
        try:
            paths = write_pages(args.root or root, args.results)
        except (FileNotFoundError, ResultsFileError, EnvPathError) as exc:
            parser.error(str(exc))
        for path in paths:
            print(f"[lamina] wrote {path}", file=sys.stderr)
        return 0
    target = Path(args.out) if args.out else root / "book" / "generated" / "definitions.md"
    atomic_write_text(target, methods_markdown())
    print(f"[lamina] wrote {target}", file=sys.stderr)
    return 0
