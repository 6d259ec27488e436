"""The curvature claim's tests: reasoning against lexical variation, at equal length.

Mean curvature moves with a prompt's length on real models (on SmolLM2's mean-pooled states,
one-token prompts turn about 0.2 rad less than two-token ones), and paper 1's lexical
variations (1-3 words) are all shorter than its reasoning prompts (6-25). So the claim's test
compares the two within strata of equal length (:data:`LENGTH_EDGES`, in tokens): the
families ``reasoning*`` (reasoning, reasoning_short) against ``lexical*`` (lexical,
lexical_framed) wherever both have prompts of that length. Where they share too few
(:data:`MIN_MATCHED`), the matched gap is undefined, and says why. The paper's own comparison
(the families ``reasoning`` and ``lexical``, whatever their lengths) and each family's level
are reported beside it.

Independent units: a lexical base word (its variants share the word, framed or not) and a
reasoning prompt. The paper's comparison resamples units within their family. The gap at equal
length compares the families where they share lengths, and there the prompts share more than a
unit: a lexical variant in a sentence frame shares the frame with other base words, and a
reasoning prompt shares its template (family and subtype) with the others of its subtype, so a
frame or a template moves the curvature of all its prompts together. The prompt set has four
frames, and each fills its own few strata, so a frame's own curvature and the length's cannot
be told apart within a stratum. On the realistic null (:mod:`lamina.trajectory.realistic`),
a permutation of the units' family labels read the gap at p < 0.05 in 22 of 100 seeds, one of
the clusters' labels (:func:`curvature_clusters`) in 15 of 100, and a Welch test of cluster
means after a log-length fit in 28 of 300. The test is therefore a mixed model
(:func:`mixed_gap`): the strata as fixed effects, each cluster's intercept as a random effect,
the gap's t test on G - 2 degrees of freedom (G clusters).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from lamina.evidence.stats import index_bootstrap, mann_whitney
from lamina.trajectory.background import prompt_keys

__all__ = ["LENGTH_EDGES", "MIN_CLUSTERS", "MIN_MATCHED", "curvature_clusters", "curvature_test",
           "family_group", "length_strata", "mixed_gap"]  # fmt: skip

# token-count strata [edge_k, edge_k+1): narrow where curvature moves fastest with length
LENGTH_EDGES = (1, 2, 3, 4, 6, 8, 11, 15, 20, 10**9)
MIN_PER_STRATUM = 2  # prompts of each family for a stratum to count
MIN_MATCHED = 4  # units of each family in the counted strata for the matched gap to exist
MIN_CLUSTERS = 2  # clusters of each family in the counted strata: one cannot vary
CLUSTER_KEYS = ("frame", "template", "base")  # the prompt_keys kinds that join prompts
FIT_METHODS = ("lbfgs", "powell")  # the mixed model's optimisers, tried in turn


def family_group(family: Any) -> np.ndarray:
    """(n,) "reasoning" / "lexical" for the families ``reasoning*`` / ``lexical*``, else ""."""
    f = np.asarray(family).astype(str)
    return np.where(np.char.startswith(f, "reasoning"), "reasoning",
                    np.where(np.char.startswith(f, "lexical"), "lexical", ""))


def curvature_clusters(table: Any) -> np.ndarray:
    """(n,) int cluster of each row of ``table`` (columns ``family``, ``prompt``, optional
    ``frame``, ``subtype``, ``base``): rows sharing a sentence frame, a template or a lexical
    base word (the keys :data:`CLUSTER_KEYS` of
    :func:`lamina.trajectory.background.prompt_keys`, the keys the realistic sources share
    components by) are joined, transitively (connected components). A row holding none is its
    own cluster."""
    keys = prompt_keys(table, "mean")
    n = len(table)
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    for kind in CLUSTER_KEYS:
        for i, key in enumerate(keys[kind]):
            if key:
                j = first.setdefault(key, i)
                parent[root(i)] = root(j)
    return np.unique([root(i) for i in range(n)], return_inverse=True)[1]


def length_strata(n_tokens: Any) -> np.ndarray:
    """(n,) int stratum of each prompt's token count (:data:`LENGTH_EDGES`); -1 if < 1."""
    tok = np.asarray(n_tokens, dtype=float)
    return np.where(tok >= 1, np.searchsorted(LENGTH_EDGES, tok, side="right") - 1, -1)


