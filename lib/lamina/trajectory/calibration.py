"""Calibration of paper 1's claim tests: false-positive rate under a null, power at the
paper's effect sizes.

For each seed, the realistic null and planted sources (:mod:`lamina.trajectory.realistic`,
via :mod:`lamina.trajectory.synthetic`) produce states for each chapter's own prompt set
(:func:`lamina.trajectory.sizes.chapter_prompts`: convergence 180 prompts, curvature 88,
bifurcation 20 pairs, three phases 184), and the very tests and verdict rules of the chapters
(:mod:`lamina.trajectory.stat_tests`, :mod:`lamina.trajectory.verdicts`) judge them. The
"vanishes under controls" rows run the control code of :mod:`lamina.states.controls` on the
source's states (shuffled layers; moment-matched random states whose draws are shared by the
prompts of one unit, :func:`lamina.trajectory.realistic.unit_keys`: an item across its frames,
a base word's variants, a pair's two contexts, as a random vocabulary shares a token's input
across prompts, so the control keeps what prompts share and removes what lies across units).
Then, per claim:

* false-positive rate = share of the null seeds where the row is testable whose verdict says
  the effect is there ("reproduced", "partially" or "smaller than claimed":
  ``lamina.evidence.claims.PRESENT``); a row "not testable" on more than half of the null
  seeds is "not calibrated", with the reason it gave;
* power = share of planted seeds whose verdict is "reproduced", at the paper's size
  (``synthetic-planted``) and at half of it (``synthetic-planted-half``);

each with a Wilson 95% interval. Targets: FPR <= 5% and power >= 80% at the paper's size.

CLI: ``python -m lamina.trajectory.calibration [N_SEEDS]`` prints the summary table.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lamina.core import registry
from lamina.core.manifest import read_cache_entry, write_sealed_json
from lamina.core.provenance import atomic_write_text, data_dir
from lamina.evidence.claims import PRESENT, Claim
from lamina.evidence.stats import mann_whitney, wilson
from lamina.sources.prompts import load_prompts
from lamina.states.controls import random_embeddings, shuffle_layers
from lamina.trajectory import convergence_index_per_prompt
from lamina.trajectory.realistic import unit_keys
from lamina.trajectory.sizes import CHAPTER_FAMILIES, chapter_prompts
from lamina.trajectory.stat_tests import paper1_test
from lamina.trajectory.synthetic import synthetic_states, word_counts
from lamina.trajectory.verdicts import (
    bifurcation_claims,
    convergence_claims,
    curvature_claims,
    three_phase_claims,
    vanish_claim,
)

__all__ = ["TESTS", "calibrate", "calibration_markdown", "known_answer_rows", "row_text",
           "run_seed", "seeds_for_halfwidth", "summarise"]

TESTS = registry.calibrated()  # the chapters whose records say calibrated=True
FPR_TARGET, POWER_TARGET = 0.05, 0.80


def _tables() -> dict[str, pd.DataFrame]:
    return {f: load_prompts(f) for fams in CHAPTER_FAMILIES.values() for f in fams}


CLAIMS: dict[str, tuple[Callable[[dict[str, Any], str, str], list[Claim]], str]] = {
    "convergence": (convergence_claims, "Convergence"),
    "curvature": (curvature_claims, "The curvature difference"),
    "bifurcation": (bifurcation_claims, "Bifurcation"),
    "three_phase": (three_phase_claims, "The three-phase structure"),
}


def _families(tb: dict[str, pd.DataFrame], name: str) -> pd.DataFrame:
    """The chapter's own prompt set (:func:`lamina.trajectory.sizes.chapter_prompts`)."""
    return chapter_prompts(name, tb)


KINDS = ("null", "planted", "planted-half")


