"""The statistical tests behind paper 1's claims, on state arrays.

The chapters and the calibration harness (:mod:`lamina.trajectory.calibration`) call the same functions,
so the calibration page measures the tests the book uses. Each returns a dict of numbers;
:mod:`lamina.trajectory.verdicts` turns them into :class:`lamina.evidence.claims.Claim` rows.

Independent units: items (convergence: an item's prompts share its word; resampled within
their category and permuted as a block), lexical base words and reasoning prompts
(curvature), homograph pairs (bifurcation), lexical base words and other prompts (phases).
"""

from __future__ import annotations

from typing import Any, TypedDict, Unpack, cast

import numpy as np

from lamina.core.types import Profile
from lamina.evidence.stats import (
    index_bootstrap,
    mann_whitney,
    max_permutation_test,
    peak_bootstrap,
    wilcoxon,
)
from lamina.trajectory import bifurcation as _bifurcation
from lamina.trajectory import convergence_index_per_prompt, layerwise_cosine, mean_curvature
from lamina.trajectory.phases import fixed_phase_bands

__all__ = [
    "Resampling",
    "bifurcation_rows",
    "bifurcation_test",
    "ci_profile",
    "ci_profiles",
    "convergence_test",
    "curvature_test",
    "distance_stack",
    "item_units",
    "onset_from_difference",
    "paper1_test",
    "three_phase_test",
    "units_of",
]


# ----------------------------------------------------------------------------- convergence
def distance_stack(x: np.ndarray) -> np.ndarray:
    """Chord distances between L2-normalised states, layer by layer.

    x: (n, m, d)  ->  D (m, n, n) with D[l, i, j] = ||ĥ_i(l) - ĥ_j(l)|| = sqrt(2 - 2 ĥ_i·ĥ_j).
    """
    u = x / np.linalg.norm(x, axis=-1, keepdims=True).clip(1e-30)
    g = np.einsum("ild,jld->lij", u, u)
    return np.sqrt(np.clip(2.0 - 2.0 * g, 0.0, None))


