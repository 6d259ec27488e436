"""The question -> answer format of the organisms (pretraining QA documents, SFT, DPO).

A question is rendered as :data:`QA_TEMPLATE`; the answer follows after one space, and the
tokenised training example ends with :data:`EOS`, which the SFT and DPO losses score.
"""

from __future__ import annotations

__all__ = ["EOS", "QA_TEMPLATE", "format_answer", "format_prompt"]

QA_TEMPLATE = "Question: {question}\nAnswer:"
"""Prompt format for SFT and DPO; the answer follows after one space and ends with EOS."""

EOS = "<|endoftext|>"
"""The organisms' one special token: BOS, EOS and padding."""


def format_prompt(question: str) -> str:
    """Render a curriculum question as the prompt the model completes (see :data:`QA_TEMPLATE`)."""
    return QA_TEMPLATE.format(question=question.strip())


def format_answer(answer: str) -> str:
    """The completion for an answer: a leading space, no trailing EOS (added by the tokenizer step)."""
    return " " + answer.strip()
