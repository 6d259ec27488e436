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

import sys
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from lamina.core import registry
from lamina.core.provenance import atomic_write_text
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

__all__ = ["TESTS", "calibrate", "calibration_markdown", "run_seed", "summarise"]

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


def calibrate(
    seeds: Iterable[int], tests: Iterable[str] = TESTS, *, legacy: bool = False, **kwargs: Any
) -> pd.DataFrame:
    """One row per (kind, seed, claim): columns kind, seed, claim_id, main, verdict, p,
    measured. ``kwargs`` go to :func:`run_seed`; ``legacy`` adds the old convergence test
    (:data:`LEGACY`) for comparison."""
    tables = _tables()
    rows = []
    for seed in seeds:
        for kind in KINDS:
            if legacy and kind != "planted-half":
                v = _legacy_convergence(kind, seed, tables["semantic"])
                rows.append({"kind": kind, "seed": seed, "claim_id": LEGACY, "main": False,
                             "verdict": v, "reason": "", "p": np.nan, "measured": np.nan})
            for c in run_seed(kind, seed, tests, tables=tables, **kwargs):
                rows.append(
                    {
                        "kind": kind,
                        "seed": seed,
                        "claim_id": c.claim_id,
                        "main": c.main,
                        "verdict": c.verdict,
                        "reason": c.reason,
                        "p": c.p,
                        "measured": c.measured,
                    }
                )
    return pd.DataFrame(rows)



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
    whether each meets its target (FPR <= 5%, power >= 80%; point estimates)."""
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
                               "untestable_null": int(untestable.sum())}
        for kind, key in (("planted", "power"), ("planted-half", "power_half")):
            part = g[g["kind"] == kind]
            row[key], row[f"{key}_low"], row[f"{key}_high"] = _rate(
                int((part["verdict"] == "reproduced").sum()), len(part))
        plant = g[g["kind"] == "planted"]
        row["fpr_ok"] = bool(calibrated and fpr <= FPR_TARGET)
        row["power_ok"] = bool(row["power"] >= POWER_TARGET)
        row["why_null"] = _top_reason(judged, judged["verdict"].isin(PRESENT))
        row["why_planted"] = _top_reason(plant, plant["verdict"] != "reproduced")
        rows.append(row)
    return pd.DataFrame(rows)


def _pct(x: float) -> str:
    return "–" if not np.isfinite(x) else f"{100 * x:.0f}%"


def _row_text(r: Any) -> str:
    if r.claim_id == LEGACY:
        ok = "FPR missed (replaced)" if not r.fpr_ok else "met (replaced)"
    elif not r.calibrated:
        ok = f"not calibrated: {r.not_calibrated}"
    else:
        ok = "met" if r.fpr_ok and r.power_ok else ("FPR missed" if not r.fpr_ok else "power missed")
    fpr = (f"{_pct(r.fpr)} [{_pct(r.fpr_low)}, {_pct(r.fpr_high)}]" if r.calibrated
           else "not calibrated")
    return (f"| `{r.claim_id}` | {'yes' if r.main else ''} | {fpr} | {_pct(r.power)} "
            f"[{_pct(r.power_low)}, {_pct(r.power_high)}] | {_pct(r.power_half)} "
            f"[{_pct(r.power_half_low)}, {_pct(r.power_half_high)}] | {ok} |")


def calibration_markdown(n_seeds: int = 20, **kwargs: Any) -> str:
    """The book's calibration page body: one table row per claim (FPR, power at the paper's
    size and at half of it, with Wilson 95% intervals over ``n_seeds`` seeds), and sentences
    computed from it naming the tests that miss a target or are not calibrated."""
    import time

    start = time.perf_counter()
    runs = calibrate(range(n_seeds), legacy=True, **kwargs)
    cost = (time.perf_counter() - start) / max(n_seeds, 1)
    s = summarise(runs)
    lines = [
        f"{n_seeds} seeds per source ({cost:.0f} s of computation per seed, all three sources); "
        f"bootstrap and permutation sizes: {kwargs or {'n_bootstrap': 500, 'n_permutations': 10_000}}.",
        "",
        "| claim | main | FPR (null: reproduced, partially or smaller than claimed) "
        "| power at the paper's size | power at half size | targets |",
        "|---|---|---|---|---|---|",
    ]
    lines += [_row_text(r) for r in s.itertuples()]
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
    if len(wide):
        lines.append(f"- With {n_seeds} seeds the FPR intervals of {len(wide)} row(s) are wider "
                     "than +/-5 points (about 100 seeds would be needed).")
    leg = s[s["claim_id"] == LEGACY]
    if len(leg):
        lines += ["", "The convergence test lamina used before (peak chosen by argmax, then "
                  f"Mann-Whitney against the first layer) gives a verdict on "
                  f"{_pct(float(leg['fpr'].iloc[0]))} of the null seeds."]
    return "\n".join(lines) + "\n"


def _parse_main(argv: list[str]) -> tuple[str | None, int]:
    """(page path or None, number of seeds) from the command line; SystemExit(2) with a usage
    line naming the bad value, or SystemExit(0) after ``--help``."""
    import argparse
    import os
    from pathlib import Path

    def seeds(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"N_SEEDS must be a whole number; got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"N_SEEDS must be at least 1; got {value}")
        return value

    parser = argparse.ArgumentParser(
        prog="python -m lamina.trajectory.calibration",
        description="Calibrate the trajectory verdicts on synthetic nulls. "
        "'page OUT.md [N_SEEDS]' writes the book page body (default 20 seeds); "
        "'[N_SEEDS]' prints the summary (default 5 seeds).",
    )
    parser.add_argument("words", nargs="*", metavar="[page OUT.md] [N_SEEDS]")
    words = parser.parse_args(argv).words
    if words and words[0] == "page":
        if len(words) not in (2, 3):
            parser.error("usage: page OUT.md [N_SEEDS]: name the page to write")
        out = Path(words[1]).absolute()
        if out.is_dir() or not out.parent.is_dir() or not os.access(out.parent, os.W_OK):
            parser.error(f"page {words[1]!r}: cannot write a file there (checked before computing)")
        try:
            return str(out), seeds(words[2]) if len(words) == 3 else 20
        except argparse.ArgumentTypeError as exc:
            parser.error(str(exc))
    if len(words) > 1:
        parser.error(f"expected at most one N_SEEDS; got {words}")
    try:
        return None, seeds(words[0]) if words else 5
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))


def main(argv: list[str] | None = None) -> None:  # pragma: no cover
    """``python -m lamina.trajectory.calibration [N_SEEDS]`` prints the summary;
    ``python -m lamina.trajectory.calibration page OUT.md [N_SEEDS]`` writes the book page body."""
    page, n = _parse_main(list(sys.argv[1:] if argv is None else argv))
    if page is not None:
        print(atomic_write_text(page, calibration_markdown(n)))
        return
    pd.set_option("display.width", 200)
    print(summarise(calibrate(range(n), legacy=True)).round(3).to_string(index=False))


if __name__ == "__main__":  # pragma: no cover
    main()
