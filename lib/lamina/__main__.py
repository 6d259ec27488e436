"""The ``lamina`` console command (also ``python -m lamina``).

    lamina run CHAPTER [CHAPTER ...] [--model M] [-p NAME VALUE ...] [--out DIR] [--force]
    lamina run --all [--jobs 2]            # every chapter of the book, in registry order
    lamina chapters                        # the registry: name, paper, default models
    lamina pages [--results DIR]           # scorecard, comparison, reproducibility pages
    lamina methods                         # the methods page's quoted definitions
    lamina models                          # the models loadable offline here
    lamina calibrate [N_SEEDS] [--page OUT.md]
    lamina organisms build|list ...        # the model organisms (python -m lamina.sources.organisms)

``run`` is ``python -m lamina.book execute`` with ``--model M`` as a shorthand for
``-p model M``; the older ``python -m`` forms stay.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


def _run(argv: list[str]) -> int:
    """``lamina run``: translate ``--model`` and hand the rest to the book's executor."""
    from lamina.book.execute import main as execute

    pre = argparse.ArgumentParser(prog="lamina run", add_help=False)
    pre.add_argument("--model", default=None)
    known, rest = pre.parse_known_args(argv)
    if known.model is not None:
        if not known.model.strip():
            raise SystemExit("lamina run: --model is empty; give a model name, path or 'default'")
        rest += ["-p", "model", known.model]
    return execute(["execute", *rest])


def _chapters() -> int:
    from lamina.core.registry import REGISTRY

    for r in REGISTRY:
        paper = f"paper {r.paper}" if r.paper else "-"
        print(f"{r.name:<26} {paper:<8} {r.notebook:<36} {', '.join(r.default_models)}")
    return 0


def _models() -> int:
    from lamina.sources.models import available_offline

    for name in available_offline():
        print(name)
    return 0


def _calibrate(argv: list[str]) -> int:
    from lamina.trajectory.calibration import main as calibration

    parser = argparse.ArgumentParser(prog="lamina calibrate")
    parser.add_argument("seeds", nargs="?", type=int, default=5, help="null and planted seeds")
    parser.add_argument("--page", default=None, help="write the book page body to this file")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (one thread each)")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"seeds must be >= 1; got {args.seeds}")
    words = ["page", args.page, str(args.seeds)] if args.page else [str(args.seeds)]
    calibration([*words, "--jobs", str(args.jobs)])
    return 0


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
        return _chapters()
    if command == "models":
        return _models()
    if command == "calibrate":
        return _calibrate(rest)
    if command == "organisms":
        from lamina.sources.organisms.__main__ import main as organisms

        return int(organisms(rest) or 0)
    from lamina.book.execute import main as book

    return book([command, *rest])


if __name__ == "__main__":
    raise SystemExit(main())
