"""Claims declared as data: what each claim says, how it is measured and tested, what it needs.

A :class:`ClaimSpec` is written once, in the science package that owns the claim
(``lamina.trajectory.claims``, ``lamina.weights.claims``, ``lamina.anatomy.claims``, ...), and
judged by :func:`lamina.evidence.decide.decide` on each model's measurement. The calibration page
lists every declared claim with its false-positive rate and power, or the reason it has none.

Preconditions (``requires``):

* :class:`Gate` ``(name)``: a behavioural gate of that name must have passed on the model (e.g.
  the training stage the claim reads: "sft", "dpo"). A failed or unmeasured gate makes the row
  "not testable" with the gate's values.
* :class:`Present` ``(claim_id)``: that claim's effect must be *present* on the same model:
  significant in its claimed direction (its row's ``present``), whatever its size or verdict.

A vanish row lists its :class:`Control` s, each declared able or unable to fail; a control that
removes every effect by construction is no evidence, and the row reads "undecidable at this
design".

Decidability: a claim whose rule cannot read its claimed answer at the book's design declares
``undecidable`` (why, and the design that would decide it); a *level* row (a claimed range with
no test and no direction) declares ``equivalence=True`` to be judged by an equivalence test
against its range, and otherwise has no test (the calibration page shows "FPR n/a: no test").
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from lamina.evidence.claims import KINDS, check_id

__all__ = ["NO_TEST", "ClaimSpec", "Control", "Gate", "Present", "Sided", "check_declarations"]

Sided = Literal["two-sided", "greater", "less"]
#: the calibration status of a level row without an equivalence test (no rate: its "present" is
#: False by construction, so a false-positive rate of 0% would say nothing)
NO_TEST = "FPR n/a: no test (a level row: a claimed range with no test and no direction)"


@dataclass(frozen=True)
class Gate:
    """Precondition: the behavioural gate ``name`` passed on the model the claim reads."""

    name: str

    def text(self) -> str:
        return f"gate {self.name} passed"


@dataclass(frozen=True)
class Present:
    """Precondition: the effect of claim ``claim_id`` is present (significant in its claimed
    direction) on the same model."""

    claim_id: str

    def text(self) -> str:
        return f"effect of {self.claim_id} present"


@dataclass(frozen=True)
class Control:
    """A control of a vanish claim. can_fail: whether an effect could survive it (a control
    whose construction removes every effect cannot fail, and ``why`` says why)."""

    name: str
    can_fail: bool = True
    why: str = ""

    def __post_init__(self) -> None:
        if not self.can_fail and not self.why:
            raise ValueError(f"control {self.name!r} cannot fail: say why (why=...)")


@dataclass(frozen=True, kw_only=True)
class ClaimSpec:
    """One claim of a paper (or one self-check), as data.

    id: the claim id (:func:`lamina.evidence.claims.claim_id` scheme); claim: the paper's words;
    paper_value: the paper's number as text; kind: effect, count, location, vanish, across or
    self-check (:mod:`lamina.evidence.claims`); statistic: what the estimate is; unit: its unit;
    resampling: the independent unit that CIs and tests resample (prompt, item, base word, pair,
    document, matrix, seed, ...); test: the test's name ("" = no test: judged on the CI alone);
    sided: the sidedness of BOTH its p and its CI ("greater": p of estimate > null, and a CI
    whose ends are one-sided bounds at ``level``, i.e. the central 1 - 2(1 - level) interval);
    alpha: the claim's own level; level: the CI's coverage per the sidedness; direction: +1/-1
    for a claimed sign relative to ``null`` (0 for none); null: the value of no effect (0 for a
    difference, 1 for a ratio); claimed: the claimed range (lo, hi), ``hi = inf`` for "at least";
    tolerance: slack for an open-ended range's precision rule (decide's docstring); opposite: the
    opposite of the claimed shape, when it is not the sign flip of the estimate (e.g. "elaboration
    below both neighbours"), which the measurement must test (``p_opposite``) for "reversed";
    requires: preconditions; controls: the controls of a vanish row; of: the effect claim a vanish
    or across row is about; min_sources: an across row's fewest judged sources; main: the
    chapter's headline claim; short: its label in the verdict picture; calibrated / not_calibrated:
    exactly one is set: the null and planted sources that calibrate it, or why none does;
    equivalence: a level row (claimed finite range, no test, no direction) judged by an
    equivalence test (two one-sided tests at level (1 - ci_level) / 2 each: "reproduced" only
    when the whole CI lies inside the claimed range); undecidable: why the rule cannot read its
    claimed answer at this design, and the design that would decide it (the row then reads
    "undecidable at this design" whenever its preconditions hold); conditional_null: for a row
    that requires another claim's effect (:class:`Present`), the calibration source on which
    its false-positive rate is read, one that keeps the precondition and breaks this row's own
    claim ("half": the effect present at half the paper's size, for a size claim; a science
    package's own, such as "elsewhere": the effect located outside the claimed range). On the
    plain null such a row is "not testable" by design (its precondition fails there), so a rate
    read there counts nothing.
    """

    id: str
    claim: str
    paper_value: str
    kind: str
    statistic: str
    unit: str
    resampling: str = ""
    test: str = ""
    sided: Sided = "two-sided"
    alpha: float = 0.05
    level: float = 0.95
    direction: int = 0
    null: float = 0.0
    claimed: tuple[float, float] = (-math.inf, math.inf)
    tolerance: float = 0.0
    opposite: str = ""
    requires: tuple[Gate | Present, ...] = ()
    controls: tuple[Control, ...] = ()
    of: str = ""
    min_sources: int = 0
    main: bool = False
    short: str = ""
    calibrated: str = ""
    not_calibrated: str = ""
    equivalence: bool = False
    undecidable: str = ""
    conditional_null: str = ""

    def __post_init__(self) -> None:
        check_id(self.id)
        where = f"claim {self.id}"
        if self.kind not in KINDS:
            raise ValueError(f"{where}: kind {self.kind!r} is not one of {KINDS}")
        if (self.kind == "self-check") != self.id.startswith("self-"):
            raise ValueError(f"{where}: only self-checks have self- ids")
        if self.sided not in ("two-sided", "greater", "less"):
            raise ValueError(f"{where}: sided {self.sided!r} is not two-sided, greater or less")
        if self.sided != "two-sided" and self.direction != (1 if self.sided == "greater" else -1):
            raise ValueError(f"{where}: a {self.sided} test needs direction "
                             f"{1 if self.sided == 'greater' else -1}")  # fmt: skip
        if self.direction not in (-1, 0, 1):
            raise ValueError(f"{where}: direction must be -1, 0 or +1")
        if not (0 < self.alpha < 1 and 0.5 < self.level < 1):
            raise ValueError(f"{where}: alpha must lie in (0, 1) and level in (0.5, 1)")
        lo, hi = self.claimed
        if not lo <= hi:
            raise ValueError(f"{where}: claimed range {self.claimed} has lo > hi")
        if self.kind in ("vanish", "across") and not self.of:
            raise ValueError(f"{where}: a {self.kind} row names the claim it is about (of=...)")
        if self.kind == "vanish" and not self.controls:
            raise ValueError(f"{where}: a vanish row declares its controls")
        if self.kind == "across" and self.min_sources < 1:
            raise ValueError(f"{where}: an across row declares min_sources >= 1")
        if self.equivalence and not (self.kind == "effect" and not self.test
                                     and self.direction == 0 and math.isfinite(lo)
                                     and math.isfinite(hi)):
            raise ValueError(f"{where}: an equivalence test is for a level row: an effect with "
                             "a finite claimed range, no test and no direction")  # fmt: skip
        if self.conditional_null and not any(isinstance(r, Present) for r in self.requires):
            raise ValueError(f"{where}: a conditional null is for a row that requires another "
                             "claim's effect (requires=(Present(...),))")  # fmt: skip
        if bool(self.calibrated) == bool(self.not_calibrated):
            raise ValueError(f"{where}: set exactly one of calibrated= (its nulls) and "
                             "not_calibrated= (why it has none)")  # fmt: skip

    @property
    def paper(self) -> int | None:
        """The paper (1, 2, 3) whose claim this is; None for a self-check."""
        head = self.id.split("-", 1)[0]
        return None if head == "self" else int(head[1:])

    @property
    def ci_level(self) -> float:
        """The two-sided coverage of the CI that goes with the sidedness: ``level`` for a
        two-sided test, ``1 - 2 (1 - level)`` for a one-sided one (both ends one-sided bounds)."""
        return self.level if self.sided == "two-sided" else 1 - 2 * (1 - self.level)

    @property
    def is_level(self) -> bool:
        """Whether this is a level row: an effect claimed to lie in a range, with no test and
        no direction (judged by an equivalence test only when ``equivalence``)."""
        return self.kind == "effect" and not self.test and self.direction == 0

    @property
    def has_test(self) -> bool:
        """Whether the row's rule is a test that can reject on a null: not a level row
        without an equivalence test (whose "present" is False by construction)."""
        return not self.is_level or self.equivalence

    def requires_text(self) -> str:
        """The preconditions as one line ("" when none)."""
        return "; ".join(r.text() for r in self.requires)

    def calibration_text(self) -> str:
        """The row's ``calibration`` column: "undecidable at this design: <reason>" (declared
        undecidable), :data:`NO_TEST` (a level row without an equivalence test), "calibrated",
        or "not calibrated: <reason>"."""
        if self.undecidable:
            return f"undecidable at this design: {self.undecidable}"
        if not self.has_test:
            return NO_TEST
        return "calibrated" if self.calibrated else f"not calibrated: {self.not_calibrated}"


def check_declarations(specs: Iterable[ClaimSpec]) -> dict[str, ClaimSpec]:
    """{id: spec} of a set of declarations; ValueError on a repeated id, or on a precondition,
    ``of`` or vanish/across target naming a claim outside the set."""
    out: dict[str, ClaimSpec] = {}
    for s in specs:
        if s.id in out:
            raise ValueError(f"claim {s.id} is declared twice")
        out[s.id] = s
    for s in out.values():
        named = [r.claim_id for r in s.requires if isinstance(r, Present)]
        named += [s.of] if s.of else []
        for target in named:
            if target not in out:
                raise ValueError(f"claim {s.id} names {target}, which is not declared")
    return out
