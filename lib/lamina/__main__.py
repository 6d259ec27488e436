"""The ``lamina`` console command (also ``python -m lamina``).

    lamina run CHAPTER [CHAPTER ...] [--model M] [-p NAME VALUE ...] [--out DIR] [--force]
    lamina run --all [--book]              # every chapter; --book: the book's own build
    lamina chapters [CHAPTER ...]          # the registry: name, paper, default models
    lamina pages [--results DIR]           # scorecard, comparison, reproducibility pages
    lamina methods                         # the methods page's quoted definitions
    lamina models                          # the models loadable offline here
    lamina calibrate [N_SEEDS] [--page OUT.md]
    lamina organisms build|list ...        # the model organisms (python -m lamina.sources.organisms)

``run`` is ``python -m lamina.book execute`` (``--model M`` is ``-p model M``; ``lamina run
--help`` lists every option); the older ``python -m`` forms stay. Usage errors exit with 2.
"""

from __future__ import annotations

import argparse
import sys

from lamina.core.machine import machine_cores

__all__ = ["main"]


def _run(argv: list[str]) -> int:
    """``lamina run``: the book's executor (:func:`lamina.book.cli.run_main`)."""
    if not {"-h", "--help"} & set(argv):  # importing torch takes a while on a first run
        print("[lamina] run: loading lamina ...", file=sys.stderr, flush=True)
    from lamina.book.cli import run_main

    return run_main(argv, prog="lamina run")


def _chapters(argv: list[str]) -> int:
    """``lamina chapters [NAME ...]``: the registry's rows (of the chapters named); an unknown
    name is a usage error (exit 2)."""
    from lamina.core.registry import REGISTRY

    parser = argparse.ArgumentParser(prog="lamina chapters", description="the book's chapters")
    parser.add_argument("names", nargs="*", help="chapters to show (default: all)")
    args = parser.parse_args(argv)
    known = [r.name for r in REGISTRY]
    unknown = [n for n in args.names if n not in known]
    if unknown:
        parser.error(f"unknown chapter {unknown[0]!r}; chapters: {known}")
    for r in REGISTRY:
        if args.names and r.name not in args.names:
            continue
        paper = f"paper {r.paper}" if r.paper else "-"
        print(f"{r.name:<26} {paper:<8} {r.notebook:<36} {', '.join(r.default_models)}")
    return 0


def _models(argv: list[str]) -> int:
    """``lamina models``: the models loadable offline here (no arguments)."""
    parser = argparse.ArgumentParser(prog="lamina models", description="the models loadable offline here")
    parser.parse_args(argv)  # no arguments: a stray one is a usage error
    from lamina.sources.models import available_offline

    for name in available_offline():
        print(name)
    return 0


def _calibrate(argv: list[str]) -> int:
    from lamina.book.calibration import main as calibration

    parser = argparse.ArgumentParser(prog="lamina calibrate")
    parser.add_argument("seeds", nargs="?", type=int, default=5, help="seeds per known-answer source")
    parser.add_argument("--page", default="book/generated/calibration.md",
                        help="where the calibration page's body goes (every paper's claims)")  # fmt: skip
    parser.add_argument("--jobs", type=int, default=machine_cores(),
                        help="worker processes, one thread each (default: the machine's cores)")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"seeds must be >= 1; got {args.seeds}")
    return calibration([args.page, str(args.seeds), "--jobs", str(args.jobs)])


def main(argv: list[str] | None = None) -> int:
    """Dispatch ``lamina COMMAND ...``; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    commands = ("run", "chapters", "pages", "methods", "models", "calibrate", "organisms")
    if not args or args[0] in ("-h", "--help") or args[0] not in commands:
        print(__doc__, file=sys.stderr)
        if args and args[0] not in ("-h", "--help"):
            print(f"lamina: unknown command {args[0]!r}; one of {', '.join(commands)}", file=sys.stderr)
            return 2
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "run":
        return _run(rest)
    if command == "chapters":
        return _chapters(rest)
    if command == "models":
        return _models(rest)
    if command == "calibrate":
        return _calibrate(rest)
    if command == "organisms":
        from lamina.sources.organisms.__main__ import main as organisms

        return int(organisms(rest) or 0)
    from lamina.book.cli import main as book

    return book([command, *rest], prog="lamina")


if __name__ == "__main__":
    raise SystemExit(main())
