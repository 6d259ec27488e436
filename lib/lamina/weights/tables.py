"""Figure data, tables and verdict sentences for the weight-update-signature chapter (pure
pandas; the charts that show them are in :mod:`~.views`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lamina.weights.measure import margin
from lamina.weights.measures_signature import qk_measure, writes_measure
from lamina.weights.settings import SignatureSettings
from lamina.weights.summaries import RowSelection, keep_layers

__all__ = [
    "ROLE_GROUPS",
    "adaptation_gain",
    "enrichment_curves",
    "finetune_summary",
    "mechanism_summary",
    "objective_signatures",
    "pretraining_trajectory",
    "sensitivity",
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


def enrichment_curves(deltas: pd.DataFrame, config: SignatureSettings) -> pd.DataFrame:
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


def pretraining_trajectory(deltas: pd.DataFrame, config: SignatureSettings) -> pd.DataFrame:
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


def mechanism_summary(
    gradients: pd.DataFrame, adam: pd.DataFrame, config: SignatureSettings
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


def objective_signatures(deltas: pd.DataFrame, config: SignatureSettings) -> pd.DataFrame:
    """The signature of each stage ΔW (every objective applied to one checkpoint): geometric-
    mean enrichment at k = ``config.k`` (main moment, prediction basis W_U) per model × pair
    (rows) and role group (columns: Q, K; V; MLP in; writes)."""
    t = keep_layers(deltas, config)
    t = t[t["family"].isin(["stage", "objective"]) & (t["k"] == config.k)]
    t = t[t["moment"] == ("centred" if config.centred else "raw")]
    if "prediction" in t:
        t = t[t["prediction"] == "W_U"]
    t = t.assign(group=t["role"].map(ROLE_GROUPS))
    out = t.groupby(["model", "pair", "group"], sort=False)["enrichment"].apply(_geo)
    return out.unstack("group")


def finetune_summary(curves: pd.DataFrame) -> pd.DataFrame:
    """Per model × applied objective: steps, examples and tokens read (NaN where a run does
    not count them), the training loss of the first and of the last step (nats, each before
    its update)."""
    if curves.empty:
        return pd.DataFrame(
            columns=["model", "objective", "steps", "examples", "tokens", "first loss", "last loss"]
        )
    # a run that does not count tokens (the applied objectives) reads n/a, not 0
    curves = curves.reindex(columns=list(dict.fromkeys([*curves.columns, "examples", "tokens"])))
    g = curves.sort_values("step").groupby(["model", "objective"], sort=False)

    def total(x: pd.Series) -> float:
        return float(x.sum(min_count=1))

    return g.agg(
        steps=("step", "max"),
        examples=("examples", total),
        tokens=("tokens", total),
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


def sensitivity(model: str, deltas: pd.DataFrame, s: SignatureSettings) -> pd.DataFrame:
    """The alignment-stage and applied-objective measurements re-made at every k of the sweep,
    with both second-moment conventions and with the final-norm gain folded into W_U
    (``prediction``): per row, the Q/K measurement against both baselines
    (:func:`lamina.weights.measures_signature.qk_measure`: ``qk``, its CI, p, and ``qk_vs_kd``
    the enrichment against k/d alone) and the write measurement (TOST within the declared
    margin: ``writes``, its CI, p). The verdicts at each k are the chapter's to judge."""
    rows = []
    preds = sorted(deltas["prediction"].unique()) if "prediction" in deltas else ["W_U"]
    pairs = deltas[deltas["family"].isin(["stage", "objective"])][["family", "pair"]].drop_duplicates()
    for moment in sorted(deltas["moment"].unique()):
        for pred in preds:
            for k in sorted(deltas["k"].unique()):
                for family, pair in pairs.itertuples(index=False):
                    where: RowSelection = {"k": int(k), "moment": moment, "prediction": pred,
                             "family": family, "pair": pair}  # fmt: skip
                    qk = qk_measure(deltas, s, **where)
                    if not qk["n_units"]:
                        continue
                    wr = writes_measure(deltas, s, margin(), **where)
                    rows.append({"model": model, "family": family, "stage": pair, "k": int(k),
                                 "moment": moment, "prediction": pred,
                                 **{f"qk_{f}": qk[f] for f in ("estimate", "ci_low", "ci_high", "p")},
                                 "qk_vs_kd": qk["effect_size"],
                                 **{f"writes_{f}": wr[f] for f in ("estimate", "ci_low", "ci_high", "p")}})  # fmt: skip
    return pd.DataFrame(rows)
