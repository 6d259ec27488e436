"""Calibration runs of paper 1's claims: every declared claim's rule on known-answer sources at
the chapters' own sizes, as the rows the book's calibration page reads
(:data:`lamina.evidence.calibration.RUN_COLUMNS`; the rates: :mod:`lamina.evidence.calibration`).

For each seed and each chapter (its prompt set :func:`lamina.trajectory.sizes.chapter_prompts`,
its pooling, the rows its main test reads :func:`lamina.trajectory.sizes.chapter_mask`), the
realistic sources (:mod:`lamina.trajectory.synthetic`) give states, the chapter's test
(:func:`lamina.trajectory.stat_tests.paper1_test`, the chapters' budget) measures them and
:func:`lamina.trajectory.judging.judge_chapter` judges every claim, exactly as the chapter does.
Sources (:data:`CALIBRATION_SOURCES`):

* effect, count and location rows: ``null`` = the realistic null, ``planted`` = the paper's
  sizes, ``half`` = half of each;
* vanish rows: ``null`` = the survivor source (the effects at the paper's size, carried by what
  the controls keep: the vanish row must not read "reproduced" there), ``planted`` = the
  removable source (the paper's sizes, carried by what the controls remove: a category code
  of each layer's own, a homograph separation over the last transition alone;
  :data:`lamina.trajectory.realistic.REMOVABLE`), ``half`` as above. Convergence's vanish row
  is calibrated at the fitted model's own convergence peak instead (:data:`VANISH_KIND`: the
  survivor and removable sources of :data:`lamina.trajectory.realistic.MODEL_KINDS`), the
  size of the real models' peaks, where the book's verdicts are made. (There, as at the
  paper's peak, its shuffled-layers control removes a layer-invariant code too, so the row is
  undecidable on every seed: :mod:`lamina.trajectory.control_power`.) The controls run only where the
  effect is present (else the row is "not testable"): shuffled layers
  (:func:`lamina.states.controls.shuffle_layers` with
  :func:`lamina.trajectory.stat_tests.shuffle_options`) and the source's random-embedding
  control (:func:`lamina.trajectory.synthetic.control_states`).
* conditional rows (a claim judged only where another's effect is present, declared with its
  ``conditional_null``): the size rows' FPR (the homograph ratio, the gap at all lengths) is
  read on ``half`` (the effect present at half the paper's size); the location rows' (the
  onset, the convergence peak's depth) on ``elsewhere``, the paper's sizes with each location
  moved outside its claimed range (:data:`lamina.trajectory.realistic.ELSEWHERE`).

The bifurcation ratio rows (:data:`BACKGROUND`) are calibrated on the same kinds built on
organism-gpt2's fitted last-token background (:mod:`lamina.trajectory.fitted_positional`):
delta(L)/delta(0) needs delta(0) > 0, which SmolLM2's rotary layer 0 does not give.

Coverage (:data:`lamina.evidence.calibration.COVERAGE_COLUMN`): each chapter's main row on the
planted source (the convergence peak, the curvature gap, the bifurcation excess, the SIM
margin) says whether its CI covers the source's population value
(:func:`lamina.trajectory.coverage.main_truth`); NaN on every other row.

``python -m lamina.trajectory.calibration [N_SEEDS] [--jobs J] [--no-cache]`` prints the rates;
the calibration page (paper 1's section beside papers 2 and 3) is written by
``python -m lamina.book.calibration OUT.md N_SEEDS --jobs J``. Each seed's rows are cached under
``<data>/cache/calibration/p1-<key>/`` (:func:`cache_key`: the code, the prompts, the budget,
the library versions), each file with its own SHA-256, checked on read (a damaged entry is
recomputed with a warning).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sys
import time
import warnings
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from lamina.core import registry
from lamina.core.arguments import count
from lamina.core.machine import machine_cores
from lamina.core.provenance import atomic_write_text, data_dir
from lamina.core.threads import one_thread_process
from lamina.evidence.calibration import COVERAGE_COLUMN, RUN_COLUMNS, calibration_rates
from lamina.states.controls import shuffle_layers
from lamina.trajectory import layerwise_cosine
from lamina.trajectory.claims import (
    CHAPTER_CLAIMS,
    CLAIMS,
    CONTROL_LEVEL,
    HOMOGRAPH_RATIO,
    NULL_SOURCES,
    PEAK,
    SURVIVOR,
)
from lamina.trajectory.control_power import (
    invariant_share,
    shuffled_cannot_fail,
    shuffled_cannot_remove,
)
from lamina.trajectory.coverage import MAIN_ROWS, covers, main_truth
from lamina.trajectory.fitted import POSITIONAL
from lamina.trajectory.judging import control_result, judge_chapter
from lamina.trajectory.phase_stats import detected_phases
from lamina.trajectory.sizes import CHAPTER_POOLING, chapter_mask, chapter_prompts
from lamina.trajectory.stat_tests import (
    Resampling,
    control_summaries,
    paper1_test,
    shuffle_options,
)
from lamina.trajectory.synthetic import control_states, synthetic_states, synthetic_tokens

__all__ = ["BACKGROUND", "BUDGET", "CALIBRATION_SOURCES", "CHAPTERS", "CLAIMS", "VANISH_KIND",
           "cache_key", "calibration_runs", "chapter_rows"]  # fmt: skip

CHAPTERS = registry.calibrated()  # the chapters whose records say calibrated=True
BUDGET = {"n_bootstrap": 500, "n_permutations": 10_000}  # the chapters' main tests decide at these
PHASE_RESAMPLES = 100  # prompt resamples of the detected-phases count's CI
CALIBRATION_SOURCES = {
    "null": f"effect, count and location rows: {NULL_SOURCES.split('; planted')[0]}; vanish rows: "
            "the survivor source (the paper's effects, carried by what the controls keep; "
            "convergence's at the fitted model's own peak)",
    "planted": "the paper's effect sizes planted on the realistic background (each effect on "
               "its own lever, solved on reference draws of the chapter's prompts); vanish "
               "rows: the same sizes carried by what the controls remove (a category code of "
               "each layer's own, a homograph separation over the last transition alone; "
               "convergence's at the fitted model's own peak, the real models' size)",
    "half": "half of each effect planted on the realistic background",
    "elsewhere": "the location rows' conditional null: the paper's sizes (the effect kept), "
                 "each location moved outside its claimed range: the bifurcation's separation "
                 "starting at half depth (0.23 of depth past the claimed 0.17-0.27), the "
                 "convergence bump centred at 1/6 of depth (claimed: from 1/3)",
}  # fmt: skip
# source of the page -> the realistic kind, for the vanish rows and for the others
KIND = {"null": ("survivor", "null"), "planted": ("removable", "planted"),
        "half": ("planted-half", "planted-half")}  # fmt: skip
# a chapter's vanish row calibrated on other kinds (module docstring): chapter -> {source: kind}
VANISH_KIND = {"convergence": {"null": "survivor-model", "planted": "removable-model"}}
_ = SURVIVOR  # the declarations name it; the runs build it
# claims calibrated on another background than their chapter's (claim id -> background of
# lamina.trajectory.fitted.BACKGROUNDS): the bifurcation ratio delta(L)/delta(0) is undefined
# on SmolLM2's rotary background (delta(0) = 0), so its rows are calibrated on organism-gpt2's
BACKGROUND = {HOMOGRAPH_RATIO.id: POSITIONAL, CONTROL_LEVEL.id: POSITIONAL}


def chapter_rows(chapter: str, kind: str, seed: int, *, vanish: bool,
                 budget: dict[str, int] | None = None, pool: str | None = None,
                 prompts: pd.DataFrame | None = None) -> list[Any]:  # fmt: skip
    """The rows of ``chapter``'s claims on the realistic source ``kind`` at ``seed``, judged as
    the chapter judges them; with ``vanish``, the vanish row too (its controls run only when
    the main effect is present). ``pool``: the background (:data:`lamina.trajectory.fitted.
    BACKGROUNDS`; default the chapter's pooling, SmolLM2's). ``prompts``: the chapter's prompt
    table (default :func:`~lamina.trajectory.sizes.chapter_prompts`; another design:
    :mod:`lamina.trajectory.design`)."""
    budget = budget or BUDGET
    pool = pool or CHAPTER_POOLING[chapter]
    t = chapter_prompts(chapter) if prompts is None else prompts
    tok = synthetic_tokens(t, pool)
    keep = chapter_mask(chapter, t, tok)
    t, tok = t[keep].reset_index(drop=True), tok[keep]
    x = synthetic_states(t, kind, seed, pool)
    layers = list(range(x.shape[1]))
    s = paper1_test(chapter, x, t, layers, n_tokens=tok,
                    **cast(Resampling, {**budget, "seed": seed}))
    if chapter == "three_phase":
        s["phases"] = detected_phases(np.asarray(layerwise_cosine(x)), PHASE_RESAMPLES, seed)
    src = f"synthetic-{kind}"
    rows = judge_chapter(chapter, s, src, "synthetic states", controls=None)
    main = rows[0]
    if not vanish:
        return rows
    controls = None
    if main.present:
        states = {"shuffled layers": shuffle_layers(x, seed, **shuffle_options(chapter, t, s)),
                  "random embeddings": control_states(t, kind, seed, pool)["random embeddings"]}
        summ = control_summaries(chapter, states, t, layers, n_tokens=tok, seed=seed)
        controls = {k: control_result(s, v) for k, v in summ.items()}
    check = (invariant_share(x, t, s["effect"], seed)  # as the chapter checks it
             if main.present and chapter == "convergence" else None)
    vanish_id = next(sp.id for sp in CHAPTER_CLAIMS[chapter] if sp.kind == "vanish")
    return rows + judge_chapter(
        chapter, s, src, "synthetic states", controls=controls or {},
        cannot_fail=shuffled_cannot_fail(check) if check else {},
        cannot_remove=shuffled_cannot_remove(check) if check else "",
        specs=(main.claim_id, vanish_id))[1:]  # fmt: skip


def seed_rows(seed: int, chapters: tuple[str, ...], budget: dict[str, int],
              prompts: dict[str, pd.DataFrame] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """One seed's calibration rows (:data:`RUN_COLUMNS`) of every claim of ``chapters``;
    ``prompts``: {chapter: its prompt table} where not the chapter's own (:func:`chapter_rows`)."""
    out = []
    for chapter in chapters:
        rows_of = partial(chapter_rows, chapter, seed=seed, budget=budget,
                          prompts=(prompts or {}).get(chapter))  # fmt: skip
        for source, (vanish_kind, kind) in KIND.items():
            vanish_kind = VANISH_KIND.get(chapter, {}).get(source, vanish_kind)
            rows = rows_of(kind, vanish=kind == vanish_kind)
            if kind != vanish_kind:
                rows = [r for r in rows if r.kind != "vanish"]
                rows += [r for r in rows_of(vanish_kind, vanish=True) if r.kind == "vanish"]
            for pool in sorted({BACKGROUND[r.claim_id] for r in rows if r.claim_id in BACKGROUND}):
                moved = {c for c, b in BACKGROUND.items() if b == pool}
                rows = [r for r in rows if r.claim_id not in moved] + [
                    r for r in rows_of(kind, vanish=False, pool=pool) if r.claim_id in moved]
            out += [_run(r, source, seed, kind) for r in rows]
        moved = {s.id for s in CHAPTER_CLAIMS[chapter] if s.conditional_null == "elsewhere"}
        if moved:  # their conditional null: the effect planted, located elsewhere
            out += [_run(r, "elsewhere", seed, "planted-elsewhere")
                    for r in rows_of("planted-elsewhere", vanish=False) if r.claim_id in moved]
    return out


