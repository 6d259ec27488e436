"""Generation probes of the organisms (lamina.sources.organisms.probes) on a micro organism."""

from __future__ import annotations

import pytest

from lamina import load_model
from lamina.sources.organisms.probes import generate

from ...conftest import lamina_env


@pytest.mark.slow
def test_sampled_generation_is_seeded_and_respects_the_context(micro_organisms, tmp_path):
    with lamina_env(micro_organisms, tmp_path):  # the micro organisms, built once per run
        model, tok = load_model("organism-gpt2-micro")
    long_prompt = "word " * 100  # longer than the micro context of 32 tokens
    a = generate(model, tok, long_prompt, 8, 0.8, seed=3)
    b = generate(model, tok, long_prompt, 8, 0.8, seed=3)
    assert a == b
    greedy = [generate(model, tok, "HAMLET:\n", 8, None, seed) for seed in (0, 1)]
    assert greedy[0] == greedy[1]  # greedy decoding ignores the seed
