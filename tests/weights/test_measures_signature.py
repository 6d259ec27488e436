"""The unit of the signature rows that pool several pairs (late pretraining, early vs late): the
matrix, whose pairs share its W and its basis."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lamina.weights.measures_signature import late_pretraining, stage_not_objective
from lamina.weights.settings import SignatureSettings
from lamina.weights.summaries import per_matrix

S = SignatureSettings(k=8, n_bootstrap=200)
SD = 0.4  # the calibration source's log-normal spread of a matrix's RSF (lamina.weights.sources)


def _late_null(rng: np.random.Generator, n_layers: int = 8, n_pairs: int = 3) -> pd.DataFrame:
    """Late-pretraining deltas rows where ΔW is exactly as concentrated as W in expectation:
    log vs_weight = z(ΔW of the pair) - z(W of the matrix), W's draw shared by its pairs."""
    rows = []
    for layer in range(n_layers):
        for role in ("q", "k", "attn_out", "mlp_out"):
            z_w = rng.normal(0, SD)
            for i in range(n_pairs):
                z = rng.normal(0, SD)
                rows.append({"key": f"layers.{layer}.{role}", "layer": layer, "role": role, "k": 8,
                             "moment": "raw", "family": "pretraining", "phase": "late",
                             "pair": f"step-{i}→step-{i + 1}", "enrichment": 50.0,
                             "vs_weight": float(np.exp(z - z_w))})  # fmt: skip
    return pd.DataFrame(rows)


def test_late_pretraining_counts_matrices_not_matrix_pairs():
    m = late_pretraining(_late_null(np.random.default_rng(0)), S, 1.25)["qk"]
    assert m["n_units"] == 16  # 8 blocks x (Q, K); 48 rows


@pytest.mark.slow
def test_a_null_shared_by_the_pairs_of_one_matrix_reads_present_at_the_tests_rate():
    # pooling the 3 pairs of each matrix as 48 independent units read this null present in about
    # 12% of draws (W's draw counted three times); one unit per matrix keeps the 5% rate
    rng = np.random.default_rng(1)
    hits = []
    for _ in range(300):
        m = late_pretraining(_late_null(rng), S, 1.25)["qk"]
        hits.append(m["p"] is not None and m["p"] < 0.05)
    assert np.mean(hits) <= 0.085


def test_per_matrix_is_the_geometric_mean_of_each_matrix_over_its_pairs():
    values = pd.Series([2.0, 8.0, 3.0, np.nan, 5.0])
    keys = pd.Series(["a", "a", "b", "b", "c"])
    assert np.allclose(per_matrix(values, keys), [4.0, 3.0, 5.0])


def test_early_against_late_pairs_each_matrix_with_itself():
    rng = np.random.default_rng(2)
    late = _late_null(rng)
    early = late.assign(phase="early", enrichment=late["enrichment"] * 1.5,
                        pair=late["pair"].str.replace("step", "early"))  # fmt: skip
    both = pd.concat([early, late], ignore_index=True)
    m = stage_not_objective(both, S)
    assert m["n_units"] == 16  # the write matrices
    assert np.isclose(m["estimate"], 1.5) and m["p"] < 0.001
    only_late = stage_not_objective(late, S)
    assert "untestable" in only_late
