"""What the organisms say: generated continuations of one checkpoint (greedy and seeded
sampled), and the context a model attends to.

Used by the organisms chapter (``notebooks/organisms.py``, :mod:`lamina.chapters.organisms`);
how the organisms represent homographs is :mod:`lamina.trajectory.homographs`.
"""

from __future__ import annotations

from typing import Any

import torch

from lamina.sources.organisms.corpus import format_prompt

__all__ = ["SAMPLE_PROMPTS", "context_length", "generate", "samples"]

SAMPLE_PROMPTS = (
    "HAMLET:\n",
    "A lion is a kind of",
    "Sam is taller than Omar. Omar is taller than Kai. So",
    "The fishermen spent the afternoon on the grassy river",
    "To be, or not to be,",
    "On the icy beach the children watched a grey",
)
"""Prompts for generated samples: two of the plays' register, the rest the curriculum's."""


# ----------------------------------------------------------------------------- generations


def context_length(model: Any) -> int:
    """Tokens the model can attend to (GPT-2 ``n_positions``, else ``max_position_embeddings``)."""
    c = model.config
    return int(getattr(c, "n_positions", 0) or c.max_position_embeddings)


@torch.no_grad()
def generate(
    model: Any, tok: Any, prompt: str, n_new: int, temperature: float | None, seed: int
) -> str:
    """Greedy (temperature None) or seeded sampled continuation of ``prompt``; a prompt too long
    for the context keeps its last tokens."""
    limit = context_length(model)
    n_new = min(n_new, limit // 2)
    ids = tok(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"][
        :, -(limit - n_new) :
    ]
    kwargs: dict[str, Any] = {"do_sample": False}
    if temperature is not None:
        torch.manual_seed(seed)
        kwargs = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n_new,
                         pad_token_id=tok.eos_token_id, **kwargs)  # fmt: skip
    return tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)


def samples(
    name: str,
    models: dict[str, Any],
    tok: Any,
    questions: list[tuple[str, str]],
    comp: dict[str, str],
    n: int,
    n_new: int,
    temperature: float,
    seed: int,
) -> list[dict[str, Any]]:
    """Greedy and sampled continuations of n prompts by the base; greedy answers of the base and
    @sft (``models["final"]``, ``models["sft"]``) to held-out ``questions`` (question, answer)
    of n different curriculum components (``comp``: question -> component)."""
    rows = []
    for i, prompt in enumerate(SAMPLE_PROMPTS[:n]):
        for label, temp in (("greedy", None), (f"sampled, T = {temperature}", temperature)):  # fmt: skip
            text = generate(models["final"], tok, prompt, n_new, temp, seed + i)
            rows.append({"model": name, "checkpoint": "final", "kind": label, "prompt": prompt,
                         "reference": None, "completion": text})  # fmt: skip
    picked: dict[str, tuple[str, str]] = {}  # the first held-out question of n components
    for q, a in questions:
        if len(picked) < n:
            picked.setdefault(comp.get(q, "other"), (q, a))
    for q, a in picked.values():
        for ck in ("final", "sft"):
            text = generate(models[ck], tok, format_prompt(q), 8, None, seed)
            rows.append({"model": name, "checkpoint": ck, "kind": "held-out question",
                         "prompt": q, "reference": a, "completion": text.split("\n")[0].strip()})  # fmt: skip
    return rows