def control_fractions(
    name: str, real: dict, controls: dict[str, np.ndarray], table: pd.DataFrame,
    layers: list[int], seed: int, n_bootstrap: int = 100,
) -> dict[str, tuple[float, float | None]]:
    """Per control states: (control effect / real effect, the control effect's p), with the
    same test (fewer resamples: 200 permutations, ``n_bootstrap``)."""
    out = {}
    for cname, xc in controls.items():
        sc = paper1_test(name, xc, table, layers, n_bootstrap=n_bootstrap,
                         n_permutations=200, seed=seed)
        frac = sc["effect"] / real["effect"] if real["effect"] else float("nan")
        out[cname] = (float(frac), sc["effect_p"])
    return out


def run_seed(
    kind: str,
    seed: int,
    tests: Iterable[str] = TESTS,
    *,
    n_bootstrap: int = 500,
    n_permutations: int = 10_000,
    tables: dict[str, pd.DataFrame] | None = None,
    vanish: bool = True,
) -> list[Claim]:
    """The claims rows of every test in ``tests`` on one synthetic source (kind in
    :data:`KINDS`) at one seed, at the chapters' sizes; with ``vanish``, also the
    "vanishes under controls" row (``lamina.states.controls``: shuffled layers and
    moment-matched random states of the same states, drawn shared within each unit)."""
    tb = tables or _tables()
    src, conv = f"synthetic-{kind}", "synthetic states"
    out: list[Claim] = []
    for name in tests:
        t = _families(tb, name)
        x = synthetic_states(t, kind, seed)
        layers = list(range(x.shape[1]))
        s = paper1_test(name, x, t, layers, n_bootstrap=n_bootstrap,
                        n_permutations=n_permutations, seed=seed, n_tokens=word_counts(t))
        make, what = CLAIMS[name]
        rows = make(s, src, conv)
        out += rows
        if vanish:
            head = next(r for r in rows if r.main)
            ctl = {}
            if head.verdict in PRESENT:
                ctl = control_fractions(name, s, {
                    "shuffled layers": shuffle_layers(x, seed=seed),
                    "random embeddings": random_embeddings(x, seed=seed + 20_002,
                                                           units=unit_keys(t)),
                }, t, layers, seed)
            out.append(vanish_claim(name.replace("_", "-"), what, head, ctl))
    return out


LEGACY = "legacy: convergence peak by argmax, Mann-Whitney vs first layer, p < 0.05"


def _legacy_convergence(kind: str, seed: int, table: pd.DataFrame) -> str:
    """The test lamina used before (issue 11, defect 4): peak layer by argmax of the mean
    per-prompt CI, then a Mann-Whitney U of per-prompt CI at the peak vs the first layer."""
    x = synthetic_states(table, kind, seed)
    ci = convergence_index_per_prompt(x, table["category"].to_numpy())
    k = int(np.nanargmax(np.nanmean(ci, axis=0)))
    if k == 0:
        return "not reproduced"
    p = mann_whitney(ci[:, k], ci[:, 0]).iloc[0]["p_value"]
    return "partially" if p < 0.05 else "not reproduced"


def seed_rows(seed: int, tests: tuple[str, ...], legacy: bool, kwargs: dict[str, Any]) -> list[dict]:
    """One seed's rows of :func:`calibrate` (every kind in :data:`KINDS`), as plain dicts."""
    tables = _tables()
    rows = []
    for kind in KINDS:
        if legacy and kind != "planted-half":
            v = _legacy_convergence(kind, seed, tables["semantic"])
            rows.append({"kind": kind, "seed": seed, "claim_id": LEGACY, "main": False,
                         "verdict": v, "reason": "", "p": np.nan, "measured": np.nan})
        for c in run_seed(kind, seed, tests, tables=tables, **kwargs):
            rows.append({"kind": kind, "seed": seed, "claim_id": c.claim_id, "main": bool(c.main),
                         "verdict": c.verdict, "reason": c.reason, "p": _num(c.p),
                         "measured": _num(c.measured)})
    return rows


def _num(x: Any) -> float:
    return np.nan if x is None else float(x)


def _timed_seed(seed: int, tests: tuple[str, ...], legacy: bool, kwargs: dict[str, Any]) -> dict:
    start = time.perf_counter()
    rows = seed_rows(seed, tests, legacy, kwargs)
    return {"seed": seed, "seconds": time.perf_counter() - start, "rows": rows}


