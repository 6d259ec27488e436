"""The claim rows of paper 2's abstract and the rules that turn the measurements into verdicts.

Conventions: an enrichment summary over matrices is the geometric mean with a percentile
bootstrap 95% CI over matrices and a one-sample Wilcoxon signed-rank test of log enrichment
(:func:`lamina.evidence.stats.geometric_summary`). "Enriched" needs p < 0.05 (one-sided) and the whole CI above 1;
"close to random" needs the CI inside [1/m, m], m = ``config.random_margin``
(reimplementation choice). A Q/K update is "enriched" only beyond the RSF of the matrix it
updates (:func:`beyond_weight_verdict`): the k/d baseline alone cannot tell an update
concentrated in the subspace from one that inherits W's own concentration (ΔW ∝ W).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, Unpack

import numpy as np
import pandas as pd

from lamina.chapters.results import claim_record, verdict
from lamina.chapters.weight_update_signature.config import SignatureConfig
from lamina.evidence.stats import geometric_summary

__all__ = [
    "CLAIMS",
    "FRAMING",
    "QK",
    "RowOptions",
    "WRITE",
    "beyond_weight_verdict",
    "claim_row",
    "close_verdict",
    "combine",
    "enriched_verdict",
    "enrichments",
    "keep_layers",
    "mark_untestable",
    "signature",
    "summary",
    "weight_baseline",
]

FRAMING: dict[str, str] = {
    "shared_frame": "The residual stream gives every matrix a shared coordinate system in which a "
    "weight change can be compared with its input principal subspace and the prediction subspace",
}
"""The abstract's framing statements: the frame every row uses, not an empirical claim with a
statistic that could fail, so it has no row in the claims table and no verdict in the counts."""
CLAIMS: dict[str, str] = {
    "align_qk_enriched": "Alignment updates to the query and key matrices are enriched in the "
    "principal input subspace",
    "align_write_random": "Alignment updates to the output matrices are close to random relative "
    "to the prediction subspace",
    "late_pretraining_signature": "The same signature appears in late pretraining",
    "every_objective_signature": "The same signature appears under every objective applied to "
    "one checkpoint",
    "stage_not_objective": "The signature is a property of the training stage rather than of the "
    "objective",
    "read_grad_inherits": "Read gradients inherit the spectrum of the activations, the same under "
    "every objective",
    "write_grad_early_only": "Write gradients point into the prediction subspace only early in "
    "pretraining",
    "write_weights_acquire_early": "The output matrices acquire their prediction geometry early "
    "in pretraining",
    "raw_read_grad_follows": "The raw read gradient follows the activation spectrum",
    "optimizer_attenuates": "The optimiser attenuates the concentration it inherits",
    "cancellation_scale_not_direction": "Cancellation between tokens sets the scale of the "
    "update but not its direction",
    "write_edit_after_alignment": "A write direction derived from the unembedding still changes "
    "predictions after alignment",
    "single_group_effective": "Adaptation restricted to any single group of matrices remains "
    "effective",
    "where_not_which": "The signature describes where training places its updates, not which "
    "matrices can carry them",
}
QK, WRITE = ("q", "k"), ("attn_out", "mlp_out")


def enriched_verdict(s: dict[str, float]) -> str:
    """reproduced: p_greater < 0.05 and CI above 1; partially: one of them; else not."""
    if not np.isfinite(s["geo"]):
        return "not testable"
    if s["geo"] <= 1:
        return "not reproduced"
    return verdict(s["p_greater"], bool(s["ci_low"] > 1))


_RANK = {"not reproduced": 0, "partially": 1, "reproduced": 2}


def beyond_weight_verdict(
    iso: dict[str, float], own: dict[str, float] | None
) -> tuple[str, str]:
    """The Q/K enrichment verdict against both baselines -> (verdict, note).

    iso: :func:`summary` of enrichment = RSF(ΔW) / (k/d) over matrices; own: :func:`summary`
    of RSF(ΔW) / RSF(W) over the same matrices (W the start checkpoint's matrix, same
    subspace), or None / NaN when W's RSF was not measured. The verdict is the weaker of
    :func:`enriched_verdict` of each (order reproduced > partially > not reproduced): an
    update is "enriched" only if it beats isotropy *and* W's own concentration. Without W's
    RSF the isotropic verdict stands and the note says why the baseline is missing."""
    v_iso = enriched_verdict(iso)
    if own is None or not np.isfinite(own.get("geo", float("nan"))):
        return v_iso, "RSF of W itself not measured: judged against k/d only"
    v_own = enriched_verdict(own)
    ci = (
        f", CI {own['ci_low']:.3g}–{own['ci_high']:.3g}"
        if np.isfinite(own.get("ci_low", float("nan")))
        else ""
    )
    note = (
        f"vs k/d: {v_iso}; vs W itself: RSF(ΔW)/RSF(W) {own['geo']:.3g}{ci}, "
        f"p = {own['p_greater']:.3g}: {v_own}"
    )
    if v_iso == "not testable":
        return v_iso, note
    return min(v_iso, v_own, key=lambda w: _RANK.get(w, -1)), note


def close_verdict(s: dict[str, float], margin: float) -> str:
    """reproduced: the CI lies inside [1/margin, margin]; partially: the estimate does;
    not reproduced: it does not."""
    if not np.isfinite(s["geo"]):
        return "not testable"
    lo, hi = 1 / margin, margin
    if np.isfinite(s["ci_low"]) and lo <= s["ci_low"] and s["ci_high"] <= hi:
        return "reproduced"
    return "partially" if lo <= s["geo"] <= hi else "not reproduced"


def combine(words: list[str]) -> str:
    """Conjunction of verdicts: all reproduced -> reproduced; all not -> not; else partially."""
    words = [w for w in words if w != "not testable"]
    if not words:
        return "not testable"
    if all(w == "reproduced" for w in words):
        return "reproduced"
    return "not reproduced" if all(w == "not reproduced" for w in words) else "partially"


class RowOptions(TypedDict, total=False):
    """What a :func:`claim_row` may add to its measurement (each optional).

    s: a summary holding the 95% CI of ``measured`` ("ci_low", "ci_high"); p: the test's p;
    word: the verdict word (default "not testable"); effect / effect_name: a secondary effect
    size and what it measures; note: a free note; unit: the unit of ``measured``.
    """

    s: Mapping[str, Any] | None
    p: float | None
    word: str | None
    effect: float
    effect_name: str
    note: str
    unit: str


def claim_row(
    cid: str, model: str, stage: str, paper: str, measured: float, **kw: Unpack[RowOptions]
) -> dict[str, Any]:
    """One row of the chapter's claims table: claim ``cid`` of :data:`CLAIMS` (id "P2.<cid>")
    for ``model`` at ``stage`` (a checkpoint pair, objective or "-"), the paper's value
    ``paper`` and the ``measured`` value, with the options of :class:`RowOptions`.
    -> :func:`lamina.chapters.results.claim_record`'s row plus "stage", "unit" and "note"."""
    s = kw.get("s") or {}
    rec = claim_record(
        f"P2.{cid}",
        CLAIMS[cid],
        paper,
        model,
        measured,
        s.get("ci_low", float("nan")),
        s.get("ci_high", float("nan")),
        kw.get("p"),
        verdict_word=kw.get("word") or "not testable",
        effect_size=kw.get("effect", float("nan")),
        effect_name=kw.get("effect_name", ""),
    )
    rec |= {"stage": stage, "unit": kw.get("unit", ""), "note": kw.get("note", "")}
    return rec