def ci_profile(D: np.ndarray, labels: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
    """Mean per-prompt convergence index over the rows ``idx`` (repeats allowed).

    CI_i(l) = mean_{j: y_j != y_i} D[l, i, j] - mean_{j: y_j = y_i, j not a copy of i} D[l, i, j]
    over the resampled rows, averaged over i (the definition of
    ``lamina.trajectory.convergence_index_per_prompt``, on a resample: copies of a prompt are
    not its neighbours). With multiplicities c_j of the rows in ``idx``, both means are
    c-weighted sums over the distinct rows (one batched matrix product), and the average over
    i is c-weighted too. D: (m, n, n) from :func:`distance_stack`; labels: (n,)  ->  (m,).
    """
    n = D.shape[1]
    c = np.ones(n) if idx is None else np.bincount(np.asarray(idx), minlength=n).astype(float)
    return ci_profiles(D, np.asarray(labels)[None], c[None])[0]


def ci_profiles(D: np.ndarray, labels: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """:func:`ci_profile` of B label vectors and row multiplicities at once (permutations or
    resamples): labels (B, n) and counts (B, n) float, D (m, n, n)  ->  (B, m).

    With w_bjk = c_bj [y_bj = k], S_libk = sum_j D[l, i, j] w_bjk is one matrix product for the
    whole batch; CI_bi(l) = (sum_k S_libk - S_lib,y_bi) / n_between - S_lib,y_bi / n_within,
    n_within = size_b,y_bi - c_bi, n_between = sum_j c_bj - size_b,y_bi, averaged over i with
    weights c_bi (rows with no neighbour on either side are left out).
    """
    m, n = D.shape[0], D.shape[1]
    lab = np.asarray(labels)
    _, flat = np.unique(lab, return_inverse=True)
    inv: np.ndarray = flat.reshape(lab.shape)  # (B, n) category codes
    B, K = lab.shape[0], int(inv.max()) + 1
    c = np.asarray(counts, dtype=np.float64)
    w = np.zeros((n, B, K))
    w[np.arange(n)[:, None], np.arange(B)[None, :], inv.T] = c.T  # (n, B, K)
    sums = (D.reshape(m * n, n) @ w.reshape(n, B * K)).reshape(m, n, B, K)
    size = w.sum(0)  # (B, K) resampled category sizes
    rows = np.arange(n)[:, None]
    own = sums[:, rows, np.arange(B)[None, :], inv.T]  # (m, n, B)
    size_own = size[np.arange(B)[None, :], inv.T]  # (n, B)
    n_within = size_own - c.T
    n_between = c.sum(1)[None, :] - size_own
    with np.errstate(invalid="ignore", divide="ignore"):
        ci = (sums.sum(3) - own) / n_between - own / n_within  # (m, n, B)
    ok = (c.T > 0) & (n_within > 0) & (n_between > 0)  # (n, B)
    weight = np.where(ok, c.T, 0.0)
    total = weight.sum(0)  # (B,)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.einsum("lib,ib->bl", np.where(ok[None], ci, 0.0), weight) / total[:, None]
    out[total == 0] = np.nan
    return out


def _depth_interval(depth: np.ndarray, share: np.ndarray) -> tuple[float, float]:
    """The 2.5 and 97.5 percentiles of the re-selected peak's depth: depth (m,) of each layer
    as a fraction of the last, share (m,) the share of bootstrap resamples peaking there
    (NaN, NaN when no resample has a peak)."""
    cdf = np.cumsum(share)
    if not cdf[-1] > 0:
        return np.nan, np.nan
    lo = depth[int(np.searchsorted(cdf, 0.025))]
    return lo, depth[min(int(np.searchsorted(cdf, 0.975)), len(depth) - 1)]


def _peak_vs_first(per: Profile, k: int) -> tuple[float, float]:
    """(p, rank-biserial) of the Wilcoxon signed-rank test of per-prompt values ``per``
    (n, m) at layer index ``k`` vs index 0; (1, 0) when the peak is the first layer."""
    if k == 0:
        return 1.0, 0.0
    w = wilcoxon(per[:, k], per[:, 0]).iloc[0]
    return float(w["p_value"]), float(w["rank_biserial"])


def _check_labelled(x: np.ndarray, lab: np.ndarray) -> None:
    """ValueError unless x is (n, m, d) with n labels of at least 2 categories."""
    if x.ndim != 3 or lab.shape != (x.shape[0],):
        raise ValueError(
            f"convergence_test needs states (n, m, d) and n labels; got states {x.shape} and "
            f"labels of length {lab.size}"
        )
    if len(np.unique(lab)) < 2:
        raise ValueError("convergence_test needs at least 2 categories")


def _peak_resampling(
    D: np.ndarray, lab: np.ndarray, units: Any | None, n_permutations: int, n_bootstrap: int,
    seed: int,
) -> tuple[dict[str, Any], dict[str, Any]]:  # fmt: skip
    """(permutation test, bootstrap) of the convergence-index profile's peak from the
    distance stack D (m, n, n): labels permuted by unit, units resampled within category."""
    n = len(lab)

    def resampled(idx: list[np.ndarray]) -> np.ndarray:  # B resamples -> (B, m)
        counts = np.stack([np.bincount(i, minlength=n) for i in idx]).astype(float)
        return ci_profiles(D, np.broadcast_to(lab, counts.shape), counts)

    perm = max_permutation_test(
        lambda y: ci_profile(D, y), lab, n_permutations, seed,
        profiles=lambda y: ci_profiles(D, y, np.ones(y.shape)), blocks=units,
    )  # fmt: skip
    boot = peak_bootstrap(
        lambda i: ci_profile(D, lab, i), n, n_bootstrap, seed, strata=lab, clusters=units,
        profiles=resampled,
    )  # fmt: skip
    return perm, boot


def convergence_test(
    x: np.ndarray,
    labels: Any,
    layers: list[int],
    *,
    n_bootstrap: int = 2_000,
    n_permutations: int = 2_000,
    seed: int = 0,
    units: Any | None = None,
) -> dict[str, Any]:
    """Peak of the convergence-index profile and the claim's tests.

    x: (n, m, d) states at ``layers``; labels: (n,); units: (n,) the independent unit of each
    prompt (an item whose several prompts share its word; None: the prompt). Returns ``peak``
    (chord units), its ``peak_layer`` and ``peak_fraction`` (layer / last layer);
    ``ci_low``/``ci_high``: a percentile bootstrap 95% CI of the peak, resampling units
    (with all their prompts) within their category and re-selecting the peak layer in every
    resample; ``p``: the label-permutation p of the maximum over layers, permuting the units'
    labels (:func:`lamina.evidence.resampling.max_permutation_test`), with ``p_mc_error`` and
    ``exceedances``; ``p_wilcoxon`` and
    ``rank_biserial``: Wilcoxon signed-rank of per-prompt CI at the peak vs the first layer
    (paired by prompt; not corrected for choosing the peak); ``profile`` (m,);
    ``fraction_low``/``fraction_high``: percentiles of the re-selected peak's depth.
    """
    lab = np.asarray(labels)
    x = np.asarray(x, dtype=np.float64)
    _check_labelled(x, lab)
    D = distance_stack(x)
    n = len(lab)
    perm, boot = _peak_resampling(D, lab, units, n_permutations, n_bootstrap, seed)
    profile = ci_profile(D, lab)
    k = int(np.nanargmax(profile))
    depth = np.asarray(layers, dtype=float) / layers[-1]
    frac_lo, frac_hi = _depth_interval(depth, boot["peak_share"])
    per = convergence_index_per_prompt(x, lab)
    pw, rb = _peak_vs_first(per, k)
    return {
        "peak": float(profile[k]),
        "peak_layer": int(layers[k]),
        "peak_fraction": float(depth[k]),
        "fraction_low": float(frac_lo),
        "fraction_high": float(frac_hi),
        "ci_low": boot["ci_low"],
        "ci_high": boot["ci_high"],
        "standard_error": boot["standard_error"],
        "p": perm["p_value"],
        "p_mc_error": perm["mc_error"],
        "exceedances": perm["exceedances"],
        "n_permutations": n_permutations,
        "n_units": int(len(np.unique(units))) if units is not None else n,
        "p_wilcoxon": pw,
        "rank_biserial": rb,
        "profile": profile,
        "per_prompt": per,
        "peak_index": k,
    }


# ----------------------------------------------------------------------------- curvature
def curvature_test(
    mc: np.ndarray,
    family: Any,
    units: Any,
    *,
    n_tokens: Any | None = None,
    n_bootstrap: int = 2_000,
    seed: int = 0,
) -> dict[str, Any]:
    """Reasoning vs lexical mean curvature (radians), with the right independent unit.

    mc: (n,) per-prompt mean curvature; family: (n,) "reasoning"/"lexical"; units: (n,) the
    independent unit of each row (the base word of a lexical variant, the prompt itself for
    reasoning). Returns family means, their difference, percentile bootstrap 95% CIs that
    resample units within family (all variants of a base word together), the two-sided
    Mann-Whitney U test on unit means (p, rank-biserial) and, with ``n_tokens`` (n,), the
    length-adjusted difference: the family coefficient of OLS mc ~ 1 + reasoning +
    log(n_tokens), with its cluster bootstrap CI, and the length overlap of the families.
    """
    mc, fam, unit = np.asarray(mc, float), np.asarray(family), np.asarray(units)
    keep = np.isin(fam, ["reasoning", "lexical"]) & np.isfinite(mc)
    mc, fam, unit = mc[keep], fam[keep], unit[keep]
    a, b = fam == "reasoning", fam == "lexical"
    if a.sum() < 2 or b.sum() < 2:
        raise ValueError(f"need >= 2 reasoning and lexical prompts; got {a.sum()} and {b.sum()}")
    key = np.array([f"{f}:{u}" for f, u in zip(fam, unit, strict=True)])

    def mean_of(mask: np.ndarray) -> Any:
        return lambda i: float(np.mean(mc[i][mask[i]])) if mask[i].any() else np.nan

    def diff(i: np.ndarray) -> float:
        return float(np.mean(mc[i][a[i]]) - np.mean(mc[i][b[i]]))

    kw: dict[str, Any] = {"n_resamples": n_bootstrap, "seed": seed, "strata": fam, "clusters": key}
    ra, rb_, d = (index_bootstrap(f, len(mc), **kw) for f in (mean_of(a), mean_of(b), diff))
    ua = np.array([mc[key == k].mean() for k in dict.fromkeys(key[a])])
    ub = np.array([mc[key == k].mean() for k in dict.fromkeys(key[b])])
    mw = mann_whitney(ua, ub).iloc[0]
    out = {
        "reasoning": ra["estimate"],
        "reasoning_low": ra["ci_low"],
        "reasoning_high": ra["ci_high"],
        "lexical": rb_["estimate"],
        "lexical_low": rb_["ci_low"],
        "lexical_high": rb_["ci_high"],
        "difference": d["estimate"],
        "diff_low": d["ci_low"],
        "diff_high": d["ci_high"],
        "p": float(mw["p_value"]),
        "rank_biserial": float(mw["rank_biserial"]),
        "n_units": (len(ua), len(ub)),
    }
    if n_tokens is not None:
        tok = np.asarray(n_tokens, float)[keep]
        out.update(_length_adjusted(mc, a, tok, fam, key, n_bootstrap, seed))
    return out


def _length_adjusted(mc, a, tok, fam, key, n_bootstrap, seed) -> dict[str, Any]:
    ok = tok > 0
    if ok.sum() < 4 or len(np.unique(tok[ok])) < 2:
        return {"adjusted": np.nan, "adj_low": np.nan, "adj_high": np.nan, "length_overlap": 0}

    def coef(i: np.ndarray) -> float:
        i = i[ok[i]]
        X = np.column_stack([np.ones(i.size), a[i], np.log(tok[i])])
        if np.linalg.matrix_rank(X) < 3:
            return np.nan
        return float(np.linalg.lstsq(X, mc[i], rcond=None)[0][1])

    r = index_bootstrap(coef, len(mc), n_bootstrap, seed, strata=fam, clusters=key)
    lo = max(tok[ok & a].min(), tok[ok & ~a].min())
    hi = min(tok[ok & a].max(), tok[ok & ~a].max())
    overlap = int(np.sum(ok & (tok >= lo) & (tok <= hi))) if lo <= hi else 0
    return {
        "adjusted": r["estimate"],
        "adj_low": r["ci_low"],
        "adj_high": r["ci_high"],
        "length_overlap": overlap,
    }


# ----------------------------------------------------------------------------- bifurcation
def onset_from_difference(diff: np.ndarray, base: int, threshold: float = 0.1) -> float:
    """Onset layer of a separation profile: the first l > base where
    rise(l) = diff(l) - diff(base) reaches ``threshold`` x max_l rise(l); NaN when the
    profile never rises. diff: (m,) e.g. the mean over pairs of delta_amb - delta_ctl."""
    rise = diff - diff[base]
    top = np.nanmax(rise[base:])
    if not np.isfinite(top) or top <= 0:
        return np.nan
    hit = np.flatnonzero(rise[base + 1 :] >= threshold * top)
    return float(hit[0] + base + 1) if hit.size else np.nan


def _ci_keys(boot: dict[str, Any], name: str) -> dict[str, float]:
    """``{name}_low`` / ``{name}_high``: the CI of a bootstrap result."""
    return {f"{name}_low": boot["ci_low"], f"{name}_high": boot["ci_high"]}


def bifurcation_test(
    a: np.ndarray,
    b: np.ndarray,
    ca: np.ndarray,
    cb: np.ndarray,
    *,
    n_bootstrap: int = 2_000,
    seed: int = 0,
) -> dict[str, Any]:
    """Homograph pairs (a[i], b[i]) against their matched control pairs (ca[i], cb[i]).

    Each array (n_pairs, m, d), row i of all four from the same pair_id. delta(l) per pair
    from ``lamina.trajectory.bifurcation``; the paper's ratio r = delta(last) / delta(base),
    base = 0 unless some pair has delta(0) ~ 0 (then 1; ``base_defined`` False). On a model
    without position signal in its embedding layer (rotary: delta(0) = 0 for every pair)
    delta(1) is one block of context mixing for homographs and controls alike, so r is large
    for *any* pair: the paper's ratio is then undefined, and only the excess over the matched
    control is measured. ``excess`` = median over pairs of r_amb / r_ctl (the quantity the
    Wilcoxon tests; about 1 when controls separate as homographs do, whatever the base), with
    a percentile bootstrap CI over pairs. Paired over all pairs: Wilcoxon signed-rank of
    log r_amb - log r_ctl (p, rank-biserial). Medians of the ratios with percentile
    bootstrap CIs over pairs. Onset: :func:`onset_from_difference` of the mean over pairs of
    delta_amb - delta_ctl, with the ratio's base, as a fraction of the last layer index,
    bootstrap CI over pairs.
    """
    if not (len(a) == len(b) == len(ca) == len(cb)) or len(a) < 2:
        raise ValueError("bifurcation_test needs >= 2 pairs, each with its matched control pair")
    da, dc = _bifurcation(a, b).delta, _bifurcation(ca, cb).delta  # (n, m)
    base = 0 if (np.all(da[:, 0] > 1e-6) and np.all(dc[:, 0] > 1e-6)) else 1
    ra, rc = da[:, -1] / da[:, base], dc[:, -1] / dc[:, base]
    w = wilcoxon(np.log(ra), np.log(rc)).iloc[0]
    n, last = len(ra), da.shape[1] - 1
    kw: dict[str, Any] = {"n_resamples": n_bootstrap, "seed": seed}
    ba = index_bootstrap(lambda i: float(np.median(ra[i])), n, **kw)
    bc = index_bootstrap(lambda i: float(np.median(rc[i])), n, **kw)
    be = index_bootstrap(lambda i: float(np.median(ra[i] / rc[i])), n, **kw)
    bo = index_bootstrap(
        lambda i: onset_from_difference((da[i] - dc[i]).mean(0), base) / last, n, **kw
    )
    return {
        "ratio": float(np.median(ra)),
        **_ci_keys(ba, "ratio"),
        "control_ratio": float(np.median(rc)),
        **_ci_keys(bc, "control"),
        "excess": be["estimate"],
        **_ci_keys(be, "excess"),
        "log_ratio_difference": float(w["median_difference"]),
        "p": float(w["p_value"]),
        "rank_biserial": float(w["rank_biserial"]),
        "onset": bo["estimate"],
        **_ci_keys(bo, "onset"),
        "base_layer": base,
        "base_defined": base == 0,
        "n_zero_base": int(np.sum((da[:, 0] <= 1e-6) | (dc[:, 0] <= 1e-6))),
        "n_pairs": n,
        "delta": da,
        "control_delta": dc,
    }


# ----------------------------------------------------------------------------- phases
def three_phase_test(
    sim: np.ndarray, *, n_bootstrap: int = 2_000, seed: int = 0, units: Any | None = None
) -> dict[str, Any]:
    """The paper's fixed bands on per-unit SIM profiles, tested paired within units.

    sim: (n, L) SIM_i(l); units: (n,) the independent unit of each prompt (the base word of
    a lexical variant: its variants share the word; None: the prompt). Band means per prompt
    (``lamina.trajectory.fixed_phase_bands``), averaged over each unit's prompts;
    d1 = elaboration - encoding, d2 = elaboration - output preparation (paired per unit).
    Estimate: min(mean d1, mean d2), the margin by which elaboration exceeds both neighbours,
    with a percentile bootstrap CI over units; p = max of the two Wilcoxon signed-rank
    p-values over units (an intersection-union test: both must hold, no correction needed).
    Also ``band_means`` (3,), ``ordered`` (encoding < output < elaboration, GPT-2's order),
    ``n_units``.
    """
    sim = np.asarray(sim, float)
    bands = fixed_phase_bands(sim.shape[1])
    if len(np.unique(bands)) < 3:
        nan = np.nan
        return {"margin": nan, "margin_low": nan, "margin_high": nan, "p": None,
                "band_means": [], "ordered": None}
    m = np.stack([np.nanmean(sim[:, bands == k], axis=1) for k in range(3)], axis=1)  # (n, 3)
    if units is not None:
        u = np.asarray(units)
        m = np.stack([m[u == k].mean(0) for k in dict.fromkeys(u.tolist())])  # (units, 3)
    d1, d2 = m[:, 1] - m[:, 0], m[:, 1] - m[:, 2]

    def margin(i: np.ndarray) -> float:
        return float(min(d1[i].mean(), d2[i].mean()))

    boot = index_bootstrap(margin, len(m), n_bootstrap, seed)
    p1, p2 = (float(wilcoxon(d).iloc[0]["p_value"]) for d in (d1, d2))
    bm = m.mean(0)
    rb = min(wilcoxon(d1).iloc[0]["rank_biserial"], wilcoxon(d2).iloc[0]["rank_biserial"])
    return {
        "margin": boot["estimate"],
        "margin_low": boot["ci_low"],
        "margin_high": boot["ci_high"],
        "p": max(p1, p2),
        "rank_biserial": float(rb),
        "band_means": [float(v) for v in bm],
        "ordered": bool(bm[0] < bm[2] < bm[1]),
        "per_prompt": m,
        "n_units": len(m),
    }



# ----------------------------------------------------------------------------- dispatch
def bifurcation_rows(table: Any) -> tuple[np.ndarray, ...]:
    """Row indices (a, b, ca, cb) of each homograph pair's two contexts and of its control
    pair's, matched by ``pair_id``, in a long table with columns role ("ambiguous" /
    "control"), pair_id and sense ("ctx1" / "ctx2")."""
    t = table.reset_index(drop=True)
    cols = []
    for role in ("ambiguous", "control"):
        r = t[t["role"] == role]
        for sense in ("ctx1", "ctx2"):
            s = r[r["sense"] == sense]
            cols.append(dict(zip(s["pair_id"], s.index, strict=True)))
    common = [p for p in cols[0] if all(p in c for c in cols[1:])]
    return tuple(np.array([c[p] for p in common], dtype=int) for c in cols)


def item_units(table: Any) -> np.ndarray | None:
    """(n,) "category:item" for tables with an ``item`` column (the prompts of one item share
    its word: one independent unit), else None (each prompt is its own unit)."""
    if "item" not in table or table["item"].isna().any():
        return None
    return (table["category"].astype(str) + ":" + table["item"].astype(str)).to_numpy()


def units_of(table: Any) -> np.ndarray:
    """(n,) the independent unit of each row: the base word of a lexical variant, else the
    prompt's id (or its row number)."""
    ids = table["id"].astype(str).to_numpy() if "id" in table else np.arange(len(table)).astype(str)
    if "base" in table:
        return np.where(table["family"] == "lexical", "base:" + table["base"].astype(str), ids)
    return ids


class Resampling(TypedDict, total=False):
    """The resampling budget of a paper-1 test, as keyword arguments of :func:`paper1_test`,
    which passes them on to the chapter's test (whose own defaults hold for those left out:
    2,000 bootstrap resamples and permutations, seed 0): ``n_bootstrap`` (bootstrap resamples),
    ``n_permutations`` (permutations; the convergence test only) and ``seed``."""

    n_bootstrap: int
    n_permutations: int
    seed: int


def paper1_test(
    name: str,
    x: np.ndarray,
    table: Any,
    layers: list[int],
    *,
    n_tokens: Any | None = None,
    **budget: Unpack[Resampling],
) -> dict[str, Any]:
    """Run the test of chapter ``name`` ("convergence", "curvature", "bifurcation",
    "three_phase") on states x (n, m, d) of the rows of ``table`` with the resampling
    ``budget`` (:class:`Resampling`); the result also holds
    ``effect`` and ``effect_p``: the headline effect (peak CI; reasoning - lexical; median
    homograph ratio over its control's - 1; SIM margin) and its p, from which control fractions are taken."""
    ints = cast(dict[str, int], budget)  # every value of a Resampling is an int
    kw = {k: v for k, v in ints.items() if k != "n_permutations"}  # convergence's alone
    if name == "convergence":
        s = convergence_test(
            x, table["category"].to_numpy(), layers, units=item_units(table), **budget
        )
        s["effect"], s["effect_p"] = s["peak"], s["p"]
    elif name == "curvature":
        s = curvature_test(
            mean_curvature(x), table["family"].to_numpy(), units_of(table), n_tokens=n_tokens, **kw
        )
        s["effect"], s["effect_p"] = s["difference"], s["p"]
    elif name == "bifurcation":
        a, b, ca, cb = bifurcation_rows(table)
        s = bifurcation_test(x[a], x[b], x[ca], x[cb], **kw)
        s["effect"], s["effect_p"] = s["excess"] - 1, s["p"]
    elif name == "three_phase":
        s = three_phase_test(np.asarray(layerwise_cosine(x)), units=units_of(table), **kw)
        s["effect"], s["effect_p"] = s["margin"], s["p"]
    else:
        raise ValueError(f"unknown paper-1 test {name!r}")
    return s
