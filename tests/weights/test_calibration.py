"""Paper 2's calibration runs: every calibrated claim judged on its known-answer sources, in the
calibration page's runs format."""

from __future__ import annotations

import pytest

from lamina.weights.calibration import RUN_COLUMNS, calibration_runs
from lamina.weights.claims import CLAIMS
from lamina.weights.settings import SignatureSettings
from lamina.weights.sources_mechanism import adam_source, adaptation_source

S = SignatureSettings(n_bootstrap=200, edit_tokens=4, edit_texts=5, edit_scrambled=5)


def test_fast_sources_read_their_null_and_planted_answers_apart():
    runs = calibration_runs([0, 1], S, sources=("optimizer", "adaptation"))
    assert tuple(runs.columns) == RUN_COLUMNS
    by = runs.set_index(["claim_id", "source", "seed"])["present"]
    for cid in ("p2-signature-optimizer-attenuates", "p2-signature-single-group"):
        assert not by.loc[(cid, "null")].any(), cid
        assert by.loc[(cid, "planted")].all(), cid


def test_the_optimizer_null_covers_the_first_steps_and_consistent_gradients():
    steps = {int(adam_source("null", seed)["step"].iloc[0]) for seed in range(5)}
    assert steps == {1, 3, 8, 30, 120}
    assert adaptation_source("null", 0).groupby("group").size().nunique() == 1


@pytest.mark.slow
def test_every_calibrated_claim_has_runs_from_every_source():
    runs = calibration_runs([0], S)
    calibrated = {c["id"] for c in CLAIMS if c.get("calibrated")}
    assert set(runs["claim_id"]) == calibrated
    assert set(runs["source"]) == {"null", "planted", "half"}