def keep_layers(t: pd.DataFrame, config: SignatureConfig) -> pd.DataFrame:
    return t if config.layers is None else t[t["layer"].isin(config.layers)]


def enrichments(
    deltas: pd.DataFrame,
    config: SignatureConfig,
    roles,
    k: int | None = None,
    moment: str | None = None,
    prediction: str = "W_U",
    column: str = "enrichment",
    **where: Any,
) -> np.ndarray:
    """The ``column`` (enrichment, or ``vs_weight`` = RSF(ΔW)/RSF(W)) of the matrices of
    ``roles`` at k, second-moment convention ``moment`` and prediction basis ``prediction``
    ("W_U" or "W_U diag(gamma)"), filtered by ``where`` (column=value or list of values)."""
    t = keep_layers(deltas, config)
    t = t[(t["k"] == (k or config.k)) & t["role"].isin(roles)]
    t = t[t["moment"] == (moment or ("centred" if config.centred else "raw"))]
    if "prediction" in t.columns:
        t = t[t["prediction"] == prediction]
    for col, val in where.items():
        t = t[t[col].isin(val) if isinstance(val, list | tuple) else t[col] == val]
    return t[column].to_numpy()


def summary(values, config: SignatureConfig) -> dict[str, float]:
    return geometric_summary(values, config.n_bootstrap, config.seed)


def weight_baseline(deltas, config, **where) -> dict[str, float] | None:
    """:func:`summary` of RSF(ΔW)/RSF(W) (``vs_weight``) over the Q/K matrices of ``where``;
    None when the table has no ``vs_weight`` column."""
    if "vs_weight" not in deltas:
        return None
    return summary(enrichments(deltas, config, QK, column="vs_weight", **where), config)


def signature(deltas, config, **where) -> tuple[dict, dict, str, str]:
    """(Q/K enrichment summary, write enrichment summary, Q/K verdict, write verdict) of the
    rows of ``where``. The Q/K verdict is :func:`beyond_weight_verdict` (enriched beyond k/d
    and beyond W's own RSF); the write verdict :func:`close_verdict`."""
    qk = summary(enrichments(deltas, config, QK, **where), config)
    wr = summary(enrichments(deltas, config, WRITE, **where), config)
    vq, _ = beyond_weight_verdict(qk, weight_baseline(deltas, config, **where))
    return qk, wr, vq, close_verdict(wr, config.random_margin)


def mark_untestable(
    rows: list[dict[str, Any]], model: str, untestable: dict[str, str]
) -> list[dict[str, Any]]:
    """Replace the rows of each claim in ``untestable`` by one "not testable" row (at the place
    of its first row, else before the first row of a later claim of :data:`CLAIMS`) whose note
    is the reason."""
    out: list[dict[str, Any]] = []
    done: set[str] = set()
    for r in rows:
        cid = r["claim_id"].removeprefix("P2.")
        if cid not in untestable:
            out.append(r)
        elif cid not in done:
            out.append(
                claim_row(cid, model, "-", r["paper_value"], float("nan"), note=untestable[cid])
            )
            done.add(cid)
    order = list(CLAIMS)
    for cid, reason in untestable.items():
        if cid not in done:
            later = [
                i
                for i, r in enumerate(out)
                if order.index(r["claim_id"].removeprefix("P2.")) > order.index(cid)
            ]
            row = claim_row(cid, model, "-", "-", float("nan"), note=reason)
            out.insert(later[0] if later else len(out), row)
    return out
