"""Known-answer sources for paper 3's layer-anatomy claims, at the chapter's sizes, and the
rows they give for one seed (:func:`seed_rows`, in the format of
:mod:`lamina.evidence.calibration`; the runner is :mod:`lamina.anatomy.calibration`).

Every source goes through the chapter's own measurements (:mod:`lamina.anatomy.measurements`)
and :func:`lamina.evidence.decide.decide`. Each null keeps what threatens its claim, and none
is the test's own null (a shuffled layer order would be exactly the core's hypergeometric):

* **importance** (range, core, core size, anti-layers and where): a skip sweep of 30 layers on
  :data:`N_UNITS` units of one window (:func:`importance_sweep`). The null's log10 importance is a smooth
  random profile over depth (AR(1), phi :data:`PHI`: neighbours alike, so the top layers
  cluster, the threat to a test that treats layers as exchangeable) at the mean and spread of
  SmolLM2-135M-Instruct's, with :data:`N_ZERO` layers of no effect (the threat to an anti-layer
  count) and no core. Planted: the same profile stretched to span the paper's 10^7, the core
  at +63,419% (the others 5, 10, 15% lower) and anti-layers at the mapped L14, L17 at
  :data:`ANTI_PCT` (lamina's size: the paper gives none); half: 10^3.5, the core at half its
  percentages, the anti-layers at half theirs. Each unit's NLL shift at layer l is
  mu_l + sd_l z (mu_l = log(1 + delta_l / 100) nats per token, sd_l = sqrt((REL_SD mu_l)^2 +
  ABS_SD^2), z shared across layers with correlation :data:`SHARED`), all fitted on that
  model's sweep (:data:`FIT`).
* **robustness** (predicted weights, accumulation, scaling, only scaling): per-layer and
  per-unit PPL changes (:func:`robustness_sweep`), with heavy-tailed (t, 3 df) unit noise
  and left-skewed noise of the joint replacement (the threat to a sign-flip test).
* **recovery**: per-layer recovery times whose initial damage is driven by importance (the
  threat: importance might only predict the damage) (:func:`recovery_source`).

The weights' sources (R^2, the delta structure) are :mod:`lamina.anatomy.calibration_weights`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from scipy.optimize import least_squares

from lamina.anatomy.claims import BY_ID
from lamina.anatomy.heldout import regroup_sweep
from lamina.anatomy.measurements import (
    DEPTH_FIT_GATE,
    AnatomyTables,
    MeasureOptions,
    measure_anatomy,
)
from lamina.anatomy.paper import PAPER_ANTI, PAPER_CORE, PAPER_CORE_MAX_PCT, PAPER_L
from lamina.anatomy.recovery import measure_recovery
from lamina.evidence.calibration import COVERAGE_COLUMN, covers
from lamina.evidence.claims import REPRODUCED, Claim
from lamina.evidence.decide import Context, GateResult, Judge, Measurement
from lamina.evidence.declare import ClaimSpec

__all__ = [
    "ANTI_PCT",
    "FIT",
    "JOINT_RATIO",
    "PLANTED_TRUTH",
    "PREDICTED_MEDIAN",
    "SCALED_WORST",
    "ar1",
    "SOURCES",
    "fit_noise",
    "given_row",
    "importance_profile",
    "importance_sweep",
    "recovery_source",
    "robustness_sweep",
    "run_rows",
    "seed_rows",
]

SOURCES = ("null", "planted", "half")
# the chapter's pretrained design (lamina.chapters.layer_anatomy.config.BUDGETS), raised at
# 29e499b to the designs of lamina.anatomy.design_power that give the underpowered rows 80%
# power at the paper's size: 6,144 tokens in 48 units (anti-layers needed 24, their positions
# 40, scaling 48; 16 before), the other edits on all 48 (6 before), 30 fine-tuned layers (8
# before; every layer of SmolLM2: power 78% at 24 layers and 82% at 30 over 140 seeds)
N_UNITS, SEQ_LEN = 48, 128
N_ROBUST_UNITS, N_ROBUST_LAYERS, N_RECOVERY = 48, 14, 30
# :func:`fit_noise` of SmolLM2-135M-Instruct's skip sweep (16 units of 128 tokens,
# plays="all", 2026-12-02): log10 delta_pct of its interior layers, mean 1.48, sd 0.58, lag-1
# correlation 0.26; a unit's shift sd = sqrt((0.25 mu)^2 + 0.071^2) nats per token; the
# correlation of units' residuals across layers 0.07
FIT = "SmolLM2-135M-Instruct's skip sweep, 16 units of 128 tokens (fit_noise), 2026-12-02"
LOG_MEAN, LOG_SD = 1.48, 0.58
REL_SD, ABS_SD, SHARED = 0.25, 0.071, 0.07
PHI = 0.8  # the null's depth correlation: a stress value above SmolLM2's 0.26
N_ZERO = 3  # layers of no effect in the null
ANTI_PCT = -5.0  # the planted anti-layers' delta_pct (lamina's size)
OPTIONS = MeasureOptions(n_bootstrap=1_000, n_permutations=200)
# the robustness sweeps' sizes by source (:func:`robustness_sweep`): the population median of
# the predicted layers' delta_pct (percent), joint / summed log-PPL increase, and the scaled
# worst layer's delta_pct (percent)
PREDICTED_MEDIAN = {"null": 100.0, "planted": 1_000.0, "half": 369.0}
JOINT_RATIO = {"null": 1.0, "planted": 2.0, "half": 1.5}
SCALED_WORST = {"null": 5.0, "planted": 1.0, "half": 3.0}
# the planted sources' population values, in each claim's unit, where a CI's coverage is
# checked (COVERAGE_COLUMN): the core's share (every core layer above every other), the
# scaled worst layer, the joint / summed ratio, the predicted median (the layers' skew has
# median exp(0.8 (m - 1.678)), m Gamma(2)'s median)
PLANTED_TRUTH = {
    "p3-anatomy-core": 1.0,
    "p3-anatomy-scaling": SCALED_WORST["planted"],
    "p3-anatomy-accumulation": JOINT_RATIO["planted"],
    "p3-anatomy-predicted": 100 * float((1 + PREDICTED_MEDIAN["planted"] / 100)
                                   * np.exp(0.8 * (stats.gamma(2.0).median() - 1.678)) - 1),
}


def fit_noise(skip: pd.DataFrame) -> dict[str, float]:
    """The source's parameters fitted on a real skip sweep (rows by layer with per-unit NLLs
    ``nll_per_seq`` and ``base_nll_per_seq``, one window per unit), over its interior layers
    (the first and last excluded): log_mean, log_sd, phi (mean, sd and lag-1 correlation of
    log10 delta_pct); rel_sd, abs_sd (least squares on log sd_l of
    sd_l = sqrt((rel_sd mu_l)^2 + abs_sd^2), mu_l the layer's mean shift in nats per token);
    shared (mean correlation across layers of the units' standardised residuals)."""
    d = np.stack(skip["nll_per_seq"].to_list()) - np.asarray(skip["base_nll_per_seq"].iloc[0])
    mu, sd = d.mean(1), d.std(1, ddof=1)  # (L,) nats per token
    inner = slice(1, len(mu) - 1)
    lg = np.log10(100 * np.expm1(mu[inner]))
    fit = least_squares(
        lambda x: np.log(sd[inner]) - 0.5 * np.log((x[0] * mu[inner]) ** 2 + x[1] ** 2),
        [0.3, 0.05],
        bounds=([0.0, 1e-6], [5.0, 5.0]),
    )
    z = (d - mu[:, None]) / sd[:, None]
    c = np.corrcoef(z)
    n = len(mu)
    return {
        "log_mean": float(lg.mean()),
        "log_sd": float(lg.std()),
        "phi": float(np.corrcoef(lg[:-1], lg[1:])[0, 1]),
        "rel_sd": float(fit.x[0]),
        "abs_sd": float(fit.x[1]),
        "shared": float((c.sum() - n) / (n * (n - 1))),
    }


def ar1(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    """(n,) a stationary AR(1) series of unit variance: z_0 ~ N(0, 1),
    z_i = phi z_(i-1) + sqrt(1 - phi^2) e_i (lag-1 correlation phi)."""
    z = np.empty(n)
    z[0] = rng.standard_normal()
    for i in range(1, n):
        z[i] = phi * z[i - 1] + np.sqrt(1 - phi**2) * rng.standard_normal()
    return z


def importance_profile(source: str, rng: np.random.Generator) -> np.ndarray:
    """(30,) true skip delta_pct of one known-answer source (module docstring)."""
    log10 = LOG_MEAN + LOG_SD * ar1(rng, PAPER_L, PHI)
    if source == "null":
        d = 10**log10
        d[rng.choice(PAPER_L, N_ZERO, replace=False)] = 0.0
        return d
    span = 7.0 if source == "planted" else 3.5
    top = np.log10(PAPER_CORE_MAX_PCT * (1.0 if source == "planted" else 0.5))
    lo, hi = log10.min(), log10.max()
    d = 10 ** (top - span + span * (log10 - lo) / (hi - lo))  # the profile over `span` decades
    d = np.minimum(d, 10 ** (top - 0.5))  # below the core
    for i, layer in enumerate(PAPER_CORE):
        d[layer] = 10**top * (1 - 0.05 * i)
    for layer in PAPER_ANTI:
        d[layer] = ANTI_PCT * (1.0 if source == "planted" else 0.5)
    return d


def _unit_nll(
    mu: np.ndarray, rng: np.random.Generator, n_units: int
) -> tuple[np.ndarray, np.ndarray]:
    """(per-window NLL (L, G), base (G,)), nats per token, of true shifts ``mu`` (L,)."""
    base = 4.0 + 0.5 * rng.standard_normal(n_units)
    shared = rng.standard_normal(n_units)
    z = np.sqrt(SHARED) * shared + np.sqrt(1 - SHARED) * rng.standard_normal((len(mu), n_units))
    sd = np.sqrt((REL_SD * mu) ** 2 + ABS_SD**2)
    return base + mu[:, None] + sd[:, None] * z, base


def _rows(surgery: str, layers: Iterable[int], per: np.ndarray, base: np.ndarray) -> list[dict]:
    return [
        {
            "layer": int(l),
            "surgery": surgery,
            "nll_per_seq": per[i],
            "base_nll_per_seq": base,
            "delta_pct": 100 * float(np.expm1(per[i].mean() - base.mean())),
        }
        for i, l in enumerate(layers)
    ]


def importance_sweep(
    source: str, seed: int, n_units: int = N_UNITS
) -> tuple[pd.DataFrame, np.ndarray]:
    """(skip rows with per-window NLLs and the chapter's CIs over units, unit ids (n_units,)) of
    one source of :data:`SOURCES`; ``n_units``: the design (default the chapter's 16)."""
    rng = np.random.default_rng([seed, SOURCES.index(source), 31])
    d = importance_profile(source, rng)
    per, base = _unit_nll(np.log1p(d / 100), rng, n_units)
    doc_ids = np.arange(n_units)
    sweep = pd.DataFrame(_rows("skip", range(PAPER_L), per, base))
    return regroup_sweep(sweep, doc_ids, SEQ_LEN, OPTIONS.n_bootstrap, seed), doc_ids


def robustness_sweep(
    source: str, seed: int, n_units: int = N_ROBUST_UNITS, worst: float | None = None
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """(rows of predicted (14 layers x N_UNITS units), scale, noise, interpolate, reinit (14 x
    n_units),
    unit ids, joint per-window NLL with every predicted layer replaced) of one source:
    predicted weights' median PPL change at +100% (null), +1,000% (planted) or +369% (half:
    half the log excess); joint / summed increase 1 (null), 2 (planted), 1.5 (half); the worst
    layer under scaling at +5% (null), +1% (planted), +3% (half), one other strategy at +1%
    worst in the null, all four at +20% or more otherwise. Unit noise: t with 3 df; the joint
    replacement's: left-skewed (skewness -2).
    ``n_units``: the other strategies' units (default the chapter's 6; the first of the
    held-out units, as in the chapter); ``worst``: the scaled worst layer's change (%) instead
    of the source's (the draws unchanged)."""
    rng = np.random.default_rng([seed, SOURCES.index(source), 37])
    k = SOURCES.index(source)
    med = PREDICTED_MEDIAN[source]
    # PPL ratios skewed to the right (gamma, 2), their median at 1 + med / 100
    skew = np.exp(0.8 * (rng.standard_gamma(2.0, N_ROBUST_LAYERS) - 1.678))
    mu = np.log((1 + med / 100) * skew)  # (L,) nats per token
    base = 3.0 + 0.4 * rng.standard_normal(N_UNITS)
    noise = 0.15 * mu[:, None] * rng.standard_t(3, (N_ROBUST_LAYERS, N_UNITS)) / np.sqrt(3)
    per = base + mu[:, None] + noise
    ratio = JOINT_RATIO[source]
    single = (per - base).sum(0)  # (G,)
    _ = rng.standard_t(3, N_UNITS)  # drawn as before c924c00, so every later draw is unchanged
    # the joint replacement's noise is left-skewed (a mirrored exponential: mean 0, sd 1,
    # skewness -2; its own generator): many units slightly superadditive, a few strongly
    # subadditive, the threat to a sign-flip test of the interaction's mean
    skewed = 1.0 - np.random.default_rng([seed, k, 41]).standard_exponential(N_UNITS)
    joint = base + ratio * single * (1 + 0.1 * skewed)
    layers = range(N_ROBUST_LAYERS)
    rows = _rows("predicted", layers, per, base)
    worst = SCALED_WORST[source] if worst is None else worst
    others = {"noise": 30.0, "interpolate": 25.0, "reinit": 500.0}
    if source == "null":
        others["noise"] = 1.0
    for s, top in {"scale": worst, **others}.items():
        d = top * rng.uniform(0.2, 1.0, N_ROBUST_LAYERS)
        d[rng.integers(N_ROBUST_LAYERS)] = top
        p, b = _unit_nll(np.log1p(d / 100), rng, n_units)
        rows += _rows(s, layers, p, b)
    sweep = pd.DataFrame(rows)
    return sweep, np.arange(max(N_UNITS, n_units)), joint  # windows 0.. are shared


def recovery_source(
    source: str, seed: int, n_layers: int = N_RECOVERY
) -> tuple[pd.Series, pd.DataFrame]:
    """(importance by layer, recovery table) of ``n_layers`` layers (default the chapter's
    :data:`N_RECOVERY`): standardised
    importance x, initial damage d = 0.7 x + noise, recovery time y = 0.6 d + b x + noise with
    b giving a partial correlation of about 0.6 (planted), 0.3 (half) or 0 (null); the slowest
    quarter censored."""
    rng = np.random.default_rng([seed, SOURCES.index(source), 41])
    b = (0.0, 0.75, 0.32)[SOURCES.index(source)]
    x = rng.standard_normal(n_layers)
    d = 0.7 * x + np.sqrt(1 - 0.49) * rng.standard_normal(n_layers)
    y = 0.6 * d + b * x + 0.8 * rng.standard_normal(n_layers)
    cut = np.quantile(y, 0.75)
    table = pd.DataFrame(
        {
            "layer": range(n_layers),
            "baseline_ppl": 20.0,
            "perturbed_ppl": 20.0 * np.exp(1 + 0.5 * d),
            "recovered": y <= cut,
            "steps_ranked": 6 + 2 * y,
        }
    )
    return pd.Series(10 ** (1 + x), index=range(n_layers)), table


def given_row(spec: ClaimSpec) -> Claim:
    """A present row of ``spec``: a precondition that a known-answer source takes as given."""
    return Claim(
        claim_id=spec.id,
        claim=spec.claim,
        paper_value=spec.paper_value,
        model="given",
        measured=1.0,
        verdict=REPRODUCED,
        present=True,
    )


def run_rows(
    source: str,
    seed: int,
    measured: dict[str, Measurement],
    ids: Iterable[str],
    given: Iterable[str] = (),
) -> list[dict[str, object]]:
    """The calibration rows (:data:`lamina.evidence.calibration.RUN_COLUMNS` and
    ``COVERAGE_COLUMN``, checked on the planted source against :data:`PLANTED_TRUTH`) of
    claims ``ids`` judged on ``measured``, in declaration order; the claims ``given`` are taken as present and
    the depth-fit gate as passed (each source calibrates its claims given their
    preconditions)."""
    rows = {c: given_row(BY_ID[c]) for c in given}
    judge = Judge(
        Context(
            model=f"{source}-{seed}", rows=rows, gates={DEPTH_FIT_GATE: GateResult(True, "given")}
        )
    )
    out = []
    for cid in [c for c in BY_ID if c in set(ids)]:
        r = judge(BY_ID[cid], measured.get(cid, Measurement(untestable="not measured")))
        out.append(
            {
                "claim_id": cid,
                "source": source,
                "seed": seed,
                "verdict": r.verdict,
                "kind": r.kind,
                "present": r.present,
                "reason": r.reason[:120],
                COVERAGE_COLUMN: covers(r.ci_low, r.ci_high, PLANTED_TRUTH[cid])
                if source == "planted" and cid in PLANTED_TRUTH
                else float("nan"),
            }
        )
    return out


IMPORTANCE = (
    "p3-anatomy-range",
    "p3-anatomy-core",
    "p3-anatomy-core-max",
    "p3-anatomy-anti",
    "p3-anatomy-anti-at",
)
CORE_MAX = "p3-anatomy-core-max"  # judged given the core (its precondition): its size alone
# the conditional null of p3-anatomy-scaling-only (judged only where scaling preserves quality):
# the null's robustness draws with the scaled worst layer at +1% (scaling preserves, as
# planted) and noise at +1% (a second strategy preserves), so the claim "only scaling" is false
ONE_OTHER = "one-other"
ROBUSTNESS = (
    "p3-anatomy-predicted",
    "p3-anatomy-accumulation",
    "p3-anatomy-scaling",
    "p3-anatomy-scaling-only",
)


def seed_rows(seed: int) -> list[dict[str, object]]:
    """Every anatomy source's rows for one seed but the weights' (importance, robustness,
    recovery; the weight stacks are :mod:`lamina.anatomy.calibration_weights`)."""
    out: list[dict[str, object]] = []
    for source in SOURCES:
        sweep, docs = importance_sweep(source, seed)
        measured, _ = measure_anatomy(AnatomyTables(sweep, docs, PAPER_L), OPTIONS)
        out += run_rows(source, seed, measured, [c for c in IMPORTANCE if c != CORE_MAX])
        out += run_rows(source, seed, measured, [CORE_MAX], given=("p3-anatomy-core",))
        rob, docs, joint = robustness_sweep(source, seed)
        t = AnatomyTables(rob, docs, N_ROBUST_LAYERS, joint_nll=joint)
        measured, _ = measure_anatomy(t, OPTIONS)
        out += run_rows(source, seed, measured, ROBUSTNESS, given=("p3-anatomy-r2",))
        if source == "null":  # scaling-only's conditional null: scaling preserves, noise too
            rob, docs, joint = robustness_sweep(source, seed, worst=1.0)
            t = AnatomyTables(rob, docs, N_ROBUST_LAYERS, joint_nll=joint)
            out += [r for r in run_rows(ONE_OTHER, seed, measure_anatomy(t, OPTIONS)[0],
                                        ROBUSTNESS, given=("p3-anatomy-r2",))
                    if r["claim_id"] == "p3-anatomy-scaling-only"]  # fmt: skip
        imp, rec = recovery_source(source, seed)
        fields: dict[str, Any] = measure_recovery(imp, rec, OPTIONS.n_permutations, seed)
        m = Measurement(**fields)
        out += run_rows(source, seed, {"p3-anatomy-recovery": m}, ("p3-anatomy-recovery",))
    return out