def _one_thread() -> None:
    """Worker initialiser: one torch thread (BLAS threads are set through the environment)."""
    import torch

    torch.set_num_threads(1)


CODE = ("trajectory", "evidence", "states/controls.py", "sources/prompts.py", "core/registry.py")


def cache_key(tests: tuple[str, ...], legacy: bool, kwargs: dict[str, Any]) -> str:
    """sha256 (hex) of everything a seed's rows depend on besides the seed: the source of the
    modules that compute them (:data:`CODE`, under lib/lamina), the chapters' prompt tables,
    the tests, ``legacy``, the resampling options and the numpy / scipy / pandas versions."""
    import scipy

    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]  # lib/lamina
    for part in CODE:
        for f in sorted((root / part).rglob("*.py")) if (root / part).is_dir() else [root / part]:
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    tb = _tables()
    for name in sorted(tests):
        h.update(pd.util.hash_pandas_object(_families(tb, name).astype(str), index=True).values.tobytes())
    meta = {"tests": list(tests), "legacy": legacy, "kwargs": sorted(kwargs.items()),
            "versions": [np.__version__, scipy.__version__, pd.__version__], "kinds": KINDS}
    h.update(json.dumps(meta, sort_keys=True, default=str).encode())
    return h.hexdigest()


def default_cache() -> Path:
    """Where per-seed results are kept: ``<data>/cache/calibration`` (``lamina.core.provenance.data_dir``)."""
    return data_dir() / "cache" / "calibration"


def calibrate(
    seeds: Iterable[int],
    tests: Iterable[str] = TESTS,
    *,
    legacy: bool = False,
    jobs: int = 1,
    cache: str | os.PathLike | None = None,
    **kwargs: Any,
) -> pd.DataFrame:
    """One row per (kind, seed, claim): columns kind, seed, claim_id, main, verdict, reason,
    p, measured; ``attrs["seconds"]`` the computation time of each seed (when it was
    computed, cached or not). ``kwargs`` go to :func:`run_seed`; ``legacy`` adds the old
    convergence test (:data:`LEGACY`). ``jobs`` > 1 runs the seeds in that many worker
    processes (spawned, one thread each): each seed is deterministic, so the rows equal the
    serial run's. ``cache``: a folder where each seed's rows are kept as
    ``<cache_key>/seed-<seed>.json`` (sealed with its SHA-256: a damaged entry is recomputed,
    :func:`lamina.core.manifest.read_cache_entry`) and reused (None: no cache)."""
    tests, seeds = tuple(tests), [int(s) for s in seeds]
    if int(jobs) < 1:
        raise ValueError(f"jobs must be >= 1; got {jobs}")
    folder = Path(cache) / cache_key(tests, legacy, kwargs)[:20] if cache is not None else None
    done: dict[int, dict] = {}
    for seed in seeds:
        entry = read_cache_entry(folder / f"seed-{seed}.json") if folder is not None else None
        if entry is not None:  # sealed; a damaged entry is warned about, deleted, recomputed
            done[seed] = entry
    todo = [s for s in seeds if s not in done]
    for res in _compute(todo, tests, legacy, kwargs, int(jobs)):
        done[res["seed"]] = res
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            write_sealed_json(folder / f"seed-{res['seed']}.json", res, indent=None)
    out = pd.DataFrame([r for s in seeds for r in done[s]["rows"]],
                       columns=["kind", "seed", "claim_id", "main", "verdict", "reason", "p", "measured"])
    out.attrs["seconds"] = [done[s]["seconds"] for s in seeds]
    return out


