"""Summaries of paper 2's per-matrix tables, in the form a claim's measurement takes.

A ratio measured per matrix (an enrichment, RSF(ΔW) / RSF(W), an update's enrichment over its
momentum's) is summarised over the matrices by its geometric mean, with a percentile bootstrap
CI over matrices and a one-sample Wilcoxon signed-rank test of its log against 0. The CI has the
sidedness of the test (:func:`ratio_summary`): a one-sided test comes with the central 90%
interval, whose ends are one-sided 95% bounds; a two-sided one with the central 95% interval.
A claim that the ratio is close to 1 (within [1/m, m]) has no test of a difference: it is judged
on its 95% CI alone (:func:`closeness_summary`).

Each summary is a dict of :class:`lamina.evidence.decide.Measurement` fields (``estimate``,
``ci_low``, ``ci_high``, ``sided``, ``p``, ``p_opposite``, ``n_units``).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Literal, TypedDict, Unpack

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import stats as sps

from lamina.evidence.stats import bootstrap_ci, t_summary
from lamina.weights.settings import SignatureSettings

__all__ = [
    "QK",
    "WRITE",
    "Sided",
    "closeness_summary",
    "enrichments",
    "keep_layers",
    "per_block",
    "per_matrix",
    "ratio_summary",
    "selected_rows",
    "worst",
]

QK, WRITE = ("q", "k"), ("attn_out", "mlp_out")
Sided = Literal["two-sided", "greater", "less"]
Interval = Literal["percentile", "t"]
_OPPOSITE = {"greater": "less", "less": "greater", "two-sided": "two-sided"}


def keep_layers(t: pd.DataFrame, s: SignatureSettings) -> pd.DataFrame:
    """The rows of ``t`` in the probed layers (``s.layers``; None = all)."""
    return t if s.layers is None else t[t["layer"].isin(s.layers)]


class RowSelection(TypedDict, total=False):
    """Which rows of the deltas table a measurement reads: ``k`` (default the settings' k),
    second-moment convention ``moment`` (default the settings' main one), prediction basis
    ``prediction`` ("W_U", the default, or "W_U diag(gamma)"), and column filters (a value, or
    a list of values): ``family`` ("pretraining", "stage", "objective"), ``pair`` (the ΔW
    pair label) and ``phase`` ("early", "late")."""

    k: int | None
    moment: str | None
    prediction: str
    family: str | list[str]
    pair: str | list[str]
    phase: str | list[str]


SELECTION_OPTIONS = ("k", "moment", "prediction")


def selected_rows(
    deltas: pd.DataFrame, s: SignatureSettings, roles: Sequence[str], **where: Unpack[RowSelection]
) -> pd.DataFrame:
    """The rows of the deltas table (:func:`lamina.weights.probes.organism_deltas`) for the
    matrices of ``roles`` in the probed layers, selected and filtered by ``where``
    (:class:`RowSelection`)."""
    k, moment = where.get("k"), where.get("moment")
    t = keep_layers(deltas, s)
    t = t[(t["k"] == (k or s.k)) & t["role"].isin(roles)]
    t = t[t["moment"] == (moment or ("centred" if s.centred else "raw"))]
    if "prediction" in t.columns:
        t = t[t["prediction"] == where.get("prediction", "W_U")]
    filters = {c: v for c, v in where.items() if c not in SELECTION_OPTIONS}
    for col, val in filters.items():
        t = t[t[col].isin(val) if isinstance(val, list | tuple) else t[col] == val]
    return t


def enrichments(
    deltas: pd.DataFrame, s: SignatureSettings, roles: Sequence[str], column: str = "enrichment",
    **where: Unpack[RowSelection],
) -> np.ndarray:
    """The ``column`` of :func:`selected_rows` (one value per matrix and pair).
    -> (n_rows,) float64."""
    return selected_rows(deltas, s, roles, **where)[column].to_numpy(dtype=np.float64)


def per_matrix(values: pd.Series, keys: pd.Series) -> np.ndarray:
    """The geometric mean of the positive ``values`` of each matrix (``keys``), over the pairs
    it appears in: one value per matrix, the unit a test over matrices resamples (the pairs of
    one matrix share its W and its basis, so they are not independent). -> (n_matrices,),
    in the order of first appearance."""
    x = np.log(values.to_numpy(dtype=np.float64))
    frame = pd.DataFrame({"key": keys.to_numpy(), "log": np.where(np.isfinite(x), x, np.nan)})
    return np.exp(frame.groupby("key", sort=False)["log"].mean().dropna().to_numpy())


def per_block(values: pd.Series, keys: pd.Series, blocks: pd.Series) -> np.ndarray:
    """The geometric mean of the positive ``values`` of each block (``blocks``, e.g. the layer),
    over its matrices (``keys``), each matrix first geo-averaged over its pairs
    (:func:`per_matrix`): the unit when the matrices of one block share an estimate, such as
    Q and K reading one input moment through one estimated P̂ (its error moves both).
    -> (n_blocks,), in the order of first appearance."""
    x = np.log(values.to_numpy(dtype=np.float64))
    frame = pd.DataFrame({"block": blocks.to_numpy(), "key": keys.to_numpy(),
                          "log": np.where(np.isfinite(x), x, np.nan)})  # fmt: skip
    matrices = frame.groupby(["block", "key"], sort=False)["log"].mean().dropna()
    return np.exp(matrices.groupby(level="block", sort=False).mean().to_numpy())


def _ci_level(sided: Sided, level: float = 0.95) -> float:
    return level if sided == "two-sided" else 1 - 2 * (1 - level)


def ratio_summary(
    values: ArrayLike, sided: Sided, n_bootstrap: int, seed: int, *, null: float = 1.0,
    interval: Interval = "percentile", alpha: float = 0.05,
) -> dict[str, object]:
    """Geometric mean of positive per-unit ratios (a unit: a matrix, or a block) with its CI
    over the units and the one-sample Wilcoxon signed-rank p of log(ratio) against
    log(``null``), both of sidedness ``sided``; ``p_opposite`` is the p of the other side (the
    two-sided p for a two-sided test). ``interval``: "percentile" (bootstrap over the units)
    or "t" (Student's t on the logs, for few units: a percentile bootstrap over 8 units is
    too narrow by about sqrt((n-1)/n) and its tails are the sample's own). Ratios within a
    relative 1e-6 of ``null`` count as ties (dropped by the test: a ratio equal to its null by
    construction is no evidence either way). With too few untied units for the exact
    Wilcoxon to reach p < ``alpha`` (the claims' level; its smallest p is 2^-n one-sided,
    2^(1-n) two-sided: 4 units or fewer one-sided), ``undecidable`` says so.
    -> Measurement fields; estimate NaN with no finite positive value, p None with fewer than
    2 values or no spread."""
    if interval not in ("percentile", "t"):
        raise ValueError(f"interval must be 'percentile' or 't'; got {interval!r}")
    x = np.log(np.asarray(values, dtype=np.float64))
    x = x[np.isfinite(x)]
    out: dict[str, object] = {"estimate": float("nan"), "ci_low": float("nan"),
                           "ci_high": float("nan"), "sided": sided, "p": None,
                           "p_opposite": None, "n_units": len(x)}  # fmt: skip
    if not len(x):
        return out
    out["estimate"] = float(np.exp(x.mean()))
    d = x - np.log(null)
    d = np.where(np.abs(d) < 1e-6, 0.0, d)
    if len(x) >= 2 and np.ptp(x) > 0 and interval == "t":
        _, lo, hi, _ = t_summary(x, sided=sided)  # on the logs
        out["ci_low"], out["ci_high"] = float(np.exp(lo)), float(np.exp(hi))
    elif len(x) >= 2 and np.ptp(x) > 0:
        b = bootstrap_ci(x, n_resamples=n_bootstrap, seed=seed, method="percentile",
                         confidence=_ci_level(sided)).iloc[0]  # fmt: skip
        out["ci_low"], out["ci_high"] = float(np.exp(b["ci_low"])), float(np.exp(b["ci_high"]))
    n_untied = int(np.count_nonzero(d))
    smallest = 2.0 ** -n_untied * (2 if sided == "two-sided" else 1)
    if len(x) >= 2 and smallest >= alpha:
        need = next(n for n in range(1, 64) if 2.0**-n * (2 if sided == "two-sided" else 1) < alpha)
        out["undecidable"] = (f"a Wilcoxon over {n_untied} untied units cannot reach p < {alpha:g} "
                              f"(its smallest p is {smallest:.3g}); {need} units would decide it")  # fmt: skip
    if np.any(d != 0) and len(x) >= 2:
        out["p"] = float(sps.wilcoxon(d, alternative=sided).pvalue)
        out["p_opposite"] = float(sps.wilcoxon(d, alternative=_OPPOSITE[sided]).pvalue)
    elif len(x) >= 2:  # every ratio equals its null: nothing either way
        out["p"] = out["p_opposite"] = 1.0
    return out


def closeness_summary(values: ArrayLike, n_bootstrap: int, seed: int) -> dict[str, object]:
    """Geometric mean of positive per-matrix ratios with its two-sided 95% percentile
    bootstrap CI over matrices, no test (a "close to 1" claim is judged on its CI, against
    the claimed range [1/m, m]). -> Measurement fields."""
    out = ratio_summary(values, "two-sided", n_bootstrap, seed)
    return out | {"p": None, "p_opposite": None}


def worst(
    parts: dict[str, dict[str, object]], key: str = "p", *, largest: bool = True
) -> tuple[str, dict[str, object]]:
    """The part of a conjunction ("under every objective", "any single group") with the weakest
    evidence: the largest ``key`` (a p: the intersection-union test of the conjunction rejects
    only when every part does, so its p is the largest part's), or the smallest when
    ``largest=False``. Parts whose ``key`` is missing or NaN are the weakest of all.
    -> (its name, its summary). ValueError when ``parts`` is empty."""
    if not parts:
        raise ValueError("a conjunction needs at least one part")

    def weakness(item: tuple[str, dict[str, object]]) -> float:
        v = item[1].get(key)
        if not isinstance(v, numbers.Real) or not np.isfinite(float(v)):
            return np.inf
        return float(v) if largest else -float(v)

    return max(parts.items(), key=weakness)
