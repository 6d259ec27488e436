"""Calibration of paper 1's claim tests: false-positive rate under a null, power at the
paper's effect sizes.

For each seed, the synthetic null and planted sources (:mod:`lamina.trajectory.synthetic`) produce
states for lamina's own prompt families at their real sizes (60 semantic prompts in 6
categories, 40 reasoning prompts against 48 lexical variants of 8 base words, 40 homograph
pairs with their controls, 184 prompts for the phases), and the very tests and verdict rules
of the chapters (:mod:`lamina.trajectory.stat_tests`, :mod:`lamina.trajectory.verdicts`) judge
them. Then, per claim:

* false-positive rate = share of null seeds whose verdict says the effect is there
  ("reproduced", "partially" or "smaller than claimed": ``lamina.evidence.claims.PRESENT``);
* power = share of planted seeds whose verdict is "reproduced";

each with a Wilson 95% interval. Targets: FPR <= 5% and power >= 80%.

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
from lamina.sources.prompts import bifurcation_prompts, load_prompts
from lamina.states.controls import shuffle_layers
from lamina.trajectory import convergence_index_per_prompt
from lamina.trajectory.sizes import CHAPTER_FAMILIES, CHAPTER_POOLING
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
    """The chapter's own prompt set (``lamina.trajectory.sizes``): its families, and for
    bifurcation the pairs its pooling uses (``word_last`` pairs under last-token pooling)."""
    if name == "bifurcation":
        t = bifurcation_prompts(tb["ambiguous"])
        if CHAPTER_POOLING[name] == "last" and "word_last" in t:
            t = t[t["word_last"].astype(bool)].reset_index(drop=True)
        return t
    return pd.concat([tb[f] for f in CHAPTER_FAMILIES[name]], ignore_index=True)


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
    """The claims rows of every test in ``tests`` on one synthetic source (kind "null" or
    "planted") at one seed, at the real families' sizes; with ``vanish``, also the
    "vanishes under controls" row (shuffled layers of the same states; random input
    embeddings = null states of seed + 20002, as ``synthetic_model_states`` gives them)."""
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
                    "random embeddings": synthetic_states(t, "null", seed + 20_002),
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
        for kind in ("null", "planted"):
            if legacy:
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



def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Per claim: n seeds, FPR (null: a verdict in ``PRESENT``) and power (planted:
    "reproduced"), with Wilson intervals and whether each meets its target
    (FPR <= 5%, power >= 80%; judged on the point estimates). Claims "not testable" on a
    source count as not reproduced there; ``untestable_null`` says how often that happened."""
    rows = []
    for cid, g in runs.groupby("claim_id", sort=False):
        null, plant = g[g["kind"] == "null"], g[g["kind"] == "planted"]
        fp = int(null["verdict"].isin(PRESENT).sum())
        tp = int((plant["verdict"] == "reproduced").sum())
        fl, fh = wilson(fp, len(null))[1:]
        pl, ph = wilson(tp, len(plant))[1:]
        fpr = fp / len(null) if len(null) else np.nan
        power = tp / len(plant) if len(plant) else np.nan
        why = {}
        for kind, part, bad in (("null", null, null["verdict"].isin(PRESENT)),
                                ("planted", plant, plant["verdict"] != "reproduced")):
            reasons = part.loc[bad, "reason"] if "reason" in part else pd.Series(dtype=str)
            top = reasons[reasons != ""].value_counts()
            why[kind] = (f"{top.index[0]} ({top.iloc[0]} of {len(part)} seeds)"
                         if len(top) else "")
        rows.append(
            {
                "claim_id": cid,
                "main": bool(g["main"].any()),
                "n_seeds": int(g["seed"].nunique()),
                "fpr": fpr,
                "fpr_low": fl,
                "fpr_high": fh,
                "power": power,
                "power_low": pl,
                "power_high": ph,
                "untestable_null": int((null["verdict"] == "not testable").sum()),
                "fpr_ok": bool(fpr <= FPR_TARGET),
                "power_ok": bool(power >= POWER_TARGET),
                "why_null": why["null"],
                "why_planted": why["planted"],
            }
        )
    return pd.DataFrame(rows)


def _pct(x: float) -> str:
    return "–" if not np.isfinite(x) else f"{100 * x:.0f}%"


def calibration_markdown(n_seeds: int = 20, **kwargs: Any) -> str:
    """The book's calibration page body: one table row per claim (FPR and power with Wilson
    95% intervals over ``n_seeds`` seeds), and sentences computed from it naming the tests
    that miss a target."""
    runs = calibrate(range(n_seeds), legacy=True, **kwargs)
    s = summarise(runs)
    lines = [
        f"{n_seeds} seeds per source; bootstrap and permutation sizes: "
        f"{kwargs or {'n_bootstrap': 500, 'n_permutations': 10_000}}.",
        "",
        "| claim | main | FPR (null: reproduced, partially or smaller than claimed) | power (planted: reproduced) "
        "| targets |",
        "|---|---|---|---|---|",
    ]
    for r in s.itertuples():
        ok = "met" if r.fpr_ok and r.power_ok else (
            "FPR missed" if not r.fpr_ok else "power missed"
        )
        if r.claim_id == LEGACY:
            ok = "FPR missed (replaced)" if not r.fpr_ok else "met (replaced)"
        lines.append(
            f"| `{r.claim_id}` | {'yes' if r.main else ''} | {_pct(r.fpr)} "
            f"[{_pct(r.fpr_low)}, {_pct(r.fpr_high)}] | {_pct(r.power)} "
            f"[{_pct(r.power_low)}, {_pct(r.power_high)}] | {ok} |"
        )
    current = s[s["claim_id"] != LEGACY]
    miss = current[~(current["fpr_ok"] & current["power_ok"])]
    lines.append("")
    if miss.empty:
        lines.append(
            f"Every current claim test meets both targets over these {n_seeds} seeds "
            "(point estimates; the Wilson intervals show how far the seeds pin them down)."
        )
    else:
        for r in miss.itertuples():
            why = []
            if not r.fpr_ok:
                why.append(f"its false-positive rate is {_pct(r.fpr)}"
                           + (f"; on the null: {r.why_null}" if r.why_null else ""))
            if not r.power_ok:
                why.append(f"its power is {_pct(r.power)}"
                           + (f"; on the planted source: {r.why_planted}" if r.why_planted else ""))
            lines.append(f"- `{r.claim_id}` misses a target: {' and '.join(why)}.")
    leg = s[s["claim_id"] == LEGACY]
    if len(leg):
        lines += [
            "",
            f"The convergence test lamina used before (peak chosen by argmax, then Mann-Whitney "
            f"against the first layer) gives a verdict on {_pct(float(leg['fpr'].iloc[0]))} of "
            "the null seeds.",
        ]
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
