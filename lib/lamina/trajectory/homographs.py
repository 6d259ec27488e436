"""Do a model's last-token states tell a homograph's two senses apart? (the organisms
chapter's probe, ``notebooks/organisms.py``; paper 1's bifurcation measure on the homographs of
``data/prompts/ambiguous.jsonl``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from lamina.sources.organisms.probes import context_length
from lamina.sources.prompts import load_prompts
from lamina.states.extract import extract
from lamina.trajectory.metrics import bifurcation

__all__ = ["homograph_separation"]


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
