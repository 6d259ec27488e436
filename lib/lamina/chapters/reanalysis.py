"""Reanalysis of paper 1's released GPT-2 states: which conventions give the released numbers
(curvature 0.94-1.27 rad, peak CI ~0.14) and which the paper's text (0.27-0.83 rad, 0.41-0.58)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from lamina.chapters.results import ExperimentResult, claim_record
from lamina.chapters.states import ModelStates, peer_states
from lamina.chapters.trajectory import CONVENTIONS, TrajectoryConfig, peer_root
from lamina.geometry import convergence_index_per_prompt, mean_curvature, trajectory_length

__all__ = ["peer_available", "run_reanalysis"]

PAPER_CURVATURE = (0.27, 0.83)
PAPER_CI = (0.41, 0.58)


PER_PROMPT = "metrics/phase_7_controls_metrics/gpt2_trajectory_metrics.csv"


def _per_prompt_match(ms: ModelStates, released: pd.DataFrame | None) -> pd.DataFrame:
    """Per convention: the largest |lamina - released| of per-prompt mean curvature (rad) and of
    raw length over the prompts of the released per-prompt metrics table."""
    rows: list[dict] = []
    if released is None:
        return pd.DataFrame(rows)
    rel = released.set_index("prompt_id")
    for name, conv in CONVENTIONS.items():
        if conv.pool not in ms.pools:
            continue
        pooled = ms.pools[conv.pool]
        ids = pooled.prompts["id"].tolist()
        common = [i for i in rel.index if i in ids]
        if not common:
            continue
        x = pooled.states(conv)[0][[ids.index(i) for i in common]]
        rows.append(
            {
                "model": "peer-gpt2",
                "convention": name,
                "n_prompts": len(common),
                "curvature_max_diff": float(
                    np.max(np.abs(mean_curvature(x) - rel.loc[common, "curvature"].to_numpy()))
                ),
                "length_max_diff": float(
                    np.max(np.abs(trajectory_length(x) - rel.loc[common, "length"].to_numpy()))
                ),
            }
        )
    return pd.DataFrame(rows)


def peer_available(config: TrajectoryConfig) -> bool:
    """Whether the released trajectories are under ``config.peer_root``."""
    return (peer_root(config) / "data" / "trajectories" / "gpt2").is_dir()


def _released(root: Path, rel: str) -> pd.DataFrame | None:
    path = root / "results" / rel
    return pd.read_csv(path) if path.is_file() else None


def run_reanalysis(config: TrajectoryConfig) -> ExperimentResult:
    """lamina's curvature and convergence index on the released last-token (170 prompts) and
    mean-pooled (50 prompts) GPT-2 states under every convention, beside the released tables
    (``results/statistics/bootstrap_ci.csv``, ``results/convergence_metrics.csv``). Raises
    FileNotFoundError when the released data are absent."""
    if not peer_available(config):
        raise FileNotFoundError(f"paper 1's released states are not under {peer_root(config)}")
    root = peer_root(config)
    ms = peer_states(config)
    rel_boot = _released(root, "statistics/bootstrap_ci.csv")
    rel_ci = _released(root, "convergence_metrics.csv")
    curv_rows, ci_rows, sens = [], [], []
    for name, conv in CONVENTIONS.items():
        if conv.pool not in ms.pools:
            continue
        pooled = ms.pools[conv.pool]
        x, layers = pooled.states(conv)
        mc = mean_curvature(x)
        cats = pooled.prompts["category"].to_numpy()
        for cat in ("animals", "objects", "reasoning"):
            curv_rows.append(
                {
                    "model": "peer-gpt2",
                    "convention": name,
                    "category": cat,
                    "mean_curvature": float(np.mean(mc[cats == cat])),
                }
            )
        ci = np.nanmean(convergence_index_per_prompt(x, cats), axis=0)
        ci_rows += [
            {"model": "peer-gpt2", "convention": name, "layer": layer, "ci": float(v)}
            for layer, v in zip(layers, ci, strict=True)
        ]
        means = [r["mean_curvature"] for r in curv_rows if r["convention"] == name]
        sens.append(
            {
                "model": "peer-gpt2",
                "convention": name,
                "definition": conv.label,
                "n_prompts": len(x),
                "curvature_min": min(means),
                "curvature_max": max(means),
                "peak_ci": float(np.nanmax(ci)),
                "peak_layer": int(layers[int(np.nanargmax(ci))]),
            }
        )
    curv = pd.DataFrame(curv_rows)
    table = pd.DataFrame(sens)
    claims = []
    if rel_boot is not None:  # category means of the released bootstrap table (for reference)
        rb = rel_boot[rel_boot["metric"] == "curvature"].set_index("category")["mean"]
        curv = curv.merge(rb.rename("released").reset_index(), on="category", how="left")
    match = _per_prompt_match(ms, _released(root, PER_PROMPT))
    if len(match):
        ours = match.set_index("convention").loc["released code"]
        claims.append(
            claim_record(
                "reanalysis_released_curvature",
                "lamina's curvature with the released code's convention gives the released "
                "per-prompt curvature",
                f"released per-prompt curvature ({int(ours['n_prompts'])} prompts)",
                "peer-gpt2",
                float(ours["curvature_max_diff"]),
                verdict_word="reproduced"
                if ours["curvature_max_diff"] < 1e-3
                else "not reproduced",
                effect_name="max |lamina - released| over prompts (rad)",
                convention=CONVENTIONS["released code"].label,
            )
        )
    best = table.loc[table["curvature_min"].idxmin()]
    in_paper = table[
        (table["curvature_min"] >= PAPER_CURVATURE[0])
        & (table["curvature_max"] <= PAPER_CURVATURE[1])
    ]
    chosen = in_paper.iloc[0] if len(in_paper) else best
    claims.append(
        claim_record(
            "reanalysis_paper_curvature",
            "Some convention gives the paper's curvature range on the released states",
            "0.27-0.83 rad",
            "peer-gpt2",
            float(chosen["curvature_min"]),
            float(chosen["curvature_min"]),
            float(chosen["curvature_max"]),
            verdict_word="reproduced" if len(in_paper) else "not reproduced",
            effect_name="lowest category mean (CI columns: lowest-highest) under the convention "
            "in the paper's range, else the lowest-curvature one",
            convention=str(chosen["convention"]),
        )
    )
    if rel_ci is not None:
        rc = rel_ci[rel_ci["model"] == "gpt2"].set_index("layer")["mean_tci"]
        ours = pd.DataFrame(ci_rows)
        ours = ours[ours["convention"] == "released code"].set_index("layer")["ci"]
        gap = float(np.nanmax(np.abs(ours.reindex(rc.index) - rc)))
        ci_rows = [
            dict(
                r,
                released=float(rc.get(r["layer"], np.nan))
                if r["convention"] == "released code"
                else np.nan,
            )
            for r in ci_rows
        ]
        claims.append(
            claim_record(
                "reanalysis_released_ci",
                "lamina's convergence index with the released convention gives the released profile",
                f"released peak {rc.max():.3f}",
                "peer-gpt2",
                gap,
                verdict_word="reproduced" if gap < 0.01 else "not reproduced",
                effect_name="max |lamina - released| over layers",
                convention=CONVENTIONS["released code"].label,
            )
        )
    claims.append(
        claim_record(
            "reanalysis_paper_ci",
            "Some convention gives the paper's peak CI on the released states",
            "0.41-0.58",
            "peer-gpt2",
            float(table["peak_ci"].max()),
            verdict_word="reproduced"
            if table["peak_ci"].max() >= PAPER_CI[0]
            else "not reproduced",
            effect_name="largest peak CI over conventions",
            convention=str(table.loc[table["peak_ci"].idxmax(), "convention"]),
        )
    )
    return ExperimentResult(
        "reanalysis",
        config,
        pd.DataFrame(claims),
        {
            "curvature": curv,
            "per_prompt_match": match,
            "convergence": pd.DataFrame(ci_rows),
            "sensitivity": table,
        },
        ms.notes,
        ["peer-gpt2"],
    )
