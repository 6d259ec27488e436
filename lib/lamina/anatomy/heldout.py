"""Held-out text whose windows are independent units, and bootstraps that resample those units.

Paper 3 measured perplexity on a small held-out English set it does not name. lamina cuts
windows of ``seq_len`` tokens from an organism corpus (:func:`heldout_text`), alternating two
sources, so that both weigh alike:

* **play windows**: seq_len consecutive tokens of one Shakespeare play, from a random passage
  (disjoint passages when a play gives several windows). The plays are the held-out split's
  (3 plays: for the organisms, trained on the other plays) or, with ``plays="all"``, every
  play of the corpus (for a model lamina did not train, none of them is training text).
* **curriculum windows**: whole held-out curriculum documents, each used once, joined with
  EOS until the window is full.

The **unit** of a window (``doc_ids``) is its play, or the window itself for a curriculum
window (its documents appear nowhere else): windows of one play are not independent, so every
CI resamples units, a cluster bootstrap (:func:`cluster_draws`). A percentile interval over
few clusters is too narrow (its variance is that of a mean over n units, not n - 1, and
normal, not t, quantiles), so the CIs here are *expanded percentile* intervals (Hesterberg
2015): the percentile interval at the level whose two-sided alpha is

    alpha' = 2 Phi(-sqrt(n / (n - 1)) t_{n-1}(1 - alpha / 2)),   n = number of units,

which :mod:`lamina.anatomy.coverage` checks by simulation at the chapter's sizes.

With windows of equal length, perplexity is a ratio estimator: for unit g with NLL sum S_g
(nats) over C_g predicted tokens, nll = sum_g S_g / sum_g C_g and ppl = exp(nll).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import pandas as pd
import torch
from scipy import stats

from lamina.sources.organisms import ORGANISMS
from lamina.sources.organisms.corpus import load_corpus, shakespeare_plays

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "PLAYS",
    "HeldoutSummary",
    "HeldoutText",
    "cluster_ci",
    "cluster_draws",
    "document_delta_ci",
    "document_ppl_ci",
    "document_sums",
    "expanded_level",
    "heldout_text",
    "passages",
    "regroup_sweep",
]

PLAYS = ("heldout", "all")


def passages(docs: list[str], seed: int, passage_chars: int) -> list[tuple[int, str]]:
    """[(document index, passage)]: each document cut into passages of at most
    ``passage_chars`` characters at line breaks (a longer line is one passage), all passages
    in one seeded random order."""
    if passage_chars < 1:
        raise ValueError(f"passage_chars must be >= 1, got {passage_chars}")
    out: list[tuple[int, str]] = []
    for i, doc in enumerate(docs):
        piece: list[str] = []
        size = 0
        for line in doc.splitlines(keepends=True):
            if size + len(line) > passage_chars and piece:
                out.append((i, "".join(piece)))
                piece, size = [], 0
            piece.append(line)
            size += len(line)
        if piece:
            out.append((i, "".join(piece)))
    order = np.random.default_rng(seed).permutation(len(out))
    return [out[j] for j in order]


class HeldoutSummary(TypedDict):
    """What :meth:`HeldoutText.summary` returns."""

    n_windows: int
    n_tokens: int
    n_documents: int
    documents_by_source: dict[str, int]
    windows_by_source: dict[str, int]


@dataclass
class HeldoutText:
    """Token windows and their resampling units.

    windows: (n_windows, seq_len) token ids; doc_ids: (n_windows,) the unit of each window,
    an index into ``sources`` and ``names`` (a play, or one curriculum window)."""

    windows: torch.Tensor
    doc_ids: np.ndarray
    sources: list[str]
    names: list[str]

    def summary(self) -> HeldoutSummary:
        """Counts for the chapter's note: windows, tokens, units used (``n_documents``), by
        source."""
        used = np.unique(self.doc_ids)
        kinds = pd.Series([self.sources[d] for d in used]).value_counts().to_dict()
        per_window = pd.Series([self.sources[d] for d in self.doc_ids]).value_counts()
        return {
            "n_windows": int(self.windows.shape[0]),
            "n_tokens": int(self.windows.numel()),
            "n_documents": len(used),
            "documents_by_source": {k: int(v) for k, v in kinds.items()},
            "windows_by_source": {k: int(v) for k, v in per_window.items()},
        }


def _ids(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _play_window(
    tokenizer: Any, text: str, part: int, parts: int, seq_len: int, rng: np.random.Generator
) -> list[int] | None:
    """seq_len tokens of ``text`` from a random line start inside its ``part``-th of ``parts``
    equal stretches (so the windows of one play never overlap); None if too short."""
    lines = text.splitlines(keepends=True)
    lo, hi = part * len(lines) // parts, (part + 1) * len(lines) // parts
    if hi <= lo:
        return None
    for start in (int(rng.integers(lo, hi)), lo):  # a random start; near the end: the stretch's
        ids: list[int] = []
        for stop in range(start + 8, len(lines) + 8, 8):  # lines until the window is full
            ids = _ids(tokenizer, "".join(lines[start:stop]))
            if len(ids) >= seq_len or stop >= len(lines):
                break
        if len(ids) >= seq_len:
            return ids[:seq_len]
    return None


def _plays(corpus: str, plays: str) -> tuple[list[str], list[str], list[str]]:
    """(play names, play texts, held-out curriculum documents) of an organism corpus."""
    name = corpus.partition("@")[0]
    if name not in ORGANISMS:
        raise ValueError(f"corpus {corpus!r} is not a registered organism: {sorted(ORGANISMS)}")
    if plays not in PLAYS:
        raise ValueError(f"plays must be one of {PLAYS}, got {plays!r}")
    cfg = ORGANISMS[name]
    c = load_corpus(cfg)
    held = list(c.card.get("natural_text", {}).get("plays_heldout", []))
    curriculum = list(c.heldout[len(held) :])
    if plays == "heldout":
        return held, list(c.heldout[: len(held)]), curriculum
    every = shakespeare_plays()
    names = list(every)[: cfg.max_plays] if cfg.max_plays else list(every)
    return names, [every[n][: cfg.max_chars_per_play] for n in names], curriculum


def heldout_text(
    corpus: str, tokenizer: PreTrainedTokenizerBase, n_tokens: int, seq_len: int, seed: int, plays: str = "heldout"
) -> HeldoutText:
    """ceil(n_tokens / seq_len) windows of ``seq_len`` tokens of an organism corpus, play and
    curriculum windows in turn (module docstring), with each window's unit: half the windows
    from the curriculum (fewer if it runs out), the rest from the plays, taken in a seeded
    order, each in turn; a play that gives k windows gives them from k disjoint stretches.
    Raises ValueError if the text runs out."""
    if seq_len < 2 or n_tokens < seq_len:
        raise ValueError(f"need seq_len >= 2 and n_tokens >= seq_len, got {seq_len}, {n_tokens}")
    names, texts, curriculum = _plays(corpus, plays)
    need = -(-n_tokens // seq_len)
    rng = np.random.default_rng([seed, 34])
    cur_order = [int(i) for i in rng.permutation(len(curriculum))]
    eos = [] if tokenizer.eos_token_id is None else [int(tokenizer.eos_token_id)]
    cur_windows: list[list[int]] = []
    ids: list[int] = []
    for i in cur_order:  # whole documents, each in one window; the one cut at the end is dropped
        ids += _ids(tokenizer, curriculum[i]) + eos
        if len(ids) >= seq_len:
            cur_windows.append(ids[:seq_len])
            ids = []
            if len(cur_windows) >= need // 2:
                break
    n_play = need - len(cur_windows)
    order = [int(i) for i in rng.permutation(len(names))]
    picks = [order[k % len(order)] for k in range(n_play)] if order else []
    parts = {i: picks.count(i) for i in set(picks)}
    seen = dict.fromkeys(parts, 0)
    play_windows: list[tuple[int, list[int]]] = []
    for i in picks:
        window = _play_window(tokenizer, texts[i], seen[i], parts[i], seq_len, rng)
        seen[i] += 1
        if window is None:
            raise ValueError(f"play {names[i]!r} is too short for {parts[i]} windows")
        play_windows.append((i, window))
    if len(play_windows) + len(cur_windows) < need:
        raise ValueError(
            f"the held-out text of {corpus} gives too few tokens; {n_tokens} were asked for"
        )
    rows: list[list[int]] = []
    units: list[int] = []
    sources, unit_names = ["play"] * len(names), list(names)
    for k in range(max(len(play_windows), len(cur_windows))):  # play and curriculum in turn
        if k < len(play_windows):
            rows.append(play_windows[k][1])
            units.append(play_windows[k][0])
        if k < len(cur_windows):
            rows.append(cur_windows[k])
            units.append(len(sources))
            sources.append("curriculum")
            unit_names.append(f"curriculum window {k}")
    return HeldoutText(torch.tensor(rows, dtype=torch.long), np.asarray(units), sources, unit_names)


def expanded_level(level: float, n_units: int) -> float:
    """The two-sided percentile level whose interval is Hesterberg's expanded percentile
    interval at ``level`` over ``n_units`` units: 1 - alpha' (module docstring); ``level``
    itself below 2 units."""
    if n_units < 2:
        return level
    alpha = 1 - level
    z = np.sqrt(n_units / (n_units - 1)) * stats.t.ppf(1 - alpha / 2, n_units - 1)
    return float(1 - 2 * stats.norm.cdf(-z))


def cluster_draws(n_units: int, n_bootstrap: int, seed: int) -> np.ndarray:
    """(n_bootstrap, n_units) unit indices drawn with replacement (a cluster bootstrap)."""
    return np.random.default_rng(seed).integers(0, n_units, (n_bootstrap, n_units))


def cluster_ci(
    sums: tuple[np.ndarray, ...],
    statistic: Callable[..., np.ndarray],
    n_bootstrap: int,
    seed: int,
    level: float = 0.95,
    *,
    min_units: int = 3,
) -> tuple[float, float]:
    """Expanded percentile CI (two-sided coverage ``level``) of ``statistic(*totals)``, where
    totals are the sums over units of ``sums`` (each (n_units,) or (n_units, k)), resampling
    the units jointly. ``statistic`` maps (n_bootstrap, ...) totals to (n_bootstrap,) values
    (NaN draws are dropped). (NaN, NaN) below ``min_units`` units or ``n_bootstrap`` 0."""
    n = len(sums[0])
    if n < min_units or n_bootstrap <= 0:
        return float("nan"), float("nan")
    idx = cluster_draws(n, n_bootstrap, seed)
    draws = np.asarray(statistic(*(np.asarray(s, float)[idx].sum(axis=1) for s in sums)), float)
    draws = draws[np.isfinite(draws)]
    if draws.size < 10:
        return float("nan"), float("nan")
    a = 1 - expanded_level(level, n)
    lo, hi = np.quantile(draws, [a / 2, 1 - a / 2])
    return float(lo), float(hi)


def document_sums(
    per_window: np.ndarray, counts: np.ndarray, doc_ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(S, C): per-unit NLL sums (nats) and predicted-token counts, each (n_units_present,),
    from per-window mean NLL ``per_window`` (n_windows,) and ``counts`` (n_windows,), in
    order of ascending unit id."""
    per_window, counts = np.asarray(per_window, float), np.asarray(counts, float)
    if per_window.shape != counts.shape or per_window.shape != np.shape(doc_ids):
        raise ValueError("per_window, counts and doc_ids must have one value per window")
    _, g = np.unique(doc_ids, return_inverse=True)
    return np.bincount(g, per_window * counts), np.bincount(g, counts)


