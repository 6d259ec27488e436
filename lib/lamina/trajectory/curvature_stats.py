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
reasoning prompt. CIs resample units within their family; the matched gap's p permutes the
units' family labels (every prompt of a unit keeps its unit's label).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from lamina.evidence.stats import index_bootstrap, mann_whitney

__all__ = ["LENGTH_EDGES", "MIN_MATCHED", "curvature_test", "length_strata", "matched_gaps",
           "family_group"]  # fmt: skip

# token-count strata [edge_k, edge_k+1): narrow where curvature moves fastest with length
LENGTH_EDGES = (1, 2, 3, 4, 6, 8, 11, 15, 20, 10**9)
MIN_PER_STRATUM = 2  # prompts of each family for a stratum to count
MIN_MATCHED = 4  # units of each family in the counted strata for the matched gap to exist


def family_group(family: Any) -> np.ndarray:
    """(n,) "reasoning" / "lexical" for the families ``reasoning*`` / ``lexical*``, else ""."""
    f = np.asarray(family).astype(str)
    return np.where(np.char.startswith(f, "reasoning"), "reasoning",
                    np.where(np.char.startswith(f, "lexical"), "lexical", ""))


def length_strata(n_tokens: Any) -> np.ndarray:
    """(n,) int stratum of each prompt's token count (:data:`LENGTH_EDGES`); -1 if < 1."""
    tok = np.asarray(n_tokens, dtype=float)
    return np.where(tok >= 1, np.searchsorted(LENGTH_EDGES, tok, side="right") - 1, -1)


def matched_gaps(mc: np.ndarray, reasoning: np.ndarray, strata: np.ndarray,
                 counts: np.ndarray) -> np.ndarray:  # fmt: skip
    """The matched gap of B relabellings or resamples at once.

    mc (n,) mean curvature (rad); reasoning (B, n) bool; strata (n,) int; counts (B, n) row
    multiplicities. Per stratum s with n_r, n_l >= MIN_PER_STRATUM (counted prompts):
    gap_s = mean_r - mean_l; the matched gap is sum_s w_s gap_s / sum_s w_s with
    w_s = n_r n_l / (n_r + n_l). -> (B,) rad (NaN where no stratum counts)."""
    S = int(strata.max()) + 1
    onehot = np.zeros((len(mc), S))
    ok = strata >= 0
    onehot[np.flatnonzero(ok), strata[ok]] = 1.0
    r = counts * reasoning
    le = counts * ~reasoning
    n_r, n_l = r @ onehot, le @ onehot  # (B, S)
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = (r * mc) @ onehot / n_r - (le * mc) @ onehot / n_l
        w = np.where((n_r >= MIN_PER_STRATUM) & (n_l >= MIN_PER_STRATUM),
                     n_r * n_l / (n_r + n_l), 0.0)
        out = np.sum(np.where(w > 0, w * gap, 0.0), axis=1) / w.sum(1)
    return np.where(w.sum(1) > 0, out, np.nan)


def _matched(mc: np.ndarray, grp: np.ndarray, unit: np.ndarray, tok: np.ndarray,
             n_bootstrap: int, n_permutations: int, seed: int) -> dict[str, Any]:  # fmt: skip
    """The matched gap (module docstring) with its bootstrap CI and permutation p."""
    strata = length_strata(tok)
    reas = grp == "reasoning"
    n = len(mc)
    gap = float(matched_gaps(mc, reas[None], strata, np.ones((1, n)))[0])
    counted = np.zeros(n, bool)
    for s in np.unique(strata[strata >= 0]):
        inn = strata == s
        if (inn & reas).sum() >= MIN_PER_STRATUM and (inn & ~reas).sum() >= MIN_PER_STRATUM:
            counted |= inn
    n_units = tuple(len(np.unique(unit[counted & m])) for m in (reas, ~reas))
    span = {g: (int(tok[grp == g].min()), int(tok[grp == g].max())) for g in ("reasoning", "lexical")}
    out: dict[str, Any] = {"matched": gap, "matched_units": n_units,
                           "matched_prompts": int(counted.sum()), "token_span": span}
    if min(n_units) < MIN_MATCHED or not np.isfinite(gap):
        out.update(matched_low=np.nan, matched_high=np.nan, matched_p=None, matched_untestable=(
            f"the families share too few lengths: {n_units[0]} reasoning and {n_units[1]} "
            f"lexical units in strata both fill (at least {MIN_MATCHED} each needed); tokens: "
            f"reasoning {span['reasoning'][0]}-{span['reasoning'][1]}, lexical "
            f"{span['lexical'][0]}-{span['lexical'][1]}"))
        return out

    def many(idx: list[np.ndarray]) -> np.ndarray:
        counts = np.stack([np.bincount(i, minlength=n) for i in idx]).astype(float)
        return matched_gaps(mc, np.broadcast_to(reas, counts.shape), strata, counts)

    boot = index_bootstrap(lambda i: float(many([i])[0]), n, n_bootstrap, seed, strata=grp,
                           clusters=unit, many=many)
    names, inv = np.unique(unit, return_inverse=True)
    label = np.array([reas[inv == k][0] for k in range(len(names))])  # a unit's family
    rng = np.random.default_rng([seed, 3])
    perms = np.stack([label[rng.permutation(len(names))][inv] for _ in range(n_permutations)])
    null = matched_gaps(mc, perms, strata, np.ones(perms.shape))
    null = null[np.isfinite(null)]
    hits = int(np.sum(np.abs(null) >= abs(gap) - 1e-12))
    out.update(matched_low=boot["ci_low"], matched_high=boot["ci_high"],
               matched_p=(1 + hits) / (1 + len(null)), matched_untestable=None)
    return out


def _mean_of(v: np.ndarray, mask: np.ndarray) -> Callable[[np.ndarray], float]:
    return lambda i: float(np.mean(v[i][mask[i]])) if mask[i].any() else np.nan


def curvature_test(
    mc: np.ndarray,
    family: Any,
    units: Any,
    *,
    n_tokens: Any | None = None,
    n_bootstrap: int = 2_000,
    n_permutations: int = 2_000,
    seed: int = 0,
) -> dict[str, Any]:
    """Reasoning vs lexical mean curvature (radians), at equal length and as the paper
    compared them.

    mc: (n,) per-prompt mean curvature; family: (n,) prompt families; units: (n,) the
    independent unit of each row (the base word of a lexical variant, the prompt itself for
    reasoning); n_tokens: (n,) tokens per prompt. Returns

    * the paper's families (``reasoning``, ``lexical``): their means ``reasoning`` /
      ``lexical`` and ``difference``, percentile bootstrap 95% CIs resampling units within
      family, the two-sided Mann-Whitney U test on unit means (``p``, ``rank_biserial``);
    * with ``n_tokens``, over the families ``reasoning*`` and ``lexical*``: ``matched``, the
      gap within length strata (:func:`matched_gaps`), its bootstrap 95% CI
      (``matched_low``/``matched_high``, two-sided, units resampled within family), the
      two-sided permutation p of the units' family labels (``matched_p``), the units and
      prompts in the counted strata, and ``matched_untestable`` (the reason, when the
      families share too few lengths; else None).
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
        out.update(_matched(mc[keep], grp[keep], key[keep], tok[keep], n_bootstrap,
                            n_permutations, seed))
    return out