_MAIN_CHAPTER = {PEAK.id: "convergence", **{cid: ch for ch, cid in MAIN_ROWS.items()}}


def _run(r: Any, source: str, seed: int, kind: str) -> dict[str, Any]:
    """One run row (:data:`RUN_COLUMNS` and coverage) of the judged row ``r``."""
    return {"claim_id": r.claim_id, "source": source, "seed": seed, "verdict": r.verdict,
            "kind": r.kind, "present": bool(r.present), "reason": r.reason[:160],
            COVERAGE_COLUMN: _covered(r, kind)}  # fmt: skip


def _covered(row: Any, kind: str) -> float:
    """:data:`COVERAGE_COLUMN` of a row on source ``kind``: for a main row (the convergence
    peak, :data:`lamina.trajectory.coverage.MAIN_ROWS`) on the planted source (the paper's
    size, where the page reads coverage), whether its CI covers the source's population value
    (:func:`lamina.trajectory.coverage.main_truth`); NaN for every other row."""
    chapter = _MAIN_CHAPTER.get(row.claim_id)
    if chapter is None or kind != "planted":
        return float("nan")
    return covers(row.ci_low, row.ci_high, main_truth(chapter, kind))


def _timed(seed: int, chapters: tuple[str, ...], budget: dict[str, int]) -> dict[str, Any]:
    start = time.process_time()
    rows = seed_rows(seed, chapters, budget)
    return {"seed": seed, "seconds": time.process_time() - start, "rows": rows}


