"""The one place a verdict word is decided: :func:`decide` (and :func:`decide_across` for a row
over several sources). The methods page quotes this docstring.

A claim is declared once (:class:`lamina.evidence.declare.ClaimSpec`); a chapter measures it on
a model (:class:`Measurement`: estimate, CI, p) and ``decide`` returns the row
(:class:`lamina.evidence.claims.Claim`) by these rules, in order:

1. **Preconditions.** Each declared ``Gate(name)`` must be in the context's gates and have
   passed; each ``Present(id)`` needs that claim's row on the same model to be *present*
   (significant in its claimed direction). Otherwise "not testable", giving the gate's values
   or the row's verdict and p. A measurement may also be untestable for its own reason
   (``untestable``), e.g. too few permutations to decide at the claim's alpha.
   **Decidability.** A claim declared ``undecidable`` (its rule cannot read the claimed answer
   at this design), or a measurement that says so (``undecidable``), reads "undecidable at this
   design" with the reason -- neither evidence for the claim nor against it.
2. **Sidedness.** The measurement states the sidedness of its p and CI; it must be the
   declaration's (a two-sided CI beside a one-sided p is a programming error, raised).
3. **The estimate and its CI.** An undefined estimate, or an undefined p for a tested claim, is
   "not testable". An estimate outside its own CI is "not testable" unless the measurement says
   which estimate the CI belongs to (``ci_of``).
4. **Effect rows** (point estimate e, CI [c_lo, c_hi], claimed range [lo, hi], value of no
   effect ``null`` -- the declaration's, or the measurement's where its test's null has a
   centre of its own, such as a permutation null's median -- the claim's ``alpha``):

   * *Direction.* With a claimed direction, an estimate on the other side of ``null`` is
     "reversed" when the opposite of the claimed shape is significant (its p < alpha: the
     two-sided p when the opposite is the sign flip, else the measurement's ``p_opposite``;
     for an untested claim, a CI wholly on the other side), else "absent".
   * *Significance.* A tested claim with p >= alpha is "absent", whatever the estimate.
     An untested claim with a direction needs its CI to exclude ``null`` (else "absent").
     Past this point the effect is **present**.
   * *Level rows* (``equivalence``: a claimed range, no test, no direction) are judged by an
     equivalence test, two one-sided tests at (1 - ci_level) / 2 each: "reproduced" (and
     present) only when the whole CI lies inside the claimed range; "partially" when it
     overlaps it; "smaller than claimed" / "not reproduced" when it lies below / above it; no
     CI is "not testable". A CI that overlaps the range but is wider than it can never lie
     inside it, so it reads "undecidable at this design" with the units that would decide it.
   * *Size.* ``in_range``: lo <= e <= hi; ``ci_overlaps``: c_lo <= hi and c_hi >= lo;
     ``precise``: the CI lies inside the range widened by half its width on each side
     (open-ended range: c_lo >= lo - tolerance). "reproduced" when in_range and precise;
     "partially" when the CI overlaps the range; "smaller than claimed" when the CI lies below
     it; "not reproduced" when it lies above it.
5. **Count rows**: "count as claimed" when the count is in the claimed range and so is its
   CI (when it has one); "count uncertain" when the count is but the CI leaves the range;
   otherwise "fewer than claimed" / "more than claimed". A one-point claimed range judged with
   a CI whose ends are not whole numbers is "undecidable at this design": such a CI can never
   lie inside it. Never present.
6. **Location rows**: "located as claimed" when in_range and precise (as above); "location
   uncertain" when the CI overlaps the range; "located elsewhere" when it does not; a
   location without a CI is "not testable". Never present.
7. **Vanish rows** ("the effect vanishes under the controls"): testable only when the effect
   of the claim they are about (``of``) is present. A control declared unable to fail (or
   unable on this source: ``cannot_fail``) makes the row "undecidable at this design" -- such
   a control is no evidence. Every declared control must have a result with a bound on the
   share that remains, else "not testable". A control *removes* the effect by an equivalence
   test: the upper confidence bound of the signed share of the effect that remains under it
   (one-sided, at level >= 1 - alpha: ``share_high``) lies below one half. Where the control
   keeps half the effect or more, this reads "removes" with probability <= alpha; a remainder
   that is small but significant (a few per cent of a layer-specific code, which a large
   design detects) still counts as removed, and a noisy control that is merely not
   significant does not. "reproduced" when every control removes it, "partially" when some
   do, "not reproduced" when none does.
8. **Self-checks**: "check passed" / "check failed" from the measurement's ``passed``.

:func:`decide_across` judges one row over several sources (an ``across`` claim such as
"consistent across all three architectures"): "not testable" with fewer judged sources than
``min_sources``; "reproduced" when the claim it is about is reproduced on every judged source;
"not reproduced" otherwise, naming the sources.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from lamina.evidence.claims import (
    ABSENT,
    NOT_REPRODUCED,
    NOT_TESTABLE,
    PARTIALLY,
    REPRODUCED,
    REVERSED,
    SMALLER,
    UNDECIDABLE,
    Claim,
    osc_replicates,
)
from lamina.evidence.declare import ClaimSpec, Gate, Present

__all__ = ["Context", "ControlResult", "GateResult", "Judge", "Measurement", "decide",
           "decide_across", "range_rules", "vanish_measurement"]  # fmt: skip


@dataclass(frozen=True)
class GateResult:
    """A behavioural gate on one model: passed, and its values as text (shown when it fails)."""

    passed: bool
    values: str = ""


@dataclass(frozen=True)
class ControlResult:
    """A control's effect: the signed share of the real effect that remains under it
    (``fraction``, dimensionless: control effect / real effect), the p of the effect measured
    on the control (same test and sidedness; None: untested; shown, not judged), and the
    upper one-sided confidence bound of that share at level >= 1 - alpha (``share_high``;
    None: no bound, and the vanish row cannot judge this control)."""

    fraction: float
    p: float | None = None
    share_high: float | None = None


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """What a chapter measured for one claim on one model (units: the claim's ``unit``).

    estimate: the point estimate; ci_low/ci_high: its CI, of sidedness ``sided`` (must equal
    the declaration's); p: the test's p of that sidedness (None: no test); p_opposite: the p of
    the opposite of the claimed shape, when the declaration names one (``opposite``) or the test
    is one-sided; effect_size/effect_name: a standardised effect; ci_of: when the CI does not
    belong to ``estimate``, which estimate it belongs to; n_units: the number of independent
    units; test: the test's name with its budget (default: the declaration's); detail: text added
    to the reason; untestable: a measurement-level reason the claim cannot be judged;
    controls: vanish rows' controls by name; cannot_fail: controls unable to fail on this
    source, with why; undecidable: a measurement-level reason the rule cannot read the claimed
    answer at this design (and the design that would); passed: a self-check's outcome; null: the value of no effect under this
    measurement's test when the test's null has a centre of its own (e.g. the median R^2 over
    shuffled layer orders), which the direction rule then uses instead of the declaration's
    ``null`` (None: the declaration's).
    """

    estimate: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    sided: str | None = None
    p: float | None = None
    p_opposite: float | None = None
    effect_size: float = math.nan
    effect_name: str = ""
    ci_of: str = ""
    n_units: int | None = None
    test: str = ""
    detail: str = ""
    untestable: str | None = None
    undecidable: str | None = None
    controls: Mapping[str, ControlResult] = field(default_factory=dict)
    cannot_fail: Mapping[str, str] = field(default_factory=dict)
    passed: bool | None = None
    null: float | None = None


def _null(spec: ClaimSpec, m: Measurement) -> float:
    """The value of no effect for ``m``'s direction rule: its test's own centre, or the
    declaration's."""
    return spec.null if m.null is None or not _finite(m.null) else float(m.null)


@dataclass(frozen=True, kw_only=True)
class Context:
    """Where a claim is judged: the model (source), its representation convention, its gates
    by name, and the rows already judged on it by claim id (for ``Present``)."""

    model: str
    convention: str = ""
    gates: Mapping[str, GateResult] = field(default_factory=dict)
    rows: Mapping[str, Claim] = field(default_factory=dict)


Row = Callable[..., Claim]  # (verdict, reason, present=False) -> the row


def _finite(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _g(x: float) -> str:
    return f"{x:.3g}"


def range_rules(
    e: float, c_lo: float, c_hi: float, lo: float, hi: float, tolerance: float = 0.0
) -> dict[str, bool]:
    """The size rules of rule 4: ``in_range``, ``ci_overlaps``, ``precise`` and ``matches``
    (= in_range and precise). A missing CI end (NaN) is neither overlapping nor precise; an
    infinite end is an open one-sided bound."""
    in_range = _finite(e) and lo <= e <= hi
    has_ci = not (math.isnan(c_lo) or math.isnan(c_hi))
    overlaps = has_ci and c_lo <= hi and c_hi >= lo
    if math.isinf(hi):
        precise = has_ci and c_lo >= lo - tolerance
    else:
        half = (hi - lo) / 2
        precise = has_ci and c_lo >= lo - half and c_hi <= hi + half
    return {"in_range": bool(in_range), "ci_overlaps": bool(overlaps),
            "precise": bool(precise), "matches": bool(in_range and precise)}  # fmt: skip


def _precondition(spec: ClaimSpec, ctx: Context) -> str | None:
    """Why a precondition fails (None: all hold)."""
    for req in spec.requires:
        if isinstance(req, Gate):
            gate = ctx.gates.get(req.name)
            if gate is None:
                return f"gate {req.name} was not measured on {ctx.model}"
            if not gate.passed:
                return f"gate {req.name} failed" + (f": {gate.values}" if gate.values else "")
        elif isinstance(req, Present):
            row = ctx.rows.get(req.claim_id)
            if row is None:
                return f"{req.claim_id} was not judged on {ctx.model}"
            if not row.present:
                p = f", p = {_g(row.p)}" if _finite(row.p) else ""
                return f"the effect of {req.claim_id} is not present ({row.verdict}{p})"
    return None


def _base(spec: ClaimSpec, m: Measurement, ctx: Context) -> dict[str, object]:
    return {
        "claim_id": spec.id, "claim": spec.claim, "paper_value": spec.paper_value,
        "model": ctx.model, "measured": float(m.estimate), "ci_low": float(m.ci_low),
        "ci_high": float(m.ci_high), "ci_level": spec.ci_level, "sided": spec.sided,
        "ci_of": m.ci_of, "p": math.nan if m.p is None else float(m.p), "alpha": spec.alpha,
        "test": m.test or spec.test, "effect_size": float(m.effect_size),
        "effect_name": m.effect_name or spec.statistic, "convention": ctx.convention,
        "kind": spec.kind, "main": spec.main, "unit": spec.unit, "short": spec.short,
        "resampling": spec.resampling, "requires": spec.requires_text(),
        "calibration": spec.calibration_text(),
    }  # fmt: skip


def decide(spec: ClaimSpec, m: Measurement, ctx: Context) -> Claim:
    """The row of claim ``spec`` measured as ``m`` on ``ctx.model``, by the module's rules."""
    base = _base(spec, m, ctx)
    if spec.kind == "across":
        raise ValueError(f"claim {spec.id} is an across row: judge it with decide_across")

    def row(verdict: str, reason: str, present: bool = False) -> Claim:
        detail = m.detail if m.detail and verdict != NOT_TESTABLE else ""
        detail = f"; {detail}" if detail and reason else detail  # a self-check has no reason of its own
        osc = ""
        if spec.kind == "effect" and verdict != NOT_TESTABLE:
            osc = osc_replicates(m.estimate, m.p, direction=spec.direction, null=_null(spec, m))
        return Claim(verdict=verdict, reason=reason + detail, present=present, osc=osc,
                     **base)  # type: ignore[arg-type]  # fmt: skip

    why = _precondition(spec, ctx) or m.untestable
    if why:
        return row(NOT_TESTABLE, why)
    if spec.kind != "self-check" and (spec.undecidable or m.undecidable):
        return row(UNDECIDABLE, "; ".join(x for x in (spec.undecidable, m.undecidable or "") if x))
    if spec.kind == "self-check":
        if m.passed is None:
            return row(NOT_TESTABLE, "the check could not run")
        return row("check passed" if m.passed else "check failed", "")
    if spec.kind == "vanish":
        return _vanish(spec, m, ctx, row)
    tested = bool(spec.test)
    if spec.kind == "effect" and (tested or _finite(m.ci_low)) and m.sided != spec.sided:
        raise ValueError(
            f"claim {spec.id} is declared {spec.sided}; its measurement on {ctx.model} is "
            f"{m.sided!r}: the p and CI must have the declared sidedness"
        )
    e, lo, hi = m.estimate, m.ci_low, m.ci_high
    if not _finite(e):
        return row(NOT_TESTABLE, "the estimate is undefined")
    if tested and spec.kind == "effect" and not _finite(m.p):
        return row(NOT_TESTABLE, "the test's p-value is undefined")
    has_ci = not (math.isnan(lo) or math.isnan(hi))
    if has_ci and not lo <= e <= hi and not m.ci_of:
        return row(NOT_TESTABLE, f"the estimate {_g(e)} lies outside its own CI "
                   f"[{_g(lo)}, {_g(hi)}]: the CI belongs to another estimate")  # fmt: skip
    claimed = spec.claimed
    where = f"claimed {claimed[0]:g} to {claimed[1]:g}"
    if spec.kind == "count":
        return _count(e, lo, hi, has_ci, claimed, where, row)
    if spec.kind == "location":
        if not has_ci:
            return row(NOT_TESTABLE, "the location has no CI")
        r = range_rules(e, lo, hi, *claimed, spec.tolerance)
        if r["matches"]:
            return row("located as claimed", f"in the claimed range ({where})")
        if r["ci_overlaps"]:
            return row("location uncertain", f"the CI overlaps the claimed range ({where}) "
                       "but does not lie within it")  # fmt: skip
        return row("located elsewhere", f"the CI lies outside the claimed range ({where})")
    return _effect(spec, m, e, lo, hi, has_ci, where, row)


def _effect(
    spec: ClaimSpec, m: Measurement, e: float, lo: float, hi: float, has_ci: bool, where: str,
    row: Row,
) -> Claim:
    """Rule 4 (see :func:`decide`)."""
    tested, alpha, null, d = bool(spec.test), spec.alpha, _null(spec, m), spec.direction
    p = m.p
    if spec.equivalence:
        return _equivalence(spec, e, lo, hi, has_ci, where, row, m.n_units)
    if d and (e == null or math.copysign(1, e - null) != d):
        if tested:
            if spec.opposite or spec.sided != "two-sided":
                p_opp = m.p_opposite
            else:
                p_opp = p
            if p_opp is not None and _finite(p_opp) and p_opp < alpha:
                shape = spec.opposite or "the effect points the other way"
                return row(REVERSED, f"{shape}, p = {_g(p_opp)} < {alpha:g}")
            opp = spec.opposite or "the sign flip"
            tail = "" if p_opp is None else f"; the opposite ({opp}) has p = {_g(p_opp)} >= {alpha:g}"
            return row(ABSENT, "the estimate points the other way" + (
                tail or f" (the opposite, {opp}, is not tested)"))
        other = has_ci and (hi < null if d > 0 else lo > null)
        if other:
            return row(REVERSED, f"the CI lies wholly on the other side of {null:g}")
        return row(ABSENT, "the estimate points the other way")
    if tested and not (p is not None and p < alpha):
        return row(ABSENT, f"p = {_g(float(p or math.nan))} >= {alpha:g}" + (
            " (the estimate is in the claimed range; the test is not significant)"
            if spec.claimed[0] <= e <= spec.claimed[1] else ""))
    if d and not tested and not (has_ci and (lo > null if d > 0 else hi < null)):
        return row(ABSENT, f"the CI includes no effect ({null:g})")
    present = bool(d) or tested
    sig = f"; p = {_g(float(p or math.nan))} < {alpha:g}" if tested else ""
    r = range_rules(e, lo, hi, *spec.claimed, spec.tolerance)
    if r["matches"]:
        return row(REPRODUCED, f"in the claimed range ({where}){sig}", present)
    if r["ci_overlaps"]:
        what = "the estimate lies outside" if not r["in_range"] else "the CI is too wide for"
        return row(PARTIALLY, f"{what} the claimed range ({where}){sig}", present)
    if e < spec.claimed[0]:
        return row(SMALLER, f"the CI lies below the claimed range ({where}){sig}", present)
    return row(NOT_REPRODUCED, f"the CI lies above the claimed range ({where}){sig}", present)


def _equivalence(spec: ClaimSpec, e: float, lo: float, hi: float, has_ci: bool, where: str,
                 row: Row, n_units: int | None = None) -> Claim:  # fmt: skip
    """Rule 4's level rows (:func:`decide`); a CI's width falls as 1 / sqrt(units)."""
    a, b = spec.claimed
    if not has_ci:
        return row(NOT_TESTABLE, "the level has no CI, so no equivalence test")
    tost = (f"equivalence test: the {100 * spec.ci_level:g}% CI [{_g(lo)}, {_g(hi)}] against "
            f"the {where.replace('claimed ', 'claimed range ')}")  # fmt: skip
    if a <= lo and hi <= b:
        return row(REPRODUCED, f"{tost}: inside it", present=True)
    if lo <= b and hi >= a and hi - lo > b - a:  # the design first: the page keeps 160 characters
        more = (f"about {math.ceil(n_units * ((hi - lo) / (b - a)) ** 2)} {spec.resampling or 'unit'}s"
                f" (here {n_units}) would narrow it enough; " if n_units else "")  # fmt: skip
        return row(UNDECIDABLE, f"the CI is {_g(hi - lo)} wide, wider than the claimed range "
                   f"({_g(b - a)}), so it can never lie inside it; {more}{tost}")  # fmt: skip
    if lo <= b and hi >= a:
        return row(PARTIALLY, f"{tost}: overlaps it, not inside it")
    return row(SMALLER, f"{tost}: below it") if hi < a else row(NOT_REPRODUCED, f"{tost}: above it")


def _count(
    e: float, lo: float, hi: float, has_ci: bool, claimed: tuple[float, float], where: str,
    row: Row,
) -> Claim:
    """Rule 5 (see :func:`decide`)."""
    a, b = claimed
    if a == b and has_ci and not (float(lo).is_integer() and float(hi).is_integer()):
        return row(UNDECIDABLE, f"the count's CI [{_g(lo)}, {_g(hi)}] has ends that are not "
                   f"whole numbers, so it can never lie inside the one-point range ({where})")  # fmt: skip
    if a <= e <= b:
        if has_ci and not (a <= lo and hi <= b):
            return row("count uncertain", f"{e:g} is in the claimed range ({where}); its CI "
                       f"[{_g(lo)}, {_g(hi)}] is not")  # fmt: skip
        return row("count as claimed", f"{e:g} ({where})")
    word = "fewer than claimed" if e < a else "more than claimed"
    return row(word, f"{e:g} ({where})")


def _vanish(spec: ClaimSpec, m: Measurement, ctx: Context, row: Row) -> Claim:
    """Rule 7 (see :func:`decide`)."""
    real = ctx.rows.get(spec.of)
    if real is None or not real.present:
        state = "was not judged" if real is None else f"is not present ({real.verdict})"
        return row(NOT_TESTABLE, f"the effect of {spec.of} {state}")
    void = {c.name: c.why for c in spec.controls if not c.can_fail} | dict(m.cannot_fail)
    if void:
        return row(UNDECIDABLE, "; ".join(
            f"the {k} control cannot fail: {v}" for k, v in void.items()))
    names = [c.name for c in spec.controls]
    missing = [k for k in names if k not in m.controls or not _finite(m.controls[k].fraction)]
    if missing:
        return row(NOT_TESTABLE, f"no result for the {' and '.join(missing)} control")
    unbounded = [k for k in names if not _finite(m.controls[k].share_high)]
    if unbounded:
        return row(NOT_TESTABLE, f"no confidence bound on the share remaining under the "
                   f"{' and '.join(unbounded)} control")  # fmt: skip
    high = {k: float(m.controls[k].share_high) for k in names}  # type: ignore[arg-type]  # finite, checked above
    shares = "; ".join(f"{k}: {_g(m.controls[k].fraction)} remains, upper bound {_g(high[k])}"
                       for k in names)  # fmt: skip
    kept = [k for k in names if not high[k] < 0.5]
    if not kept:
        return row(REPRODUCED, f"every control removes the effect ({shares})")
    word = NOT_REPRODUCED if len(kept) == len(names) else PARTIALLY
    return row(word, f"the effect survives the {', '.join(kept)} control ({shares})")


def vanish_measurement(controls: Mapping[str, ControlResult], **kw: object) -> Measurement:
    """A vanish row's measurement: estimate = the largest remaining share over the controls,
    p = the largest control p (both NaN where no control has a finite result)."""
    fr = [c.fraction for c in controls.values() if _finite(c.fraction)]
    ps = [c.p for c in controls.values() if c.p is not None and _finite(c.p)]
    return Measurement(estimate=max(fr, default=math.nan), p=max(ps, default=None),
                       controls=dict(controls), **kw)  # type: ignore[arg-type]  # fmt: skip


def decide_across(spec: ClaimSpec, rows: Sequence[Claim], *, convention: str = "") -> Claim:
    """The across row of ``spec`` over the per-source rows of the claim it is about (``spec.of``),
    by the module's last rule; model "all sources", measured = the share of judged sources
    whose row is reproduced."""
    if spec.kind != "across":
        raise ValueError(f"claim {spec.id} is not an across row")
    mine = [r for r in rows if r.claim_id == spec.of]
    judged = [r for r in mine if r.verdict != NOT_TESTABLE]
    bad = [r.model for r in judged if r.verdict != REPRODUCED]
    if len(judged) < spec.min_sources:
        verdict = NOT_TESTABLE
        reason = f"{len(judged)} source(s) judged; the claim needs {spec.min_sources}"
    elif bad:
        verdict, reason = NOT_REPRODUCED, f"not reproduced on {', '.join(bad)}"
    else:
        verdict, reason = REPRODUCED, f"reproduced on all {len(judged)} sources judged"
    m = Measurement(estimate=(len(judged) - len(bad)) / len(judged) if judged else math.nan)
    base = _base(spec, m, Context(model="all sources", convention=convention))
    return Claim(verdict=verdict, reason=reason, **base)  # type: ignore[arg-type]


class Judge:
    """Judges one model's claims in order, so that ``Present`` preconditions see the rows
    judged before them: ``judge = Judge(Context(model=...)); row = judge(spec, measurement)``;
    ``judge.rows`` holds every row by id."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.rows: dict[str, Claim] = dict(ctx.rows)

    def __call__(self, spec: ClaimSpec, m: Measurement) -> Claim:
        ctx = Context(model=self.ctx.model, convention=self.ctx.convention,
                      gates=self.ctx.gates, rows=self.rows)  # fmt: skip
        out = decide(spec, m, ctx)
        self.rows[spec.id] = out
        return out
