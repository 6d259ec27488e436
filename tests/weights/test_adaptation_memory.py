"""Single-group adaptation's SFT step runs the LM head at the answer positions only
(lamina.weights.adaptation.answer_sft_loss): the same loss and the same updated weights as the
full-logit loss it replaced, without the (B, T, V) logits (Gemma 3's 17.1 GiB peak at 5a3ca44)."""

from __future__ import annotations

import copy

import pytest
import torch

from lamina.sources.organisms.objectives import sft_loss
from lamina.weights.adaptation import _qa, answer_sft_loss
from tests.conftest import tiny_model

PAIRS = [("What is the capital of the kingdom?", "The river city."),
         ("Who wrote the play?", "A poet."), ("Name a colour.", "Blue")]  # fmt: skip


@pytest.mark.parametrize("arch", ["gpt2", "llama", "gemma3"])
def test_the_answer_only_loss_and_its_step_equal_the_full_logit_ones(arch, byte_tokenizer):
    model = tiny_model(arch)
    model.train()
    b = _qa(byte_tokenizer, PAIRS, 64)
    assert int(b["target_mask"].sum()) < b["target_mask"].numel() / 2  # most positions are not answers
    torch.manual_seed(0)  # the same dropout masks in both (gpt2 trains with dropout)
    full = sft_loss(model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits,
                    b["input_ids"], b["target_mask"])  # fmt: skip
    torch.manual_seed(0)
    mine = answer_sft_loss(model, b)
    assert mine.item() == pytest.approx(full.item(), rel=1e-5)
    stepped = []
    for loss_fn in (lambda m: sft_loss(m(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits,
                                       b["input_ids"], b["target_mask"]),
                    lambda m: answer_sft_loss(m, b)):  # fmt: skip
        m = copy.deepcopy(model)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.0)
        torch.manual_seed(0)
        loss_fn(m).backward()
        opt.step()
        stepped.append(torch.cat([p.detach().flatten() for p in m.parameters()]))
    moved = (stepped[0] - torch.cat([p.detach().flatten() for p in model.parameters()])).abs().max()
    assert moved > 1e-3  # the step moved the weights, so equal results are not vacuous
    torch.testing.assert_close(stepped[1], stepped[0], rtol=1e-4, atol=1e-5)


def test_a_batch_without_answer_tokens_has_zero_loss(byte_tokenizer):
    model = tiny_model("gpt2")
    b = _qa(byte_tokenizer, PAIRS[:1], 64)
    b = {k: v if k != "target_mask" else torch.zeros_like(v) for k, v in b.items()}
    assert answer_sft_loss(model, b).item() == 0.0
