"""Shared machinery of the trajectory-geometry experiments (paper 1): the experiment config,
the default model set, representation conventions, state loading and claim records.

A *convention* says how a prompt's trajectory is built from a forward pass:

* ``pool``: "mean" over the prompt's non-padding tokens (paper text) or the "last" non-special
  token (released code; for an encoder it skips the trailing ``[SEP]``);
* ``layer0``: keep the embedding output h(0) (paper text) or drop it (released code);
* ``final``: the last state raw (the residual stream after block L, lamina's convention) or
  "post_norm" (after the model's final norm, as in Hugging Face's ``hidden_states[-1]``, which
  the released code uses);
* ``normalize``: L2-normalise every state before any metric.

All metrics live in :mod:`lamina.geometry`; this module only builds the state arrays.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from lamina.book import verdict

__all__ = [
    "CONVENTIONS",
    "Convention",
    "ExperimentResult",
    "TrajectoryConfig",
    "claim_record",
    "concat_tables",
    "default_peer_root",
    "expand_models",
    "load_chapter_prompts",
    "range_claim",
    "range_verdict",
    "tested_verdict",
]

DEFAULT_MODELS = ("organism-gpt2", "organism-llama", "minilm")
PEER_MODEL = "peer-gpt2"


@dataclass
class TrajectoryConfig:
    """Parameters of one trajectory-geometry experiment (serialised next to its results).

    model: "default" (the organisms, MiniLM and paper 1's released GPT-2 states when present)
        or one model name/path accepted by ``lamina.load_model``.
    pooling: the main convention's pooling, "mean" or "last".
    prompts: None for the chapter's default families, else a prompt file path or family name
        (comma-separated for several) read with ``lamina.prompts.load_prompts``.
    n_bootstrap: bootstrap resamples for 95% CIs (the paper used 10,000).
    n_permutations: label permutations / control draws for null distributions.
    seed: seeds every random draw (controls, bootstraps, random-init model).
    quick: few prompts and resamples, for CI.
    exclude_single_token: drop prompts that tokenise to one token from the main analysis
        (their last token is also their first, which in GPT-2 carries a massive activation).
    peer_root: folder of paper 1's released data; None for ``../shared/peer/latent-trajectories``.
    """

    model: str = "default"
    pooling: Literal["mean", "last"] = "mean"
    prompts: str | None = None
    n_bootstrap: int = 10_000
    n_permutations: int = 200
    seed: int = 0
    quick: bool = False
    exclude_single_token: bool = True
    peer_root: str | None = None

    def __post_init__(self) -> None:
        if self.pooling not in ("mean", "last"):
            raise ValueError(f"pooling must be 'mean' or 'last'; got {self.pooling!r}")
        if self.n_bootstrap < 10 or self.n_permutations < 1:
            raise ValueError("n_bootstrap must be >= 10 and n_permutations >= 1")
        if self.quick:
            self.n_bootstrap = min(self.n_bootstrap, 200)
            self.n_permutations = min(self.n_permutations, 20)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Convention:
    """How a trajectory is built (see the module docstring)."""

    pool: Literal["mean", "last"]
    layer0: bool = True
    final: Literal["raw", "post_norm"] = "raw"
    normalize: bool = False

    @property
    def label(self) -> str:
        parts = [f"{self.pool} token" if self.pool == "last" else "mean pool"]
        parts.append("with layer 0" if self.layer0 else "without layer 0")
        parts.append("post-norm final" if self.final == "post_norm" else "raw final")
        if self.normalize:
            parts.append("normalised")
        return ", ".join(parts)


CONVENTIONS: dict[str, Convention] = {
    "paper text": Convention("mean", True, "raw", False),
    "released code": Convention("last", False, "post_norm", False),
    "mean, post-norm final": Convention("mean", True, "post_norm", False),
    "last, with layer 0": Convention("last", True, "raw", False),
    "paper text, normalised": Convention("mean", True, "raw", True),
    "released code, normalised": Convention("last", False, "post_norm", True),
}


def default_peer_root() -> Path:
    """``<repo>/../shared/peer/latent-trajectories``."""
    return Path(__file__).resolve().parents[3].parent / "shared" / "peer" / "latent-trajectories"


def _peer_root(config: TrajectoryConfig) -> Path:
    return Path(config.peer_root) if config.peer_root else default_peer_root()


def expand_models(config: TrajectoryConfig) -> tuple[list[str], list[str]]:
    """The models to run and notes on those skipped.

    "default" -> the built organisms among ``DEFAULT_MODELS``, "minilm", and ``peer-<folder>``
    for every model folder released under ``peer_root`` (``lamina.peer``); any other value ->
    [that value].
    """
    if config.model != "default":
        return [config.model], []
    models, notes = [], []
    for name in DEFAULT_MODELS:
        if name.startswith("organism-"):
            from lamina import organisms

            try:
                organisms.resolve(name)
            except Exception as exc:  # not built yet: skip with a visible note
                notes.append(f"{name} skipped: {exc}")
                continue
        models.append(name)
    from lamina.peer import peer_models

    peer = _peer_root(config)
    released = peer_models(peer)  # peer-<folder> for every released model folder
    models.extend(released)
    if not released:
        notes.append(f"{PEER_MODEL} skipped: released data not found under {peer}")
    return models, notes


# ----------------------------------------------------------------------------- prompts
def load_chapter_prompts(
    config: TrajectoryConfig, families: list[str], required: list[str]
) -> pd.DataFrame:
    """The chapter's prompt table: ``config.prompts`` (file paths or family names, comma
    separated) or the default ``families``, concatenated. Raises ValueError naming a missing
    required column, and ``lamina.prompts.PromptFileError`` for a malformed file."""
    from lamina.prompts import load_prompts

    sources = [s.strip() for s in config.prompts.split(",")] if config.prompts else families
    frames = []
    for src in sources:
        if config.prompts and not Path(src).expanduser().is_file() and os.sep in src:
            raise FileNotFoundError(f"prompt file {src!r} does not exist")
        frames.append(load_prompts(src))
    table = pd.concat(frames, ignore_index=True)
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise ValueError(
            f"prompts {sources} lack the column(s) {missing} this chapter needs; "
            f"columns present: {list(table.columns)}"
        )
    return table


def subsample(table: pd.DataFrame, by: str, per_group: int, seed: int) -> pd.DataFrame:
    """At most ``per_group`` rows of each value of ``by`` (for quick mode), order kept."""
    rng = np.random.default_rng(seed)
    keep = []
    for _, idx in table.groupby(by, sort=False).indices.items():
        keep.extend(sorted(rng.choice(idx, size=min(per_group, len(idx)), replace=False)))
    return table.iloc[sorted(keep)].reset_index(drop=True)


# ----------------------------------------------------------------------------- claims
def range_verdict(
    ci_low: float, ci_high: float, lo: float, hi: float, estimate: float | None = None
) -> str:
    """Verdict for a claimed range [lo, hi] from a 95% CI [ci_low, ci_high] and the point
    estimate: "reproduced" when the estimate lies in the range (and so the CI overlaps it),
    "partially" when only the CI overlaps it (a wide CI is not a reproduction),
    "not reproduced" when the CI misses it, "not testable" when the CI is undefined.
    Without ``estimate``, the CI's midpoint stands in for it."""
    if not (np.isfinite(ci_low) and np.isfinite(ci_high)):
        return "not testable"
    if not (ci_low <= hi and ci_high >= lo):
        return "not reproduced"
    point = (ci_low + ci_high) / 2 if estimate is None or not np.isfinite(estimate) else estimate
    return "reproduced" if lo <= point <= hi else "partially"


