"""The prompt sets of paper 1's chapters: one table that the chapters and the calibration
harness both read, so the calibration runs at the chapters' own sizes (never a second set of
constants).

``CHAPTER_FAMILIES[chapter]``: the prompt families the chapter loads (files under
``data/prompts``); ``CHAPTER_POOLING[chapter]``: the main convention's pooling of the
chapter's notebook (bifurcation pools the last token, so it uses only the pairs whose
homograph is the last word: ``word_last``). Sizes follow from the prompt files: convergence
180 prompts (60 items x 3 frames), curvature 88, bifurcation 20 pairs (last token), three
phases 184.
"""

from __future__ import annotations

__all__ = ["CHAPTER_FAMILIES", "CHAPTER_POOLING"]

CHAPTER_FAMILIES: dict[str, tuple[str, ...]] = {
    "convergence": ("semantic", "semantic_neutral"),
    "curvature": ("reasoning", "lexical"),
    "bifurcation": ("ambiguous",),
    "three_phase": ("semantic", "analogies", "reasoning", "lexical"),
}
CHAPTER_POOLING: dict[str, str] = {
    "convergence": "mean",
    "curvature": "mean",
    "bifurcation": "last",
    "three_phase": "mean",
}
