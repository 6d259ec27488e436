"""Benchmark of the convergence test's kernels against their previous forms (issue 34,
"the speed the hardware allows"). Paper 1's calibration calls ``ci_profile`` thousands of times
a seed (lever solves, 500 bootstrap resamples, permutation batches) at the chapter's sizes
(180 prompts of 60 items in 6 named categories, 13 layers). Each call built the table of a
row's unit members with one ``np.pad`` per row (now ``unit_rows``: one sort) and coded the
category names with ``np.unique`` over every label of the batch as Python objects (now
``label_codes``: hashed, and only the distinct names sorted). Timed alone and inside whole
``ci_profile`` / ``ci_profiles`` calls (the previous code: the same function with both
helpers patched back in); the profiles are identical (checked).

The reference is the previous code, kept here only to be timed against. Medians of
interleaved repeats, one thread. Usage: python benchmarks/convergence_kernels.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from lamina.core.threads import one_thread_process
from lamina.trajectory import convergence_stats as cs
from lamina.trajectory.convergence_stats import unit_rows


def unit_rows_padded(u: np.ndarray) -> np.ndarray:
    """The previous own-unit table: u (n,) codes -> (n, width), one np.pad per row."""
    members = [np.flatnonzero(u == k) for k in range(int(u.max()) + 1)]
    width = max(len(g) for g in members)
    return np.array([np.pad(members[u[i]], (0, width - len(members[u[i]])), constant_values=-1)
                     for i in range(len(u))])  # fmt: skip


def label_codes_unique(lab: np.ndarray) -> np.ndarray:
    """The previous category codes: np.unique's inverse over every label."""
    return np.unique(lab, return_inverse=True)[1].reshape(lab.shape)


