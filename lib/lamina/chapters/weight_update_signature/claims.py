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
from lamina.chapters.weight_update_signature.gate import GateArg, gate_for, gate_rows
from lamina.chapters.weight_update_signature.mechanism_claims import mechanism_claims
from lamina.chapters.weight_update_signature.units import Units
from lamina.chapters.weight_update_signature.verdicts import (
    QK,
    WRITE,
    beyond_weight_verdict,
    claim_row,
    close_verdict,
    combine,
    enriched_verdict,
    enrichments,
    mark_untestable,
    signature,
    summary,
    weight_baseline,
)

__all__ = ["all_claims", "sensitivity", "stage_claims"]


def sensitivity(model: str, deltas: pd.DataFrame, config: SignatureConfig) -> pd.DataFrame:
    """The two stage claims (Q/K enriched, writes random) re-decided at every k of the sweep,
    with both second moments and with the final-norm gain folded into W_U (``prediction``),
    per target stage; with the "RSF of W itself" baseline: ``qk_vs_weight`` = geo-mean
    RSF(ΔW)/RSF(W) over Q, K and its verdict (enriched beyond the matrix it updates).
    ``qk_verdict`` is the claim's rule, :func:`~.verdicts.beyond_weight_verdict` (the weaker
    of the k/d and the W-itself verdicts)."""
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
                            "qk_verdict": beyond_weight_verdict(qk, vw if "vs_weight" in t else None)[0],
                            "qk_vs_weight": vw["geo"],
                            "qk_vs_weight_verdict": enriched_verdict(vw),
                            "write_enrichment": wr["geo"],
                            "write_verdict": close_verdict(wr, config.random_margin),
                        }
                    )
    return pd.DataFrame(rows)


def _alignment_rows(
    model: str, d: pd.DataFrame, config: SignatureConfig, t: str, qk, wr, vw
) -> list[dict]:
    """The two alignment-stage rows (Q/K enriched beyond k/d and W's own RSF; writes close
    to random) of the stage pair base -> ``t``."""
    pair = f"{config.base}→{t}"
    own = weight_baseline(d, config, family="stage", pair=pair)
    vq, note = beyond_weight_verdict(qk, own)
    return [
        claim_row(
            "align_qk_enriched", model, pair, "enriched (> 1)", qk["geo"], s=qk, p=qk["p_greater"],
            word=vq, effect=own["geo"] if own else float("nan"),
            effect_name="RSF(ΔW)/RSF(W) (baseline: W itself)", note=note,
            unit="enrichment (geo-mean over Q,K)",
        ),
        claim_row(
            "align_write_random", model, pair, "≈ 1 (random)", wr["geo"], s=wr, p=wr["p_two"], word=vw,
            unit="enrichment (geo-mean over O, down)",
        ),
    ]  # fmt: skip


def _stage_not_objective(
    model: str, d: pd.DataFrame, config: SignatureConfig, stage_rows: dict
) -> dict:
    """Writes differ between early and late pretraining, not across objectives."""
    m = config.random_margin
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
    return claim_row(
        "stage_not_objective", model, "early vs late; objectives", "stage-specific", ratio,
        p=p, word=word, effect=spread, effect_name="max/min write enrichment across objectives",
        unit="early/late write enrichment",
    )  # fmt: skip


def _where_not_which(model: str, rows: list[dict]) -> dict:
    """The conclusion: the conjunction of the write-edit and single-group verdicts; not
    testable when either has no testable row (a conjunction needs both halves)."""
    parts = {}
    for cid in ("write_edit_after_alignment", "single_group_effective"):
        words = [r["verdict"] for r in rows if r["claim_id"] == f"P2.{cid}"]
        parts[cid] = [w for w in words if w != "not testable"]
    missing = [cid for cid, words in parts.items() if not words]
    if missing:
        return claim_row(
            "where_not_which", model, "-", "conclusion", float("nan"),
            note=f"conjunction of the write-edit and single-group verdicts; no testable "
            f"{' or '.join(missing)} row",
        )  # fmt: skip
    return claim_row(
        "where_not_which", model, "-", "conclusion", float("nan"),
        word=combine(parts["write_edit_after_alignment"] + parts["single_group_effective"]),
        note="conjunction of the write-edit and single-group verdicts",
    )  # fmt: skip


def stage_claims(
    model: str, d: pd.DataFrame, config: SignatureConfig, gate: GateArg = None
) -> tuple[list[dict], dict[str, tuple]]:
    """The rows of the stage pairs base -> each target of ``config.targets``, from the deltas
    table ``d`` (:func:`~.deltas.organism_deltas`): for each aligned target (every target but
    ``lm``) the alignment rows (Q/K enriched beyond k/d and W's own RSF; writes close to
    random), gated by that target's gate (:func:`~.gate.gate_rows`), and for every target the
    objective row. -> (rows, {target: (qk summary, write summary, qk verdict, write verdict)})."""
    aligned = [t for t in config.targets if t != "lm"] or list(config.targets)
    stage_rows, rows = {}, []
    for t in config.targets:
        qk, wr, vq, vw = signature(d, config, family="stage", pair=f"{config.base}→{t}")
        stage_rows[t] = (qk, wr, vq, vw)
        if t in aligned:
            rows += gate_rows(
                _alignment_rows(model, d, config, t, qk, wr, vw), gate_for(gate, t)
            )
        rows.append(
            claim_row(
                "every_objective_signature", model, f"{config.base}→{t}",
                "Q/K > 1, writes ≈ 1", qk["geo"], s=qk, p=qk["p_greater"], word=combine([vq, vw]),
                effect=wr["geo"], effect_name="write enrichment", unit="Q/K enrichment",
            )  # fmt: skip
        )
    return rows, stage_rows


def all_claims(
    model: str,
    parts: dict[str, pd.DataFrame],
    config: SignatureConfig,
    ck: Units,
    gate: GateArg = None,
) -> pd.DataFrame:
    """One row per claim (× stage, objective or group) for one organism or real pair; see
    :data:`CLAIMS` (the framing statements of :data:`FRAMING` get none). The claims in
    ``ck.untestable`` (a pair's: those that need the training history) get one "not
    testable" row each, with the reason as its note.

    gate: the behavioural gate of the aligned checkpoints (:mod:`~.gate`): one
    :class:`~.gate.AlignmentGate` for all, a mapping {target stage or label: gate}, or None
    (not measured). The rows of :data:`~.gate.ALIGNMENT_CLAIMS` of a checkpoint whose gate
    failed or was not measured read "not testable" with the gate's values."""
    d = parts["deltas"]
    rows, stage_rows = stage_claims(model, d, config, gate)
    qk, wr, vq, vw = signature(d, config, family="pretraining", phase="late")
    rows.append(
        claim_row(
            "late_pretraining_signature", model, "late pretraining", "Q/K > 1, writes ≈ 1",
            qk["geo"], s=qk, p=qk["p_greater"], word=combine([vq, vw]), effect=wr["geo"],
            effect_name="write enrichment", unit="Q/K enrichment",
        )  # fmt: skip
    )
    rows.append(_stage_not_objective(model, d, config, stage_rows))
    rows += mechanism_claims(model, parts, config, ck)
    # a released instruction-tuned checkpoint (single.SingleCheckpoint) is itself aligned
    rows += causal_claims(
        model, parts, config, bool(getattr(ck, "aligned_base", False)),
        applied=hasattr(ck, "aligned_base"), gate=gate,
    )  # fmt: skip
    rows = mark_untestable(rows, model, ck.untestable)
    rows.append(_where_not_which(model, rows))
    return pd.DataFrame(rows)
