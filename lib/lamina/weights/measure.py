"""Every paper-2 claim measured on one unit (an organism, a real checkpoint, a real pair): the
tables of a run -> {claim id: :class:`lamina.evidence.decide.Measurement` fields}.

The tables are those of the chapter's run (:mod:`lamina.weights.probes`,
:mod:`lamina.weights.mechanism`, :mod:`lamina.weights.edit_effects`,
:mod:`lamina.weights.adaptation`); the claims are :data:`lamina.weights.claims.CLAIMS`; a claim
the unit cannot test (``ck.untestable``: it needs a training history the unit lacks) gets a
measurement that says why. The gates the rows require are measured here too
(:func:`unit_gates`): the aligned stages' (recorded by their builds), the applied objectives'
and full fine-tuning's.
"""

from __future__ import annotations

import pandas as pd

from lamina.weights.aligned import StageGate
from lamina.weights.claims import ALIGNED_STAGES, CLAIMS, spec_of
from lamina.weights.measures_causal import adaptation_gate, kept_measure, single_group, write_edit
from lamina.weights.measures_mechanism import (
    cancellation_direction,
    cancellation_scale,
    optimizer_attenuates,
    raw_read_follows,
    read_grad_inherits,
    write_grad_early_only,
    write_weights_early,
)
from lamina.weights.measures_signature import (
    every_objective,
    late_pretraining,
    qk_measure,
    stage_not_objective,
    writes_measure,
)
from lamina.weights.settings import SignatureSettings
from lamina.weights.summaries import RowSelection, keep_layers
from lamina.weights.units import Units

__all__ = ["PREFIX", "margin", "measure_unit", "stage_pair", "unit_gates"]

PREFIX = "p2-signature-"


def margin() -> float:
    """m of "close to random" (within [1/m, m]): the upper end of the declared range."""
    return float(spec_of(f"{PREFIX}align-writes-sft").claimed[1])


def stage_pair(deltas: pd.DataFrame, stage: str) -> str | None:
    """The pair label of the stage ΔW base -> ``stage`` in the deltas table (None: absent)."""
    pairs = deltas[deltas["family"] == "stage"]["pair"].unique()
    found = [p for p in pairs if str(p).endswith(f"→{stage}") or str(p).endswith(f"+{stage}")]
    return str(found[0]) if found else None


def unit_gates(
    recorded: dict[str, StageGate], objective_gates: dict[str, tuple[bool, str]],
    adaptation: pd.DataFrame, s: SignatureSettings,
) -> dict[str, tuple[bool, str]]:
    """{gate name: (passed, values as text)}: the aligned stages' recorded gates, the applied
    objectives' (``objective-<o>``) and full fine-tuning's (``adaptation``,
    :func:`~lamina.weights.measures_causal.adaptation_gate`)."""
    out = {t: (g.passed, f"{g.describe()}; {g.reason}".strip("; ")) for t, g in recorded.items()}
    out |= {f"objective-{o}": g for o, g in objective_gates.items()}
    if len(adaptation):
        out["adaptation"] = adaptation_gate(adaptation, s.n_bootstrap, s.seed)
    return out


def measure_unit(
    parts: dict[str, pd.DataFrame], s: SignatureSettings, ck: Units
) -> dict[str, dict[str, object]]:
    """{claim id: Measurement fields} of every declared claim on one unit (module docstring).
    parts: the run's tables "deltas", "gradients", "write_gradients", "adam", "edits",
    "adaptation"."""
    m, d = margin(), parts["deltas"]
    out: dict[str, dict[str, object]] = {}
    for t in ALIGNED_STAGES:
        pair = stage_pair(d, t)
        if pair is None:
            why: dict[str, object] = {"untestable": f"no @{t} checkpoint in this run"}
            out[f"align-qk-{t}"] = out[f"align-writes-{t}"] = why
            continue
        where: RowSelection = {"family": "stage", "pair": pair}
        out[f"align-qk-{t}"] = qk_measure(d, s, **where)
        out[f"align-writes-{t}"] = writes_measure(d, s, m, **where)
    late = late_pretraining(d, s, m)
    out["late-pretraining-qk"], out["late-pretraining-writes"] = late["qk"], late["writes"]
    objectives = {o: p for o, p in _objective_pairs(d).items()}
    every = every_objective(d, s, m, objectives)
    out["every-objective-qk"], out["every-objective-writes"] = every["qk"], every["writes"]
    out["stage-not-objective"] = stage_not_objective(d, s)
    g = keep_layers(parts["gradients"], s)
    read = g[g["kind"] == "read"]
    out["read-grad-inherits"] = read_grad_inherits(read, m, s)
    out["raw-read-grad-follows"] = raw_read_follows(read, s)
    out["optimizer-attenuates"] = optimizer_attenuates(keep_layers(parts["adam"], s), "sft", s)
    out["cancellation-scale"] = cancellation_scale(g, m, s)
    out["cancellation-direction"] = cancellation_direction(g, m, s)
    w = keep_layers(parts["write_gradients"], s)
    out["write-grad-early-only"] = write_grad_early_only(w, s, ck.total)
    out["write-weights-early"] = write_weights_early(w, s, ck.total)
    e = parts["edits"]
    released = getattr(ck, "aligned_base", False)
    out["write-edit-released"] = (write_edit(e, s.base, s) if released else
                                  {"untestable": "the checkpoint itself is not aligned"})  # fmt: skip
    for t in ALIGNED_STAGES:
        out[f"write-edit-{t}"] = write_edit(e, t, s)
        out[f"write-edit-kept-{t}"] = kept_measure(e, t, s.base, s)
    out["single-group"] = single_group(parts["adaptation"], s)
    for name, reason in ck.untestable.items():
        if name in out:
            out[name] = {"untestable": reason}
    ids = {c.id for c in CLAIMS}
    return {f"{PREFIX}{k}": v for k, v in out.items() if f"{PREFIX}{k}" in ids}


def _objective_pairs(deltas: pd.DataFrame) -> dict[str, str]:
    """{objective: pair label} of the applied-objective ΔW pairs (family "objective")."""
    pairs = deltas[deltas["family"] == "objective"]["pair"].unique()
    return {str(p).rsplit("obj-", 1)[1]: str(p) for p in pairs}
