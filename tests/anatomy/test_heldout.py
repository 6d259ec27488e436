"""Held-out windows as independent units, and cluster CIs that cover at the chapter's size."""

from __future__ import annotations

import numpy as np
import pytest

from lamina.anatomy.heldout import expanded_level, heldout_text


@pytest.fixture(scope="module")
def text(byte_tokenizer):
    return {
        p: heldout_text("organism-llama", byte_tokenizer, 2048, 128, 0, plays=p)
        for p in ("all", "heldout")
    }


def test_every_window_is_its_own_unit_when_every_play_may_be_read(text):
    """2,048 tokens give 16 units (at 2a683dc: 8 documents, plays as 3 shared clusters)."""
    h = text["all"]
    assert h.windows.shape == (16, 128)
    assert len(np.unique(h.doc_ids)) == 16
    assert h.summary()["windows_by_source"] == {"play": 8, "curriculum": 8}


def test_an_organisms_text_keeps_its_three_held_out_plays_as_clusters(text):
    h = text["heldout"]
    plays = {h.names[d] for d in h.doc_ids if h.sources[d] == "play"}
    assert len(plays) == 3  # the held-out split's plays only
    assert len(np.unique(h.doc_ids)) == 3 + 8


def test_windows_of_one_play_do_not_overlap(text):
    h = text["heldout"]
    for unit in {d for d in h.doc_ids if h.sources[d] == "play"}:
        rows = [tuple(w.tolist()) for w, d in zip(h.windows, h.doc_ids, strict=True) if d == unit]
        assert len(set(rows)) == len(rows)


def test_the_expanded_level_widens_most_for_few_units():
    levels = [expanded_level(0.95, n) for n in (3, 6, 16, 100)]
    assert all(a > b > 0.95 for a, b in zip(levels, levels[1:], strict=False))
    assert levels[-1] < 0.955


def test_too_much_text_asked_is_a_clear_error(byte_tokenizer):
    with pytest.raises(ValueError, match="too few tokens|too short"):
        heldout_text("organism-llama-micro", byte_tokenizer, 10**7, 128, 0, plays="heldout")
