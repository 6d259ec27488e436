"""Figure data, tables and verdict sentences for the weight-update-signature chapter (pure
pandas; the charts that show them are in :mod:`~.views`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from lamina.book.chapter import claims_view
from lamina.chapters.weight_update_signature.config import SignatureConfig
from lamina.chapters.weight_update_signature.verdicts import keep_layers

__all__ = [
    "CLAIM_COLUMNS",
    "ROLE_GROUPS",
    "adaptation_gain",
    "claims_table",
    "describe",
    "enrichment_curves",
    "finetune_summary",
    "mechanism_summary",
    "objective_signatures",
    "pretraining_trajectory",
    "sensitivity_baselines",
    "sensitivity_course",
    "sensitivity_verdicts",
    "short_note",
    "write_gradient_course",
]


ROLE_GROUPS = {
    "q": "Q, K",
    "k": "Q, K",
    "v": "V",
    "mlp_gate": "MLP in",
    "mlp_up": "MLP in",
    "attn_out": "writes (O, down)",
    "mlp_out": "writes (O, down)",
}


def _geo(v: pd.Series) -> float:
    v = pd.to_numeric(v, errors="coerce").astype(float)  # an empty table's columns are objects
    v = v[np.isfinite(v) & (v > 0)]
    return float(np.exp(np.log(v).mean())) if len(v) else float("nan")


def enrichment_curves(deltas: pd.DataFrame, config: SignatureConfig) -> pd.DataFrame:
    """Geometric-mean enrichment per model × pair × role group × k (main moment, stage and
    early→late pairs), with the random-subspace null band (2.5/97.5 % of the draws, as
    enrichment, geometric mean over the group's matrices) and the mean enrichment of random
    Gaussian matrices against the same bases (``random_matrix``)."""
    t = keep_layers(deltas, config)
    t = t[
        (t["family"] != "pretraining") & (t["moment"] == ("centred" if config.centred else "raw"))
    ]
    t = t.assign(group=t["role"].map(ROLE_GROUPS))
    t = t.assign(
        null_low=t["null_q025"] / t["iso"],
        null_high=t["null_q975"] / t["iso"],
        random_matrix=t["rmat_mean"] / t["iso"],
    )
    out = t.groupby(["model", "pair", "group", "k"], sort=False).agg(
        enrichment=("enrichment", _geo),
        null_low=("null_low", _geo),
        null_high=("null_high", _geo),
        random_matrix=("random_matrix", _geo),
    )
    return out.reset_index()


def pretraining_trajectory(deltas: pd.DataFrame, config: SignatureConfig) -> pd.DataFrame:
    """Geometric-mean enrichment at k = ``config.k`` of every consecutive pretraining pair
    (x = its end step) per model and role group."""
    t = keep_layers(deltas, config)
    t = t[(t["family"] == "pretraining") & (t["k"] == config.k)]
    t = t[t["moment"] == ("centred" if config.centred else "raw")]
    t = t.assign(group=t["role"].map(ROLE_GROUPS))
    out = t.groupby(["model", "pair", "phase", "step_end", "group"], sort=False)[
        "enrichment"
    ].apply(_geo)
    return out.reset_index()


def _fmt(x: float) -> str:
    if x is None or not np.isfinite(x):
        return "n/a"
    if x == 0:
        return "0"
    return f"{x:.3g}" if abs(x) >= 1e-3 else f"{x:.1e}"


def short_note(note: str, limit: int = 110) -> str:
    """The reason a row carries, cut to what a verdict box needs: a failed alignment gate
    reads "alignment gate failed: <the failed check>" (``gate.gate_reason`` puts the check
    after "failed: "); any other note keeps its first clause, at most ``limit`` characters
    (the whole note is in the chapter's verdict table)."""
    note = str(note or "").strip().removeprefix("not testable: ")
    if "alignment did not take" in note and "failed: " in note:
        check = note.split("failed: ", 1)[1].split(":", 1)[0].split(";", 1)[0].strip()
        return f"alignment gate failed: {check}"
    first = note.split("; ", 1)[0].strip()
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def _stage_label(model: str, stage: str) -> str:
    """A row's stage without repeating its model: a leading "<model>" ("smollm2→sft" gives
    "→sft") and "@<model>" (the checkpoint of a real model, its only one) are dropped; "" for
    a row that is the model itself ("-")."""
    model, stage = str(model), str(stage or "")
    stage = stage.removeprefix(model) if stage.startswith(model + "→") else stage
    stage = " ".join(stage.replace(f"@{model}", "").split())
    return "" if stage == "-" else stage


def _valued(r: Any) -> str:
    s = f"{_stage_label(r.model, r.stage)} {r.verdict} {_fmt(r.measured)}".lstrip()
    if np.isfinite(r.ci_low):
        s += f" [{_fmt(r.ci_low)}, {_fmt(r.ci_high)}]"
    if np.isfinite(r.p):
        s += f" p = {_fmt(r.p)}"
    return s


def describe(claims: pd.DataFrame, claim_id: str) -> str:
    """A verdict box's text for a claim: the count of each verdict over its (model, stage)
    rows; then, per unit, each model once with its rows ("<stage> <verdict> <measured>
    [95% CI] p = …", rows joined by " · ", models by "; "); then the rows without a value,
    grouped by their reason (:func:`short_note`). The full rows (effect sizes, whole notes)
    are the chapter's verdict table."""
    rows = claims[claims["claim_id"] == f"P2.{claim_id}"]
    if rows.empty:
        return "no result (the model or its checkpoints were not available)"
    counts = rows["verdict"].value_counts()
    out = [f"{len(rows)} rows: " + ", ".join(f"{v} {n}" for v, n in counts.items()) + "."]
    has_value = np.isfinite(rows["measured"].to_numpy(dtype=float))
    for unit, group in rows[has_value].groupby("unit", sort=False):
        per_model = [
            f"{model}: " + " · ".join(_valued(r) for r in g.itertuples())
            for model, g in group.groupby("model", sort=False)
        ]
        out.append(f"{unit} [95% CI], p: " + "; ".join(per_model) + ".")
    by_reason: dict[str, list[str]] = {}
    for r in rows[~has_value].itertuples():
        reason = short_note(r.note) if r.note else "no value"
        label = f"{r.model} {_stage_label(r.model, r.stage)}".strip()
        by_reason.setdefault(f"{r.verdict} ({reason})", []).append(label)
    out += [f"{k}: {', '.join(v)}." for k, v in by_reason.items()]
    return " ".join(x[:1].upper() + x[1:] for x in out)  # each part a sentence


def mechanism_summary(
    gradients: pd.DataFrame, adam: pd.DataFrame, config: SignatureConfig
) -> pd.DataFrame:
    """Geometric-mean enrichment at k = ``config.k`` per model and matrix kind (read / write)
    of: the summed LM gradient, its per-token terms (mean and energy-pooled), and, from the
    optimiser state saved with ``config.base``, Adam's first moment and its update."""
    g = keep_layers(gradients, config)
    g = g[g["objective"] == "lm"]
    a = keep_layers(adam, config)
    a = a[a["state"] == config.base]
    out = []
    for (model, kind), t in g.groupby(["model", "kind"]):
        s = a[(a["model"] == model) & (a["kind"] == kind)]
        out.append(
            {
                "model": model,
                "kind": kind,
                "summed gradient": _geo(t["enrichment_summed"]),
                "per-token (mean)": _geo(t["enrichment_token_mean"]),
                "per-token (pooled)": _geo(t["enrichment_token_pooled"]),
                "Adam m": _geo(s["enrichment_momentum"]),
                "Adam update": _geo(s["enrichment_update"]),
                "median cancellation": float(t["cancellation"].median()),
            }
        )
    return pd.DataFrame(out)


def objective_signatures(deltas: pd.DataFrame, config: SignatureConfig) -> pd.DataFrame:
    """The signature of each stage ΔW (every objective applied to one checkpoint): geometric-
    mean enrichment at k = ``config.k`` (main moment, prediction basis W_U) per model × pair
    (rows) and role group (columns: Q, K; V; MLP in; writes)."""
    t = keep_layers(deltas, config)
    t = t[(t["family"] == "stage") & (t["k"] == config.k)]
    t = t[t["moment"] == ("centred" if config.centred else "raw")]
    if "prediction" in t:
        t = t[t["prediction"] == "W_U"]
    t = t.assign(group=t["role"].map(ROLE_GROUPS))
    out = t.groupby(["model", "pair", "group"], sort=False)["enrichment"].apply(_geo)
    return out.unstack("group")


def finetune_summary(curves: pd.DataFrame) -> pd.DataFrame:
    """Per model × applied objective: steps, examples and tokens read, the training loss of
    the first and of the last step (nats, each before its update)."""
    if curves.empty:
        return pd.DataFrame(
            columns=["model", "objective", "steps", "examples", "tokens", "first loss", "last loss"]
        )
    g = curves.sort_values("step").groupby(["model", "objective"], sort=False)
    return g.agg(
        steps=("step", "max"),
        examples=("examples", "sum"),
        tokens=("tokens", "sum"),
        **{"first loss": ("loss", "first"), "last loss": ("loss", "last")},
    ).reset_index().round(4)


def write_gradient_course(write_gradients: pd.DataFrame) -> pd.DataFrame:
    """The write matrices across pretraining, long: one row per model × step × matrix key ×
    quantity ("LM gradient": enrichment of the summed LM gradient in the prediction subspace;
    "weight itself": the weight's own enrichment there), the enrichment in ``value``."""
    return write_gradients.melt(
        id_vars=["model", "step", "key"],
        value_vars=["enrichment_summed", "weight_enrichment"],
        var_name="quantity",
    ).replace({"enrichment_summed": "LM gradient", "weight_enrichment": "weight itself"})


def adaptation_gain(adaptation: pd.DataFrame) -> pd.DataFrame:
    """Per model × trained group: the mean reduction of the SFT eval loss (nats, before minus
    after, over the adaptation's rows) and the group's parameter count (``n_params``)."""
    reduction = adaptation["loss_before"] - adaptation["loss_after"]
    return (
        adaptation.assign(reduction=reduction)
        .groupby(["model", "group"], as_index=False)
        .agg(reduction=("reduction", "mean"), n_params=("n_params", "first"))
    )


def sensitivity_course(sens: pd.DataFrame) -> pd.DataFrame:
    """The sensitivity rows with prediction basis W_U, long: one row per model × stage × k ×
    moment × matrices ("Q, K" or "writes"), the geometric-mean enrichment in ``value``."""
    main = sens[sens["prediction"] == "W_U"]
    return main.melt(
        id_vars=["model", "stage", "k", "moment"],
        value_vars=["qk_enrichment", "write_enrichment"],
        var_name="matrices",
    ).replace({"qk_enrichment": "Q, K", "write_enrichment": "writes"})


def sensitivity_verdicts(sens: pd.DataFrame) -> pd.DataFrame:
    """The Q/K stage verdict (prediction basis W_U) per model × stage × moment (rows) and k
    (columns)."""
    main = sens[sens["prediction"] == "W_U"]
    return main.pivot_table(
        index=["model", "stage", "moment"], columns="k", values="qk_verdict", aggfunc="first"
    )


def sensitivity_baselines(sens: pd.DataFrame, k: int) -> pd.DataFrame:
    """The sensitivity rows at ``k`` with both baselines (RSF of W itself: ``qk_vs_weight``;
    the final-norm gain: the prediction "W_U diag(gamma)" rows), rounded to 3 decimals."""
    columns = [
        "model", "stage", "moment", "prediction", "qk_enrichment", "qk_verdict", "qk_vs_weight",
        "qk_vs_weight_verdict", "write_enrichment", "write_verdict",
    ]  # fmt: skip
    return sens[sens["k"] == k][columns].round(3)


CLAIM_COLUMNS = [
    "model", "claim_id", "stage", "measured", "ci_low", "ci_high", "p", "verdict", "effect_size",
    "effect_name", "note",
]  # fmt: skip


def claims_table(claims: pd.DataFrame) -> pd.DataFrame:
    """The claims table as the chapter shows it: :func:`lamina.book.chapter.claims_view` with
    :data:`CLAIM_COLUMNS` (the stage and the effect's name and note beside each verdict)."""
    return claims_view(claims, CLAIM_COLUMNS)
