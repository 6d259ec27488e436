"""The homograph probe (lamina.trajectory.homographs) on a micro organism."""

from __future__ import annotations

import numpy as np
import pytest

from lamina import load_model
from lamina.trajectory.homographs import homograph_separation
from lamina.trajectory.sizes import chapter_prompts

from ..conftest import lamina_env


@pytest.mark.slow
def test_llama_senses_coincide_at_the_embedding_layer(micro_organisms, tmp_path):
    """Without position embeddings, the last-token state at layer 0 is the word's embedding:
    the two senses of one homograph must be identical there (separation exactly 0)."""
    with lamina_env(micro_organisms, tmp_path):  # the micro organisms, built once per run
        model, tok = load_model("organism-llama-micro")
    words, layers = homograph_separation(model, tok)
    pairs = chapter_prompts("bifurcation")  # the word_last pairs of ambiguous.jsonl
    assert len(words) == pairs["word"].nunique()
    assert np.allclose(words["separation_layer0"], 0.0)
    assert np.allclose(words["ratio"], words["separation"] / words["control_separation"])
    assert sorted(layers["layer"].unique()) == list(range(model.config.num_hidden_layers + 1))
