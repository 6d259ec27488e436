"""The layer orders Growth Training trains in: skip-ablation importance of an organism, of a
brief pretraining of the trained architecture, or of a real pretrained model mapped by depth.

Importance of layer l is the skip ablation's perplexity change
(:func:`lamina.anatomy.ablation.ablation_sweep`, surgery "skip")::

    delta_pct(l) = 100 (ppl with layer l skipped / clean ppl - 1)        (percent)

A real model of R layers maps onto the trained model's L layers by relative depth
(:func:`depth_map`): trained layer l covers [l/L, (l+1)/L), real layer r covers [r/R, (r+1)/R),
and l's importance is the overlap-weighted mean of the real layers overlapping it (a
reimplementation choice).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np
import pandas as pd
import torch
from scipy import stats

from lamina.anatomy.ablation import ablation_sweep
from lamina.anatomy.heldout import heldout_text
from lamina.sources.models import get_adapter, load_model

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["depth_map", "random_order", "rank_correlations", "real_importance", "real_label"]


def random_order(n_layers: int, seed: int) -> np.ndarray:
    """(n_layers,) the random-order control's layer scores for training seed ``seed``: a
    permutation of 0..n_layers-1 drawn from ``default_rng(seed + 4242)``, fresh per seed."""
    return np.random.default_rng(int(seed) + 4242).permutation(n_layers).astype(float)


def depth_map(values: np.ndarray, n_layers: int) -> np.ndarray:
    """(R,) per-layer values of an R-layer model -> (n_layers,) by relative depth.

    mapped[l] = sum_r w[l, r] values[r] / sum_r w[l, r], with w[l, r] the length of the
    overlap of [l/L, (l+1)/L) and [r/R, (r+1)/R) (L = n_layers). R = L is the identity; a
    real model deeper than L averages about R/L of its layers into each trained layer."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"values must be a non-empty 1-D array, got shape {v.shape}")
    if n_layers < 1:
        raise ValueError(f"n_layers must be >= 1, got {n_layers}")
    r = v.size
    edges_l = np.arange(n_layers + 1) / n_layers  # (L + 1,)
    edges_r = np.arange(r + 1) / r  # (R + 1,)
    lo = np.maximum(edges_l[:-1, None], edges_r[None, :-1])  # (L, R)
    hi = np.minimum(edges_l[1:, None], edges_r[None, 1:])  # (L, R)
    w = np.clip(hi - lo, 0.0, None)
    return cast(np.ndarray, (w @ v) / w.sum(axis=1))


def real_label(name: str) -> str:
    """A short label of a model name or folder: the folder's (or file's) name for a path."""
    text = str(name).rstrip("/")
    return Path(text).name if ("/" in text or Path(text).exists()) else text


def real_importance(
    name: str, corpus: str, n_tokens: int, seq_len: int, seed: int = 0
) -> tuple[np.ndarray, dict[str, float]]:
    """Skip-ablation importance of every layer of a pretrained causal LM.

    -> ((R,) delta_pct in percent, info): on ceil(n_tokens / seq_len) windows of the held-out
    text of ``corpus`` (:func:`lamina.anatomy.heldout.heldout_text`, every play: the model was
    not trained by lamina) in the model's own tokenizer, ``seq_len`` capped at its context.
    info: n_layers, n_tokens, n_windows, n_documents, baseline_ppl, load_s, sweep_s."""
    t0 = time.perf_counter()
    model, tok = load_model(name, dtype=torch.float32)
    load_s = time.perf_counter() - t0
    n_layers = get_adapter(model).n_layers(model)
    max_pos = getattr(model.config, "max_position_embeddings", None) or seq_len
    seq = min(seq_len, int(max_pos))
    held = heldout_text(
        corpus, cast("PreTrainedTokenizerBase", tok), max(n_tokens, seq), seq, seed, plays="all"
    )
    df = ablation_sweep(model, held.windows, ["skip"], n_bootstrap=0, batch_size=8)
    delta = df.sort_values("layer")["delta_pct"].to_numpy(float)
    if delta.shape != (n_layers,) or not np.all(np.isfinite(delta)):
        raise RuntimeError(f"{name}: skip sweep gave {delta.shape} values, not {n_layers} finite")
    info = held.summary()
    del model
    return delta, {
        "n_layers": n_layers,
        "n_tokens": info["n_tokens"],
        "n_windows": info["n_windows"],
        "n_documents": info["n_documents"],
        "baseline_ppl": float(df.attrs["baseline_ppl"]),
        "load_s": load_s,
        "sweep_s": float(df.attrs["seconds"]),
    }


def rank_correlations(profiles: dict[str, np.ndarray]) -> pd.DataFrame:
    """Spearman rank correlation of every pair of importance profiles of equal length (the
    trained model's L layers): columns a, b, rho, p (two-sided, scipy), n_layers. NaN where
    a profile is constant."""
    names = list(profiles)
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            x, y = np.asarray(profiles[a], float), np.asarray(profiles[b], float)
            if x.shape != y.shape:
                raise ValueError(f"profiles {a!r} {x.shape} and {b!r} {y.shape} differ in length")
            flat = np.ptp(x) == 0 or np.ptp(y) == 0
            res = None if flat else stats.spearmanr(x, y)
            rows.append(
                {
                    "a": a,
                    "b": b,
                    "rho": float("nan") if res is None else float(res.statistic),
                    "p": float("nan") if res is None else float(res.pvalue),
                    "n_layers": int(x.size),
                }
            )
    return pd.DataFrame(rows, columns=["a", "b", "rho", "p", "n_layers"])