def _compute(seeds: list[int], tests: tuple[str, ...], legacy: bool, kwargs: dict[str, Any],
             jobs: int) -> Iterable[dict]:
    """Each seed's :func:`_timed_seed`, in the order of ``seeds``; serial when ``jobs`` is 1."""
    if jobs == 1 or len(seeds) < 2:
        for seed in seeds:
            yield _timed_seed(seed, tests, legacy, kwargs)
        return
    threads = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    saved = {k: os.environ.get(k) for k in threads}
    os.environ.update(threads)  # inherited by the spawned workers before numpy loads
    try:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(jobs, len(seeds)), mp_context=ctx,
                                 initializer=_one_thread) as pool:
            yield from pool.map(partial(_timed_seed, tests=tests, legacy=legacy, kwargs=kwargs), seeds)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def known_answer_rows(
    seeds: Iterable[int],
    judge: Callable[[str, int], list[dict[str, Any]]],
    claims: tuple[str, ...],
    reason: str = "note",
) -> pd.DataFrame:
    """The rows of :func:`calibrate`'s format for another paper's rules: for each seed and
    each kind of :data:`KINDS`, ``judge(kind, seed)`` gives claim records (``claim_id``,
    ``verdict``, ``p``, ``measured`` and the text field ``reason``); those of ``claims`` are
    kept, the first counting as the main claim. ``attrs["seconds"]``: each seed's computation
    time (s, all kinds)."""
    rows, seconds = [], []
    for seed in seeds:
        start = time.perf_counter()
        for kind in KINDS:
            rows += [{"kind": kind, "seed": seed, "claim_id": r["claim_id"],
                      "main": r["claim_id"] == claims[0], "verdict": r["verdict"],
                      "reason": str(r.get(reason) or "")[:120], "p": _num(r.get("p")),
                      "measured": _num(r.get("measured"))}
                     for r in judge(kind, seed) if r["claim_id"] in claims]  # fmt: skip
        seconds.append(time.perf_counter() - start)
    out = pd.DataFrame(rows)
    out.attrs["seconds"] = seconds
    return out


def _top_reason(part: pd.DataFrame, bad: pd.Series) -> str:
    reasons = part.loc[bad, "reason"] if "reason" in part else pd.Series(dtype=str)
    top = reasons[reasons != ""].value_counts()
    return f"{top.index[0]} ({top.iloc[0]} of {len(part)} seeds)" if len(top) else ""