def claim_record(
    claim_id: str,
    claim: str,
    paper_value: str,
    model: str,
    measured: float,
    ci_low: float = float("nan"),
    ci_high: float = float("nan"),
    p: float | None = None,
    effect_ok: bool | None = None,
    *,
    verdict_word: str | None = None,
    effect_size: float = float("nan"),
    effect_name: str = "",
    convention: str = "",
    direction_ok: bool = True,
) -> dict[str, Any]:
    """One row of a chapter's claims table (the scorecard's unit): verdict from ``p`` and
    ``effect_ok`` via ``lamina.book.verdict`` unless ``verdict_word`` is given; an effect of the
    opposite sign to the claim (``direction_ok=False``) is "not reproduced" however significant."""
    if verdict_word is None and not direction_ok:
        verdict_word = "not reproduced"
    return {
        "claim_id": claim_id,
        "claim": claim,
        "paper_value": paper_value,
        "model": model,
        "measured": float(measured),
        "ci_low": float(ci_low),
        "ci_high": float(ci_high),
        "p": float("nan") if p is None else float(p),
        "effect_size": float(effect_size),
        "effect_name": effect_name,
        "verdict": verdict_word or verdict(p, effect_ok),
        "convention": convention,
    }


def tested_verdict(p: float | None, effect_ok: bool | None, *, direction_ok: bool = True) -> str:
    """The verdict word that :func:`claim_record` gives a tested claim (no ``verdict_word``):
    ``lamina.book.verdict(p, effect_ok)``, or "not reproduced" for an effect of the wrong sign.
    Used for the sensitivity tables, whose rows are verdicts without a claims row."""
    return "not reproduced" if not direction_ok else verdict(p, effect_ok)


def range_claim(
    claim_id: str,
    claim: str,
    paper_value: str,
    model: str,
    estimate: float,
    ci_low: float,
    ci_high: float,
    claimed: tuple[float, float],
    *,
    convention: str = "",
) -> dict[str, Any]:
    """Claims row for "the quantity lies in the range ``claimed`` = (lo, hi)": the point
    ``estimate`` with its 95% CI [``ci_low``, ``ci_high``] (units of the quantity), judged by
    :func:`range_verdict`."""
    return claim_record(
        claim_id,
        claim,
        paper_value,
        model,
        estimate,
        ci_low,
        ci_high,
        verdict_word=range_verdict(ci_low, ci_high, *claimed, estimate),
        convention=convention,
    )


def concat_tables(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Stack per-model tables into one (fresh index); an empty frame when there are none."""
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


@dataclass
class ExperimentResult:
    """What an experiment returns: tidy tables (each with a ``model`` column), the claims table
    (see :func:`claim_record`), notes on skipped models or traps, and the config."""

    chapter: str
    config: TrajectoryConfig
    claims: pd.DataFrame
    tables: dict[str, pd.DataFrame]
    notes: list[str]
    models: list[str]

    def summary(self, model: str) -> dict[str, Any]:
        rows = self.claims[self.claims["model"] == model]
        return {
            "claims": rows.replace({np.nan: None}).to_dict(orient="records"),
            "notes": self.notes,
        }

    def write(self, root: str | os.PathLike | None = None) -> list[Path]:
        """``lamina.io.write_results`` once per model (tables filtered to that model)."""
        from lamina.io import write_results

        paths = []
        for model in self.models:
            tables = {
                k: v[v["model"] == model].reset_index(drop=True)
                for k, v in self.tables.items()
                if "model" in v.columns
            }
            paths.append(
                write_results(
                    self.chapter,
                    model,
                    summary=self.summary(model),
                    config=self.config.to_dict(),
                    tables=tables,
                    root=root,
                )
            )
        return paths
