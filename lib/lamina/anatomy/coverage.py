"""Does the importance range's CI cover? A coverage check by simulation at the chapter's size.

The range statistic, log10(max / min delta_pct) over the layers whose CI excludes 0, is a
ratio of a maximum and a minimum, and its CI resamples few units (documents): a percentile
bootstrap over n clusters is too narrow for small n. :func:`range_coverage` measures the share
of simulated samples whose interval covers the truth, for the plain percentile interval and
for the expanded percentile interval the chapter uses
(:func:`lamina.anatomy.heldout.expanded_level`), by a double bootstrap: the population is a
sweep's own units (a real model's, or a known-answer source's); each simulated sample draws
n of them with replacement; the truth is the population's statistic over the same layers.
"""

from __future__ import annotations

import numpy as np

from lamina.anatomy.heldout import cluster_draws, expanded_level
from lamina.anatomy.importance import UnitSums, log_range

__all__ = ["range_coverage"]


def range_coverage(
    us: UnitSums,
    keep: np.ndarray,
    n_units: int | None = None,
    *,
    n_sims: int = 200,
    n_bootstrap: int = 1_000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, float]:
    """Coverage of the range CI over ``n_sims`` samples of ``n_units`` units (None: as many as
    the population ``us`` has) drawn from ``us``, the statistic over the layers ``keep`` (L,).
    -> {percentile, expanded (the shares covering the truth), n_units, n_sims, truth (log10)}."""
    g = us.n_units if n_units is None else int(n_units)
    truth = float(log_range(us.delta_pct(), keep))
    rng = np.random.default_rng(seed)
    a_pct, a_exp = 1 - level, 1 - expanded_level(level, g)
    hits = {"percentile": 0, "expanded": 0}
    for sim in range(n_sims):
        idx = rng.integers(0, us.n_units, g)
        sample = UnitSums(us.counts[idx], us.base[idx], us.layers[idx], us.layer_ids)
        draws = log_range(sample.delta_pct(cluster_draws(g, n_bootstrap, seed + 1 + sim)), keep)
        draws = draws[np.isfinite(draws)]
        for name, a in (("percentile", a_pct), ("expanded", a_exp)):
            lo, hi = np.quantile(draws, [a / 2, 1 - a / 2])
            hits[name] += int(lo <= truth <= hi)
    return {
        "percentile": hits["percentile"] / n_sims,
        "expanded": hits["expanded"] / n_sims,
        "n_units": g,
        "n_sims": n_sims,
        "truth": truth,
    }
