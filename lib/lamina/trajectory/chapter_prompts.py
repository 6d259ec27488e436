"""The prompt table of a trajectory chapter (paper 1): its default families or the files the
user names, checked for the columns the chapter needs (:func:`load_chapter_prompts`), and
quick mode's seeded subsample (:func:`subsample`)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from lamina.sources.prompts import load_prompt_files, prompt_sources

__all__ = ["load_chapter_prompts", "subsample"]


def load_chapter_prompts(
    prompts: str | None, families: list[str], required: list[str]
) -> pd.DataFrame:
    """The chapter's prompt table: ``prompts`` (file paths or family names, comma separated)
    or, when None, the default ``families``, concatenated. Raises FileNotFoundError for a
    missing file path, ValueError naming a missing required column, and
    ``lamina.sources.prompts.PromptFileError`` for a malformed file."""
    sources = prompt_sources(prompts) if prompts else families
    for src in sources:
        if prompts and not Path(src).expanduser().is_file() and os.sep in src:
            raise FileNotFoundError(f"prompt file {src!r} does not exist")
    table = load_prompt_files(sources)  # an id in two files is refused
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise ValueError(f"prompts {sources} lack the column(s) {missing} this chapter needs; "
                         f"columns present: {list(table.columns)}")  # fmt: skip
    return table


def subsample(table: pd.DataFrame, by: str, per_group: int, seed: int) -> pd.DataFrame:
    """At most ``per_group`` rows of each value of ``by`` (for quick mode), order kept;
    which rows is drawn without replacement by ``numpy.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    keep = []
    for _, idx in table.groupby(by, sort=False).indices.items():
        keep.extend(sorted(rng.choice(idx, size=min(per_group, len(idx)), replace=False)))
    return table.iloc[sorted(keep)].reset_index(drop=True)