def interleaved(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Median wall seconds of each function, the calls interleaved repeat by repeat."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    one_thread_process()
    print(f"load average: {', '.join(f'{v:.1f}' for v in os.getloadavg())}; "
          f"repeats: {args.repeats}; one thread")  # fmt: skip
    rng = np.random.default_rng(0)
    u = np.repeat(np.arange(60), 3)  # 60 items of 3 frames, as the calibration source
    rng.shuffle(u)
    assert np.array_equal(unit_rows(u), unit_rows_padded(u))
    t = interleaved({"pad": lambda: unit_rows_padded(u), "vector": lambda: unit_rows(u)},
                    args.repeats * 20)  # fmt: skip
    print(f"unit_rows, 180 rows in 60 units: per-row np.pad {t['pad'] * 1e3:.2f} ms, one sort "
          f"{t['vector'] * 1e3:.3f} ms: {t['pad'] / t['vector']:.0f}x (identical)")
    lab = np.repeat(np.array(["animals", "colours", "food", "music", "sport", "weather"],
                             dtype=object), 30)  # 6 named categories of 10 items (30 prompts)
    assert np.array_equal(cs.label_codes(lab), label_codes_unique(lab))
    batch = np.stack([rng.permutation(lab) for _ in range(50)])
    t = interleaved({"unique": lambda: label_codes_unique(batch),
                     "hashed": lambda: cs.label_codes(batch)}, args.repeats * 5)  # fmt: skip
    print(f"label_codes, 50 x 180 names: np.unique {t['unique'] * 1e3:.2f} ms, hashed "
          f"{t['hashed'] * 1e3:.2f} ms: {t['unique'] / t['hashed']:.0f}x (identical)")
    D = cs.distance_stack(rng.standard_normal((180, 13, 128)).cumsum(1))  # (13, 180, 180)
    perms = np.stack([rng.permutation(lab) for _ in range(50)])  # (50, 180)
    idx = rng.integers(0, 180, 180)  # one bootstrap resample of the rows
    calls = {"ci_profile (1 resample, as the bootstrap and lever solves)":
             lambda: cs.ci_profile(D, lab, idx, u),
             "ci_profiles (a batch of 50 permutations)":
             lambda: cs.ci_profiles(D, perms, np.ones(perms.shape), u)}  # fmt: skip
    for name, call in calls.items():
        new = call()
        with patched():
            old = call()
        assert np.array_equal(new, old, equal_nan=True)
        t = interleaved({"new": call, "old": lambda c=call: with_patch(c)}, args.repeats * 5)
        print(f"{name}: {t['old'] * 1e3:.2f} ms -> {t['new'] * 1e3:.2f} ms: "
              f"{t['old'] / t['new']:.1f}x (identical)")
    unit_sums(D, lab, u, rng, args.repeats)


def by_rows(D: np.ndarray, labels: np.ndarray, counts: np.ndarray, units: Any = None) -> np.ndarray:
    """``ci_profiles`` row by row (its general path), whatever the units."""
    return cs._by_rows(D, cs.label_codes(np.asarray(labels)), np.asarray(counts, float), units)


def unit_sums(D: np.ndarray, lab: np.ndarray, u: np.ndarray, rng: np.random.Generator,
              repeats: int) -> None:  # fmt: skip
    """Issue 52 (a leaner ``ci_profiles``): the sums over a unit's rows taken once on the
    unit-by-unit sums of D, where labels and multiplicities are whole units (the permutation
    test permutes items' labels; the bootstrap resamples whole items), against the row-by-row
    path; and the whole convergence test at the calibration's budget (500 resamples, 10,000
    permutations) each way (its unit sums taken once per test: ``profiles_of``)."""
    lab = np.repeat(np.unique(lab), 10)[u]  # each item's 3 prompts in its category
    items = np.unique(u, return_index=True)[1]  # the first row of each item
    perms = np.stack([rng.permutation(lab[items])[u] for _ in range(50)])  # items' labels
    counts = np.stack([np.bincount(rng.choice(60, 60), minlength=60)[u] for _ in range(50)])
    boot = np.broadcast_to(lab, counts.shape)
    for name, (y, c) in {"a batch of 50 item-label permutations": (perms, np.ones(perms.shape)),
                         "a batch of 50 item resamples": (boot, counts.astype(float))}.items():
        new, old = cs.ci_profiles(D, y, c, u), by_rows(D, y, c, u)
        diff = float(np.nanmax(np.abs(new - old)))
        t = interleaved({"new": lambda y=y, c=c: cs.ci_profiles(D, y, c, u),
                         "old": lambda y=y, c=c: by_rows(D, y, c, u)}, repeats * 5)  # fmt: skip
        print(f"ci_profiles, {name}: row by row {t['old'] * 1e3:.2f} ms, by units "
              f"{t['new'] * 1e3:.2f} ms: {t['old'] / t['new']:.1f}x (max difference {diff:.1e})")
    layers = list(range(D.shape[0]))
    x = rng.standard_normal((180, 13, 128)).cumsum(1)

    def test() -> dict[str, Any]:
        return cs.convergence_test(x, lab, layers, units=u, n_bootstrap=500,
                                   n_permutations=10_000, seed=0)  # fmt: skip

    def test_by_rows() -> dict[str, Any]:
        saved = cs.profiles_of
        cs.profiles_of = lambda D, units=None: lambda y, c: by_rows(D, y, c, units)
        try:
            return test()
        finally:
            cs.profiles_of = saved

    a, b = test(), test_by_rows()
    same = all(a[k] == b[k] for k in ("peak_layer", "exceedances"))
    diff = max(abs(a[k] - b[k]) for k in ("peak", "ci_low", "ci_high", "p"))
    t = interleaved({"new": test, "old": test_by_rows}, max(1, repeats // 3))
    print(f"convergence_test (500 resamples, 10,000 permutations): row by row {t['old']:.2f} s, "
          f"by units {t['new']:.2f} s: {t['old'] / t['new']:.1f}x (peak layer and exceedances "
          f"{'identical' if same else 'DIFFER'}; max difference {diff:.1e})")


@contextmanager
def patched() -> Iterator[None]:
    """Run the block with ``ci_profiles`` on its previous helpers."""
    saved = cs.unit_rows, cs.label_codes
    cs.unit_rows, cs.label_codes = unit_rows_padded, label_codes_unique
    try:
        yield
    finally:
        cs.unit_rows, cs.label_codes = saved


def with_patch(call: Callable[[], Any]) -> Any:
    """``call()`` with the previous helpers."""
    with patched():
        return call()


if __name__ == "__main__":
    main()
