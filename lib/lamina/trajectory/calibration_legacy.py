"""The former calibration helpers that papers 2 and 3 still call (``lamina.chapters.
rules_calibration``, ``lamina.chapters.layer_anatomy.calibration``,
``lamina.chapters.weight_update_signature.calibration``), kept unchanged until they are ported
to ``calibration_runs`` and :mod:`lamina.evidence.calibration` (issue 32); paper 1 no longer
uses them (:mod:`lamina.trajectory.calibration`). Delete this module with the last caller.

Their rows: one per (kind, seed, claim) with columns kind ("null", "planted",
"planted-half"), seed, claim_id, main, verdict, reason, p, measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lamina.core.provenance import data_dir
from lamina.evidence.calibration import FPR_TARGET, POWER_TARGET, seeds_for_halfwidth
from lamina.evidence.claims import PRESENT
from lamina.evidence.stats import wilson

__all__ = ["KINDS", "default_cache", "known_answer_rows", "row_text", "seeds_for_halfwidth",
           "summarise"]  # fmt: skip

KINDS = ("null", "planted", "planted-half")


def default_cache() -> Path:
    """Where per-seed results are kept: ``<data>/cache/calibration`` (``lamina.core.provenance.data_dir``)."""
    return data_dir() / "cache" / "calibration"


def _num(x: Any) -> float:
    return np.nan if x is None else float(x)


def known_answer_rows(
    seeds: Iterable[int],
    judge: Callable[[str, int], list[dict[str, Any]]],
    claims: tuple[str, ...],
    reason: str = "note",
) -> pd.DataFrame:
    """The rows (module docstring) of another paper's rules: for each seed and each kind of
    :data:`KINDS`, ``judge(kind, seed)`` gives claim records (``claim_id``, ``verdict``,
    ``p``, ``measured`` and the text field ``reason``); those of ``claims`` are kept, the
    first counting as the main claim. ``attrs["seconds"]``: each seed's computation time (s,
    all kinds)."""
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
                               "n_fpr": len(judged)}  # fmt: skip
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


def _pct(x: float) -> str:
    return "–" if not np.isfinite(x) else f"{100 * x:.0f}%"


def row_text(r: Any) -> str:
    """One Markdown table row of a :func:`summarise` row: claim, main, FPR [Wilson 95%] (n),
    power and power at half size [Wilson 95%] (n), and whether it meets its targets."""
    if not r.calibrated:
        ok = f"not calibrated: {r.not_calibrated}"
    else:
        ok = "met" if r.fpr_ok and r.power_ok else ("FPR missed" if not r.fpr_ok else "power missed")
    fpr = (f"{_pct(r.fpr)} [{_pct(r.fpr_low)}, {_pct(r.fpr_high)}] (n = {r.n_fpr})"
           if r.calibrated else "not calibrated")  # fmt: skip
    return (f"| `{r.claim_id}` | {'yes' if r.main else ''} | {fpr} | {_pct(r.power)} "
            f"[{_pct(r.power_low)}, {_pct(r.power_high)}] (n = {r.n_power}) | "
            f"{_pct(r.power_half)} [{_pct(r.power_half_low)}, {_pct(r.power_half_high)}] "
            f"(n = {r.n_power_half}) | {ok} |")