def document_ppl_ci(
    per_window: np.ndarray, counts: np.ndarray, doc_ids: np.ndarray, n_bootstrap: int, seed: int
) -> tuple[float, float, float]:
    """(ppl, ci_low, ci_high): ppl = exp(sum_g S_g / sum_g C_g) with its 95% expanded
    percentile CI over units (:func:`cluster_ci`; NaN with fewer than 3 units).
    per_window, counts, doc_ids: (n_windows,)."""
    s, c = document_sums(per_window, counts, doc_ids)
    lo, hi = cluster_ci((s, c), lambda s_, c_: s_ / c_, n_bootstrap, seed)
    return float(np.exp(s.sum() / c.sum())), float(np.exp(lo)), float(np.exp(hi))


def document_delta_ci(
    ablated: np.ndarray,
    clean: np.ndarray,
    counts: np.ndarray,
    doc_ids: np.ndarray,
    n_bootstrap: int,
    seed: int,
) -> tuple[float, float]:
    """95% expanded percentile CI over units (paired) of
    delta_pct = 100 (exp(nll_ablated - nll_clean) - 1); per-window mean NLLs (n_windows,) in,
    (low, high) in percent out."""
    sa, c = document_sums(ablated, counts, doc_ids)
    sb, _ = document_sums(clean, counts, doc_ids)
    lo, hi = cluster_ci((sa, sb, c), lambda a, b, c_: (a - b) / c_, n_bootstrap, seed)
    return 100.0 * float(np.expm1(lo)), 100.0 * float(np.expm1(hi))


def regroup_sweep(
    sweep: pd.DataFrame, doc_ids: np.ndarray, seq_len: int, n_bootstrap: int, seed: int
) -> pd.DataFrame:
    """The sweep with delta_ci_low/high recomputed by :func:`document_delta_ci` (each row on
    the first ``len(nll_per_seq)`` windows) and ``n_documents`` (units) added. Needs the
    columns nll_per_seq and base_nll_per_seq (per-window mean NLL arrays, nats per token)."""
    out = sweep.copy()
    lows, highs, ndocs = [], [], []
    for _, row in out.iterrows():
        a = np.asarray(row["nll_per_seq"], float)
        b = np.asarray(row["base_nll_per_seq"], float)
        d = np.asarray(doc_ids)[: len(a)]
        counts = np.full(len(a), seq_len - 1, float)
        lo, hi = document_delta_ci(a, b, counts, d, n_bootstrap, seed)
        lows.append(lo)
        highs.append(hi)
        ndocs.append(len(np.unique(d)))
    out["delta_ci_low"], out["delta_ci_high"], out["n_documents"] = lows, highs, ndocs
    return out