def _rate(hits: int, n: int) -> tuple[float, float, float]:
    """(share, Wilson low, Wilson high); NaNs when n = 0."""
    if n == 0:
        return np.nan, np.nan, np.nan
    return (hits / n, *wilson(hits, n)[1:])


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Per claim: n seeds; FPR over the null seeds where the row is testable (a verdict in
    ``PRESENT``), or ``calibrated`` False with ``not_calibrated`` giving the null's reason when
    the row is "not testable" on more than half of the null seeds; power at the paper's size
    (``planted``: "reproduced") and at half of it (``planted-half``); Wilson intervals
    (``*_low``, ``*_high``; ``fpr_halfwidth`` the larger distance from the estimate) and
    whether each meets its target (FPR <= 5%, power >= 80%; point estimates); ``n_fpr``,
    ``n_power``, ``n_power_half`` the seeds each rate is over."""
    rows = []
    for cid, g in runs.groupby("claim_id", sort=False):
        null = g[g["kind"] == "null"]
        untestable = null["verdict"] == "not testable"
        judged = null[~untestable]
        calibrated = len(null) > 0 and untestable.sum() * 2 <= len(null)
        fpr, fl, fh = _rate(int(judged["verdict"].isin(PRESENT).sum()), len(judged))
        row: dict[str, Any] = {"claim_id": cid, "main": bool(g["main"].any()),
                               "n_seeds": int(g["seed"].nunique()), "calibrated": calibrated,
                               "not_calibrated": "" if calibrated else _top_reason(null, untestable),
                               "fpr": fpr if calibrated else np.nan,
                               "fpr_low": fl if calibrated else np.nan,
                               "fpr_high": fh if calibrated else np.nan,
                               "fpr_halfwidth": max(fpr - fl, fh - fpr) if calibrated else np.nan,
                               "untestable_null": int(untestable.sum()),
                               "n_fpr": len(judged)}
        for kind, key in (("planted", "power"), ("planted-half", "power_half")):
            part = g[g["kind"] == kind]
            row[f"n_{key}"] = len(part)
            row[key], row[f"{key}_low"], row[f"{key}_high"] = _rate(
                int((part["verdict"] == "reproduced").sum()), len(part))
        plant = g[g["kind"] == "planted"]
        row["fpr_ok"] = bool(calibrated and fpr <= FPR_TARGET)
        row["power_ok"] = bool(row["power"] >= POWER_TARGET)
        row["why_null"] = _top_reason(judged, judged["verdict"].isin(PRESENT))
        row["why_planted"] = _top_reason(plant, plant["verdict"] != "reproduced")
        rows.append(row)
    return pd.DataFrame(rows)


def seeds_for_halfwidth(rate: float, halfwidth: float = 0.05, limit: int = 100_000) -> int:
    """The smallest number of seeds n (a multiple of 10) whose Wilson 95% interval around an
    observed share ``rate`` (in [0, 1]) reaches at most ``halfwidth`` from the estimate on
    either side; ``limit`` when none below it does."""
    n = 10
    while n < limit:
        hits = round(rate * n)
        share, low, high = wilson(hits, n)
        if max(share - low, high - share) <= halfwidth:
            return n
        n += 10
    return limit


def _pct(x: float) -> str:
    return "–" if not np.isfinite(x) else f"{100 * x:.0f}%"


def row_text(r: Any) -> str:
    """One Markdown table row of a :func:`summarise` row: claim, main, FPR [Wilson 95%] (n),
    power and power at half size [Wilson 95%] (n), and whether it meets its targets."""
    if r.claim_id == LEGACY:
        ok = "FPR missed (replaced)" if not r.fpr_ok else "met (replaced)"
    elif not r.calibrated:
        ok = f"not calibrated: {r.not_calibrated}"
    else:
        ok = "met" if r.fpr_ok and r.power_ok else ("FPR missed" if not r.fpr_ok else "power missed")
    fpr = (f"{_pct(r.fpr)} [{_pct(r.fpr_low)}, {_pct(r.fpr_high)}] (n = {r.n_fpr})"
           if r.calibrated else "not calibrated")
    return (f"| `{r.claim_id}` | {'yes' if r.main else ''} | {fpr} | {_pct(r.power)} "
            f"[{_pct(r.power_low)}, {_pct(r.power_high)}] (n = {r.n_power}) | "
            f"{_pct(r.power_half)} [{_pct(r.power_half_low)}, {_pct(r.power_half_high)}] "
            f"(n = {r.n_power_half}) | {ok} |")


def calibration_markdown(
    n_seeds: int = 20, *, jobs: int = 1, cache: str | os.PathLike | None = None, **kwargs: Any
) -> str:
    """The book's calibration page body: one table row per claim (FPR over the judged null
    seeds, power at the paper's size and at half of it, each with its Wilson 95% interval
    and its number of seeds), and sentences computed from it naming the tests that miss a
    target or are not calibrated. ``jobs`` and ``cache`` go to :func:`calibrate`."""
    runs = calibrate(range(n_seeds), legacy=True, jobs=jobs, cache=cache, **kwargs)
    cost = float(np.mean(runs.attrs["seconds"])) if n_seeds else 0.0
    s = summarise(runs)
    lines = [
        f"{n_seeds} seeds per source ({cost:.0f} s of computation per seed, all three sources, "
        "on one core); "
        f"bootstrap and permutation sizes: {kwargs or {'n_bootstrap': 500, 'n_permutations': 10_000}}.",
        "",
        "| claim | main | FPR (null: reproduced, partially or smaller than claimed) "
        "| power at the paper's size | power at half size | targets |",
        "|---|---|---|---|---|---|",
    ]
    lines += [row_text(r) for r in s.itertuples()]
    current = s[s["claim_id"] != LEGACY]
    miss = current[current["calibrated"] & ~(current["fpr_ok"] & current["power_ok"])]
    lines.append("")
    if miss.empty:
        lines.append(f"Every calibrated claim test meets both targets over these {n_seeds} "
                     "seeds (point estimates; the Wilson intervals show how far the seeds pin "
                     "them down).")
    for r in miss.itertuples():
        why = []
        if not r.fpr_ok:
            why.append(f"its false-positive rate is {_pct(r.fpr)}"
                       + (f"; on the null: {r.why_null}" if r.why_null else ""))
        if not r.power_ok:
            why.append(f"its power is {_pct(r.power)}"
                       + (f"; on the planted source: {r.why_planted}" if r.why_planted else ""))
        lines.append(f"- `{r.claim_id}` misses a target: {' and '.join(why)}.")
    wide = current[current["calibrated"] & (current["fpr_halfwidth"] > 0.05)]
    for r in wide.itertuples():
        lines.append(f"- With {n_seeds} seeds the FPR interval of `{r.claim_id}` "
                     f"({_pct(r.fpr_low)}–{_pct(r.fpr_high)}) is wider than +/-5 points; at its "
                     f"observed rate that needs about {seeds_for_halfwidth(r.fpr)} seeds.")
    leg = s[s["claim_id"] == LEGACY]
    if len(leg):
        lines += ["", "The convergence test lamina used before (peak chosen by argmax, then "
                  f"Mann-Whitney against the first layer) gives a verdict on "
                  f"{_pct(float(leg['fpr'].iloc[0]))} of the null seeds."]
    return "\n".join(lines) + "\n"


def _parse_main(argv: list[str]) -> tuple[str | None, int, int, bool]:
    """(page path or None, number of seeds, jobs, use the cache) from the command line;
    SystemExit(2) with a usage line naming the bad value, or SystemExit(0) after ``--help``."""
    import argparse

    def whole(text: str, what: str = "N_SEEDS") -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a whole number; got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{what} must be at least 1; got {value}")
        return value

    parser = argparse.ArgumentParser(
        prog="python -m lamina.trajectory.calibration",
        description="Calibrate the trajectory verdicts on synthetic nulls. "
        "'page OUT.md [N_SEEDS]' writes the book page body (default 20 seeds); "
        "'[N_SEEDS]' prints the summary (default 5 seeds). Each seed's rows are cached under "
        "<data>/cache/calibration, keyed by the code, prompts and options that change them.",
    )
    parser.add_argument("words", nargs="*", metavar="[page OUT.md] [N_SEEDS]")
    parser.add_argument("--jobs", type=lambda t: whole(t, "--jobs"), default=1,
                        help="worker processes, one thread each (default 1)")
    parser.add_argument("--no-cache", action="store_true", help="compute every seed again")
    ns = parser.parse_args(argv)
    words, extra = ns.words, (ns.jobs, not ns.no_cache)
    if words and words[0] == "page":
        if len(words) not in (2, 3):
            parser.error("usage: page OUT.md [N_SEEDS]: name the page to write")
        out = Path(words[1]).absolute()
        if out.is_dir() or not out.parent.is_dir() or not os.access(out.parent, os.W_OK):
            parser.error(f"page {words[1]!r}: cannot write a file there (checked before computing)")
        try:
            return str(out), whole(words[2]) if len(words) == 3 else 20, *extra
        except argparse.ArgumentTypeError as exc:
            parser.error(str(exc))
    if len(words) > 1:
        parser.error(f"expected at most one N_SEEDS; got {words}")
    try:
        return None, whole(words[0]) if words else 5, *extra
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))


def main(argv: list[str] | None = None) -> None:  # pragma: no cover
    """``python -m lamina.trajectory.calibration [N_SEEDS]`` prints the summary;
    ``python -m lamina.trajectory.calibration page OUT.md [N_SEEDS]`` writes the book page body;
    ``--jobs J`` worker processes, ``--no-cache`` to recompute."""
    page, n, jobs, cached = _parse_main(list(sys.argv[1:] if argv is None else argv))
    cache = default_cache() if cached else None
    if page is not None:
        print(atomic_write_text(page, calibration_markdown(n, jobs=jobs, cache=cache)))
        return
    pd.set_option("display.width", 200)
    runs = calibrate(range(n), legacy=True, jobs=jobs, cache=cache)
    print(summarise(runs).round(3).to_string(index=False))


if __name__ == "__main__":  # pragma: no cover
    main()
