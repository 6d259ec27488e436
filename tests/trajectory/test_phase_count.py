"""The detected-phases count (issue 50, item 3): why it cannot decide at this design, each part
checked, and its row's state.

At 5a3ca44 the row was calibrated as a count claim and had 0% power: the detector found 1
phase on the planted three-band source at every seed, while the bands row read "reproduced"
there. The planted source moves the fixed bands' means by the paper's margin, but its profile
is not three plateaus, and the background's embedding transition (SIM(0) ~ 0, a real model's,
kept by the null) hides any step of the paper's size from a segmentation with segments of at
least 2."""

import numpy as np
import pytest

from lamina.evidence.claims import UNDECIDABLE
from lamina.evidence.decide import Context, Measurement, decide
from lamina.trajectory import layerwise_cosine
from lamina.trajectory.claims import DETECTED, PHASE_MARGIN
from lamina.trajectory.phases import detect_phases, fixed_phase_bands
from lamina.trajectory.sizes import chapter_mask, chapter_prompts
from lamina.trajectory.synthetic import synthetic_states, synthetic_tokens

STEP = 2 * PHASE_MARGIN  # the gap between GPT-2's quoted band middles that the margin halves


def _plateaus(step: float, first: float | None) -> np.ndarray:
    """(12,) three plateaus on the fixed bands, elaboration ``step`` above its neighbours,
    with the embedding transition SIM(0) set to ``first`` (None: left on its plateau)."""
    bands = fixed_phase_bands(12)
    p = np.where(bands == 1, 0.775, 0.775 - step)
    if first is not None:
        p[0] = first
    return p


def test_the_detector_sees_three_plateaus_only_without_the_embedding_outlier():
    assert detect_phases(_plateaus(STEP, None)).n_phases == 3
    assert detect_phases(_plateaus(STEP, 0.0)).n_phases == 2
    assert detect_phases(_plateaus(0.4, 0.0)).n_phases == 3


@pytest.mark.slow
def test_the_realistic_sources_give_one_phase_null_and_planted_alike():
    t = chapter_prompts("three_phase")
    t = t[chapter_mask("three_phase", t, synthetic_tokens(t, "mean"))].reset_index(drop=True)
    for kind in ("null", "planted"):
        for seed in range(2):
            sim = np.asarray(layerwise_cosine(synthetic_states(t, kind, seed, "mean")))
            assert abs(sim.mean(0)[0]) < 0.1  # the embedding transition the null keeps
            assert detect_phases(sim.mean(0)).n_phases == 1, (kind, seed)


def test_the_count_row_reads_undecidable_with_its_reason():
    row = decide(DETECTED, Measurement(estimate=1.0, ci_low=1.0, ci_high=1.0), Context(model="m"))
    assert row.verdict == UNDECIDABLE
    assert "embedding transition" in row.reason and "plateaus" in row.reason
