"""Verdicts on every claim of paper 2's abstract, from the tables of
:func:`lamina.experiments.weight_signature.run_weight_signature`.

Conventions: an enrichment summary over matrices is the geometric mean with a percentile
bootstrap 95% CI over matrices and a one-sample Wilcoxon signed-rank test of log enrichment
(:func:`lamina.experiments.weight_signature.geometric_summary`). "Enriched" needs p < 0.05
(one-sided) and the whole CI above 1; "close to random" needs the CI inside
[1/m, m], m = ``config.random_margin`` (reimplementation choice).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from lamina.book import verdict
from lamina.experiments.trajectory import claim_record

if TYPE_CHECKING:
    from lamina.experiments.weight_signature import Checkpoints, ModelPair, SignatureConfig

__all__ = [
    "CLAIMS",
    "all_claims",
    "close_verdict",
    "combine",
    "enriched_verdict",
    "geometric_summary",
    "sensitivity",
]

CLAIMS: dict[str, str] = {
    "shared_frame": "The residual stream gives every matrix a shared coordinate system in which a "
    "weight change can be compared with its input principal subspace and the prediction subspace",
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


def _row(
    cid: str,
    model: str,
    stage: str,
    paper: str,
    measured: float,
    s: dict | None = None,
    p: float | None = None,
    word: str | None = None,
    effect: float = float("nan"),
    effect_name: str = "",
    note: str = "",
    unit: str = "",
) -> dict[str, Any]:
    rec = claim_record(
        f"P2.{cid}",
        CLAIMS[cid],
        paper,
        model,
        measured,
        (s or {}).get("ci_low", float("nan")),
        (s or {}).get("ci_high", float("nan")),
        p,
        verdict_word=word or "not testable",
        effect_size=effect,
        effect_name=effect_name,
    )
    rec |= {"stage": stage, "unit": unit, "note": note}
    return rec


def _keep_layers(t: pd.DataFrame, config: SignatureConfig) -> pd.DataFrame:
    return t if config.layers is None else t[t["layer"].isin(config.layers)]


def _enr(
    deltas: pd.DataFrame,
    config: SignatureConfig,
    roles,
    k: int | None = None,
    moment: str | None = None,
    **where: Any,
) -> np.ndarray:
    t = _keep_layers(deltas, config)
    t = t[(t["k"] == (k or config.k)) & t["role"].isin(roles)]
    t = t[t["moment"] == (moment or ("centred" if config.centred else "raw"))]
    for col, val in where.items():
        t = t[t[col].isin(val) if isinstance(val, list | tuple) else t[col] == val]
    return t["enrichment"].to_numpy()


def _summary(values, config: SignatureConfig) -> dict[str, float]:
    return geometric_summary(values, config.n_bootstrap, config.seed)


def _signature(deltas, config, **where) -> tuple[dict, dict, str, str]:
    qk = _summary(_enr(deltas, config, QK, **where), config)
    wr = _summary(_enr(deltas, config, WRITE, **where), config)
    return qk, wr, enriched_verdict(qk), close_verdict(wr, config.random_margin)


def sensitivity(model: str, deltas: pd.DataFrame, config: SignatureConfig) -> pd.DataFrame:
    """The two stage claims (Q/K enriched, writes random) re-decided at every k of the sweep
    and with both second moments, per target stage."""
    rows = []
    for moment in sorted(deltas["moment"].unique()):
        for k in sorted(deltas["k"].unique()):
            for target in config.targets:
                t = deltas[
                    (deltas["family"] == "stage") & (deltas["pair"].str.endswith(f"→{target}"))
                ]
                qk = _summary(_enr(t, config, QK, k=int(k), moment=moment), config)
                wr = _summary(_enr(t, config, WRITE, k=int(k), moment=moment), config)
                rows.append(
                    {
                        "model": model,
                        "stage": target,
                        "k": int(k),
                        "moment": moment,
                        "qk_enrichment": qk["geo"],
                        "qk_verdict": enriched_verdict(qk),
                        "write_enrichment": wr["geo"],
                        "write_verdict": close_verdict(wr, config.random_margin),
                    }
                )
    return pd.DataFrame(rows)


def all_claims(
    model: str,
    parts: dict[str, pd.DataFrame],
    config: SignatureConfig,
    ck: Checkpoints | ModelPair,
) -> pd.DataFrame:
    """One row per claim (× stage, objective or group) for one organism or real pair; see
    :data:`CLAIMS`. The claims in ``ck.untestable`` (a pair's: those that need the training
    history) get one "not testable" row each, with the reason as its note."""
    d, m = parts["deltas"], config.random_margin
    base = config.base
    rows = [
        _row(
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
        qk, wr, vq, vw = _signature(d, config, family="stage", pair=f"{base}→{t}")
        stage_rows[t] = (qk, wr, vq, vw)
        if t in aligned:
            rows.append(
                _row(
                    "align_qk_enriched",
                    model,
                    f"{base}→{t}",
                    "enriched (> 1)",
                    qk["geo"],
                    qk,
                    qk["p_greater"],
                    vq,
                    unit="enrichment (geo-mean over Q,K)",
                )
            )
            rows.append(
                _row(
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
            _row(
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
    qk, wr, vq, vw = _signature(d, config, family="pretraining", phase="late")
    rows.append(
        _row(
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
    early = _enr(d, config, WRITE, family="pretraining", phase="early")
    late = _enr(d, config, WRITE, family=["pretraining", "stage"], phase=["late", "alignment"])
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
        _row(
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
    from lamina.experiments.weight_signature_causal import causal_claims
    from lamina.experiments.weight_signature_mechanism import mechanism_claims

    rows += mechanism_claims(model, parts, config, ck)
    rows += causal_claims(model, parts, config)
    causal = [
        r["verdict"]
        for r in rows
        if r["claim_id"] in ("P2.write_edit_after_alignment", "P2.single_group_effective")
    ]
    rows = _mark_untestable(rows, model, ck.untestable)
    rows.append(
        _row(
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


def _mark_untestable(
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
            out.append(_row(cid, model, "-", r["paper_value"], float("nan"), note=untestable[cid]))
            done.add(cid)
    order = list(CLAIMS)
    for cid, reason in untestable.items():
        if cid not in done:
            later = [
                i
                for i, r in enumerate(out)
                if order.index(r["claim_id"].removeprefix("P2.")) > order.index(cid)
            ]
            row = _row(cid, model, "-", "-", float("nan"), note=reason)
            out.insert(later[0] if later else len(out), row)
    return out


def geometric_summary(values: Any, n_bootstrap: int, seed: int) -> dict[str, float]:
    """Geometric mean of positive ratios (e.g. enrichments) with a percentile bootstrap 95% CI
    over the values (matrices), and the one-sample Wilcoxon signed-rank p of log(value) = 0
    (two-sided) and > 0 (greater). -> {geo, ci_low, ci_high, p_two, p_greater, p_less, n}."""
    from scipy import stats as sps

    from lamina.stats import bootstrap_ci

    x = np.log(np.asarray(values, dtype=np.float64))
    x = x[np.isfinite(x)]
    out = {
        "geo": float("nan"),
        "ci_low": float("nan"),
        "ci_high": float("nan"),
        "p_two": float("nan"),
        "p_greater": float("nan"),
        "p_less": float("nan"),
        "n": len(x),
    }
    if len(x) == 0:
        return out
    out["geo"] = float(np.exp(x.mean()))
    if len(x) >= 2 and np.ptp(x) > 0:
        b = bootstrap_ci(x, n_resamples=n_bootstrap, seed=seed, method="percentile").iloc[0]
        out["ci_low"], out["ci_high"] = float(np.exp(b["ci_low"])), float(np.exp(b["ci_high"]))
        for alt in ("two-sided", "greater", "less"):
            key = "p_two" if alt == "two-sided" else f"p_{alt}"
            out[key] = float(sps.wilcoxon(x, alternative=alt).pvalue)
    return out
