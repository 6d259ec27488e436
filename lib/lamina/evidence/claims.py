"""Claim rows and the verdict vocabulary: one record per (claim, model).

Every chapter turns its measurements into :class:`Claim` rows with
:func:`lamina.evidence.decide.decide`, the one function that gives a verdict word; the
scorecard reads the rows back from the results files. This module holds the words, the row
and the id scheme; :mod:`lamina.evidence.declare` holds the claims as data and
:mod:`lamina.evidence.decide` the rules.

**Claim ids.** ``p<paper>-<chapter>-<name>`` for a claim of a paper (``p1-convergence-peak``,
``p2-signature-align-qk-enriched``, ``p3-anatomy-core``; Growth Training's claims are paper 3's:
``p3-growth-loss``), ``self-<chapter>-<name>`` for a self-check of lamina
(``self-reanalysis-released-curvature``). Only lowercase letters, digits and dashes;
:func:`claim_id` builds and checks them.

**Kinds of rows, and their words** (:data:`VERDICTS`):

* ``effect``: an effect of a claimed direction, size or range. "reproduced", "partially",
  "smaller than claimed", "not reproduced" (the CI lies above the claimed range), "absent",
  "reversed" (the opposite of the claimed shape, significant), "not testable".
* ``count``: how many of something (phases, anti-layers). "count as claimed", "count
  uncertain", "fewer than claimed", "more than claimed", "not testable".
* ``location``: where something lies (a peak's depth, an onset). "located as claimed",
  "location uncertain", "located elsewhere", "not testable".
* ``vanish``: an effect vanishes under controls. "reproduced", "partially", "not reproduced",
  "not testable".
* ``across``: one row over several sources ("consistent across architectures"): "reproduced",
  "not reproduced", "not testable".

Every kind but self-checks may also read "undecidable at this design": the row's rule cannot
read its claimed answer at the design it is run at (a control declared unable to fail, a count
CI that cannot lie in a one-point claimed range, a design declared too small), with the reason
and, where declared, the design that would decide it. It is neither evidence for the claim nor
against it.
* ``self-check``: lamina checking itself. "check passed", "check failed", "not testable";
  never a reproduction of a paper.

Only effect rows can say an effect is *present* (significant in the claimed direction); count,
location and across rows never count as present.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

__all__ = [
    "ABSENT",
    "KINDS",
    "NOT_INFORMATIVE",
    "UNDECIDABLE",
    "NOT_TESTABLE",
    "PAPER_VERDICTS",
    "PARTIALLY",
    "PRESENT",
    "REPRODUCED",
    "REVERSED",
    "SELF_VERDICTS",
    "SMALLER",
    "SUPPORTED",
    "VERDICTS",
    "Claim",
    "Kind",
    "claim_id",
    "claims_frame",
    "is_reproduction",
    "osc_replicates",
]

Kind = Literal["effect", "count", "location", "vanish", "across", "self-check"]
KINDS: tuple[str, ...] = ("effect", "count", "location", "vanish", "across", "self-check")

REPRODUCED, PARTIALLY, SMALLER = "reproduced", "partially", "smaller than claimed"
NOT_REPRODUCED, ABSENT, REVERSED = "not reproduced", "absent", "reversed"
NOT_TESTABLE, UNDECIDABLE = "not testable", "undecidable at this design"
#: the old name of the vanish rows' "control cannot fail" state, now :data:`UNDECIDABLE`
NOT_INFORMATIVE = UNDECIDABLE

VERDICTS: dict[str, tuple[str, ...]] = {
    "effect": (REPRODUCED, PARTIALLY, SMALLER, NOT_REPRODUCED, ABSENT, REVERSED, UNDECIDABLE,
               NOT_TESTABLE),
    "count": ("count as claimed", "count uncertain", "fewer than claimed", "more than claimed",
              UNDECIDABLE, NOT_TESTABLE),
    "location": ("located as claimed", "location uncertain", "located elsewhere", UNDECIDABLE,
                 NOT_TESTABLE),
    "vanish": (REPRODUCED, PARTIALLY, NOT_REPRODUCED, UNDECIDABLE, NOT_TESTABLE),
    "across": (REPRODUCED, NOT_REPRODUCED, UNDECIDABLE, NOT_TESTABLE),
    "self-check": ("check passed", "check failed", NOT_TESTABLE),
}  # fmt: skip
#: every word a paper's claim row may carry, in display order
PAPER_VERDICTS: tuple[str, ...] = tuple(
    dict.fromkeys(w for k, ws in VERDICTS.items() if k != "self-check" for w in ws)
)
SELF_VERDICTS: tuple[str, ...] = VERDICTS["self-check"]
#: effect-row words that say the effect is there (same direction; significant where tested)
PRESENT: tuple[str, ...] = (REPRODUCED, PARTIALLY, SMALLER)
#: effect-row words that support the claim
SUPPORTED: tuple[str, ...] = (REPRODUCED, PARTIALLY)
_ID = re.compile(r"^(p[123]|self)-[a-z0-9]+(-[a-z0-9]+)*$")


def claim_id(paper: int | None, chapter: str, name: str) -> str:
    """``p<paper>-<chapter>-<name>`` (``paper=None``: ``self-<chapter>-<name>``); underscores
    become dashes. Raises ValueError for anything outside the scheme."""
    head = "self" if paper is None else f"p{paper}"
    cid = f"{head}-{chapter}-{name}".replace("_", "-").lower()
    if not _ID.match(cid):
        raise ValueError(f"claim id {cid!r} breaks the scheme p<1|2|3>|self-<chapter>-<name>")
    return cid


def check_id(cid: str) -> str:
    """``cid`` if it follows the scheme of :func:`claim_id`; ValueError naming it otherwise."""
    if not isinstance(cid, str) or not _ID.match(cid):
        raise ValueError(f"claim id {cid!r} breaks the scheme p<1|2|3>|self-<chapter>-<name>")
    return cid


def _finite(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


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


@dataclass(frozen=True, kw_only=True)
class Claim:
    """One row of a chapter's claims table (the scorecard's unit), as
    :func:`lamina.evidence.decide.decide` writes it.

    claim_id: see :func:`claim_id`; claim: the claim's words; paper_value: the paper's number
    as text; model: the source measured ("all sources" for an across row); measured: the point
    estimate, in ``unit``; ci_low/ci_high: its CI at ``ci_level``, of the same sidedness
    (``sided``) as ``p``; ci_of: "" when the CI belongs to ``measured``, else the estimate it
    belongs to; p: the claim's test (NaN: no test); alpha: the claim's own level; test: the
    test's name; effect_size / effect_name: a standardised effect; verdict and reason: from
    ``decide``; present: whether the effect is significant in the claimed direction (effect
    rows only); convention: the representation convention; kind: see the module docstring;
    main: the chapter's headline claim; osc: :func:`osc_replicates`; short: the claim's label in
    the book's verdict picture; resampling: the independent unit of the CI and test; requires:
    its preconditions, as text; calibration: "calibrated" or "not calibrated: <reason>".
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
    ci_level: float = 0.95
    sided: str = "two-sided"
    ci_of: str = ""
    p: float = math.nan
    alpha: float = 0.05
    test: str = ""
    effect_size: float = math.nan
    effect_name: str = ""
    convention: str = ""
    kind: str = "effect"
    main: bool = False
    present: bool = False
    unit: str = ""
    osc: str = ""
    short: str = ""
    resampling: str = ""
    requires: str = ""
    calibration: str = ""

    def __post_init__(self) -> None:
        check_id(self.claim_id)
        kind = "effect" if self.kind == "paper" else self.kind  # "paper": rows written before
        if kind not in VERDICTS:
            raise ValueError(f"claim {self.claim_id}: kind {self.kind!r} is not one of {KINDS}")
        object.__setattr__(self, "kind", kind)
        if self.verdict not in VERDICTS[kind]:
            raise ValueError(
                f"claim {self.claim_id}: verdict {self.verdict!r} is not one of "
                f"{VERDICTS[kind]} ({kind} row)"
            )
        if (kind == "self-check") != self.claim_id.startswith("self-"):
            raise ValueError(f"claim id {self.claim_id!r} does not match kind {kind!r}")
        if self.present and kind != "effect":
            raise ValueError(f"claim {self.claim_id}: only an effect row can be present")

    def row(self) -> dict[str, Any]:
        """The record as a plain dict (floats as floats), for tables and JSON; without
        ``short`` when the claim declares none (the book then builds it from the id)."""
        out = dataclasses.asdict(self)
        if not out["short"]:
            del out["short"]
        for k in ("measured", "ci_low", "ci_high", "ci_level", "p", "alpha", "effect_size"):
            out[k] = float(out[k])
        return out


def is_reproduction(row: dict[str, Any] | pd.Series) -> bool:
    """Whether a claims row counts as a reproduction of a paper's claim: a paper claim of kind
    effect, vanish or across (not a self-check, count or location row) judged "reproduced"."""
    kind = row.get("kind", "effect") or "effect"
    cid = str(row.get("claim_id", ""))
    return (
        kind in ("effect", "paper", "vanish", "across")
        and not cid.startswith("self-")
        and row.get("verdict") == REPRODUCED
    )


def claims_frame(claims: list[Claim]) -> pd.DataFrame:
    """A claims table from records (empty table with the right columns when there are none)."""
    cols = [f.name for f in dataclasses.fields(Claim)]
    return pd.DataFrame([c.row() for c in claims], columns=cols)
