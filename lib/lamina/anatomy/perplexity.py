"""Perplexity of a causal LM on token windows, with a bootstrap CI over sequences.

Perplexity is over next-token predictions: a sequence of T tokens contributes T-1 predictions.
NLL is in nats per predicted token; ppl = exp(mean NLL over all predicted tokens).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from lamina.core.types import TokenIdBatch, TokenSeq
from lamina.evidence.stats import paired_bootstrap_ci
from lamina.sources.models import get_adapter

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "PerplexityResult",
    "TokenIds",
    "chunk_tokens",
    "eval_mode",
    "paired_diff_ci",
    "perplexity",
    "perplexity_result",
    "require_lm",
    "sequence_batches",
    "sequence_nll",
]

# (n_seq, T) token ids, or a list of 1-D sequences (batched by equal length, never padded)
TokenIds = TokenIdBatch | Sequence[Sequence[int]] | Sequence[TokenSeq]

# ----------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------


def chunk_tokens(
    tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], seq_len: int
) -> TokenIdBatch:
    """Tokenise ``texts``, join them with the EOS token between documents, and cut the stream
    into non-overlapping windows: LongTensor (n_seq, seq_len); the remainder is dropped."""
    if seq_len < 2:
        raise ValueError(f"seq_len must be >= 2, got {seq_len}")
    eos = tokenizer.eos_token_id
    stream: list[int] = []
    for text in texts:
        stream += list(tokenizer(text, add_special_tokens=False)["input_ids"])
        if eos is not None:
            stream.append(int(eos))
    n = len(stream) // seq_len
    if n == 0:
        raise ValueError(f"{len(stream)} tokens are fewer than one window of {seq_len}")
    return torch.tensor(stream[: n * seq_len], dtype=torch.long).view(n, seq_len)


def sequence_batches(
    token_ids: TokenIds, batch_size: int
) -> tuple[list[tuple[np.ndarray, torch.Tensor]], int]:
    """Split sequences into batches of equal length (no padding): [(indices, (b, T) ids)], n."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if isinstance(token_ids, torch.Tensor):
        if token_ids.dim() != 2:
            raise ValueError(f"token_ids must be (n_seq, T), got shape {tuple(token_ids.shape)}")
        seqs = list(token_ids.long())
    else:
        seqs = [torch.as_tensor(s, dtype=torch.long).reshape(-1) for s in token_ids]
    if not seqs:
        raise ValueError("token_ids is empty")
    by_len: dict[int, list[int]] = {}
    for i, s in enumerate(seqs):
        if len(s) < 2:
            raise ValueError(f"sequence {i} has {len(s)} tokens; at least 2 are needed")
        by_len.setdefault(len(s), []).append(i)
    out = []
    for idx in by_len.values():
        for start in range(0, len(idx), batch_size):
            chunk = np.array(idx[start : start + batch_size])
            out.append((chunk, torch.stack([seqs[i] for i in chunk])))
    return out, len(seqs)


def sequence_nll(logits: torch.Tensor, ids: torch.Tensor) -> np.ndarray:
    """(B, T, V) logits, (B, T) ids -> (B,) summed NLL (nats) of the T-1 next-token predictions.

    NLL_t = logsumexp_v z_t,v - z_t,y_{t+1}, on a view of the logits (no copy of the (B, T, V)
    tensor, which for a 262k-token vocabulary is the costly part)."""
    lp = logits[:, :-1] if logits.dtype == torch.float32 else logits[:, :-1].float()
    target = ids[:, 1:].to(logits.device).long()
    nll = torch.logsumexp(lp, -1) - lp.gather(-1, target[..., None]).squeeze(-1)  # (B, T-1)
    return nll.double().sum(1).cpu().numpy()


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[None]:
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def require_lm(model: nn.Module) -> None:
    adapter = get_adapter(model)
    if not adapter.causal or adapter.unembedding_module(model) is None:
        raise ValueError("perplexity needs a causal LM with an unembedding (e.g. *ForCausalLM)")


# ----------------------------------------------------------------------------------------
# perplexity
# ----------------------------------------------------------------------------------------


def _mean_nll_ci(
    sums: np.ndarray, counts: np.ndarray, n_bootstrap: int, seed: int
) -> tuple[float, float]:
    """95% BCa bootstrap CI over sequences of sum(sums) / sum(counts) (nats per token)."""
    return paired_bootstrap_ci(
        (sums, counts),
        lambda s, c, axis: s.sum(axis) / c.sum(axis),
        n_bootstrap,
        seed,
        method="BCa",
    )


def paired_diff_ci(
    a: np.ndarray, b: np.ndarray, counts: np.ndarray, n_bootstrap: int, seed: int
) -> tuple[float, float]:
    """95% paired BCa bootstrap CI over sequences of (sum(a) - sum(b)) / sum(counts)."""
    return paired_bootstrap_ci(
        (a, b, counts),
        lambda x, y, c, axis: (x.sum(axis) - y.sum(axis)) / c.sum(axis),
        n_bootstrap,
        seed,
        method="BCa",
    )


@dataclass
class PerplexityResult:
    """Perplexity of a model on a set of sequences.

    ppl = exp(nll); nll = mean NLL in nats per predicted token (pooled over all sequences);
    ci_low/ci_high: 95% BCa bootstrap CI of ppl, resampling sequences (NaN with
    n_bootstrap=0); nll_per_seq: (n_seq,) mean NLL of each sequence; tokens_per_seq: (n_seq,)
    predicted tokens per sequence (T_i - 1).
    """

    ppl: float
    nll: float
    ci_low: float
    ci_high: float
    nll_per_seq: np.ndarray = field(repr=False)
    tokens_per_seq: np.ndarray = field(repr=False)

    @property
    def n_tokens(self) -> int:
        return int(self.tokens_per_seq.sum())


def perplexity_result(
    sums: np.ndarray, counts: np.ndarray, n_bootstrap: int, seed: int
) -> PerplexityResult:
    nll = float(sums.sum() / counts.sum())
    lo, hi = _mean_nll_ci(sums, counts, n_bootstrap, seed)
    return PerplexityResult(
        float(np.exp(nll)), nll, float(np.exp(lo)), float(np.exp(hi)), sums / counts, counts
    )


def perplexity(
    model: nn.Module,
    token_ids: TokenIds,
    *,
    batch_size: int = 8,
    n_bootstrap: int = 2000,
    seed: int = 0,
) -> PerplexityResult:
    """Perplexity of a causal LM on ``token_ids``: a LongTensor (n_seq, T) or a list of 1-D
    sequences (batched by equal length, never padded). Runs in eval mode without gradients."""
    require_lm(model)
    batches, n = sequence_batches(token_ids, batch_size)
    sums, counts = np.zeros(n), np.zeros(n)
    device = next(model.parameters()).device
    with eval_mode(model):
        for idx, ids in batches:
            sums[idx] = sequence_nll(model(input_ids=ids.to(device), use_cache=False).logits, ids)
            counts[idx] = ids.shape[1] - 1
    return perplexity_result(sums, counts, n_bootstrap, seed)
