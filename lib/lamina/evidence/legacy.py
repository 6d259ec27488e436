"""The verdict rules written before the one engine (:mod:`lamina.evidence.decide`).

Kept only while chapters are ported to claim declarations (:mod:`lamina.evidence.declare`);
deleted once no chapter calls them. New code calls :func:`lamina.evidence.decide.decide`.
"""

from __future__ import annotations

import math

SUPPORTED = ("reproduced", "partially")

__all__ = ["decide_values", "range_decide", "self_check", "vanish_decide"]


def _finite(x: float | None) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def range_decide(
    estimate: float,
    ci_low: float,
    ci_high: float,
    lo: float,
    hi: float = math.inf,
    *,
    tolerance: float = 0.0,
) -> dict[str, bool]:
    """The range rules of the module docstring: ``in_range``, ``ci_overlaps``, ``precise`` and
    ``matches`` (= in_range and precise). A missing CI (NaN) is neither overlapping nor precise."""
    in_range = _finite(estimate) and lo <= estimate <= hi
    has_ci = _finite(ci_low) and _finite(ci_high)
    overlaps = has_ci and ci_low <= hi and ci_high >= lo
    if math.isinf(hi):
        precise = has_ci and ci_low >= lo - tolerance
    else:
        half = (hi - lo) / 2
        precise = has_ci and ci_low >= lo - half and ci_high <= hi + half
    return {
        "in_range": bool(in_range),
        "ci_overlaps": bool(overlaps),
        "precise": bool(precise),
        "matches": bool(in_range and precise),
    }


def decide_values(
    estimate: float,
    ci_low: float,
    ci_high: float,
    *,
    claimed: tuple[float, float],
    p: float | None = None,
    alpha: float = 0.05,
    direction: int = 0,
    tolerance: float = 0.0,
    untestable: str | None = None,
    null: float = 0.0,
) -> tuple[str, str]:
    """(verdict, reason) of a paper's claim by the rules of the module docstring.

    claimed: (lo, hi) in the estimate's units (hi may be ``math.inf``); p: the claim's test
    (None: no test); direction: +1 / -1 for a signed claim, 0 for none; null: the value of
    no effect in the estimate's units (0 for a difference, 1 for a ratio), against which the
    direction is read."""
    if untestable:
        return "not testable", untestable
    if not _finite(estimate):
        return "not testable", "the estimate is undefined"
    tested = p is not None
    if tested and not _finite(p):
        return "not testable", "the test's p-value is undefined"
    sig = (p < alpha) if p is not None else True  # p is not None == tested
    if direction and (estimate == null or math.copysign(1, estimate - null) != direction):
        if tested and sig:
            return "reversed", f"the effect points the other way, p = {p:.3g} < {alpha:g}"
        return "absent", "the estimate points the other way" + (
            f", p = {p:.3g} >= {alpha:g}" if tested else "")
    r = range_decide(estimate, ci_low, ci_high, *claimed, tolerance=tolerance)
    where = f"claimed {claimed[0]:g}-{claimed[1]:g}"
    if direction and not tested and not (ci_low > null if direction > 0 else ci_high < null):
        return "absent", f"the CI includes no effect ({null:g})"
    if tested and not sig:
        return "absent", f"p = {p:.3g} >= {alpha:g}" + (
            " (the estimate is in the claimed range, the test is not significant)"
            if r["in_range"] else "")
    if r["matches"]:
        return "reproduced", f"in the claimed range ({where})" + (
            f", p < {alpha:g}" if tested else ""
        )
    if r["ci_overlaps"]:
        why = "the estimate lies outside" if not r["in_range"] else "the CI is too wide for"
        return "partially", ("significant, but " if tested else "") + (
            f"{why} the claimed range ({where})")
    below = estimate < claimed[0]
    if below:
        return "smaller than claimed", f"the CI lies below the claimed range ({where})" + (
            f"; same direction and p < {alpha:g}" if tested else "")
    return "not reproduced", f"the CI lies above the claimed range ({where})" + (
        f"; p < {alpha:g}" if tested else "")


def osc_replicates(
    estimate: float, p: float | None, *, direction: int, null: float = 0.0, alpha: float = 0.05
) -> str:
    """The Open Science Collaboration's criterion (2015): the effect points the claimed way
    and its test gives p < 0.05, whatever its size. -> "yes", "no", or "" where the claim
    has no test or no direction (the criterion does not apply)."""
    if not direction or p is None or not _finite(p) or not _finite(estimate):
        return ""
    same = estimate != null and math.copysign(1, estimate - null) == direction
    return "yes" if same and p < alpha else "no"


def vanish_decide(
    real_verdict: str,
    fractions: list[float],
    control_p: list[float | None],
    *,
    alpha: float = 0.05,
    names: list[str] | None = None,
) -> tuple[str, str]:
    """(verdict, reason) for "the effect vanishes under the controls" (module docstring).
    fractions: per control, the share of the real effect that remains; control_p: per
    control, the p-value of the effect measured on the control states (None: untested)."""
    if real_verdict not in SUPPORTED:
        return "not testable", f"the real effect is absent (verdict: {real_verdict})"
    removed, kept = [], []
    names = names or [f"control {i + 1}" for i in range(len(fractions))]
    for name, f, p in zip(names, fractions, control_p, strict=True):
        if not _finite(f):
            continue
        significant = p is not None and _finite(p) and p < alpha and f > 0
        removed.append(f < 0.5 and not significant)
        if not removed[-1]:
            kept.append(name)
    if not removed:
        return "not testable", "no control gave a finite effect"
    if all(removed):
        return "reproduced", "every control removes the effect"
    if any(removed):
        return "partially", f"the effect survives {', '.join(kept)}"
    return "not reproduced", f"the effect survives {', '.join(kept)}"


def self_check(passed: bool | None, reason: str = "") -> tuple[str, str]:
    """(verdict, reason) of a self-check: "check passed", "check failed", or "not testable"
    when ``passed`` is None."""
    if passed is None:
        return "not testable", reason or "the check could not run"
    return ("check passed" if passed else "check failed"), reason
