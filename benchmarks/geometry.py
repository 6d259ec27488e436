"""Benchmark of lamina.trajectory on random data (issue 4, section 6).

Prints the median wall time of repeated calls beside the targets:
- per-prompt metrics (length, curvature, layerwise cosine, stability) on 10,000 prompts x 31 layers
  x d = 1024 float32 (1.3 GB per array): target <= 2 s in total on 2 cores;
- convergence index on 2,000 prompts in 5 categories x 31 layers x d = 1024: target <= 5 s.

Usage: python benchmarks/geometry.py [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from lamina import trajectory as geometry


def median_time(fn: Callable[[], Any], repeats: int) -> float:
    """Median wall time of ``repeats`` calls of ``fn``, in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def random_states(n: int, layers: int, d: int, seed: int) -> np.ndarray:
    """Random-walk float32 states (n, layers, d): cumulative Gaussian steps from a Gaussian start."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, layers, d), dtype=np.float32)
    np.cumsum(x, axis=1, out=x)
    return x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="10x fewer prompts (smoke test)")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(
        f"cpus available: {len(os.sched_getaffinity(0))}, load average: {load}, repeats: {args.repeats}"
    )
    bench_per_prompt(10_000 // scale, args.repeats)
    bench_convergence(2_000 // scale, args.repeats)


def bench_per_prompt(n: int, repeats: int, layers: int = 31, d: int = 1024) -> None:
    """Time length, curvature, layerwise cosine and stability on (n, layers, d) float32 states."""
    print(f"per-prompt metrics: n={n}, layers={layers}, d={d}, float32")
    a = random_states(n, layers, d, seed=0)
    b = a + 0.1 * random_states(n, layers, d, seed=1)
    per_prompt = {
        "trajectory_length": lambda: geometry.trajectory_length(a),
        "curvature": lambda: geometry.curvature(a),
        "layerwise_cosine": lambda: geometry.layerwise_cosine(a),
        "stability": lambda: geometry.stability(a, b),
    }
    total = 0.0
    for name, fn in per_prompt.items():
        t = median_time(fn, repeats)
        total += t
        print(f"  {name:<20s} {t:7.3f} s")
    print(f"  {'total':<20s} {total:7.3f} s   (target <= 2.0 s)")


def bench_convergence(n_ci: int, repeats: int, layers: int = 31, d: int = 1024) -> None:
    """Time the convergence index on (n_ci, layers, d) float32 states in 5 categories."""
    print(f"convergence index: n={n_ci} in 5 categories, layers={layers}, d={d}, float32")
    x = random_states(n_ci, layers, d, seed=2)
    labels = np.arange(n_ci) % 5
    t = median_time(lambda: geometry.convergence_index(x, labels), repeats)
    print(f"  {'convergence_index':<20s} {t:7.3f} s   (target <= 5.0 s)")
    t = median_time(lambda: geometry.convergence_index_per_prompt(x, labels), repeats)
    print(f"  {'..._per_prompt':<20s} {t:7.3f} s")


if __name__ == "__main__":
    main()
