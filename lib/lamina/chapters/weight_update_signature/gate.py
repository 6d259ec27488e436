"""The alignment gate's consumer side: paper 2's alignment claims need a checkpoint that aligned.

A behavioural gate per stage (measured in :mod:`lamina.sources.organisms.gates`, on held-out
entity pairs: ``sft`` beats every content-blind policy and the base, ``dpo`` raises the content
probe over ``sft``, each with the CI of the gain above 0) says whether an aligned checkpoint
learned what its stage trains. This module only reads its outcome, :class:`AlignmentGate`
(one per stage name, :func:`gates_from_record`; the claims engine's ``GateResult(passed,
values)`` plus a reason), and rewrites the verdict of every claim row that rests on an aligned
checkpoint (:data:`ALIGNMENT_CLAIMS`) to "not testable" when the gate failed, or when no gate
was measured (never a default pass). Part of :mod:`lamina.chapters.weight_update_signature`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lamina.evidence.decide import GateResult as EngineGate

__all__ = [
    "ALIGNMENT_CLAIMS",
    "NOT_MEASURED",
    "AlignmentGate",
    "GateArg",
    "gate_for",
    "gate_reason",
    "engine_gates",
    "gate_rows",
    "gates_from_record",
    "passed",
]

ALIGNMENT_CLAIMS: tuple[str, ...] = (
    "align_qk_enriched",
    "align_write_random",
    "write_edit_after_alignment",
)
"""Claims (ids without the ``P2.`` prefix) whose rows rest on an aligned checkpoint: the
alignment-stage enrichment rows and the write edit after alignment. The objective-comparison
rows (``every_objective_signature``) compare the updates of the objectives themselves and are
not gated (reimplementation choice)."""

NOT_MEASURED = "not testable: alignment gate not measured"


@dataclass(frozen=True)
class AlignmentGate:
    """Outcome of the behavioural gate of one aligned checkpoint.

    passed: whether the checkpoint learned its alignment task (held-out, against a baseline a
        constant policy cannot beat); values: the gate's measurements by name (e.g.
        ``{"preference_accuracy": 0.51, "content_probe": 0.50}``, fractions in [0, 1] or
        whatever unit the name says); reason: one line saying why it passed or failed.
    """

    passed: bool
    values: dict[str, float] = field(default_factory=dict)
    reason: str = ""

    def for_engine(self) -> EngineGate:
        """The claims engine's gate (:class:`lamina.evidence.decide.GateResult`): passed, and as
        its values text the reason, else :meth:`describe`."""
        return EngineGate(self.passed, self.reason or self.describe())

    def describe(self) -> str:
        """The values as "name 0.512, name 0.498" (sorted by name; "no values" when empty)."""
        if not self.values:
            return "no values"
        return ", ".join(f"{k} {_fmt(v)}" for k, v in sorted(self.values.items()))


def gates_from_record(record: Mapping[str, Any] | None) -> dict[str, AlignmentGate]:
    """{``sft``/``dpo``: gate} from a stage-gates record (an aligned build's ``gates.json``, an
    organism's ``evaluation.json["gates"]``; :func:`lamina.sources.organisms.gates.write_gates`);
    {} for None (not measured: the alignment claims read so). Only finite values are kept. A
    record of another format raises ValueError saying to rebuild."""
    from lamina.sources.organisms.gates import read_gates

    if record is None:
        return {}
    return {stage: AlignmentGate(g.passed, {k: v for k, v in g.values.items() if np.isfinite(v)},
                                 g.reason)
            for stage, g in read_gates(record).items()}  # fmt: skip


def engine_gates(gates: Mapping[str, AlignmentGate]) -> dict[str, EngineGate]:
    """{stage: the engine's gate} for a :class:`lamina.evidence.decide.Context`, so that a claim
    declaring ``Gate("sft")`` or ``Gate("dpo")`` reads the stage's gate (a stage absent here:
    not measured, and the claim is "not testable")."""
    return {stage: g.for_engine() for stage, g in gates.items()}


GateArg = AlignmentGate | Mapping[str, "AlignmentGate | None"] | None
"""What the claim builders accept: one gate for every aligned checkpoint of a unit, a
mapping {checkpoint label or stage name: gate} (a missing key = not measured), or None (not
measured)."""


def _fmt(v: float) -> str:
    return f"{v:.3g}" if np.isfinite(v) else "n/a"


def gate_for(gate: GateArg, checkpoint: str) -> AlignmentGate | None:
    """The gate of one aligned checkpoint (a stage name such as ``sft`` or a full label):
    ``gate`` itself when it is one :class:`AlignmentGate`, its entry when a mapping (None when
    absent), None when None."""
    if gate is None or isinstance(gate, AlignmentGate):
        return gate
    if not isinstance(gate, Mapping):
        raise TypeError(
            f"gate must be an AlignmentGate, a mapping of them or None; got {type(gate).__name__}"
        )
    found = gate.get(checkpoint)
    if found is not None and not isinstance(found, AlignmentGate):
        raise TypeError(f"gate[{checkpoint!r}] is a {type(found).__name__}, not an AlignmentGate")
    return found


def gate_reason(gate: AlignmentGate | None) -> str | None:
    """None when the gate passed; else the note a gated row carries: "not testable: alignment
    did not take (<values>)" or :data:`NOT_MEASURED`."""
    if gate is None:
        return NOT_MEASURED
    if gate.passed:
        return None
    why = f"; {gate.reason}" if gate.reason else ""
    return f"not testable: alignment did not take ({gate.describe()}{why})"


def gate_rows(rows: list[dict[str, Any]], gate: AlignmentGate | None) -> list[dict[str, Any]]:
    """Rows of one aligned checkpoint with the gate applied: when ``gate`` is None or failed,
    every row of :data:`ALIGNMENT_CLAIMS` gets verdict "not testable", its note says why
    (:func:`gate_reason`) and what it measured (value, verdict as if the gate had passed),
    and its measured value, CI, p and effect size become NaN, so that nothing in the row reads
    as a result. Other rows, and every row when the gate passed, are returned unchanged
    (new dicts; the input is not modified)."""
    reason = gate_reason(gate)
    out = []
    for row in rows:
        row = dict(row)
        if reason is not None and row["claim_id"].removeprefix("P2.") in ALIGNMENT_CLAIMS:
            was = f"measured {_fmt(row['measured'])} {row.get('unit', '')}".rstrip()
            old = row.get("note") or ""
            row["note"] = f"{reason}; {was}, which would read {row['verdict']}" + (
                f"; {old}" if old else ""
            )
            row["verdict"] = "not testable"
            for col in ("measured", "ci_low", "ci_high", "p", "effect_size"):
                row[col] = float("nan")
        out.append(row)
    return out


def passed(gate: GateArg, checkpoints: list[str]) -> list[str]:
    """The checkpoints (stage names or labels) whose gate was measured and passed, in order:
    where a measurement that only an aligned checkpoint can use is worth its cost (e.g. the
    write edit's random-direction null, ``write_edit_effects(..., only=passed(gate, ...))``)."""
    out = []
    for c in checkpoints:
        g = gate_for(gate, c)
        if g is not None and g.passed:
            out.append(c)
    return out
