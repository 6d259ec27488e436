"""Training objectives of the organisms: language modelling, masked SFT and DPO, in nats.

All functions take the model's ``logits`` (B, T, V) for ``input_ids`` (B, T), and score the
next-token predictions: position t predicts token t+1, so there are T-1 targets per row.
A ``target_mask`` (B, T) marks which *tokens* are scored as targets (its column 0 is ignored:
the first token has no prediction). Written here rather than taken from a trainer so later
chapters can read raw gradients and optimiser state.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def token_logprobs(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """log p(x_{t+1} | x_{<=t}) for every position.

    logits: (B, T, V), input_ids: (B, T) -> (B, T-1), nats (<= 0).
    """
    logp = F.log_softmax(logits[:, :-1].float(), dim=-1)
    return logp.gather(-1, input_ids[:, 1:, None]).squeeze(-1)


def lm_loss(
    logits: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Next-token cross-entropy averaged over target tokens.

    L = -(1/N) sum_{b,t: m[b,t+1]=1} log p(x[b,t+1] | x[b,<=t]),  N = number of such targets.
    logits: (B, T, V), input_ids: (B, T), attention_mask: (B, T) or None (all tokens)
    -> scalar, nats per token.
    """
    mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
    return sft_loss(logits, input_ids, mask)


def sft_loss(
    logits: torch.Tensor, input_ids: torch.Tensor, target_mask: torch.Tensor
) -> torch.Tensor:
    """Masked cross-entropy: the LM loss on the answer tokens only (prompt and padding excluded).

    L = -(sum_{b,t} m[b,t+1] log p(x[b,t+1] | x[b,<=t])) / (sum_{b,t} m[b,t+1]).
    logits: (B, T, V), input_ids: (B, T), target_mask: (B, T) in {0, 1}, 1 on answer tokens
    -> scalar, nats per answer token.
    """
    m = target_mask[:, 1:].to(torch.float32)
    lp = token_logprobs(logits, input_ids)
    return -(lp * m).sum() / m.sum().clamp_min(1.0)


def sequence_logprob(
    logits: torch.Tensor, input_ids: torch.Tensor, target_mask: torch.Tensor
) -> torch.Tensor:
    """Summed log-probability of the masked tokens of each row: log pi(y | x).

    logits: (B, T, V), input_ids: (B, T), target_mask: (B, T) -> (B,), nats.
    """
    m = target_mask[:, 1:].to(torch.float32)
    return (token_logprobs(logits, input_ids) * m).sum(-1)


def dpo_loss(
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    ref_chosen: torch.Tensor,
    ref_rejected: torch.Tensor,
    beta: float,
) -> torch.Tensor:
    """Direct Preference Optimisation loss (Rafailov et al. 2023) against a frozen reference.

    L = -mean_b log sigmoid(beta [(log pi(y_w|x) - log pi_ref(y_w|x))
                                   - (log pi(y_l|x) - log pi_ref(y_l|x))])
    Inputs are sequence log-probabilities (see :func:`sequence_logprob`), each (B,) in nats;
    ``beta`` is dimensionless. -> scalar, nats. At policy = reference it equals log 2.
    """
    margin = (policy_chosen - ref_chosen) - (policy_rejected - ref_rejected)
    return -F.logsigmoid(beta * margin).mean()
