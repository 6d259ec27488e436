"""Paper 1's released prompts run through other models (by default the real pretrained causal
LMs installed offline), measured under every representation convention beside the released
GPT-2 states.

Only ``peer-gpt2`` has released values to match (the self-checks of
:mod:`lamina.trajectory.analyses.reanalysis`); the other models' rows are their own values. Per model and
convention (prompts = those released for peer-gpt2 under that convention's pooling):

* curvature: mean over prompts of the per-prompt mean turning angle (rad,
  :func:`lamina.trajectory.mean_curvature`), per released category and over all prompts;
* length: mean over prompts of the trajectory length (the model's state units,
  :func:`lamina.trajectory.trajectory_length`);
* peak convergence index: max over layers of the prompt-mean convergence index
  (:func:`lamina.trajectory.convergence_index_per_prompt`, chord units), the peak layer
  re-selected in every resample (:func:`lamina.evidence.resampling.peak_bootstrap`).

95% CIs are percentile bootstraps resampling prompts, stratified by released category.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from lamina.evidence.resampling import index_bootstrap, peak_bootstrap
from lamina.sources.gguf_models import installed_offline
from lamina.sources.models import load_model
from lamina.states.extract import extract, pool_token_states
from lamina.trajectory import mean_curvature, trajectory_length
from lamina.trajectory.convergence_stats import ci_profile, distance_stack
from lamina.trajectory.model_states import CONVENTIONS, Convention, ModelStates, PooledStates

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "PAPER_TEXT_RANGE",
    "RELEASED_TABLE",
    "ROLE_PEER",
    "ROLE_REAL",
    "convention_values",
    "convergence_profile",
    "curvature_range_summary",
    "extract_released_prompts",
    "headline_table",
    "real_models",
    "real_model_table",
    "released_range",
]

PAPER_TEXT_RANGE = (0.27, 0.83)  # rad, paper 1's text (lexical 0.27-0.31 ... reasoning 0.71-0.83)
RELEASED_TABLE = "results/statistics/bootstrap_ci.csv"  # under the peer root


def released_range(root: str | os.PathLike) -> tuple[float, float] | None:
    """The range of paper 1's released per-category mean curvature (rad, last token): the
    smallest and largest ``mean`` of the rows with metric "curvature" in the release's
    :data:`RELEASED_TABLE` (0.942-1.269 rad in the GPT-2 release). None when the release has
    no such table; ValueError naming the file when it lacks the columns or curvature rows."""
    path = Path(root) / RELEASED_TABLE
    if not path.is_file():
        return None
    t = pd.read_csv(path)
    if not {"metric", "mean"} <= set(t.columns):
        raise ValueError(f"{path}: needs columns metric and mean; has {list(t.columns)}")
    v = pd.to_numeric(t.loc[t["metric"] == "curvature", "mean"], errors="coerce").dropna()
    if v.empty:
        raise ValueError(f"{path}: no numeric curvature rows")
    return float(v.min()), float(v.max())
ROLE_PEER = "released GPT-2 states (released-value self-checks apply to these only)"
ROLE_REAL = "model's own value on the released prompts (no released value to match)"


def real_models(models: str | Sequence[str] | None) -> tuple[list[str], list[str]]:
    """The models to run on the released prompts and notes on those skipped.

    ``"default"`` -> the offline pretrained causal LMs (``smollm2-135m-instruct``,
    ``gemma-3-270m``) whose wheels are installed (a missing one is skipped with a note);
    ``[]`` or None -> none; one name or a list of names -> those (order kept, duplicates
    dropped; ``peer-*`` names are refused: the released states are already the reference). An
    offline GGUF model whose wheel is not installed is skipped with a note naming the command
    that installs it.
    Raises TypeError for another type."""
    if models is None:
        return [], []
    if isinstance(models, str):
        if models != "default":
            models = [models]
        else:
            return installed_offline()
    if not isinstance(models, (list, tuple)) or not all(isinstance(m, str) and m for m in models):
        raise TypeError(f"models must be 'default', a model name or a list of names; got {models!r}")
    bad = [m for m in models if m.startswith("peer-")]
    if bad:
        raise ValueError(f"{bad}: released states are the reference here; pass models to run")
    return installed_offline(models)


def extract_released_prompts(name: str, prompts: pd.DataFrame) -> ModelStates:
    """Model ``name``'s trajectories of the released prompts ``prompts["prompt"]`` (fp32, one
    forward pass per prompt with :func:`lamina.extract`, cached on disk), pooled by mean and by
    last content token, with the final state after the model's final norm kept beside the raw
    one (:func:`lamina.states.extract.pool_token_states`). No controls are run."""
    import torch

    model, tokenizer = load_model(name, dtype=torch.float32)
    cfg = model.config
    limit = getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", None)
    texts = prompts["prompt"].astype(str).tolist()
    tok = cast("PreTrainedTokenizerBase", tokenizer)
    traj = extract(model, tok, texts, pool="none", progress=False, cache=True, max_length=limit)
    pooled = pool_token_states(model, tok, texts, list(traj.states))
    table = prompts.reset_index(drop=True)
    pools = {
        pool: PooledStates(pooled[pool], pooled.get(f"{pool}_post"), True, table, pooled["n_content"])
        for pool in ("mean", "last")
    }
    notes = []
    if "mean_post" not in pooled:
        notes.append(f"{name}: no final norm (encoder); post-norm conventions equal raw ones.")
    return ModelStates(name, pools, None, {"has_final_norm": "mean_post" in pooled}, notes)


def _relation(lo: float, hi: float, rng: tuple[float, float]) -> str:
    """'inside' / 'outside' / 'overlaps' of the CI [lo, hi] against the range ``rng``."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "undefined"
    if rng[0] <= lo and hi <= rng[1]:
        return "inside"
    if hi < rng[0] or lo > rng[1]:
        return "outside"
    return "overlaps"



