"""The bifurcation design tool: replicated pairs are new, independent pairs of the sources."""

from __future__ import annotations

import numpy as np
import pytest

from lamina.trajectory.background import prompt_keys
from lamina.trajectory.design import replicated_pairs
from lamina.trajectory.sizes import CHAPTER_POOLING, chapter_prompts
from lamina.trajectory.synthetic import synthetic_states


def test_replicates_share_no_component_of_the_sources_with_the_chapters_pairs():
    t = chapter_prompts("bifurcation")
    r = replicated_pairs(t, 3)
    assert len(r) == 3 * len(t) and r.iloc[: len(t)].equals(t)
    assert r["pair_id"].nunique() == 3 * t["pair_id"].nunique()
    assert (r["prompt"].str.split().str.len() == np.tile(t["prompt"].str.split().str.len(), 3)).all()
    keys = prompt_keys(r, CHAPTER_POOLING["bifurcation"])
    n = len(t)
    for kind in ("context", "last"):
        first, later = set(keys[kind][:n]) - {""}, set(keys[kind][n:]) - {""}
        assert first and not first & later, kind  # would fail if a replicate kept its last word


def test_a_replicates_states_are_drawn_afresh():
    t = chapter_prompts("bifurcation")
    x = synthetic_states(replicated_pairs(t, 2), "planted", 0, CHAPTER_POOLING["bifurcation"])
    n = len(t)  # (2n, L+1, d): the copy's last-token states differ from the original's
    assert not np.allclose(x[:n, -1], x[n:, -1])


@pytest.mark.parametrize("times", [0, -1, 1.5, True])
def test_a_design_that_is_not_a_whole_number_of_copies_is_refused(times):
    with pytest.raises(ValueError, match="times"):
        replicated_pairs(chapter_prompts("bifurcation"), times)
