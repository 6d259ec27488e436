"""The designs that would decide paper 3's underpowered rows: a row's power on its own planted
known-answer source, and its rate of "yes" on the null, at designs larger than the chapter's --
measured by the chapter's code and judged by :func:`lamina.evidence.decide.decide`, exactly as
the calibration (:mod:`lamina.anatomy.calibration`) does at the chapter's design.

The design each row reads (:data:`DESIGNS`):

* anti-layers and their positions: units of held-out text (128 tokens each; the chapter: 48,
  16 until 29e499b);
* recovery: fine-tuned layers (the chapter: 30, 8 until 29e499b);
* scaling: units of the other edits (the chapter: 48, 6 until 29e499b).

:func:`smallest_design` is the code behind any "this design would decide it": the smallest
size whose power at the paper's size (lamina's, where the paper gives none) reaches 80%.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from lamina.anatomy.calibration_sources import (
    N_RECOVERY,
    N_ROBUST_LAYERS,
    N_ROBUST_UNITS,
    N_UNITS,
    OPTIONS,
    importance_sweep,
    recovery_source,
    robustness_sweep,
    run_rows,
)
from lamina.anatomy.measurements import AnatomyTables, measure_anatomy
from lamina.anatomy.paper import PAPER_L
from lamina.anatomy.recovery import measure_recovery
from lamina.evidence.calibration import AS_CLAIMED, POWER_TARGET, says_yes
from lamina.evidence.decide import Measurement

__all__ = ["DESIGNS", "design_rates", "smallest_design"]

DESIGNS: dict[str, tuple[str, int]] = {
    "p3-anatomy-anti": ("units of held-out text", N_UNITS),
    "p3-anatomy-anti-at": ("units of held-out text", N_UNITS),
    "p3-anatomy-recovery": ("fine-tuned layers", N_RECOVERY),
    "p3-anatomy-scaling": ("units of the other edits", N_ROBUST_UNITS),
}
"""Claim id -> (what its design counts, the chapter's size)."""


def _row(claim_id: str, source: str, seed: int, size: int) -> dict[str, object]:
    """One calibration row (RUN_COLUMNS) of ``claim_id`` on ``source`` at design ``size``."""
    if claim_id in ("p3-anatomy-anti", "p3-anatomy-anti-at"):
        sweep, docs = importance_sweep(source, seed, size)
        measured, _ = measure_anatomy(AnatomyTables(sweep, docs, PAPER_L), OPTIONS)
        return run_rows(source, seed, measured, [claim_id])[0]
    if claim_id == "p3-anatomy-recovery":
        imp, rec = recovery_source(source, seed, size)
        m = Measurement(**measure_recovery(imp, rec, OPTIONS.n_permutations, seed))  # type: ignore[arg-type]
        return run_rows(source, seed, {claim_id: m}, [claim_id])[0]
    if claim_id == "p3-anatomy-scaling":
        rob, docs, joint = robustness_sweep(source, seed, size)
        t = AnatomyTables(rob, docs, N_ROBUST_LAYERS, joint_nll=joint)
        measured, _ = measure_anatomy(t, OPTIONS)
        return run_rows(source, seed, measured, [claim_id], given=("p3-anatomy-r2",))[0]
    raise ValueError(f"no design study for {claim_id}; known: {sorted(DESIGNS)}")


def design_rates(claim_id: str, size: int, seeds: Iterable[int]) -> dict[str, float]:
    """At design ``size``: power (the share of planted seeds whose row reads as claimed,
    :data:`lamina.evidence.calibration.AS_CLAIMED`), fpr (the share of null seeds whose row
    says yes, :func:`lamina.evidence.calibration.says_yes`) and undecidable (the share of
    planted seeds reading "undecidable at this design"), over ``seeds``."""
    seeds = list(seeds)
    planted = [_row(claim_id, "planted", s, size) for s in seeds]
    null = [_row(claim_id, "null", s, size) for s in seeds]
    kind = str(planted[0]["kind"])
    return {
        "size": float(size),
        "power": float(np.mean([r["verdict"] == AS_CLAIMED[kind] for r in planted])),
        "fpr": float(
            np.mean([says_yes(str(r["verdict"]), kind, bool(r["present"])) for r in null])
        ),  # fmt: skip
        "undecidable": float(
            np.mean([str(r["verdict"]).startswith("undecidable") for r in planted])
        ),  # fmt: skip
    }


def smallest_design(
    claim_id: str, sizes: Sequence[int], seeds: Iterable[int], target: float = POWER_TARGET
) -> tuple[int | None, list[dict[str, float]]]:
    """(the smallest of ``sizes`` (ascending) whose power reaches ``target``, None when none
    does; :func:`design_rates` of every size tried, stopping at that one)."""
    seeds = list(seeds)
    rates = []
    for size in sorted(sizes):
        rates.append(design_rates(claim_id, size, seeds))
        if rates[-1]["power"] >= target:
            return size, rates
    return None, rates
