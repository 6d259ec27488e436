"""The design that would decide a bifurcation row: its calibration rates at more pairs than the
prompt file gives (the chapter's homograph pairs whose homograph is the last word, each with
its matched control pair).

A design of ``times`` x the chapter's pairs (:func:`replicated_pairs`): replicate 0 is the
chapter's own table; replicate i > 0 copies it under new pair ids and words, the last word of
each prompt given a suffix, so that every component the realistic sources share between
prompts (:func:`lamina.trajectory.background.prompt_keys`: a pair's context, the last word)
is drawn afresh. Each replicate is then an independent pair, as a new homograph in new
contexts would be, while the seed's own components (its basis and background: one model) stay
shared, as they are between a chapter's pairs. Lengths are unchanged (the sources count
whitespace words).

The runs are the calibration's own (:func:`lamina.trajectory.calibration.seed_rows`: every
source, the chapter's judgement), their rates the page's
(:func:`lamina.evidence.calibration.calibration_rates`: FPR on each row's declared null, power
at the paper's size, Wilson 95% intervals). Nothing is cached: a design is measured once, for
the closing note of the issue that would change the prompt files.

``python -m lamina.trajectory.design [--times 1 2 4 8] [--seeds 60] [--jobs J]`` prints the
bifurcation rows' rates at each design.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from typing import Any

import pandas as pd

from lamina.core.threads import one_thread_process
from lamina.evidence.calibration import calibration_rates
from lamina.evidence.runs import RUN_COLUMNS
from lamina.trajectory.calibration import BUDGET, seed_rows
from lamina.trajectory.claims import CHAPTER_CLAIMS
from lamina.trajectory.sizes import chapter_prompts

__all__ = ["RATE_COLUMNS", "design_rates", "replicated_pairs"]

CHAPTER = "bifurcation"
RATE_COLUMNS = ("n_pairs", "claim_id", "fpr_source", "fpr", "fpr_low", "fpr_high",
                "n_null_testable", "power", "power_low", "power_high", "n_planted")  # fmt: skip
"""The columns of :func:`design_rates`: the design's homograph pairs, then the page's rates."""


def replicated_pairs(table: pd.DataFrame, times: int) -> pd.DataFrame:
    """``table`` (the chapter's long pair table: ``pair_id``, ``word``, ``prompt``, one row per
    prompt) repeated ``times`` (>= 1) times (module docstring): (times x n, same columns),
    replicate i > 0 with pair ids and words suffixed ``~i`` and each prompt's last word
    suffixed ``x<i>``."""
    if not isinstance(times, int) or isinstance(times, bool) or times < 1:
        raise ValueError(f"times must be a whole number >= 1; got {times!r}")
    missing = {"pair_id", "word", "prompt"} - set(table.columns)
    if missing:
        raise ValueError(f"the pair table lacks the columns {sorted(missing)}")
    parts = [table]
    for i in range(1, times):
        c = table.copy()
        c["pair_id"] = c["pair_id"].astype(str) + f"~{i}"
        c["word"] = c["word"].astype(str) + f"~{i}"
        c["prompt"] = c["prompt"].astype(str) + f"x{i}"  # a new last word: no shared component
        parts.append(c)
    return pd.concat(parts, ignore_index=True)


def _rows(seed: int, table: pd.DataFrame, budget: dict[str, int]) -> list[dict[str, Any]]:
    return seed_rows(seed, (CHAPTER,), budget, prompts={CHAPTER: table})


def design_rates(times: Sequence[int], n_seeds: int, *, jobs: int = 1,
                 budget: dict[str, int] | None = None) -> pd.DataFrame:  # fmt: skip
    """:data:`RATE_COLUMNS`, one row per design of ``times`` and bifurcation claim: its rates
    over seeds 0..n_seeds-1 of every calibration source, the chapter's budget (default
    :data:`lamina.trajectory.calibration.BUDGET`), in ``jobs`` spawned one-thread processes."""
    if int(n_seeds) < 1 or int(jobs) < 1:
        raise ValueError(f"n_seeds and jobs must be >= 1; got {n_seeds} and {jobs}")
    budget = dict(budget or BUDGET)
    base = chapter_prompts(CHAPTER)
    out = []
    for k in times:
        table = replicated_pairs(base, k)
        work = partial(_rows, table=table, budget=budget)
        if jobs == 1:
            parts = [work(s) for s in range(n_seeds)]
        else:
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(jobs, mp_context=ctx, initializer=one_thread_process) as pool:
                parts = list(pool.map(work, range(n_seeds)))
        runs = pd.DataFrame([r for p in parts for r in p])
        rates = calibration_rates(runs[list(RUN_COLUMNS)], CHAPTER_CLAIMS[CHAPTER])
        n_pairs = int(table.loc[table["role"] == "ambiguous", "pair_id"].nunique())
        out.append(rates.assign(n_pairs=n_pairs)[list(RATE_COLUMNS)])
        print(f"[lamina] design: {n_pairs} homograph pairs, {n_seeds} seeds done", flush=True)
    return pd.concat(out, ignore_index=True)


def main(argv: Sequence[str] | None = None) -> int:  # pragma: no cover (a measurement)
    """``python -m lamina.trajectory.design [--times ...] [--seeds N] [--jobs J]``."""
    parser = argparse.ArgumentParser(prog="python -m lamina.trajectory.design", description=__doc__.split("\n\n")[0])
    parser.add_argument("--times", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--seeds", type=int, default=60)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if min(args.times) < 1 or args.seeds < 1 or args.jobs < 1:
        parser.error("--times, --seeds and --jobs must be whole numbers >= 1")
    one_thread_process()
    rates = design_rates(args.times, args.seeds, jobs=args.jobs)
    pd.set_option("display.width", 200)
    print(rates.round(3).to_string(index=False))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
