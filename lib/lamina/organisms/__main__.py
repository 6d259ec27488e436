"""Command line: ``python -m lamina.organisms build [--name NAME ...] [--micro] [--root DIR]`` and
``python -m lamina.organisms list [--root DIR]``."""

from __future__ import annotations

import argparse
import json
import sys
import time

from lamina import organisms


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the command; returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m lamina.organisms", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build organisms (cached by config hash)")
    b.add_argument("--name", action="append", help="organism to build (repeatable); default: all")
    b.add_argument("--micro", action="store_true", help="build the -micro test variants instead")
    b.add_argument("--root", default=None, help="organisms folder (default $LAMINA_DATA/organisms)")
    b.add_argument("--no-progress", action="store_true", help="no progress bars")
    ls = sub.add_parser("list", help="list organisms and their checkpoints")
    ls.add_argument("--root", default=None)
    args = ap.parse_args(argv)

    if args.command == "build":
        names = args.name or organisms.list_organisms(micro=True)
        names = [n for n in names if args.name or n.endswith("-micro") == args.micro]
        t0 = time.time()
        for n in names:
            t = time.time()
            path = organisms.build(n, root=args.root, progress=not args.no_progress)
            print(f"{n}: {path} ({time.time() - t:.0f} s)", flush=True)
        print(f"built {len(names)} organism(s) in {time.time() - t0:.0f} s")
        return 0
    for n in organisms.list_organisms(micro=True):
        try:
            cks = organisms.list_checkpoints(n, root=args.root)
            ev = organisms.organism_dir(n, args.root) / "evaluation.json"
            line = f"{n}: {len(cks)} checkpoints: " + ", ".join(c.split("@")[1] for c in cks)
            if ev.is_file():
                final = json.loads(ev.read_text())["models"]["final"]
                line += f"  (val ppl {final['val_perplexity']:.1f})"
            print(line)
        except organisms.OrganismNotBuiltError:
            print(f"{n}: not built ({organisms.BUILD_HINT})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
