"""One paper's calibration runs (the Snakefile's ``calibration_paper`` rule).

    python workflow/scripts/calibrate_paper.py PAPER N_SEEDS KEY.json OUT.json [--jobs J]

Runs :func:`lamina.book.calibration.paper_section` for paper PAPER (1, 2 or 3) over seeds
0..N_SEEDS-1 on J one-thread worker processes; every seed's rows land in lamina's calibration
cache (``<data>/cache/calibration``), from which the page rule (``python -m
lamina.book.calibration``) then assembles the page without recomputing a seed. OUT.json records
the paper's key (read from KEY.json, written by ``python -m lamina.book.keyfile calibration``),
its number of rows and its cost line.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from lamina.book.calibration import PAPERS, paper_section
from lamina.core.provenance import atomic_write_text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="calibrate_paper.py", description=__doc__.splitlines()[0])
    parser.add_argument("paper", type=int, choices=range(1, len(PAPERS) + 1))
    parser.add_argument("seeds", type=int)
    parser.add_argument("key", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.jobs < 1:
        parser.error("N_SEEDS and --jobs must be >= 1")
    title, module = PAPERS[args.paper - 1]
    start = time.perf_counter()
    section = paper_section(title, module, args.seeds, jobs=args.jobs)
    record = {
        "paper": args.paper, "title": title, "seeds": args.seeds,
        "key": json.loads(args.key.read_text())["key"], "rows": int(len(section.runs)),
        "cost": section.cost, "seconds": round(time.perf_counter() - start, 1),
    }  # fmt: skip
    atomic_write_text(args.out, json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
