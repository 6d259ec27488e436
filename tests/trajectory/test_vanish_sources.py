"""The vanish rows' known-answer sources (issue 50, item 3): the planted source carries an
effect its controls remove, the survivor source (the vanish rows' null) one they keep.

At 5a3ca44 the planted convergence was one category direction at every layer: a trajectory
whose layers are permuted keeps it (a state carries its category whichever layer it sits at),
so the shuffled-layers control kept the effect on the planted source as on the survivor; and
the planted homograph separation grows from 22% of depth, so a shuffled-layers control (one
permutation per pair, the ratio's baseline in place) moves delta(L) to a random later layer
that keeps about half of the excess, significant over 20 pairs. The vanish rows read
"reproduced" on no planted seed (power 0%). The planted source of the vanish rows is now the
removable source (lamina.trajectory.realistic.REMOVABLE)."""

import numpy as np
import pytest

from lamina.states.controls import shuffle_layers
from lamina.trajectory import calibration as cal
from lamina.trajectory.judging import control_result
from lamina.trajectory.sizes import CHAPTER_POOLING, chapter_prompts
from lamina.trajectory.stat_tests import control_summaries, paper1_test, shuffle_options
from lamina.trajectory.synthetic import synthetic_states

SEEDS = range(5)
PLANTED = cal.KIND["planted"][0]  # the source of the vanish rows' power


def _shuffled_share(chapter: str, kind: str, seed: int) -> tuple[float, float]:
    """(remaining share, the control's p) of the chapter's effect under shuffled layers, as
    the calibration computes them (:func:`lamina.trajectory.calibration.chapter_rows`)."""
    t = chapter_prompts(chapter)
    x = synthetic_states(t, kind, seed, CHAPTER_POOLING[chapter])
    layers = list(range(x.shape[1]))
    s = paper1_test(chapter, x, t, layers, n_bootstrap=50, n_permutations=200, seed=seed)
    xs = shuffle_layers(x, seed, **shuffle_options(chapter, t, s))
    r = control_result(s, control_summaries(chapter, {"s": xs}, t, layers, seed=seed)["s"])
    return r.fraction, float("nan") if r.p is None else r.p


def _removed(fraction: float, p: float) -> bool:
    """Rule 7 of lamina.evidence.decide: less than half remains, and what remains is not
    significant at the vanish rows' 0.05."""
    return fraction < 0.5 and not (p < 0.05 and fraction > 0)


@pytest.mark.slow
@pytest.mark.parametrize("chapter", [pytest.param("convergence", marks=pytest.mark.xfail(
    strict=True, reason="a known shortfall of the vanish rule, not of the source: shuffled "
    "layers leave the share of pairs that land on one layer, 1/(L+1) of a layer-specific code "
    "(5-9% here), and rule 7 requires that remainder to be not significant, which at 180 "
    "prompts it is on only about 3 of 5 seeds; an equivalence rule for vanish rows (the "
    "remaining share's upper bound below one half) would read it")), "bifurcation"])  # fmt: skip
def test_shuffled_layers_remove_the_planted_effect_and_keep_the_survivors(chapter):
    """Power >= 80% needs the control to remove the effect on the vanish rows' planted source
    at nearly every seed (here >= 4 of 5); the survivor source must keep it as often."""
    planted = [_shuffled_share(chapter, PLANTED, s) for s in SEEDS]
    survivor = [_shuffled_share(chapter, "survivor", s) for s in SEEDS]
    assert sum(_removed(*r) for r in planted) >= 4, planted
    assert sum(not _removed(*r) for r in survivor) >= 4, survivor


def test_the_category_code_is_per_layer_on_the_planted_source_and_one_on_the_survivor():
    from lamina.trajectory.fitted import background
    from lamina.trajectory.realistic import _category_directions, draw

    t = chapter_prompts("convergence")
    dr = draw(t, 3, background("mean"))
    one, own = _category_directions(dr, 0.0), _category_directions(dr, 1.0)  # (L+1, K, d)
    assert np.allclose(one, one[:1])  # the same direction at every layer
    cos = np.einsum("akd,bkd->abk", own, own)  # (L+1, L+1, K)
    off = cos[~np.eye(len(own), dtype=bool)]
    assert np.allclose(np.diagonal(cos).T, 1.0) and np.abs(off).max() < 0.5
    with pytest.raises(ValueError, match="renewal"):
        _category_directions(dr, 1.5)
