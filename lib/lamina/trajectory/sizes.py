"""The prompt sets of paper 1's chapters: one table that the chapters and the calibration
harness both read, so the calibration runs at the chapters' own sizes (never a second set of
constants).

``CHAPTER_FAMILIES[chapter]``: the prompt families the chapter loads (files under
``data/prompts``); ``CHAPTER_POOLING[chapter]``: the main convention's pooling of the
chapter's notebook (bifurcation pools the last token, so it uses only the pairs whose
homograph is the last word: ``word_last``). Sizes follow from the prompt files: convergence
180 prompts (60 items x 3 frames), curvature 168 (the paper's 88 and 80 of overlapping
length), bifurcation one pair per homograph (last token), three
phases 184. :func:`chapter_prompts` builds a chapter's table from them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from lamina.core.bounds import COUNT, SEED, Bound
from lamina.sources.prompts import bifurcation_prompts, load_prompts

__all__ = ["CHAPTER_BOUNDS", "CHAPTER_FAMILIES", "CHAPTER_POOLING", "chapter_mask", "chapter_prompts"]

CHAPTER_FAMILIES: dict[str, tuple[str, ...]] = {
    "convergence": ("semantic", "semantic_neutral"),
    "curvature": ("reasoning", "lexical", "reasoning_short", "lexical_framed"),
    "bifurcation": ("ambiguous",),
    "three_phase": ("semantic", "analogies", "reasoning", "lexical"),
}
CHAPTER_POOLING: dict[str, str] = {
    "convergence": "mean",
    "curvature": "mean",
    "bifurcation": "last",
    "three_phase": "mean",
}


def chapter_prompts(name: str, tables: dict[str, pd.DataFrame] | None = None) -> pd.DataFrame:
    """The chapter's own prompt table: its families (``tables``, or loaded from
    ``data/prompts``), and for bifurcation the long table of pairs its pooling uses
    (``word_last`` pairs under last-token pooling)."""

    if name not in CHAPTER_FAMILIES:
        raise ValueError(f"unknown paper-1 chapter {name!r}; choose one of {list(CHAPTER_FAMILIES)}")
    tb = tables or {}
    get = lambda f: tb[f] if f in tb else load_prompts(f)  # noqa: E731
    if name == "bifurcation":
        t = bifurcation_prompts(get("ambiguous"))
        if CHAPTER_POOLING[name] == "last" and "word_last" in t:
            t = t[t["word_last"].astype(bool)].reset_index(drop=True)
        return t
    return pd.concat([get(f) for f in CHAPTER_FAMILIES[name]], ignore_index=True)


def chapter_mask(name: str, table: pd.DataFrame, n_tokens: Any, exclude_single: bool = True) -> np.ndarray:
    """(n,) bool: the rows of ``table`` the chapter's main test reads: curvature the families
    ``reasoning*`` and ``lexical*``, three phases its families (:data:`CHAPTER_FAMILIES`),
    both without one-token prompts when ``exclude_single`` (their last token is their first,
    which carries a massive activation on many models; ``n_tokens`` (n,), 0 = unknown, kept);
    every row otherwise."""
    keep = np.ones(len(table), bool)
    fam = table["family"].astype(str) if "family" in table else pd.Series([""] * len(table))
    if name == "curvature":
        keep = np.array(fam.str.match(r"^(reasoning|lexical)"), dtype=bool)
    elif name == "three_phase":
        keep = np.array(fam.isin(CHAPTER_FAMILIES[name]), dtype=bool)
    if name in ("curvature", "three_phase") and exclude_single:
        keep &= np.asarray(n_tokens) != 1
    return keep


CHAPTER_BOUNDS: dict[str, Bound] = {
    "n_bootstrap": Bound(10, integer=True), "n_permutations": COUNT, "seed": SEED}
"""The ranges of paper 1's chapters' resampling parameters (their ``TrajectoryConfig``;
:func:`lamina.core.bounds.check_bounds`)."""