def mixed_gap(mc: np.ndarray, reasoning: np.ndarray, strata: np.ndarray,
              clusters: np.ndarray) -> dict[str, Any]:  # fmt: skip
    """The family gap at equal length, with clusters as random effects.

    mc (n,) mean curvature (rad); reasoning (n,) bool; strata (n,) int length stratum;
    clusters (n,) the resampling cluster (:func:`curvature_clusters`). The linear mixed model
    (REML, :class:`statsmodels.regression.mixed_linear_model.MixedLM`)

        mc_i = b0 + gap [i reasoning] + sum_s beta_s [s(i) = s] + u_c(i) + e_i,
        u_c ~ N(0, tau^2), e_i ~ N(0, sigma^2),

    compares the families within strata (the stratum effects are fixed) while a cluster's
    prompts share its intercept u_c (a frame's or a template's curvature moves all of them).
    -> {"gap" (rad), "se" (rad), "df" = G - 2 (G clusters), "p": two-sided t(df) p,
    "low"/"high": the t(df) 95% CI (rad), "problem": None}. The fit tries
    :data:`FIT_METHODS` in turn until one converges; where none does, or the SE is not a
    positive number (the model fits every value exactly: nothing to test the gap against), p,
    low and high are NaN and "problem" says why."""
    import warnings

    from scipy import stats
    from statsmodels.regression.mixed_linear_model import MixedLM

    levels = np.unique(strata)
    dummies = (strata[:, None] == levels[None, 1:]).astype(float)  # (n, S - 1)
    exog = np.column_stack([np.ones(len(mc)), reasoning.astype(float), dummies])
    df = len(np.unique(clusters)) - 2
    fit, tried = None, []
    for method in FIT_METHODS:  # L-BFGS can meet a singular matrix where tau^2 -> 0
        try:
            with warnings.catch_warnings():  # a cluster variance at its boundary is a valid fit
                warnings.simplefilter("ignore")
                fit = MixedLM(mc, exog, groups=clusters).fit(reml=True, method=method)
        except (np.linalg.LinAlgError, ValueError) as exc:
            tried.append(f"{method}: {exc}")
            fit = None
            continue
        if fit.converged:
            break
        tried.append(f"{method}: did not converge")
        fit = None
    nan = {"se": np.nan, "df": df, "p": np.nan, "low": np.nan, "high": np.nan}
    if fit is None:
        return {"gap": np.nan, **nan, "problem": "the mixed model did not fit (" + "; ".join(tried) + ")"}
    gap, se = float(fit.params[1]), float(fit.bse[1])
    if not (np.isfinite(se) and se > 0):  # no variation left to measure the gap against
        return {"gap": gap, **nan, "se": se, "problem": (
            f"the mixed model's SE is {se}: the strata and clusters fit every prompt's "
            "curvature exactly, so nothing measures the gap's uncertainty")}
    half = float(stats.t.ppf(0.975, df)) * se
    p = float(2 * stats.t.sf(abs(gap) / se, df))
    return {"gap": gap, "se": se, "df": df, "p": p, "low": gap - half, "high": gap + half,
            "problem": None}


def _matched(mc: np.ndarray, grp: np.ndarray, unit: np.ndarray, tok: np.ndarray,
             cluster: np.ndarray) -> dict[str, Any]:  # fmt: skip
    """The gap at equal length (module docstring): the prompts of the strata both families
    fill, compared by :func:`mixed_gap`."""
    strata = length_strata(tok)
    reas = grp == "reasoning"
    n = len(mc)
    counted = np.zeros(n, bool)
    for s in np.unique(strata[strata >= 0]):
        inn = strata == s
        if (inn & reas).sum() >= MIN_PER_STRATUM and (inn & ~reas).sum() >= MIN_PER_STRATUM:
            counted |= inn
    n_units = tuple(len(np.unique(unit[counted & m])) for m in (reas, ~reas))
    n_clusters = tuple(len(np.unique(cluster[counted & m])) for m in (reas, ~reas))
    span = {g: (int(tok[grp == g].min()), int(tok[grp == g].max())) for g in ("reasoning", "lexical")}
    out: dict[str, Any] = {"matched_units": n_units, "matched_clusters": n_clusters,
                           "matched_prompts": int(counted.sum()), "token_span": span,
                           "matched": np.nan, "matched_low": np.nan, "matched_high": np.nan,
                           "matched_p": None}  # fmt: skip
    if min(n_units) < MIN_MATCHED:
        out["matched_untestable"] = (
            f"the families share too few lengths: {n_units[0]} reasoning and {n_units[1]} "
            f"lexical units in strata both fill (at least {MIN_MATCHED} each needed); tokens: "
            f"reasoning {span['reasoning'][0]}-{span['reasoning'][1]}, lexical "
            f"{span['lexical'][0]}-{span['lexical'][1]}")
        return out
    if min(n_clusters) < MIN_CLUSTERS:
        out["matched_untestable"] = (
            f"the strata both families fill hold {n_clusters[0]} reasoning and "
            f"{n_clusters[1]} lexical clusters (prompts joined by a frame, template or base "
            f"word; at least {MIN_CLUSTERS} each needed)")
        return out
    m = mixed_gap(mc[counted], reas[counted], strata[counted], cluster[counted])
    if m["problem"]:
        out.update(matched=m["gap"], matched_untestable=m["problem"])
        return out
    out.update(matched=m["gap"], matched_low=m["low"], matched_high=m["high"], matched_p=m["p"],
               matched_se=m["se"], matched_df=m["df"], matched_untestable=None)  # fmt: skip
    return out