# what a seed's rows depend on (under lib/lamina): the paper-1 modules this module imports,
# transitively (tests/trajectory/test_calibration.py checks the list against its import
# closure), the statistics and the rules, the controls and the prompt loader. Not the
# chapters, the analyses or the fit: an edit there keeps the cached seeds.
CODE = ("evidence", "states/controls.py", "sources/prompts.py", "trajectory/__init__.py",
        *(f"trajectory/{m}.py" for m in (
            "calibration", "claims", "control_power", "coverage", "judging", "stat_tests",
            "convergence_stats",
            "curvature_stats", "bifurcation_stats", "phase_stats", "metrics", "phases", "sizes",
            "synthetic", "realistic", "levers", "background", "fitted", "fitted_positional")))  # fmt: skip


def cache_key(chapters: tuple[str, ...], budget: dict[str, int]) -> str:
    """sha256 (hex) of what a seed's rows depend on besides the seed: the source of
    :data:`CODE` (under lib/lamina), the chapters' prompt tables, the chapters, the budget and
    the numpy / scipy / pandas versions."""
    import scipy

    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]
    for part in CODE:
        for f in sorted((root / part).rglob("*.py")) if (root / part).is_dir() else [root / part]:
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    for name in sorted(chapters):
        h.update(pd.util.hash_pandas_object(chapter_prompts(name).astype(str), index=True).values.tobytes())
    meta = {"chapters": list(chapters), "budget": sorted(budget.items()),
            "versions": [np.__version__, scipy.__version__, pd.__version__]}
    h.update(json.dumps(meta, sort_keys=True).encode())
    return h.hexdigest()


