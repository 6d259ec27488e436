"""The write edit's null: what adding an unembedding row does by construction (issue 34)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lamina.sources.models import get_adapter
from lamina.weights.edit_effects import edit_batch, score_edits
from lamina.weights.edit_null import beyond_scrambled, scrambled_copy
from lamina.weights.judging import judge_unit
from lamina.weights.settings import SignatureSettings
from lamina.weights.sources_edit import TEXTS, edit_model
from tests.conftest import SAMPLE_TEXT, _byte_tokenizer, tiny_model

S = SignatureSettings(edit_tokens=6, edit_texts=5, edit_scale=0.05, n_bootstrap=300)
ID = "p2-signature-write-edit-released"


def _measure(model, tok, texts, copies: int = 10):
    ids, mask, tokens = edit_batch(model, tok, texts, S)
    obs = np.array([r["delta_logp"] for r in score_edits(model, "x", "unembedding", 0, tokens, ids, mask, S)])
    null = np.array([np.mean([r["delta_logp"] for r in score_edits(scrambled_copy(model, i), "x", "s", i,
                                                              tokens, ids, mask, S)])
                     for i in range(copies)])  # fmt: skip
    return obs, null


def _random_llama(seed: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=320, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      bos_token_id=0, eos_token_id=0, pad_token_id=0)  # fmt: skip
    return LlamaForCausalLM(cfg).eval()


@pytest.mark.slow  # 10 models x 6 copies: about 2 CPU-minutes
def test_never_trained_models_beat_their_scrambled_copies_at_the_tests_rate_only():
    # at 2a683dc the chapter's own edit on a never-trained Llama read "reproduced" (Δlog p
    # 0.572 nats against 99 random directions of mean 0.003, p = 0.01), as it must on every
    # such model: adding W_U[t] raises logit t by construction. Against scrambled copies a
    # never-trained model is one draw among exchangeable ones, so it reads "present" at the
    # test's level (0.05): 10 models may give 0, 1 or 2, rarely more (P(>= 3) = 1.2%).
    tok = _byte_tokenizer()
    present = 0
    for seed in range(10):
        obs, null = _measure(_random_llama(100 + seed), tok, SAMPLE_TEXT, copies=6)
        assert obs.mean() > 0.02 and null.mean() > 0.02  # the edit raises the token: by construction
        m = beyond_scrambled(obs, null)
        row = judge_unit("random-init", {ID: m}, {}).set_index("claim_id").loc[ID]
        present += row["verdict"] in ("reproduced", "partially", "smaller than claimed")
    assert present <= 2


def test_a_block_that_feeds_unembedding_writes_back_beats_its_copies():
    model, tok = edit_model("planted", seed=0)
    obs, null = _measure(model, tok, TEXTS, copies=6)
    m = beyond_scrambled(obs, null)
    assert m["p"] < 0.01 and m["estimate"] > 0


def test_scrambling_keeps_norms_embedding_and_unembedding_and_moves_every_block():
    model = tiny_model("gpt2", n_layers=3)
    copy = scrambled_copy(model, seed=3)
    a, b = dict(model.named_parameters()), dict(copy.named_parameters())
    blocks = {n for n, _ in get_adapter(model).block_list(model).named_parameters()}
    for name, p in a.items():
        short = name.split("h.", 1)[-1] if ".h." in name else None
        if short is not None and short in blocks:
            assert torch.allclose(p.norm(), b[name].norm())
            assert torch.allclose(torch.sort(p.flatten()).values, torch.sort(b[name].flatten()).values)
            if p.numel() > 1 and p.std() > 0:
                assert not torch.equal(p, b[name])
        else:
            assert torch.equal(p, b[name]), name
    assert next(model.parameters()).data_ptr() != next(copy.parameters()).data_ptr()


def test_too_few_copies_or_tokens_make_the_row_untestable():
    assert "untestable" in beyond_scrambled(np.array([0.5]), np.array([0.1, 0.2, 0.3]))
    assert "untestable" in beyond_scrambled(np.array([0.5, 0.6]), np.array([0.1, 0.2]))


def test_the_ci_and_the_p_share_the_copy_as_their_unit():
    # Gemma 3 @sft at adfa656: -27.5 [-28.6, -26.3] (a bootstrap over tokens, the copies held
    # fixed) beside p_opposite = 0.055 (the copies' spread, sd 15 over 10): a CI far from 0
    # with a test that is not significant. The CI is now the test's own interval.
    rng = np.random.default_rng(0)
    for _ in range(200):
        obs = rng.normal(rng.normal(0, 3), 0.1, size=rng.integers(2, 40))
        null = rng.normal(0, rng.uniform(0.5, 5), size=rng.integers(3, 12))
        m = beyond_scrambled(obs, null)
        assert m["ci_low"] <= m["estimate"] <= m["ci_high"]
        assert (m["ci_low"] > 0) == (m["p"] < 0.05)
        assert (m["ci_high"] < 0) == (m["p_opposite"] < 0.05)


def _edit_table(stage: str, observed: np.ndarray, copies: np.ndarray) -> list[dict]:
    rows = [{"stage": stage, "direction": "unembedding", "direction_id": 0, "token": t,
             "delta_logp": float(v)} for t, v in enumerate(observed)]
    rows += [{"stage": stage, "direction": "scrambled", "direction_id": i, "token": t,
              "delta_logp": float(c)} for i, c in enumerate(copies) for t in range(len(observed))]
    return rows  # fmt: skip


def test_the_kept_ratio_is_of_the_effect_beyond_construction():
    """The edit raises its token's log p in any model; the kept row is about what is beyond
    that. Here the aligned model's edit is no stronger than its scrambled copies' (nothing kept
    beyond construction) while its raw effect is 0.8 of the base's: the raw ratio (e2b72a5)
    read 0.8, "reproduced" against the claimed >= 0.5; beyond construction it is about 0."""
    import pandas as pd

    from lamina.weights.measures_causal import kept_measure

    rng = np.random.default_rng(0)
    base = 0.40 + 0.01 * rng.standard_normal(6)
    aligned = 0.32 + 0.01 * rng.standard_normal(6)
    e = pd.DataFrame(_edit_table("base", base, 0.16 + 0.01 * rng.standard_normal(10))
                     + _edit_table("sft", aligned, 0.32 + 0.01 * rng.standard_normal(10)))  # fmt: skip
    m = kept_measure(e, "sft", "base", S)
    assert aligned.mean() / base.mean() > 0.7
    assert abs(m["estimate"]) < 0.15 and m["ci_high"] < 0.5
    e2 = pd.DataFrame(_edit_table("base", base, np.full(10, 0.1) + 0.01 * rng.standard_normal(10))
                      + _edit_table("sft", base + 0.01 * rng.standard_normal(6),
                                    np.full(10, 0.1) + 0.01 * rng.standard_normal(10)))  # fmt: skip
    kept = kept_measure(e2, "sft", "base", S)
    assert 0.8 < kept["estimate"] < 1.2 and kept["ci_low"] > 0.5


def test_the_faded_edit_model_keeps_its_scale_and_a_third_of_its_effect():
    """The kept rows' conditional null: the planted model with the feedback of all but 2 of 6
    target tokens moved to other tokens' directions keeps its scrambled copies' effect (the
    block's scale), and its effect beyond construction falls to about a third, still there."""
    from lamina.weights.sources_edit import faded

    model, tok = edit_model("planted", 0)
    obs, null = _measure(model, tok, TEXTS)
    ids, mask, tokens = edit_batch(model, tok, TEXTS, S)
    f_obs, f_null = _measure(faded(model, tokens, 0), tok, TEXTS)
    assert f_null.mean() == pytest.approx(null.mean(), rel=0.1)
    ratio = (f_obs.mean() - f_null.mean()) / (obs.mean() - null.mean())
    assert 0.1 < ratio < 0.5
