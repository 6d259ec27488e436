"""Benchmark of the calibration workers' thread pinning (issue 34, "the speed the hardware
allows"): two spawned worker processes side by side, as ``make book`` runs the calibration on
2 cores, each computing calibration rows, pinned either the previous way (the BLAS variables
and torch's thread count, set after numpy had loaded its OpenBLAS, which then keeps one thread
per core) or by :func:`lamina.core.threads.one_thread_process` (threadpoolctl as well).

Work: paper 1's convergence rows on its planted source (``lamina.trajectory.calibration.
chapter_rows``, numpy-heavy; the levers are solved once, before the clock) and paper 3's whole
seeds (``lamina.anatomy.calibration.seed_runs``). Prints the pool's wall time and the workers'
summed CPU time per pinning, interleaved over repeats, and the ratios.

Usage: python benchmarks/worker_threads.py [--repeats 2] [--seeds 4]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import torch

from lamina.core.threads import one_thread_process


def env_only_pinning() -> None:
    """The previous one_thread_process: variables and torch only (numpy's BLAS already loaded)."""
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = "1"
    torch.set_num_threads(1)


def paper1_rows(seed: int) -> float:
    """CPU seconds of paper 1's convergence rows on the planted source at ``seed``."""
    from lamina.trajectory import calibration

    start = time.process_time()
    calibration.chapter_rows("convergence", "planted", seed, vanish=True,
                             budget=calibration.BUDGET)  # fmt: skip
    return time.process_time() - start


def paper3_rows(seed: int) -> float:
    """CPU seconds of one paper-3 calibration seed."""
    from lamina.anatomy import calibration

    start = time.process_time()
    calibration.seed_runs(seed)
    return time.process_time() - start


def pool_run(init: Any, task: Any, seeds: list[int]) -> tuple[float, float]:
    """(wall seconds of the pool's work, summed CPU seconds of the tasks) on 2 spawned workers;
    the workers are started and warmed (imports) before the clock."""
    with ProcessPoolExecutor(2, mp_context=mp.get_context("spawn"), initializer=init) as pool:
        list(pool.map(task, [10_000, 10_001]))  # warm: imports, lazy setup
        start = time.perf_counter()
        cpu = sum(pool.map(task, seeds))
        return time.perf_counter() - start, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=4)
    args = parser.parse_args()
    print(f"cpus: {len(os.sched_getaffinity(0))}; load average: "
          f"{', '.join(f'{v:.1f}' for v in os.getloadavg())}")  # fmt: skip
    paper1_rows(0)  # solves and caches the levers before any clock
    for label, task, n in (("paper 1 convergence rows", paper1_rows, args.seeds),
                           ("paper 3 seeds", paper3_rows, 4 * args.seeds)):  # fmt: skip
        res: dict[str, list[tuple[float, float]]] = {"env only": [], "threadpoolctl": []}
        for _ in range(args.repeats):
            res["env only"].append(pool_run(env_only_pinning, task, list(range(1, n + 1))))
            res["threadpoolctl"].append(pool_run(one_thread_process, task, list(range(1, n + 1))))
        wall = {k: statistics.median(w for w, _ in v) for k, v in res.items()}
        cpu = {k: statistics.median(c for _, c in v) for k, v in res.items()}
        print(f"{label} ({n} on 2 workers): wall {wall['env only']:.1f} s -> "
              f"{wall['threadpoolctl']:.1f} s ({wall['env only'] / wall['threadpoolctl']:.2f}x); "
              f"CPU {cpu['env only']:.1f} s -> {cpu['threadpoolctl']:.1f} s "
              f"({cpu['env only'] / cpu['threadpoolctl']:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
