"""Verdicts on every claim of paper 2's abstract, from the tables of
:func:`lamina.chapters.weight_update_signature.run.run_weight_signature`.

Conventions: an enrichment summary over matrices is the geometric mean with a percentile
bootstrap 95% CI over matrices and a one-sample Wilcoxon signed-rank test of log enrichment
(:func:`lamina.evidence.stats.geometric_summary`). "Enriched" needs p < 0.05
(one-sided) and the whole CI above 1; "close to random" needs the CI inside
[1/m, m], m = ``config.random_margin`` (reimplementation choice).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as sps

from lamina.chapters.results import verdict
from lamina.chapters.weight_update_signature.causal_claims import causal_claims
from lamina.chapters.weight_update_signature.config import SignatureConfig
from lamina.chapters.weight_update_signature.mechanism_claims import mechanism_claims
from lamina.chapters.weight_update_signature.units import Units
from lamina.chapters.weight_update_signature.verdicts import (
    QK,
    WRITE,
    claim_row,
    close_verdict,
    combine,
    enriched_verdict,
    enrichments,
    mark_untestable,
    signature,
    summary,
)

__all__ = ["all_claims", "sensitivity"]


def sensitivity(model: str, deltas: pd.DataFrame, config: SignatureConfig) -> pd.DataFrame:
    """The two stage claims (Q/K enriched, writes random) re-decided at every k of the sweep,
    with both second moments and with the final-norm gain folded into W_U (``prediction``),
    per target stage; with the "RSF of W itself" baseline: ``qk_vs_weight`` = geo-mean
    RSF(ΔW)/RSF(W) over Q, K and its verdict (enriched beyond the matrix it updates)."""
    rows = []
    preds = sorted(deltas["prediction"].unique()) if "prediction" in deltas else ["W_U"]
    for moment in sorted(deltas["moment"].unique()):
        for pred in preds:
            for k in sorted(deltas["k"].unique()):
                for target in config.targets:
                    t = deltas[
                        (deltas["family"] == "stage")
                        & (deltas["pair"].str.endswith(f"→{target}"))
                    ]
                    where = {"k": int(k), "moment": moment, "prediction": pred}
                    qk = summary(enrichments(t, config, QK, **where), config)
                    wr = summary(enrichments(t, config, WRITE, **where), config)
                    if not len(enrichments(t, config, QK, **where)):
                        continue
                    vw = summary(
                        enrichments(t, config, QK, column="vs_weight", **where)
                        if "vs_weight" in t
                        else [],
                        config,
                    )
                    rows.append(
                        {
                            "model": model,
                            "stage": target,
                            "k": int(k),
                            "moment": moment,
                            "prediction": pred,
                            "qk_enrichment": qk["geo"],
                            "qk_verdict": enriched_verdict(qk),
                            "qk_vs_weight": vw["geo"],
                            "qk_vs_weight_verdict": enriched_verdict(vw),
                            "write_enrichment": wr["geo"],
                            "write_verdict": close_verdict(wr, config.random_margin),
                        }
                    )
    return pd.DataFrame(rows)


def all_claims(
    model: str,
    parts: dict[str, pd.DataFrame],
    config: SignatureConfig,
    ck: Units,
) -> pd.DataFrame:
    """One row per claim (× stage, objective or group) for one organism or real pair; see
    :data:`CLAIMS`. The claims in ``ck.untestable`` (a pair's: those that need the training
    history) get one "not testable" row each, with the reason as its note."""
    d, m = parts["deltas"], config.random_margin
    base = config.base
    rows = [
        claim_row(
            "shared_frame",
            model,
            "-",
            "framing",
            float("nan"),
            note="a choice of frame, not an empirical claim; every other row uses it",
        )
    ]
    aligned = [t for t in config.targets if t != "lm"] or list(config.targets)
    stage_rows = {}
    for t in config.targets:
        qk, wr, vq, vw = signature(d, config, family="stage", pair=f"{base}→{t}")
        stage_rows[t] = (qk, wr, vq, vw)
        if t in aligned:
            own = summary(
                enrichments(d, config, QK, column="vs_weight", family="stage", pair=f"{base}→{t}")
                if "vs_weight" in d
                else [],
                config,
            )
            rows.append(
                claim_row(
                    "align_qk_enriched",
                    model,
                    f"{base}→{t}",
                    "enriched (> 1)",
                    qk["geo"],
                    qk,
                    qk["p_greater"],
                    vq,
                    own["geo"],
                    "RSF(ΔW)/RSF(W) (baseline: W itself)",
                    note=f"vs W itself: {enriched_verdict(own)}"
                    + (
                        f" (CI {own['ci_low']:.2f}–{own['ci_high']:.2f})"
                        if np.isfinite(own["ci_low"])
                        else ""
                    ),
                    unit="enrichment (geo-mean over Q,K)",
                )
            )
            rows.append(
                claim_row(
                    "align_write_random",
                    model,
                    f"{base}→{t}",
                    "≈ 1 (random)",
                    wr["geo"],
                    wr,
                    wr["p_two"],
                    vw,
                    unit="enrichment (geo-mean over O, down)",
                )
            )
        rows.append(
            claim_row(
                "every_objective_signature",
                model,
                f"{base}→{t}",
                "Q/K > 1, writes ≈ 1",
                qk["geo"],
                qk,
                qk["p_greater"],
                combine([vq, vw]),
                wr["geo"],
                "write enrichment",
                unit="Q/K enrichment",
            )
        )
    qk, wr, vq, vw = signature(d, config, family="pretraining", phase="late")
    rows.append(
        claim_row(
            "late_pretraining_signature",
            model,
            "late pretraining",
            "Q/K > 1, writes ≈ 1",
            qk["geo"],
            qk,
            qk["p_greater"],
            combine([vq, vw]),
            wr["geo"],
            "write enrichment",
            unit="Q/K enrichment",
        )
    )
    # stage, not objective: writes differ between early and late pretraining; not across objectives
    early = enrichments(d, config, WRITE, family="pretraining", phase="early")
    late = enrichments(
        d, config, WRITE, family=["pretraining", "stage"], phase=["late", "alignment"]
    )
    obj_geo = [stage_rows[t][1]["geo"] for t in config.targets]
    spread = float(np.nanmax(obj_geo) / np.nanmin(obj_geo)) if obj_geo else float("nan")
    if len(early) and len(late):
        p = float(sps.mannwhitneyu(np.log(early), np.log(late)).pvalue)
        ratio = float(np.exp(np.log(early).mean() - np.log(late).mean()))
        ok = (
            all(
                stage_rows[t][2] == "reproduced" and stage_rows[t][3] == "reproduced"
                for t in config.targets
            )
            and spread <= m
        )
        word = "not reproduced" if ratio <= 1 else verdict(p, ok)
    else:
        p, ratio, word = None, float("nan"), "not testable"
    rows.append(
        claim_row(
            "stage_not_objective",
            model,
            "early vs late; objectives",
            "stage-specific",
            ratio,
            None,
            p,
            word,
            spread,
            "max/min write enrichment across objectives",
            unit="early/late write enrichment",
        )
    )
    rows += mechanism_claims(model, parts, config, ck)
    # a released instruction-tuned checkpoint (single.SingleCheckpoint) is itself aligned
    rows += causal_claims(
        model, parts, config, bool(getattr(ck, "aligned_base", False)),
        applied=hasattr(ck, "aligned_base"),
    )  # fmt: skip
    causal = [
        r["verdict"]
        for r in rows
        if r["claim_id"] in ("P2.write_edit_after_alignment", "P2.single_group_effective")
    ]
    rows = mark_untestable(rows, model, ck.untestable)
    rows.append(
        claim_row(
            "where_not_which",
            model,
            "-",
            "conclusion",
            float("nan"),
            word=combine(causal),
            note="conjunction of the write-edit and single-group verdicts",
        )
    )
    return pd.DataFrame(rows)
