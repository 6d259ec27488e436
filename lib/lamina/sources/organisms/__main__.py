"""Command line: ``python -m lamina.sources.organisms build [--name NAME ...] [--micro] [--seeds K ...]
[--root DIR]`` and ``python -m lamina.sources.organisms list [--root DIR]``.

``--seeds 0 1 2`` builds each organism with training seeds 0, 1 and 2 side by side: seed 0 is
the plain name (``organism-gpt2``), seed k the name ``organism-gpt2~sk``."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from lamina.core.machine import machine_cores
from lamina.sources import organisms


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the command; returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m lamina.sources.organisms", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build organisms (cached by config hash)")
    b.add_argument("--name", action="append", help="organism to build (repeatable); default: all")
    b.add_argument("--micro", action="store_true", help="build the -micro test variants instead")
    b.add_argument("--seeds", nargs="+", type=int, default=[0], metavar="K",
                   help="training seeds to build (default: 0; seed k > 0 is named NAME~sk)")  # fmt: skip
    b.add_argument("--root", default=None, help="organisms folder (default $LAMINA_DATA/organisms)")
    b.add_argument("--no-progress", action="store_true", help="no progress bars")
    b.add_argument("--jobs", type=int, default=machine_cores(),
                   help="organisms built at once, each in its own process on one training "
                   f"thread (default: this machine's cores, {machine_cores()})")  # fmt: skip
    ls = sub.add_parser("list", help="list organisms and their checkpoints")
    ls.add_argument("--root", default=None)
    args = ap.parse_args(argv)

    if args.command == "build":
        names = args.name or organisms.list_organisms(micro=True)
        names = [n for n in names if args.name or n.endswith("-micro") == args.micro]
        if any(k < 0 for k in args.seeds):
            ap.error(f"--seeds must be non-negative integers, got {args.seeds}")
        names = [organisms.seed_name(n, k) for k in dict.fromkeys(args.seeds) for n in names]
        if args.jobs < 1:
            ap.error(f"--jobs must be >= 1, got {args.jobs}")
        t0 = time.time()
        if args.jobs > 1 and len(names) > 1:
            _build_parallel(names, args.root, args.jobs)
            print(f"built {len(names)} organism(s) in {time.time() - t0:.0f} s")
            return 0
        for n in names:
            t = time.time()
            path = organisms.build(n, root=args.root, progress=not args.no_progress)
            print(f"{n}: {path} ({time.time() - t:.0f} s)", flush=True)
        print(f"built {len(names)} organism(s) in {time.time() - t0:.0f} s")
        return 0
    for base in organisms.list_organisms(micro=True):
        for n in organisms.built_seeds(base, args.root) or [base]:
            _list_one(n, args.root)
    return 0


def _build_parallel(names: list[str], root: str | None, jobs: int) -> None:
    """Build ``names`` in ``jobs`` child processes at once, each training on
    :data:`lamina.sources.organisms.build.TRAIN_THREADS` torch threads (the same on every
    machine, so builds agree across core counts) with its own progress line prefixed by the
    organism's name. Raises ``SystemExit`` naming every organism whose build failed."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    pending = list(names)
    running: dict[str, tuple[subprocess.Popen[bytes], float, int]] = {}
    failed: list[str] = []
    while pending or running:
        while pending and len(running) < jobs:
            n = pending.pop(0)
            cmd = [sys.executable, "-m", "lamina.sources.organisms", "build", "--name", n]
            cmd += ["--root", root] if root else []
            slot = min(set(range(jobs)) - {s for _, _, s in running.values()})
            # each child's progress bar on its own terminal line (tqdm reads TQDM_* overrides)
            child = {**env, "TQDM_POSITION": str(slot), "TQDM_MININTERVAL": "5"}
            running[n] = (subprocess.Popen(cmd, env=child), time.time(), slot)
        time.sleep(1)
        for n, (proc, t, _) in list(running.items()):
            if proc.poll() is not None:
                del running[n]
                if proc.returncode:
                    failed.append(n)
                print(f"{n}: exit {proc.returncode} ({time.time() - t:.0f} s)", flush=True)
    if failed:
        raise SystemExit(f"organism build failed: {', '.join(failed)}")


def _list_one(n: str, root: str | None) -> None:
    """Print one organism's checkpoints (or that it is not built)."""
    try:
        cks = organisms.list_checkpoints(n, root=root)
        ev = organisms.organism_dir(n, root) / "evaluation.json"
        line = f"{n}: {len(cks)} checkpoints: " + ", ".join(c.split("@")[1] for c in cks)
        if ev.is_file():
            final = json.loads(ev.read_text())["models"]["final"]
            line += f"  (val ppl {final['val_perplexity']:.1f})"
        print(line)
    except organisms.OrganismNotBuiltError:
        print(f"{n}: not built ({organisms.BUILD_HINT})")


if __name__ == "__main__":
    sys.exit(main())
