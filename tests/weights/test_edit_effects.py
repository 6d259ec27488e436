"""The write edit's score, and where its null is scored."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from lamina.weights.edit_effects import _edit_effect, _reference, mean_write_inputs, null_stages
from lamina.weights.edits import rank1_write_edit
from lamina.weights.settings import SignatureSettings
from tests.conftest import tiny_model


def test_edit_effect_equals_the_log_softmax_definition():
    """The edit's score without forming the edited log-softmax agrees with the definition:
    mean_t [log p_edit - log p] and mean_t KL(p || p_edit), on a tiny random Llama."""
    model = tiny_model("llama").eval()
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (3, 10), generator=gen)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0  # padding is left out
    inputs, lp0 = mean_write_inputs(model, ids, mask, log_probs=True)
    direction = torch.randn(model.config.hidden_size, generator=gen)
    dlp, kl = _edit_effect(model, inputs, _reference(lp0, mask), direction, 0.5, ids, mask)
    with rank1_write_edit(model, direction, 0.5, input_direction=inputs), torch.no_grad():
        lp1 = F.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), -1)
    valid = mask.bool()
    torch.testing.assert_close(dlp, (lp1 - lp0)[valid].mean(0), atol=1e-5, rtol=1e-5)
    expected = float((lp0.exp() * (lp0 - lp1)).sum(-1)[valid].mean())
    assert kl == pytest.approx(expected, abs=1e-6) and kl > 0


def test_the_null_is_scored_only_where_a_row_reads_it():
    s = SignatureSettings(targets=("lm", "sft", "dpo"))
    assert null_stages(SimpleNamespace(), s) == ["sft", "dpo"]  # an organism's base: none
    released = SimpleNamespace(aligned_base=True)
    assert null_stages(released, SignatureSettings(base="x-instruct", targets=("sft",))) == [
        "x-instruct", "sft"]  # fmt: skip
    assert null_stages(SimpleNamespace(), SignatureSettings(targets=("lm",))) == ["lm"]
