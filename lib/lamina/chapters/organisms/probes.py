"""What the organisms say and how they represent homographs: probes of one checkpoint.

Used by :mod:`lamina.chapters.organisms` (the appendix chapter on the model organisms).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import torch

from lamina.sources.organisms.corpus import format_prompt
from lamina.sources.prompts import load_prompts
from lamina.states.extract import extract
from lamina.trajectory import bifurcation

__all__ = ["SAMPLE_PROMPTS", "context_length", "generate", "homograph_separation", "samples"]

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


# ----------------------------------------------------------------------------- homographs


def _tail(text: str, tokenizer: Any, limit: int) -> str:
    """Drop leading words until ``text`` fits the context (only the micro organisms need it):
    the last token, the one compared, is kept."""
    words = text.split(" ")
    while len(words) > 1 and len(tokenizer(" ".join(words))["input_ids"]) > limit:
        words = words[1:]
    return " ".join(words)


def homograph_separation(model: Any, tokenizer: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Do the organism's last-token states tell each homograph's two senses apart?

    For every homograph of ``data/prompts/ambiguous.jsonl`` with ``word_last`` rows, the
    separation delta(l) of its two senses (:func:`lamina.trajectory.bifurcation`, chord units of
    the unit sphere, [0, 2]; 1 - cos = delta^2 / 2) is compared with that of its matched control
    (the same two contexts ending in an unambiguous word). ratio = delta_homograph(L) /
    delta_control(L) at the final layer L (residual stream before the final norm).

    Prompts longer than the context (only the micro organisms') lose leading words.

    -> (per word: word, senses, word_tokens, separation_layer0, separation, control_separation,
    ratio, separated (ratio > 1); per layer: layer, role, median separation).
    """
    table = load_prompts("ambiguous")
    table = table[table["word_last"].astype(bool)]
    one = table[table["sense"] == "ctx1"].set_index("pair_id")
    two = table[table["sense"] == "ctx2"].set_index("pair_id")
    pairs = one.index.intersection(two.index)
    texts = (list(one.loc[pairs, "prompt"]) + list(two.loc[pairs, "prompt"])
             + list(one.loc[pairs, "control_prompt"]) + list(two.loc[pairs, "control_prompt"]))  # fmt: skip
    texts = [_tail(t, tokenizer, context_length(model)) for t in texts]
    states = np.asarray(extract(model, tokenizer, texts, pool="last", progress=False).states)
    a, b, ca, cb = np.split(states, 4)
    dh, dc = bifurcation(a, b).delta, bifurcation(ca, cb).delta  # (n_words, L+1)
    words = pd.DataFrame({
        "word": one.loc[pairs, "word"].to_numpy(),
        "senses": [f"{s} / {t}" for s, t in zip(one.loc[pairs, "sense_label"],
                                                 two.loc[pairs, "sense_label"], strict=True)],
        "control_word": one.loc[pairs, "control_word"].to_numpy(),
        "word_tokens": [len(tokenizer(" " + w, add_special_tokens=False)["input_ids"])
                        for w in one.loc[pairs, "word"]],
        "separation_layer0": dh[:, 0], "separation": dh[:, -1],
        "control_separation": dc[:, -1], "ratio": dh[:, -1] / dc[:, -1],
    })  # fmt: skip
    words["separated"] = words["ratio"] > 1
    layers = [
        {"layer": layer, "role": role, "separation": float(np.median(d[:, layer]))}
        for role, d in (("homograph", dh), ("control", dc))
        for layer in range(dh.shape[1])
    ]
    return words, pd.DataFrame(layers)
