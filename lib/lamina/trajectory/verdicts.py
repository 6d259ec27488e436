"""Paper 1's claims as :class:`lamina.evidence.claims.Claim` rows, from :mod:`lamina.trajectory.stat_tests`.

The claimed values are the abstract's; each function documents which test is the claim's
and what its alpha is. The chapters and the calibration harness share these functions.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from lamina.evidence.claims import PRESENT, SUPPORTED, Claim, claim_id, vanish_decide

__all__ = [
    "BIFURCATION",
    "CONVERGENCE",
    "CURVATURE",
    "Declared",
    "PAPER_SIM_RANGES",
    "PHASE_MARGIN",
    "THREE_PHASE",
    "IID_RANDOM_INPUTS",
    "VANISH_CONTROLS",
    "bifurcation_claims",
    "convergence_claims",
    "curvature_claims",
    "three_phase_claims",
    "universal_claim",
    "vanish_claim",
]

CONVERGENCE = (
    "Semantically related prompts converge significantly in middle-to-late layers "
    "(peak CI 0.41-0.58, p<0.001, Mann-Whitney U)"
)
CURVATURE = (
    "Reasoning tasks produce trajectories of greater curvature than lexical variations "
    "(0.71-0.83 rad vs. 0.27-0.31 rad)"
)
BIFURCATION = (
    "Ambiguous tokens exhibit trajectory bifurcation with up to 5.6x representational "
    "separation by the final layer, absent in unambiguous controls"
)
THREE_PHASE = (
    "Layerwise cosine similarity reveals a universal three-phase structure: encoding, "
    "elaboration, and output preparation, consistent across all three architectures"
)
CI_RANGE = (0.41, 0.58)
CI_ALPHA = 0.001  # the abstract: p<0.001
# A permutation p decides at alpha only when an exact p of alpha would show this many
# exceedances: B + 1 >= MIN_EXCEEDANCES / alpha (10,000 permutations at alpha = 0.001; the
# Monte-Carlo SE of p at alpha is then about alpha / sqrt(10), i.e. +/- 0.0003).
MIN_EXCEEDANCES = 10
# "middle-to-late layers" (reimplementation choice): at least a third of the depth. Open-ended
# with tolerance 0, so the depth CI itself must clear 1/3 (a closed (1/3, 1) range widened
# by half its width is [0, 1.33]: no depth CI could fail it).
DEPTH_RANGE = (1 / 3, math.inf)
REASONING_RANGE = (0.71, 0.83)
LEXICAL_RANGE = (0.27, 0.31)
GAP = (REASONING_RANGE[0] - LEXICAL_RANGE[1], math.inf)  # at least 0.40 rad
RATIO = (4.9, math.inf)  # at least the smallest quoted ratio (4.9x TinyLlama; "up to 5.6x")
RATIO_TOLERANCE = 0.35  # half the spread of the quoted ratios 4.9-5.6
CONTROL_RATIO = (1.0, 1.2)  # claimed 1.1x
# The homograph's ratio over its matched control's: at least the smallest quoted homograph
# ratio over the largest control ratio the claimed ~1.1x allows (4.9 / 1.2 = 4.08).
EXCESS = (RATIO[0] / CONTROL_RATIO[1], math.inf)
ONSET_RANGE = (0.17, 0.27)  # "about 22% of depth"
PAPER_SIM_RANGES = ((0.35, 0.55), (0.70, 0.85), (0.60, 0.70))  # GPT-2, per fixed band
_MID = [(lo + hi) / 2 for lo, hi in PAPER_SIM_RANGES]
# Three phases need three distinguishable bands, not a direction: elaboration must exceed
# both neighbours by at least half the smallest gap between GPT-2's quoted band middles
# (min(0.775 - 0.45, 0.775 - 0.65) / 2 = 0.0625 cosine), and the whole CI must clear it.
PHASE_MARGIN = min(_MID[1] - _MID[0], _MID[1] - _MID[2]) / 2
MIN_ARCHITECTURES = 3  # "consistent across all three architectures"


@dataclass(frozen=True)
class Declared:
    """A paper-1 claim row as data: its wording, the paper's value and the claimed range
    (with the tolerance, direction and null of :func:`lamina.evidence.claims.decide`), and
    the keys of a :mod:`lamina.trajectory.stat_tests` summary that hold its estimate, 95% CI,
    p and effect size. :meth:`judge` turns it into a :class:`Claim`."""

    slug: str
    claim: str
    paper_value: str
    measured: str  # summary key of the estimate
    ci: tuple[str, str]  # summary keys of the CI's low and high ends
    effect_name: str
    unit: str
    claimed: tuple[float, float]
    tolerance: float = 0.0
    direction: int = 0
    null: float = 0.0
    p: str | None = None  # summary key of the test's p
    effect_size: str | None = None  # summary key of the effect size
    test: str | None = None
    main: bool = False

    def judge(
        self,
        s: dict[str, Any],
        chapter: str,
        common: dict[str, Any],
        untestable: str | None = None,
        **override: Any,
    ) -> Claim:
        """The row judged from summary ``s`` (``override``: fields computed per call)."""
        fields: dict[str, Any] = {
            "claim_id": claim_id(1, chapter, self.slug),
            "claim": self.claim,
            "paper_value": self.paper_value,
            "measured": s[self.measured],
            "ci_low": s[self.ci[0]],
            "ci_high": s[self.ci[1]],
            "effect_name": self.effect_name,
            "unit": self.unit,
        }
        if self.p is not None:
            fields["p"] = s[self.p]
        if self.effect_size is not None:
            fields["effect_size"] = s[self.effect_size]
        if self.test is not None:
            fields["test"] = self.test
        if self.main:
            fields["main"] = True
        fields |= common | override
        return Claim.tested(
            claimed=self.claimed, direction=self.direction, tolerance=self.tolerance,
            null=self.null, untestable=untestable, **fields,
        )  # fmt: skip


# ----------------------------------------------------------------------- the declarations
PEAK = Declared(
    "peak", CONVERGENCE, "peak CI 0.41-0.58, p<0.001", "peak", ("ci_low", "ci_high"),
    "matched-pairs rank-biserial, peak vs first layer", "chord distance on the unit sphere",
    CI_RANGE, direction=1, p="p", effect_size="rank_biserial", main=True,
)  # fmt: skip
PEAK_DEPTH = Declared(
    "peak-depth", "The convergence peak lies in middle-to-late layers", "middle-to-late layers",
    "peak_fraction", ("fraction_low", "fraction_high"),
    "depth of the peak (layer / last layer)", "fraction of depth", DEPTH_RANGE,
)  # fmt: skip
GAP_CLAIM = Declared(
    "gap", CURVATURE, "difference >= 0.40 rad (0.71-0.83 vs 0.27-0.31)", "difference",
    ("diff_low", "diff_high"), "rank-biserial", "rad", GAP, tolerance=0.05, direction=1,
    p="p", effect_size="rank_biserial", main=True,
    test="Mann-Whitney U on unit means (lexical base words, reasoning prompts)",
)  # fmt: skip
REASONING_CLAIM = Declared(
    "reasoning-range", "Reasoning curvature is 0.71-0.83 rad", "0.71-0.83 rad", "reasoning",
    ("reasoning_low", "reasoning_high"), "mean curvature (rad)", "rad", REASONING_RANGE,
)  # fmt: skip
LEXICAL_CLAIM = Declared(
    "lexical-range", "Lexical-variation curvature is 0.27-0.31 rad", "0.27-0.31 rad", "lexical",
    ("lexical_low", "lexical_high"), "mean curvature (rad), base-word bootstrap", "rad",
    LEXICAL_RANGE,
)  # fmt: skip
ADJUSTED_GAP = Declared(
    "gap-length-adjusted", "Reasoning curves more than lexical variation at equal length",
    "difference >= 0.40 rad", "adjusted", ("adj_low", "adj_high"),
    "family coefficient, OLS on log(tokens)", "rad", GAP, tolerance=0.05, direction=1,
)  # fmt: skip
EXCESS_CLAIM = Declared(
    "ratio", BIFURCATION, "5.6x (GPT-2), 4.9x, 5.1x; controls 1.1x", "excess",
    ("excess_low", "excess_high"), "median over pairs of the homograph's ratio over its control's",
    "x (ratio of ratios)", EXCESS, tolerance=RATIO_TOLERANCE / CONTROL_RATIO[1], direction=1,
    null=1.0, p="p", effect_size="rank_biserial", main=True,
    test="Wilcoxon signed-rank, log ratio homograph - control, over pairs",
)  # fmt: skip
HOMOGRAPH_RATIO = Declared(
    "homograph-ratio", "Homographs separate up to 5.6x (at least 4.9x) by the final layer",
    "5.6x (GPT-2), 4.9x, 5.1x", "ratio", ("ratio_low", "ratio_high"),
    "median delta(L)/delta(0) of homograph pairs", "x (ratio)", RATIO,
    tolerance=RATIO_TOLERANCE, direction=1, null=1.0, p="p",
    test="Wilcoxon signed-rank, log ratio homograph - its matched control, over pairs",
)  # fmt: skip
CONTROL_RATIO_CLAIM = Declared(
    "control-ratio", "Unambiguous controls separate ~1.1x", "1.1x", "control_ratio",
    ("control_low", "control_high"), "median delta(L)/delta(0) of control pairs", "x (ratio)",
    CONTROL_RATIO,
)  # fmt: skip
ONSET = Declared(
    "onset", "Bifurcation begins at about 22% of depth", "~0.22 of depth", "onset",
    ("onset_low", "onset_high"), "onset of delta_amb - delta_ctl (layer / last layer)",
    "fraction of depth", ONSET_RANGE,
)  # fmt: skip
BANDS = Declared(
    "bands", THREE_PHASE, "encoding < elaboration > output preparation "
    f"(margin >= {PHASE_MARGIN:.4g}, half the smallest gap of GPT-2's band middles)",
    "margin", ("margin_low", "margin_high"), "SIM margin of elaboration over both neighbours",
    "cosine", (PHASE_MARGIN, math.inf), direction=1, p="p", main=True,
    test="paired Wilcoxon, elaboration vs each neighbour band (max p)",
)  # fmt: skip


def convergence_claims(
    s: dict[str, Any], model: str, convention: str, *, chapter: str = "convergence"
) -> list[Claim]:
    """The peak (main; test: the label-permutation null of the maximum over layers, at the
    claim's alpha 0.001) and its depth (middle-to-late: peak at >= 1/3 of the depth, CI from
    the re-selected peaks). The paper's own p < 0.001 is a Mann-Whitney U of between- vs
    within-category distances at the final layer (released ``convergence_tests.csv``),
    which tests separation at one layer, not the peak."""
    need = None if s["n_permutations"] + 1 >= MIN_EXCEEDANCES / CI_ALPHA else (
        f"{s['n_permutations']} permutations: a decision at p < {CI_ALPHA:g} needs "
        f"{MIN_EXCEEDANCES / CI_ALPHA - 1:.0f} (>= {MIN_EXCEEDANCES} exceedances at alpha)"
    )
    mc = s.get("p_mc_error", math.nan)
    common: dict[str, Any] = {"model": model, "convention": convention}
    test = (
        f"label permutation of the maximum over layers, by item ({s['n_permutations']} "
        f"permutations, Monte-Carlo SE of p {mc:.2g}; peak re-selected in the bootstrap)"
    )
    peak = PEAK.judge(s, chapter, common, need, alpha=CI_ALPHA, test=test)
    present = peak.verdict in SUPPORTED
    depth = PEAK_DEPTH.judge(s, chapter, common, None if present else "no convergence to locate")
    return [peak, depth]


def curvature_claims(
    s: dict[str, Any], model: str, convention: str, *, chapter: str = "curvature"
) -> list[Claim]:
    """The gap (main; reasoning - lexical >= 0.40 rad, two-sided Mann-Whitney U on the
    independent units, alpha 0.05), the two ranges, and the length-adjusted gap when
    token counts are known."""
    common: dict[str, Any] = {"model": model, "convention": convention}
    rows = [d.judge(s, chapter, common) for d in (GAP_CLAIM, REASONING_CLAIM, LEXICAL_CLAIM)]
    if "adjusted" in s:
        why = None if math.isfinite(s["adjusted"]) else "token counts unknown or constant"
        name = f"{ADJUSTED_GAP.effect_name}; {s['length_overlap']} prompts in the shared length range"
        rows.append(ADJUSTED_GAP.judge(s, chapter, common, why, effect_name=name))
    return rows


def bifurcation_claims(s: dict[str, Any], model: str, convention: str) -> list[Claim]:
    """The excess (main): median over pairs of r_amb / r_ctl, the homograph's separation
    ratio over its matched control's, >= 4.9 / 1.2 (the smallest quoted homograph ratio over
    the largest control ratio in the claimed ~1.1x), Wilcoxon signed-rank of the paired log
    ratios, alpha 0.05. The excess does not depend on where the baseline layer falls, so it
    cannot be manufactured on rotary models (delta(0) = 0, baseline at layer 1, where any pair
    reaches a large ratio). Then the paper's own ratios (homographs >= 4.9x, controls ~1.1x),
    testable only where delta(0) > 0 for every pair (else the ratio is undefined), and the
    onset on the paired difference (testable when the excess is present)."""
    common: dict[str, Any] = {"model": model, "convention": convention}
    excess = EXCESS_CLAIM.judge(s, "bifurcation", common)
    present = excess.verdict in SUPPORTED
    undefined = None if s.get("base_defined", s["base_layer"] == 0) else (
        f"delta(0) = 0 for {s.get('n_zero_base', 'some')} of {s['n_pairs']} pairs (no position "
        "signal in the embedding layer): delta(L)/delta(0) is undefined, and a later baseline "
        "gives any pair a large ratio"
    )
    lacks = undefined or (None if present else "no bifurcation for the controls to lack")
    return [
        excess,
        _homograph_ratio(s, common, undefined),
        CONTROL_RATIO_CLAIM.judge(s, "bifurcation", common, lacks),
        ONSET.judge(s, "bifurcation", common,
                    None if present else "no bifurcation beyond the controls"),  # fmt: skip
    ]


def _homograph_ratio(s: dict[str, Any], common: dict[str, Any], undefined: str | None) -> Claim:
    """The paper's homograph ratio (>= 4.9x), tested against the matched controls at the
    pair level: the claim is a bifurcation of *ambiguous* tokens, "absent in unambiguous
    controls", so a ratio above 1 that the controls share (all pairs drifting apart with
    depth) is no evidence for it. The row's test is the excess's Wilcoxon signed-rank of
    log r_amb - log r_ctl over pairs (pairs the independent unit); a significant difference
    the other way (homographs separating less than their controls) cannot make it present.
    Without this test the row read "smaller than claimed" whenever the pair bootstrap CI of
    the median homograph ratio cleared 1: on the realistic null (no ambiguity effect, no
    depth growth) in about 6% of seeds (the percentile CI of a median of 20 pairs
    under-covers), and on any model whose pairs all separate with depth."""
    row = HOMOGRAPH_RATIO.judge(s, "bifurcation", common, undefined)
    if row.verdict in PRESENT and not s["log_ratio_difference"] > 0:
        return dataclasses.replace(row, verdict="absent", osc="no", reason=(
            "homographs separate no more than their matched controls (median log-ratio "
            f"difference {s['log_ratio_difference']:.3g}, p = {s['p']:.3g})"))
    return row


def three_phase_claims(s: dict[str, Any], model: str, convention: str) -> list[Claim]:
    """The fixed bands (main): elaboration's mean SIM exceeds both neighbouring bands by at
    least :data:`PHASE_MARGIN` (the whole CI above it; intersection-union of two paired
    Wilcoxon tests over independent units, alpha 0.05). A margin of 0.006 is a direction, not
    three phases."""
    why = None if s["p"] is not None else "fewer than 3 bands"
    common = {"model": model, "convention": convention}
    return [BANDS.judge(s, "three-phase", common, why,
                        effect_size=s.get("rank_biserial", math.nan))]  # fmt: skip


def universal_claim(bands: list[Claim], *, chapter: str = "three-phase") -> Claim:
    """"Consistent across all three architectures" as its own row over the sources of the
    book: ``bands`` holds each source's main bands row. Not testable with fewer than
    :data:`MIN_ARCHITECTURES` sources judged (testable rows); reproduced when every judged
    source reproduces the bands; not reproduced otherwise (naming the sources that do not).
    measured: the share of judged sources that reproduce."""
    judged = [c for c in bands if c.verdict != "not testable"]
    ok = [c.model for c in judged if c.verdict == "reproduced"]
    bad = [c.model for c in judged if c.verdict != "reproduced"]
    if len(judged) < MIN_ARCHITECTURES:
        verdict = "not testable"
        reason = f"{len(judged)} source(s) judged; the claim names {MIN_ARCHITECTURES} architectures"
    elif bad:
        verdict, reason = "not reproduced", f"not reproduced on {', '.join(bad)}"
    else:
        verdict, reason = "reproduced", f"reproduced on all {len(ok)} sources judged"
    return Claim(
        claim_id=claim_id(1, chapter, "universal"),
        claim="The three-phase structure is consistent across architectures",
        paper_value="all three architectures",
        model="all sources",
        measured=len(ok) / len(judged) if judged else math.nan,
        verdict=verdict,
        reason=reason,
        effect_name="share of the sources judged whose bands row is reproduced",
        unit="share",
        convention=bands[0].convention if bands else "",
    )


VANISH_CONTROLS = ("shuffled layers", "random embeddings")  # the abstract's two controls
IID_RANDOM_INPUTS = (
    "its random input embeddings are drawn independently for every prompt, so no category or "
    "pair structure can survive it whatever the model does"
)


def vanish_claim(
    chapter: str,
    what: str,
    real: Claim,
    controls: dict[str, tuple[float, float | None]],
    *,
    alpha: float = 0.05,
    cannot_fail: dict[str, str] | None = None,
) -> Claim:
    """"<what> vanishes under shuffled-layer and random-embedding controls": controls maps a
    control's name to (its effect / the real effect, its p). Judged by
    :func:`lamina.evidence.claims.vanish_decide` over *every* control the claim names
    (:data:`VANISH_CONTROLS`): a named control that is missing, or whose effect is undefined,
    makes the row "not testable" naming it (never a verdict on the others alone); not
    testable either unless the real effect is present. ``cannot_fail`` maps a control to the
    reason it removes this effect by construction (e.g. random-embedding draws independent per
    prompt, for a claim that compares categories): such a control is no evidence, and the
    row reads "not testable" giving that reason."""
    names = list(VANISH_CONTROLS)
    missing = [k for k in names if k not in controls or not _finite(controls[k][0])]
    fr = [controls[k][0] if k in controls else math.nan for k in names]
    ps = [controls[k][1] if k in controls else None for k in names]
    void = {k: v for k, v in (cannot_fail or {}).items() if k in names}
    if void and real.verdict in SUPPORTED:
        verdict = "not testable"
        reason = "; ".join(f"the {k} control cannot fail here: {v}" for k, v in void.items())
    elif missing and real.verdict in SUPPORTED:
        verdict, reason = "not testable", f"the {' and '.join(missing)} control is missing " + (
            "(the claim names both controls)"
        )
    else:
        verdict, reason = vanish_decide(real.verdict, fr, ps, alpha=alpha, names=names)
    finite = [f for f in fr if _finite(f)]
    return Claim(
        claim_id=claim_id(1, chapter, "controls-vanish"),
        claim=f"{what} vanishes under shuffled-layer and random-embedding controls",
        paper_value="effect absent under controls",
        model=real.model,
        measured=max(finite) if finite and verdict != "not testable" else math.nan,
        p=max((p for p in ps if p is not None), default=math.nan),
        verdict=verdict,
        reason=reason,
        effect_name="largest signed share of the effect remaining under the two controls",
        unit="share of the real effect",
        convention=real.convention,
    )


def _finite(x: float | None) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)
