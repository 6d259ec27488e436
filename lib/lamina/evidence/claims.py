"""Claims: one record per (claim, model), and the verdict rules, in one place.

Every chapter turns its statistics into :class:`Claim` records; the scorecard reads them back
from the results files. The rules below are the only place where a verdict word is decided,
and the methods page quotes this docstring.

**Claim ids.** ``p<paper>-<chapter>-<name>`` for a claim of a paper (``p1-convergence-peak``),
``self-<chapter>-<name>`` for a self-check of lamina (``self-reanalysis-released-curvature``).
Only lowercase letters, digits and dashes; :func:`claim_id` builds and checks them.

**Two kinds of rows.**

* ``kind="paper"``: a claim the paper makes. Verdicts: "reproduced", "partially",
  "smaller than claimed", "absent", "reversed", "not reproduced", "not testable".
* ``kind="self-check"``: lamina checking itself (e.g. that its metric reproduces the released
  per-prompt curvature). Verdicts: "check passed", "check failed", "not testable". A self-check
  is never a reproduction of a paper and the scorecard never counts it as one.

**The verdict of a tested claim** (:func:`decide`), from the point estimate ``e``, its 95% CI
``[c_lo, c_hi]``, the test's p-value ``p`` and the claim's own significance level ``alpha``
(paper 1's convergence claim says p < 0.001, so its alpha is 0.001; otherwise 0.05):

1. *Not testable* when a precondition fails (the caller passes ``untestable=<reason>``), or
   when the estimate or, for a tested claim, p is undefined. The reason is kept.
2. *Direction.* If the claim has a direction (``direction=+1`` or ``-1``) and the estimate
   points the other way from the value of no effect ``null`` (0 for a difference, 1 for a
   ratio): "reversed" when the test is significant (p < alpha), else "absent".
3. *Effect in the claimed range* ``[lo, hi]`` (``hi = inf`` for "at least lo"):

   * ``in_range`` (point rule): ``lo <= e <= hi``;
   * ``ci_overlaps`` (CI rule): ``c_lo <= hi`` and ``c_hi >= lo``;
   * ``precise`` (CI rule): the CI lies inside the range widened by half its width on each
     side, ``c_lo >= lo - w/2`` and ``c_hi <= hi + w/2`` with ``w = hi - lo`` (for an
     open-ended range, ``c_lo >= lo - tolerance``, default tolerance 0). A CI wider than
     that cannot confirm the claimed size, so it is no reproduction.

   The effect *matches* when ``in_range and precise``. A claim of direction only is the
   range ``[0, inf)`` with tolerance 0: it matches when the whole CI lies above 0.
4. *Significance*: ``p < alpha`` (claims without a test pass ``p=None`` and skip this rule).
5. Verdict, for a tested claim whose direction holds: "absent" when p >= alpha (whatever
   the point estimate: "partially" is never given to a non-significant effect); else
   "reproduced" when the effect matches; "partially" when the CI overlaps the claimed
   range (the claimed size is not excluded); "smaller than claimed" when the CI lies below
   the range (same direction, significant, smaller); "not reproduced" when it lies above.
   Significance alone is never a reproduction. An untested claim (a range) reads the same
   without the significance step; with a direction, its CI must exclude the value of no
   effect (else "absent").

**The OSC column** (:func:`osc_replicates`): beside lamina's verdict, the Open Science
Collaboration's replication criterion, direction and p < 0.05 ("yes" / "no"; empty where
the claim has no test or no direction), so a reader sees which "smaller than claimed" rows
would count as replications under that weaker rule.

**"Vanishes under controls"** (:func:`vanish_decide`) is testable only when the real effect
is present (the real claim's verdict is "reproduced" or "partially"); otherwise it is
"not testable", never a ratio over a null effect. With the effect present, a control
*removes* it when less than half of the real effect remains in the claimed direction
(signed ``fraction < 0.5``; an effect of the opposite sign remains 0) and what remains is
not significant in that direction (``p >= alpha`` or ``fraction <= 0``). Reproduced when
every control removes it, partially when some do, not reproduced when none does.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

__all__ = [
    "PAPER_VERDICTS",
    "PRESENT",
    "SUPPORTED",
    "SELF_VERDICTS",
    "Claim",
    "claim_id",
    "claims_frame",
    "decide",
    "is_reproduction",
    "osc_replicates",
    "range_decide",
    "self_check",
    "vanish_decide",
]

Kind = Literal["paper", "self-check"]
PAPER_VERDICTS = (
    "reproduced",
    "partially",
    "smaller than claimed",
    "not reproduced",
    "absent",
    "reversed",
    "not testable",
)
SELF_VERDICTS = ("check passed", "check failed", "not testable")
# the verdicts that say the effect is there (same direction; significant where tested):
# a null source showing one of them is a false positive of the test
PRESENT = ("reproduced", "partially", "smaller than claimed")
# the verdicts that support the claim: the preconditions of its secondary rows (depth,
# onset, "vanishes under controls")
SUPPORTED = ("reproduced", "partially")
_ID = re.compile(r"^(p[123]|self)-[a-z0-9]+(-[a-z0-9]+)*$")


def claim_id(paper: int | None, chapter: str, name: str) -> str:
    """``p<paper>-<chapter>-<name>`` (``paper=None``: ``self-<chapter>-<name>``); underscores
    become dashes. Raises ValueError for anything outside the scheme."""
    head = "self" if paper is None else f"p{paper}"
    cid = f"{head}-{chapter}-{name}".replace("_", "-").lower()
    if not _ID.match(cid):
        raise ValueError(f"claim id {cid!r} breaks the scheme p<1|2|3>|self-<chapter>-<name>")
    return cid


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


def decide(
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


@dataclass(frozen=True, kw_only=True)
class Claim:
    """One row of a chapter's claims table (the scorecard's unit).

    claim_id: see :func:`claim_id`; claim: the claim's words (quoted from the paper for
    ``kind="paper"``); paper_value: the paper's number as text; model: the source measured;
    measured: the point estimate, in ``unit`` (e.g. "rad"; "" for a pure number);
    ci_low/ci_high: its 95% CI;
    p: the claim's test (NaN: no test); alpha: the claim's own level; effect_size: a
    standardised effect (e.g. rank-biserial) with its ``effect_name``; test: the test's name;
    verdict and reason: from :func:`decide`, :func:`vanish_decide` or :func:`self_check`;
    convention: the representation convention; kind: "paper" or "self-check"; main: the
    chapter's headline claim; osc: :func:`osc_replicates` ("yes", "no" or ""); short: the
    claim's label in the book's verdict picture, a few neutral words naming what is measured
    (e.g. "P1 convergence peak"; "" lets the book build it from ``claim_id``).
    """

    claim_id: str
    claim: str
    paper_value: str
    model: str
    measured: float
    verdict: str
    reason: str = ""
    ci_low: float = math.nan
    ci_high: float = math.nan
    p: float = math.nan
    alpha: float = 0.05
    test: str = ""
    effect_size: float = math.nan
    effect_name: str = ""
    convention: str = ""
    kind: Kind = "paper"
    main: bool = False
    unit: str = ""
    osc: str = ""
    short: str = ""

    def __post_init__(self) -> None:
        if not _ID.match(self.claim_id):
            raise ValueError(f"claim id {self.claim_id!r} breaks the scheme (see claim_id)")
        allowed = PAPER_VERDICTS if self.kind == "paper" else SELF_VERDICTS
        if self.verdict not in allowed:
            raise ValueError(f"verdict {self.verdict!r} is not one of {allowed} ({self.kind})")
        if (self.kind == "self-check") != self.claim_id.startswith("self-"):
            raise ValueError(f"claim id {self.claim_id!r} does not match kind {self.kind!r}")

    @classmethod
    def tested(
        cls,
        *,
        claimed: tuple[float, float],
        direction: int = 0,
        tolerance: float = 0.0,
        untestable: str | None = None,
        null: float = 0.0,
        **fields: Any,
    ) -> Claim:
        """A paper's claim judged by :func:`decide` from ``measured``, ``ci_low``, ``ci_high``,
        ``p`` (NaN or absent: untested) and ``alpha`` in ``fields``."""
        p = fields.get("p", math.nan)
        verdict, reason = decide(
            fields.get("measured", math.nan),
            fields.get("ci_low", math.nan),
            fields.get("ci_high", math.nan),
            claimed=claimed,
            p=None if p is None or (isinstance(p, float) and math.isnan(p)) else p,
            alpha=fields.get("alpha", 0.05),
            direction=direction,
            tolerance=tolerance,
            untestable=untestable,
            null=null,
        )
        osc = "" if untestable else osc_replicates(
            fields.get("measured", math.nan), None if p is None else float(p),
            direction=direction, null=null)
        fields = {k: (math.nan if v is None else v) for k, v in fields.items()}
        return cls(verdict=verdict, reason=reason, osc=osc, **fields)

    def row(self) -> dict[str, Any]:
        """The record as a plain dict (floats as floats), for tables and JSON; without
        ``short`` when the claim declares none (the book then builds it from the id)."""
        out = dataclasses.asdict(self)
        if not out["short"]:
            del out["short"]
        for k in ("measured", "ci_low", "ci_high", "p", "alpha", "effect_size"):
            out[k] = float(out[k])
        return out


def self_check(passed: bool | None, reason: str = "") -> tuple[str, str]:
    """(verdict, reason) of a self-check: "check passed", "check failed", or "not testable"
    when ``passed`` is None."""
    if passed is None:
        return "not testable", reason or "the check could not run"
    return ("check passed" if passed else "check failed"), reason


def is_reproduction(row: dict[str, Any] | pd.Series) -> bool:
    """Whether a claims row counts as a reproduction of a paper's claim: a paper claim
    (not a self-check) judged "reproduced"."""
    kind = row.get("kind", "paper") or "paper"
    cid = str(row.get("claim_id", ""))
    return kind == "paper" and not cid.startswith("self-") and row.get("verdict") == "reproduced"


def claims_frame(claims: list[Claim]) -> pd.DataFrame:
    """A claims table from records (empty table with the right columns when there are none)."""
    cols = [f.name for f in dataclasses.fields(Claim)]
    return pd.DataFrame([c.row() for c in claims], columns=cols)
