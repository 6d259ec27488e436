"""Paper 2's rows judged by the one engine: each declaration of
:data:`lamina.weights.claims.CLAIMS` with a unit's measurement
(:func:`lamina.weights.measure.measure_unit`), in declaration order, by
:class:`lamina.evidence.decide.Judge` (so a ``Present`` precondition sees the rows before it).

No verdict rule lives here: the word comes from :func:`lamina.evidence.decide.decide`. A
measurement is a dict of :class:`~lamina.evidence.decide.Measurement` fields; the gates are
{name: (passed, values as text)}. The chapter and the calibration
(:mod:`lamina.weights.calibration`) judge through :func:`judge_unit`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from lamina.evidence.claims import Claim, claims_frame
from lamina.evidence.decide import Context, GateResult, Judge, Measurement
from lamina.weights.claims import CLAIMS

__all__ = ["is_present", "judge_unit", "measurement"]

_FIELDS = {f.name for f in dataclasses.fields(Measurement)}


def measurement(fields: Mapping[str, object]) -> Measurement:
    """The :class:`~lamina.evidence.decide.Measurement` of a measurement dict (keys that are not
    its fields are left out; a None estimate or CI end reads NaN)."""
    # the fields' types are the dataclass's; a measurement dict mixes them, so the keyword
    # arguments are checked when Measurement is built, not here
    kw: dict[str, Any] = {k: v for k, v in fields.items() if k in _FIELDS}
    for k in ("estimate", "ci_low", "ci_high", "effect_size"):
        if kw.get(k) is None:
            kw.pop(k, None)
    return Measurement(**kw)


def is_present(row: Claim) -> bool:
    """Whether a judged row says its effect is present (the engine's ``present``)."""
    return bool(row.present)


def judge_unit(
    model: str, measurements: Mapping[str, Mapping[str, object]],
    gates: Mapping[str, tuple[bool, str]], only: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The claims table of one unit: one row per declared claim (or per id of ``only``, in
    declaration order), judged on ``model`` with its ``gates``; a claim without a measurement
    reads "not testable: not measured"."""
    ctx = Context(model=model, gates={k: GateResult(bool(ok), str(values))
                                      for k, (ok, values) in gates.items()})  # fmt: skip
    judge = Judge(ctx)
    rows = []
    for spec in CLAIMS:
        if only is not None and spec.id not in only:
            continue
        m = measurements.get(spec.id, {"untestable": "not measured"})
        rows.append(judge(spec, measurement(m)))
    return claims_frame(rows)