def _read(f: Path) -> dict[str, Any] | None:
    """A cached seed, or None (with a warning) when the file is damaged."""
    try:
        record = json.loads(f.read_text())
        body = json.dumps(record["result"], sort_keys=True)
        if hashlib.sha256(body.encode()).hexdigest() != record["sha256"]:
            raise ValueError("checksum mismatch")
        return record["result"]
    except Exception as exc:  # damaged entry: recomputed
        warnings.warn(f"damaged calibration cache entry {f} ({exc}); recomputing it",
                      RuntimeWarning, stacklevel=3)  # fmt: skip
        return None


def _compute(seeds: list[int], chapters: tuple[str, ...], budget: dict[str, int],
             jobs: int) -> Iterable[dict[str, Any]]:  # fmt: skip
    if jobs == 1 or len(seeds) < 2:
        for seed in seeds:
            yield _timed(seed, chapters, budget)
        return
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(min(jobs, len(seeds)), mp_context=ctx,
                             initializer=one_thread_process) as pool:  # fmt: skip
        yield from pool.map(partial(_timed, chapters=chapters, budget=budget), seeds)


def calibration_runs(
    n_seeds: int, *, jobs: int = 1, chapters: tuple[str, ...] = CHAPTERS,
    budget: dict[str, int] | None = None, cache: str | os.PathLike | None | bool = True,
) -> pd.DataFrame:  # fmt: skip
    """:data:`RUN_COLUMNS` rows of every claim of ``chapters`` over seeds 0..n_seeds-1 (module
    docstring); ``attrs["seconds"]``: each seed's CPU seconds. ``jobs`` > 1: worker processes
    (spawned, one thread each; the rows equal the serial run's). ``cache``: True for
    ``<data>/cache/calibration``, a folder, or False/None for none."""
    if int(n_seeds) < 1 or int(jobs) < 1:
        raise ValueError(f"n_seeds and jobs must be >= 1; got {n_seeds} and {jobs}")
    budget = dict(budget or BUDGET)
    folder = None
    if cache:
        base = data_dir() / "cache" / "calibration" if cache is True else Path(cache)
        folder = base / f"p1-{cache_key(chapters, budget)[:20]}"
    done: dict[int, dict[str, Any]] = {}
    for seed in range(int(n_seeds)):
        f = folder / f"seed-{seed}.json" if folder is not None else None
        if f is not None and f.is_file() and (got := _read(f)) is not None:
            done[seed] = got
    todo = [s for s in range(int(n_seeds)) if s not in done]
    for res in _compute(todo, chapters, budget, int(jobs)):
        done[res["seed"]] = res
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            body = json.dumps(res, sort_keys=True)
            atomic_write_text(folder / f"seed-{res['seed']}.json", json.dumps(
                {"sha256": hashlib.sha256(body.encode()).hexdigest(), "result": res}))
    out = pd.DataFrame([r for s in range(int(n_seeds)) for r in done[s]["rows"]],
                       columns=[*RUN_COLUMNS, COVERAGE_COLUMN])  # fmt: skip
    out.attrs["seconds"] = [done[s]["seconds"] for s in range(int(n_seeds))]
    return out


