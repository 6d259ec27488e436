"""The README's stage table, from the Snakemake benchmark records of one build.

    python workflow/scripts/stage_table.py [RECORDS_DIR] [--readme README.md]

Each rule of the ``Snakefile`` writes ``<records>/<stage>.tsv`` (Snakemake's ``benchmark:``
columns: ``s`` wall seconds, ``max_rss`` peak resident memory in MB, ``cpu_time`` seconds; one
row per run of the job, the last one counts). Prints a Markdown table, one row per stage in
the build's order (organisms, aligned, chapters, runs, calibration, pages, HTML) and a total
of the wall times; with ``--readme`` it replaces the text between the lines
``<!-- stage-table -->`` and ``<!-- /stage-table -->`` of that file instead (an error if
they are missing).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

BEGIN, END = "<!-- stage-table -->", "<!-- /stage-table -->"
ORDER = ("organism-", "aligned-", "chapter-", "run-", "calibration-paper", "calibration-page",
         "methods", "pages", "html")  # fmt: skip


def _duration(seconds: float) -> str:
    """``1 h 02 min``, ``3 min 07 s`` or ``13 s``."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s} s"


def read_records(folder: Path) -> list[tuple[str, dict[str, float]]]:
    """``[(stage, {"s", "max_rss", "cpu_time"})]`` from the last row of each record, in the
    build's order (:data:`ORDER`, then by name)."""
    rows = []
    for path in sorted(folder.glob("*.tsv")):
        with open(path, newline="") as f:
            last = list(csv.DictReader(f, delimiter="\t"))[-1:]
        if not last:
            continue
        values = {}
        for column in ("s", "max_rss", "cpu_time"):
            try:
                values[column] = float(last[0][column])
            except (KeyError, TypeError, ValueError):  # "NA" where the OS gave no value
                values[column] = float("nan")
        rows.append((path.stem, values))
    rank = {p: i for i, p in enumerate(ORDER)}
    return sorted(rows, key=lambda r: (min((i for p, i in rank.items() if r[0].startswith(p)),
                                           default=len(ORDER)), r[0]))  # fmt: skip


def stage_table(rows: list[tuple[str, dict[str, float]]]) -> str:
    """The Markdown table of ``rows`` (:func:`read_records`) with the total wall time."""
    lines = ["| stage | wall time | peak memory | CPU time |", "|---|---|---|---|"]
    for stage, v in rows:
        rss = f"{v['max_rss'] / 1024:.1f} GiB" if v["max_rss"] == v["max_rss"] else "n/a"
        cpu = _duration(v["cpu_time"]) if v["cpu_time"] == v["cpu_time"] else "n/a"
        lines.append(f"| {stage} | {_duration(v['s'])} | {rss} | {cpu} |")
    total = sum(v["s"] for _, v in rows)
    lines.append(f"| **all stages, one after the other** | **{_duration(total)}** | | |")
    return "\n".join(lines) + "\n"


def replace_block(text: str, table: str) -> str:
    """``text`` with the lines between :data:`BEGIN` and :data:`END` replaced by ``table``."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"no {BEGIN} ... {END} block to replace")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stage_table.py", description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="?", type=Path,
                        default=Path(__file__).resolve().parents[2] / "benchmarks" / "snakemake")
    parser.add_argument("--readme", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = read_records(args.records)
    if not rows:
        parser.error(f"no benchmark records in {args.records}")
    table = stage_table(rows)
    if args.readme is None:
        sys.stdout.write(table)
        return 0
    try:
        args.readme.write_text(replace_block(args.readme.read_text(), table))
    except ValueError as exc:
        parser.error(f"{args.readme}: {exc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
