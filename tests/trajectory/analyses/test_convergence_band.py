"""The convergence figure's per-layer band (lamina.trajectory.analyses.convergence.layer_band)
belongs to the line it is drawn around: the claim's profile, each prompt's own item left out."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lamina.trajectory import convergence_index_per_prompt
from lamina.trajectory.analyses.convergence import layer_band
from lamina.trajectory.convergence_stats import ci_profile, distance_stack, item_units


def _items_sharing_a_word(seed: int = 0) -> tuple[np.ndarray, pd.DataFrame]:
    """3 categories x 10 items x 6 prompts, 4 layers, d = 16: an item's prompts share a strong
    direction of their own (its word), categories one whose weight grows with depth from 0 at
    the first layer."""
    rng = np.random.default_rng(seed)
    n_cat, n_item, n_frame, m, d = 3, 10, 6, 4, 16
    cat_dir = rng.normal(size=(n_cat, d))
    rows, states = [], []
    for c in range(n_cat):
        for i in range(n_item):
            word = rng.normal(size=d)
            for f in range(n_frame):
                layers = [0.3 * k * cat_dir[c] + word + 0.1 * rng.normal(size=d) for k in range(m)]
                states.append(layers)
                rows.append({"category": f"c{c}", "item": f"w{c}-{i}", "frame": f})
    return np.asarray(states), pd.DataFrame(rows)


def test_band_contains_the_line_it_is_drawn_around():
    x, table = _items_sharing_a_word()
    lab = table["category"].to_numpy()
    line = ci_profile(distance_stack(x), lab, units=item_units(table))  # (m,) the figure's line
    lo, hi = layer_band(x, table, seed=0, n_resamples=300)
    assert lo.shape == hi.shape == line.shape
    assert np.all(lo <= line) and np.all(line <= hi), (lo, line, hi)
    # the test can fail: at the first layer (no category signal) the prompt-mean of the
    # per-prompt index, which counts an item's siblings as its neighbours (the statistic the
    # band was drawn from before), lies above this band, and the line inside it
    per_prompt_mean = np.nanmean(convergence_index_per_prompt(x, lab), 0)
    assert per_prompt_mean[0] > hi[0], (per_prompt_mean, lo, hi)


def test_band_is_reproducible_and_narrows_with_its_level():
    x, table = _items_sharing_a_word(1)
    a = layer_band(x, table, seed=3, n_resamples=200)
    b = layer_band(x, table, seed=3, n_resamples=200)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    lo80, hi80 = layer_band(x, table, seed=3, n_resamples=200, confidence=0.8)
    assert np.all(lo80 >= a[0]) and np.all(hi80 <= a[1])