def _parse_main(argv: list[str]) -> tuple[int, int, bool]:
    """(number of seeds, jobs, use the cache) from the command line;
    SystemExit(2) with a usage line naming the bad value, or SystemExit(0) after ``--help``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m lamina.trajectory.calibration",
        description="Calibrate paper 1's claims on its known-answer sources and print the "
        "rates (default 5 seeds; the page: python -m lamina.book.calibration). Each seed's "
        "rows are cached under <data>/cache/calibration, keyed by the code, prompts and budget.",
    )
    parser.add_argument("n_seeds", nargs="?", metavar="N_SEEDS", type=count("N_SEEDS"), default=5)
    parser.add_argument("--jobs", type=count("--jobs"), default=machine_cores(),
                        help="worker processes, one thread each (default: the machine's cores)")
    parser.add_argument("--no-cache", action="store_true", help="compute every seed again")
    ns = parser.parse_args(argv)
    return ns.n_seeds, ns.jobs, not ns.no_cache


def main(argv: list[str] | None = None) -> None:  # pragma: no cover
    """``python -m lamina.trajectory.calibration [N_SEEDS] [--jobs J] [--no-cache]`` prints
    the rates (the page: :mod:`lamina.book.calibration`)."""
    n, jobs, cached = _parse_main(list(sys.argv[1:] if argv is None else argv))
    runs = calibration_runs(n, jobs=jobs, cache=cached)
    pd.set_option("display.width", 220)
    print(calibration_rates(runs).round(3).to_string(index=False))
    print(f"CPU seconds per seed: {np.mean(runs.attrs['seconds']):.0f}")


if __name__ == "__main__":  # pragma: no cover
    main()