def _mean_of(v: np.ndarray, mask: np.ndarray) -> Callable[[np.ndarray], float]:
    return lambda i: float(np.mean(v[i][mask[i]])) if mask[i].any() else np.nan


def curvature_test(
    mc: np.ndarray,
    family: Any,
    units: Any,
    *,
    n_tokens: Any | None = None,
    clusters: Any | None = None,
    n_bootstrap: int = 2_000,
    n_permutations: int = 2_000,
    seed: int = 0,
) -> dict[str, Any]:
    """Reasoning vs lexical mean curvature (radians), at equal length and as the paper
    compared them.

    mc: (n,) per-prompt mean curvature; family: (n,) prompt families; units: (n,) the
    independent unit of each row (the base word of a lexical variant, the prompt itself for
    reasoning); n_tokens: (n,) tokens per prompt; clusters: (n,) the clusters of the gap at
    equal length (:func:`curvature_clusters`; None: the units). Returns

    * the paper's families (``reasoning``, ``lexical``): their means ``reasoning`` /
      ``lexical`` and ``difference``, percentile bootstrap 95% CIs resampling units within
      family, the two-sided Mann-Whitney U test on unit means (``p``, ``rank_biserial``);
    * with ``n_tokens``, over the families ``reasoning*`` and ``lexical*`` in the strata both
      fill: ``matched``, the gap at equal length (:func:`mixed_gap`: clusters as random
      effects), its t 95% CI (``matched_low``/``matched_high``, two-sided), SE and degrees of
      freedom, its two-sided p (``matched_p``), the units, clusters and prompts in the counted
      strata, and ``matched_untestable`` (the reason, when the families share too few lengths
      or clusters; else None). ``n_permutations`` is not used (kept for the common budget).
    """
    mc, fam, unit = np.asarray(mc, float), np.asarray(family).astype(str), np.asarray(units)
    grp = family_group(fam)
    keep = (grp != "") & np.isfinite(mc)
    paper = keep & np.isin(fam, ["reasoning", "lexical"])
    a, b = paper & (fam == "reasoning"), paper & (fam == "lexical")
    if a.sum() < 2 or b.sum() < 2:
        raise ValueError(f"need >= 2 reasoning and lexical prompts; got {a.sum()} and {b.sum()}")
    key = np.array([f"{g}:{u}" for g, u in zip(grp, unit, strict=True)])
    pm, pa, pb, pk, pf = mc[paper], a[paper], b[paper], key[paper], fam[paper]

    def diff(i: np.ndarray) -> float:
        return float(np.mean(pm[i][pa[i]]) - np.mean(pm[i][pb[i]]))

    kw: dict[str, Any] = {"n_resamples": n_bootstrap, "seed": seed, "strata": pf, "clusters": pk}
    ra, rb_, d = (index_bootstrap(f, len(pm), **kw) for f in (_mean_of(pm, pa), _mean_of(pm, pb), diff))
    ua = np.array([pm[pk == k].mean() for k in dict.fromkeys(pk[pa])])
    ub = np.array([pm[pk == k].mean() for k in dict.fromkeys(pk[pb])])
    mw = mann_whitney(ua, ub).iloc[0]
    out: dict[str, Any] = {
        "reasoning": ra["estimate"], "reasoning_low": ra["ci_low"], "reasoning_high": ra["ci_high"],
        "lexical": rb_["estimate"], "lexical_low": rb_["ci_low"], "lexical_high": rb_["ci_high"],
        "difference": d["estimate"], "diff_low": d["ci_low"], "diff_high": d["ci_high"],
        "p": float(mw["p_value"]), "rank_biserial": float(mw["rank_biserial"]),
        "n_units": (len(ua), len(ub)),
    }  # fmt: skip
    if n_tokens is not None:
        tok = np.asarray(n_tokens, float)
        cl = key if clusters is None else np.asarray(clusters).astype(str)
        if len(cl) != len(mc):
            raise ValueError(f"clusters has {len(cl)} rows; mc has {len(mc)}")
        mixed = [c for c in np.unique(cl[keep]) if len(set(grp[keep][cl[keep] == c])) > 1]
        if mixed:
            raise ValueError(f"a cluster holds both families: {mixed[:3]}")
        out.update(_matched(mc[keep], grp[keep], key[keep], tok[keep], cl[keep]))
    return out
