"""The hazards measured on real and known-answer states (lamina.trajectory.hazards)."""

import numpy as np
import pandas as pd

from lamina.trajectory.hazards import pair_ratio_correlation


def _pairs_with_delta0_zero(seed: int, n: int = 20, m: int = 8, d: int = 16):
    """A bifurcation table of n pairs whose two contexts coincide at layer 0 (a rotary
    model's last token is its embedding) and separate afterwards; a homograph pair and its
    control pair share their contexts' drift."""
    rng = np.random.default_rng(seed)
    rows, x = [], []
    for p in range(n):
        base = rng.normal(size=(1, d))
        ctx = [rng.normal(size=(m, d)) for _ in range(2)]
        for role in ("ambiguous", "control"):
            word = rng.normal(size=(1, d)) if role == "control" else base
            for k, sense in enumerate(("ctx1", "ctx2")):
                h = np.repeat(word, m, axis=0) + 0.3 * np.cumsum(ctx[k] + 0.5 * rng.normal(size=(m, d)), 0)
                h[0] = word[0]
                x.append(h)
                rows.append({"role": role, "pair_id": f"p{p}", "sense": sense})
    return np.stack(x), pd.DataFrame(rows)


def test_pair_ratio_correlation_uses_the_chapters_baseline_when_delta0_is_zero():
    """Known answer (issue 33): on SmolLM2's states, where delta(0) = 0 for 20 of 20 pairs,
    the correlation was NaN on 2a683dc (its baseline was layer 0); the chapter's baseline is
    layer 1, and so is this one's."""
    x, t = _pairs_with_delta0_zero(0)
    r = pair_ratio_correlation(x, t)
    assert np.isfinite(r) and r > 0.2
