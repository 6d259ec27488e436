"""Paper 2's rows judged from their declarations (:data:`lamina.weights.claims.CLAIMS`) and a
unit's measurements (:func:`lamina.weights.measure.measure_unit`), in declaration order, so
that a ``present`` precondition sees the rows judged before it.

No verdict rule lives here: the word comes from ``lamina.evidence`` (:meth:`lamina.evidence.
claims.Claim.tested`); a failed or unmeasured gate, an absent precondition effect or a
measurement-level reason is passed to it as the reason the row is "not testable". The chapter
and the calibration (:mod:`lamina.weights.calibration`) judge through :func:`judge_unit`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from lamina.evidence.claims import PRESENT, Claim, claims_frame
from lamina.weights.claims import CLAIMS

__all__ = ["is_present", "judge_unit"]


def _precondition(spec: dict[str, Any], gates: Mapping[str, tuple[bool, str]],
                  rows: Mapping[str, Claim], model: str) -> str | None:  # fmt: skip
    for kind, name in spec.get("requires", ()):
        if kind == "gate":
            if name not in gates:
                return f"gate {name} was not measured on {model}"
            ok, values = gates[name]
            if not ok:
                return f"gate {name} failed: {values}"
        else:
            row = rows.get(name)
            if row is None:
                return f"{name} was not judged on {model}"
            if not is_present(row):
                p = f", p = {row.p:.3g}" if math.isfinite(row.p) else ""
                return f"the effect of {name} is not present ({row.verdict}{p})"
    return None


def is_present(row: Any) -> bool:
    """Whether a judged row says its effect is present: a verdict of
    :data:`lamina.evidence.claims.PRESENT`, significant where the claim is tested."""
    tested = math.isfinite(row.p)
    return row.verdict in PRESENT and (not tested or row.p < row.alpha)


def judge_unit(
    model: str, measurements: Mapping[str, Mapping[str, Any]],
    gates: Mapping[str, tuple[bool, str]], only: list[str] | None = None,
) -> pd.DataFrame:
    """The claims table of one unit: one row per declared claim (module docstring), or per
    claim of ``only`` (ids, in declaration order; their preconditions on other claims then
    read "not judged")."""
    rows: dict[str, Claim] = {}
    for spec in CLAIMS:
        if only is not None and spec["id"] not in only:
            continue
        m = dict(measurements.get(spec["id"], {"untestable": "not measured"}))
        why = _precondition(spec, gates, rows, model) or m.get("untestable")
        detail = m.get("detail", "")
        p = m.get("p")
        claim = Claim.tested(
            claimed=spec["claimed"], direction=spec.get("direction", 0), null=spec["null"],
            untestable=why, claim_id=spec["id"], claim=spec["claim"],
            paper_value=spec["paper_value"], model=model,
            measured=float(m.get("estimate", math.nan)), ci_low=float(m.get("ci_low", math.nan)),
            ci_high=float(m.get("ci_high", math.nan)), p=math.nan if p is None else float(p),
            alpha=spec.get("alpha", 0.05), test=spec.get("test", ""),
            effect_size=float(m.get("effect_size", math.nan)),
            effect_name=m.get("effect_name", ""), unit=spec["unit"], main=spec.get("main", False),
            short=spec.get("short", ""),
        )  # fmt: skip
        if detail and claim.verdict != "not testable":
            claim = Claim(**{**claim.row(), "short": claim.short,
                             "reason": f"{claim.reason}; {detail}"})  # fmt: skip
        rows[spec["id"]] = claim
    return claims_frame(list(rows.values()))
