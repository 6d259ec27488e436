"""The fast answer scoring (head at answer positions, a shared DPO prompt, length-sorted
batches) equals the full forward; the training loop keeps every tensor on the model's device."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
)

from lamina.sources.organisms.loop import (
    StageBudget,
    batch_indices,
    length_grouped_batches,
    train_steps,
)
from lamina.sources.organisms.qa import format_answer, format_prompt
from lamina.sources.organisms.scoring import (
    answer_hits,
    in_length_order,
    pair_logprobs,
    qa_batch,
    sequence_logprobs,
)
from lamina.sources.organisms.stages import dpo_batch_loss, sft_batch_loss, training_lengths

PROMPTS = ["Question: Is the cat here?\nAnswer:", "Question: A river bank is not the same?\nAnswer:",
           "Question: x\nAnswer:"]  # fmt: skip
CHOSEN = [" yes", " The answer is no.", " a river"]
REJECTED = [" no no no", " yes", " the cat sat on the mat"]


def _model(arch: str, vocab: int, attn: str = "sdpa") -> torch.nn.Module:
    torch.manual_seed(0)
    small = dict(vocab_size=vocab, attn_implementation=attn)
    if arch == "gpt2":
        return GPT2LMHeadModel(GPT2Config(n_positions=64, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0,
                                          embd_pdrop=0.0, attn_pdrop=0.0, **small))  # fmt: skip
    if arch == "llama":
        return LlamaForCausalLM(LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                            num_attention_heads=4, num_key_value_heads=2,
                                            max_position_embeddings=64, **small))  # fmt: skip
    # Gemma 3: soft-capped logits, a sliding-window layer (window longer than the rows)
    return Gemma3ForCausalLM(Gemma3TextConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                              num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                              max_position_embeddings=64, sliding_window=512,
                                              final_logit_softcapping=5.0,
                                              layer_types=["sliding_attention", "full_attention"], **small))  # fmt: skip


def _full(model: torch.nn.Module, tok, completions: list[str]) -> torch.Tensor:
    """Summed log p of each completion + EOS from the full logits (every position)."""
    b = qa_batch(tok, PROMPTS, completions, 64)
    logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits[:, :-1]
    lp = torch.log_softmax(logits.float(), -1).gather(-1, b["input_ids"][:, 1:, None]).squeeze(-1)
    return (lp * b["target_mask"][:, 1:]).sum(-1)


def _grads(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


@pytest.mark.parametrize("arch", ["gpt2", "llama", "gemma3"])
def test_answer_positions_and_a_shared_prompt_give_the_full_forwards_values_and_gradients(
    byte_tokenizer, arch: str
) -> None:
    model = _model(arch, len(byte_tokenizer)).eval()
    with torch.no_grad():
        full_c, full_r = _full(model, byte_tokenizer, CHOSEN), _full(model, byte_tokenizer, REJECTED)
        fast = sequence_logprobs(model, qa_batch(byte_tokenizer, PROMPTS, CHOSEN, 64))
        pc, pr = pair_logprobs(model, byte_tokenizer, PROMPTS, CHOSEN, REJECTED, 64)
    for got, want in ((fast, full_c), (pc, full_c), (pr, full_r)):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-5)
    model.zero_grad()
    (_full(model, byte_tokenizer, CHOSEN) - _full(model, byte_tokenizer, REJECTED)).sum().backward()
    want = _grads(model).clone()
    model.zero_grad()
    pc, pr = pair_logprobs(model, byte_tokenizer, PROMPTS, CHOSEN, REJECTED, 64)
    (pc - pr).sum().backward()
    assert float((_grads(model) - want).norm() / want.norm()) < 1e-5


def test_a_shared_prompt_fits_a_model_whose_positions_end_at_max_len(byte_tokenizer) -> None:
    """Learned positions (GPT-2) of exactly max_len: a long prompt beside a long answer of
    another row must not push the padding past the last position."""
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(byte_tokenizer), n_positions=40, n_embd=32,
                                       n_layer=2, n_head=4)).eval()  # fmt: skip
    prompts = ["Question: A river bank is not the same?\nAnswer:", "Q:"]
    chosen, rejected = [" yes", " the cat sat on the mat while"], [" no", " a dog"]
    with torch.no_grad():
        pc, pr = pair_logprobs(model, byte_tokenizer, prompts, chosen, rejected, 40)
        for got, comps in ((pc, chosen), (pr, rejected)):
            want = sequence_logprobs(model, qa_batch(byte_tokenizer, prompts, comps, 40))
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-5)


def test_greedy_hits_read_the_argmax_at_answer_positions_only(byte_tokenizer) -> None:
    model = _model("llama", len(byte_tokenizer)).eval()
    b = qa_batch(byte_tokenizer, PROMPTS, CHOSEN, 64)
    with torch.no_grad():
        pred = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits[:, :-1].argmax(-1)
        tgt = b["target_mask"].clone()
        tgt[torch.arange(3), b["attention_mask"].sum(-1) - 1] = 0  # the EOS is not scored
        want = ((pred == b["input_ids"][:, 1:]) | ~tgt[:, 1:].bool()).all(-1)
        assert torch.equal(answer_hits(model, b), want)
        # the model's own greedy answer is a hit by construction
        own = [byte_tokenizer.decode(pred[i][tgt[i, 1:].bool()][:1]) for i in range(3)]
        assert answer_hits(model, qa_batch(byte_tokenizer, PROMPTS, own, 64))[0]


def test_length_ordered_batches_come_back_in_the_items_order() -> None:
    items = ["ccc", "a", "bbbbb", "dd", "e"]
    seen: list[list[str]] = []

    def score(chunk: list[str]) -> torch.Tensor:
        seen.append(chunk)
        return torch.tensor([float(len(x)) for x in chunk])

    out = in_length_order(score, items, len, batch=2)
    assert out.tolist() == [3.0, 1.0, 5.0, 2.0, 1.0]
    assert [len(x) for chunk in seen for x in chunk] == [1, 1, 2, 3, 5]
    assert in_length_order(score, [], len, 2).shape == (0,)


def test_batches_are_seeded_permutations_epoch_after_epoch() -> None:
    gen = torch.Generator().manual_seed(0)
    it = batch_indices(5, 2, gen)
    first = [next(it) for _ in range(5)]  # 10 indices: two epochs
    flat = [i for b in first for i in b]
    assert sorted(flat) == sorted(list(range(5)) * 2)
    assert StageBudget.steps_for(2.0, 1286, 8) == 322 and StageBudget(322, 8, 1e-5).epochs(1286) >= 2


def _padding(lengths: list[int], batches: list[list[int]]) -> float:
    """Padded share of the tokens when each batch is padded to its longest item."""
    real = sum(lengths[i] for b in batches for i in b)
    return 1 - real / sum(len(b) * max(lengths[i] for i in b) for b in batches)


@pytest.mark.parametrize(("n", "batch", "group"), [(53, 8, 2), (50, 8, 50), (3, 8, 50), (16, 8, 1)])
def test_length_grouped_batches_draw_every_item_once_an_epoch_with_little_padding(n: int, batch: int,
                                                                                   group: int) -> None:  # fmt: skip
    """#52 item 4: grouped batches are full, draw each item once per epoch (the remainder
    carried into the next), are seeded, and pad less than unsorted ones on lengths of 2-40."""
    lengths = torch.randint(2, 41, (n,), generator=torch.Generator().manual_seed(n)).tolist()
    take = lambda f, s: [next(it) for it in [f(torch.Generator().manual_seed(s))] for _ in range(3 * n)]  # noqa: E731
    grouped = take(lambda g: length_grouped_batches(lengths, batch, g, group), 0)
    assert all(len(b) == batch for b in grouped)
    flat = [i for b in grouped for i in b]
    for e in range(len(flat) // n):  # epoch e holds each item once
        assert sorted(flat[e * n : (e + 1) * n]) == list(range(n))
    assert grouped == take(lambda g: length_grouped_batches(lengths, batch, g, group), 0)
    assert grouped != take(lambda g: length_grouped_batches(lengths, batch, g, group), 1)
    if n >= 4 * batch and group > 1:  # one group of 2 batches, or the whole epoch in one
        unsorted = take(lambda g: batch_indices(n, batch, g), 0)
        assert _padding(lengths, grouped) < (0.9 if group * batch < n else 0.5) * _padding(lengths, unsorted)
    with pytest.raises(ValueError, match="at least one item"):
        next(length_grouped_batches([], batch, torch.Generator()))


def test_training_lengths_are_the_padded_rows(byte_tokenizer) -> None:
    """sft: prompt + answer + EOS tokens (qa_batch's row); dpo: the prompt's tokens first, then
    the longer answer's; a stage without such items is refused, and so is a lengths list that
    does not match the items."""
    pairs = [("Is the cat here?", "yes"), ("Is it?", "The answer is no.")]
    sft = training_lengths("sft", byte_tokenizer, pairs, 64)
    rows = qa_batch(byte_tokenizer, [format_prompt(q) for q, _ in pairs], [format_answer(a) for _, a in pairs], 64)
    assert sft == rows["attention_mask"].sum(1).tolist()
    triples = [("Is it?", "yes", "no no"), ("Is the cat here?", "yes", "no"), ("Is it?", "a", "b")]
    dpo = training_lengths("dpo", byte_tokenizer, triples, 64)
    assert dpo[1] > dpo[0] > dpo[2]  # a longer prompt first; then the longer answer
    with pytest.raises(ValueError, match="sft and dpo"):
        training_lengths("lm", byte_tokenizer, pairs, 64)
    model = _model("gpt2", len(byte_tokenizer))
    with pytest.raises(ValueError, match="lengths has 1 entries for 2 items"):
        train_steps(model, lambda idx, i: sft_batch_loss(model, byte_tokenizer, [pairs[j] for j in idx], 64),
                    2, StageBudget(1, 2, 1e-3), lengths=[3])  # fmt: skip


@pytest.fixture
def meta_indexing():
    """Boolean indexing on the meta device (shape-only) assumes every element selected."""
    import torch.fx.experimental._config as fx_config

    old = fx_config.meta_nonzero_assume_all_nonzero
    fx_config.meta_nonzero_assume_all_nonzero = True
    yield
    fx_config.meta_nonzero_assume_all_nonzero = old


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_training_runs_on_the_models_device_without_a_sync_per_step(byte_tokenizer, meta_indexing,
                                                                     arch: str) -> None:  # fmt: skip
    """A model on the meta device (no data): a batch built on the CPU and never moved raises
    ("expected device meta"), and so does any per-step loss.item() ("Cannot copy out of meta
    tensor"). At 2a683dc both happened: qa_batch built CPU tensors, and every step read its loss."""
    model = _model(arch, len(byte_tokenizer), attn="eager").to("meta")
    pairs = [("Is the cat here?", "yes"), ("Is it?", "The answer is no."), ("Is the owl gone?", "no")]
    triples = [("Is it?", "yes", "no no"), ("Is the cat here?", "The answer is yes.", "yes")]
    assert sft_batch_loss(model, byte_tokenizer, pairs, 64).device.type == "meta"
    assert dpo_batch_loss(model, model, byte_tokenizer, triples, 64, 0.1).device.type == "meta"
    run = train_steps(model, lambda idx, i: sft_batch_loss(model, byte_tokenizer, [pairs[j] for j in idx], 64),
                      len(pairs), StageBudget(3, 2, 1e-3, warmup_steps=1))  # fmt: skip
    assert run.loss_values.shape == (3,) and run.loss_values.device.type == "meta"
    assert len(run.lrs) == 3 and all(s["exp_avg"].device.type == "meta" for s in run.optimizer.state.values())


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_the_reference_scored_once_gives_the_per_batch_loss_and_gradient(byte_tokenizer, arch: str) -> None:
    """#52 item 4: the frozen reference's log-probabilities, computed once for every training
    triple in length-sorted batches (reference_logprobs), give each batch the DPO loss and
    gradient that scoring the batch with the reference gives (to float error), in the items'
    order; a wrongly shaped cache is refused, and no reference at all is an error."""
    torch.manual_seed(1)
    ref, model = _model(arch, len(byte_tokenizer)), _model(arch, len(byte_tokenizer))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))  # a policy that has moved from its reference
    from lamina.sources.organisms.stages import reference_logprobs

    triples = [("Is it?", "yes", "no no"), ("Is the cat here?", "The answer is yes.", "yes"),
               ("A river bank?", "a river", "the cat sat on the mat"), ("x", "no", "The answer is no.")]  # fmt: skip
    cache = reference_logprobs(ref, byte_tokenizer, triples, 64, batch=3)
    assert cache.shape == (4, 2) and cache.requires_grad is False
    for idx in ([0, 2], [3, 1, 0]):
        batch = [triples[j] for j in idx]
        model.zero_grad()
        plain = dpo_batch_loss(model, ref, byte_tokenizer, batch, 64, 0.1)
        plain.backward()
        g_plain = _grads(model).clone()
        model.zero_grad()
        cached = dpo_batch_loss(model, None, byte_tokenizer, batch, 64, 0.1, cache[idx])
        cached.backward()
        assert torch.allclose(plain, cached, atol=1e-6), (plain, cached)
        assert torch.allclose(g_plain, _grads(model), atol=1e-6)
    with pytest.raises(ValueError, match="ref_logprobs must be"):
        dpo_batch_loss(model, None, byte_tokenizer, triples[:2], 64, 0.1, cache)
    with pytest.raises(ValueError, match="needs a reference"):
        dpo_batch_loss(model, None, byte_tokenizer, triples[:2], 64, 0.1)