def _mean_at(values: np.ndarray, idx: np.ndarray) -> float:
    """Mean of ``values`` (n,) at the resampled indices ``idx`` (m,) ints."""
    return float(np.mean(values[idx]))

def convention_values(
    x: np.ndarray, cats: np.ndarray, n_bootstrap: int, seed: int
) -> list[dict[str, Any]]:
    """Curvature (per category and all), length and peak convergence index of states
    x (n, layers, d) with released categories ``cats`` (n,), each with a 95% CI resampling
    prompts (stratified by category). Rows: metric, category, n_prompts, estimate, ci_low,
    ci_high, peak_layer_index (convergence only)."""
    mc = mean_curvature(x)  # (n,) rad
    ln = trajectory_length(x)  # (n,) state units
    rows: list[dict[str, Any]] = []
    groups = [(str(c), cats == c) for c in pd.unique(cats)] + [("all", np.ones(len(x), bool))]
    for cat, mask in groups:
        vals = mc[mask]
        if vals.size < 2:
            continue
        strata = None if cat != "all" else cats
        b = index_bootstrap(partial(_mean_at, vals), vals.size, n_bootstrap, seed, strata=strata)
        rows.append({"metric": "curvature (rad)", "category": cat, "n_prompts": int(vals.size),
                     "estimate": b["estimate"], "ci_low": b["ci_low"], "ci_high": b["ci_high"]})
    b = index_bootstrap(partial(_mean_at, ln), len(x), n_bootstrap, seed, strata=cats)
    rows.append({"metric": "length", "category": "all", "n_prompts": len(x),
                 "estimate": b["estimate"], "ci_low": b["ci_low"], "ci_high": b["ci_high"]})

    profile = convergence_profile(x, cats)
    p = peak_bootstrap(profile, len(x), n_bootstrap, seed, strata=cats)
    rows.append({"metric": "peak convergence index", "category": "all", "n_prompts": len(x),
                 "estimate": p["estimate"], "ci_low": p["ci_low"], "ci_high": p["ci_high"],
                 "peak_layer_index": int(p["peak_index"])})
    return rows


