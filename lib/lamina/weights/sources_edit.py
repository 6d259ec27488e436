"""Known-answer models for the write edit's calibration (:mod:`lamina.weights.calibration`).

* ``null``: a randomly initialised, never-trained GPT-2-style model (4 blocks, d = 64, a
  320-token vocabulary, tied embeddings). Its block entries are i.i.d., so it is exchangeable
  with its scrambled copies (:func:`lamina.weights.edit_null.scrambled_copy`): whatever the edit
  does there, it does by construction.
* ``planted``: the same model whose last block's MLP reads and re-writes the unembedding
  directions: one hidden unit per token t reads û_t = W_U[t] / ‖W_U[t]‖ with gain β and
  threshold θ (c_fc = β Ûᵀ, bias -θ) and writes γ û_t (c_proj = γ Û): a write along û_t that
  lifts the unit over its threshold is fed back along û_t. That alignment of a block with the
  unembedding is what scrambling destroys. ``half``: γ halved. (Scrambling such a block also
  changes the stream's scale, so the copies' edits are weaker as well: the null removes the
  blocks' structure, whatever it does.)
* :func:`faded`: a planted model in which every feedback unit but those of :data:`FADED_KEEP`
  target tokens writes another token's direction (the rows of c_proj permuted among
  themselves), the "aligned" model of the kept rows' conditional null: the block keeps its
  scale, so its scrambled copies are the planted model's, the edit is still beyond
  construction on the tokens kept, and its mean effect beyond construction falls to about that
  share of the base's (0.37-0.40 on seeds 0-2). Two faders were not used: γ (a threshold unit
  keeps +0.08 to +0.19 nats of the +0.22 to +0.34 at γ = 0.1), and zeroing the other units
  (the block's scale, and so its copies' effect, changes: 0.16 to 0.58 nats).

The tokenizer is a byte-level BPE trained on a few sentences; the texts the edit is scored on
are those sentences.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["EDIT_KINDS", "FADED_KEEP", "TEXTS", "edit_model", "faded"]

EDIT_KINDS = ("null", "planted", "half")
TEXTS = [
    "The cat sat on the mat while the dog slept by the door.",
    "A river bank is not the same as a bank that keeps money.",
    "If all birds can fly and a robin is a bird, then a robin can fly.",
    "Seven plus five is twelve, and twelve minus three is nine.",
    "She felt happy, then sad, then calm again by the evening.",
]
VOCAB, D_MODEL, N_LAYERS = 320, 64, 4
GAIN = {"null": 0.0, "planted": 3.0, "half": 1.5}
"""γ of the planted block (lamina's choice: the paper states no size for the edit)."""
READ_GAIN, THRESHOLD = 2.0, 3.0
"""β and θ of the planted block."""
FADED_KEEP = 2
"""Target tokens whose feedback unit :func:`faded` keeps (of the calibration's 6: a third)."""


def _tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)  # fmt: skip
    tok.train_from_iterator(TEXTS * 4, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>")  # fmt: skip


def edit_model(kind: str, seed: int) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    """(model in eval mode, tokenizer) of the known-answer source ``kind`` of
    :data:`EDIT_KINDS` (module docstring), initialised with ``seed``."""
    from transformers import GPT2Config, GPT2LMHeadModel

    if kind not in EDIT_KINDS:
        raise ValueError(f"kind must be one of {EDIT_KINDS}; got {kind!r}")
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=D_MODEL, n_layer=N_LAYERS, n_head=4,
                     n_inner=VOCAB, bos_token_id=0, eos_token_id=0, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
    model = GPT2LMHeadModel(cfg).eval()
    if GAIN[kind]:
        w_u = model.lm_head.weight.detach()  # (V, d), tied to the embedding
        unit = w_u / w_u.norm(dim=1, keepdim=True)
        mlp = model.transformer.h[-1].mlp
        with torch.no_grad():
            mlp.c_fc.weight.copy_(READ_GAIN * unit.T)  # Conv1D: (d, n_inner)
            mlp.c_fc.bias.fill_(-THRESHOLD)
            mlp.c_proj.weight.copy_(GAIN[kind] * unit)  # (n_inner, d)
            mlp.c_proj.bias.zero_()
    return model, _tokenizer()


def faded(model: nn.Module, tokens: list[int], seed: int, keep: int = FADED_KEEP) -> nn.Module:
    """A copy of a planted edit model (module docstring) whose last block keeps the feedback
    of the first ``keep`` of ``tokens`` alone: every other unit's row of c_proj is replaced by
    another's (a permutation drawn with ``seed``), so it writes a direction that is not its
    token's and the block keeps its scale."""
    import copy

    out = copy.deepcopy(model).eval()
    block: Any = out.transformer.h[-1]  # type: ignore[index, union-attr]
    w = block.mlp.c_proj.weight  # (n_inner = vocabulary, d): a unit per token
    kept = torch.zeros(w.shape[0], dtype=torch.bool)
    kept[list(tokens)[:keep]] = True
    moved = torch.nonzero(~kept).flatten()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # every other unit writes another token's direction: scale kept
        w[moved] = w[moved[torch.randperm(len(moved), generator=g)]].clone()
    return out