def convergence_profile(x: np.ndarray, cats: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``profile(idx)`` -> (layers,) the prompt-mean of
    :func:`~lamina.trajectory.convergence_index_per_prompt` over the rows ``idx`` (a bootstrap
    resample, with repeats; a copy of a prompt is not its neighbour), from the distances of
    x (n, layers, d) computed once: :func:`lamina.trajectory.convergence_stats.ci_profile`, the estimator
    of the convergence chapter's own bootstrap."""
    return partial(ci_profile, distance_stack(np.asarray(x, dtype=np.float64)), np.asarray(cats))


def headline_table(table: pd.DataFrame) -> pd.DataFrame:
    """The all-prompt rows of :func:`real_model_table` as one row per (convention, model), a
    column per metric holding "estimate [ci_low, ci_high]" (3 significant decimals)."""
    rows = table[table["category"] == "all"].copy()
    rows["value"] = [f"{e:.3f} [{lo:.3f}, {hi:.3f}]" for e, lo, hi in
                     zip(rows["estimate"], rows["ci_low"], rows["ci_high"], strict=True)]
    order = list(dict.fromkeys(rows["model"]))
    wide = rows.pivot_table(index=["convention", "model", "n_prompts"], columns="metric",
                            values="value", aggfunc="first").reset_index()
    wide["_c"] = wide["convention"].map(list(CONVENTIONS).index)
    wide["_m"] = wide["model"].map(order.index)
    return wide.sort_values(["_c", "_m"]).drop(columns=["_c", "_m"]).reset_index(drop=True)


def _aligned(ms: ModelStates, ref: PooledStates, conv: Convention) -> tuple[np.ndarray, list[int]]:
    """``ms``'s states under ``conv`` for the reference's prompts (by id), in its order."""
    pooled = ms.pools[conv.pool]
    ids = pooled.prompts["id"].astype(str).tolist()
    pos = {p: k for k, p in enumerate(ids)}
    missing = [i for i in ref.prompts["id"].astype(str) if i not in pos]
    if missing:
        raise ValueError(f"{ms.name}: released prompt ids {missing[:3]} were not run")
    x, layers = pooled.states(conv)
    return x[[pos[i] for i in ref.prompts["id"].astype(str)]], layers


def real_model_table(
    peer: ModelStates,
    others: Sequence[ModelStates],
    n_bootstrap: int,
    seed: int,
    released: tuple[float, float] | None = None,
) -> pd.DataFrame:
    """Per model (peer first, then ``others``), convention and metric: the value with its
    95% CI over the released prompts of that convention's pooling. Columns: model, role
    (:data:`ROLE_PEER` / :data:`ROLE_REAL`), convention, metric, category, n_prompts, estimate,
    ci_low, ci_high, peak_layer (convergence), paper_text_range and released_range (curvature
    rows: the CI 'inside' / 'outside' / 'overlaps' 0.27-0.83 rad and ``released``, the
    release's range from :func:`released_range`; "" without it), released_low/released_high."""
    rows: list[dict[str, Any]] = []
    for name, conv in CONVENTIONS.items():
        if conv.pool not in peer.pools:
            continue
        ref = peer.pools[conv.pool]
        cats = ref.prompts["category"].astype(str).to_numpy()
        for ms in [peer, *others]:
            x, layers = ref.states(conv) if ms is peer else _aligned(ms, ref, conv)
            for r in convention_values(x, cats, n_bootstrap, seed):
                peak = r.pop("peak_layer_index", None)
                curv = r["metric"].startswith("curvature")
                rows.append({
                    "model": ms.name, "role": ROLE_PEER if ms is peer else ROLE_REAL,
                    "convention": name, **r,
                    "peak_layer": layers[peak] if peak is not None else np.nan,
                    "paper_text_range": _relation(r["ci_low"], r["ci_high"], PAPER_TEXT_RANGE)
                    if curv else "", "released_range": _relation(r["ci_low"], r["ci_high"],
                                                                 released)
                    if curv and released else "",
                    "released_low": released[0] if released else np.nan,
                    "released_high": released[1] if released else np.nan,
                })
    return pd.DataFrame(rows)


def curvature_range_summary(table: pd.DataFrame) -> list[str]:
    """One sentence per model of ``table`` (:func:`real_model_table`): the conventions under
    which every category's curvature CI lies inside the paper text's 0.27-0.83 rad, and those
    under which every one lies inside the release's range (the table's released_low /
    released_high; omitted when the release has no curvature table)."""
    out = []
    curv = table[(table["metric"] == "curvature (rad)") & (table["category"] != "all")]
    for model, g in curv.groupby("model", sort=False):
        text = [c for c, h in g.groupby("convention", sort=False)
                if (h["paper_text_range"] == "inside").all()]
        rel = [c for c, h in g.groupby("convention", sort=False)
               if (h["released_range"] == "inside").all()]
        lo, hi = (g["released_low"].iloc[0], g["released_high"].iloc[0]) if (
            "released_low" in g) else (np.nan, np.nan)
        released = (
            f", and inside the released {lo:.2f}–{hi:.2f} rad under "
            f"{', '.join(rel) if rel else 'no convention'}" if np.isfinite(lo) else "")
        out.append(
            f"{model}: every category's 95% CI lies inside the paper text's "
            f"{PAPER_TEXT_RANGE[0]}–{PAPER_TEXT_RANGE[1]} rad under "
            f"{', '.join(text) if text else 'no convention'}{released} "
            f"(of {g['convention'].nunique()} conventions)."
        )
    return out
