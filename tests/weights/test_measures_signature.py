"""The unit of the signature rows that pool several pairs (late pretraining, early vs late): the
matrix, whose pairs share its W and its basis; and of the Q/K rows: the block, whose Q and K
share one estimated P̂."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lamina.weights.measures_signature import late_pretraining, qk_measure, stage_not_objective
from lamina.weights.settings import SignatureSettings
from lamina.weights.summaries import per_block, per_matrix, ratio_summary

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


def test_late_pretraining_counts_blocks_not_matrices_or_matrix_pairs():
    m = late_pretraining(_late_null(np.random.default_rng(0)), S, 1.25)["qk"]
    assert m["n_units"] == 8  # 8 blocks of (Q, K); 16 matrices, 48 rows


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


def test_per_block_averages_each_matrix_over_its_pairs_then_the_block_over_its_matrices():
    values = pd.Series([2.0, 8.0, 1.0, 9.0, np.nan])
    keys = pd.Series(["q0", "q0", "k0", "q1", "k1"])
    blocks = pd.Series([0, 0, 0, 1, 1])
    assert np.allclose(per_block(values, keys, blocks), [2.0, 9.0])  # sqrt(4 * 1); 9


def _shared_block(rng: np.random.Generator, n_layers: int = 8) -> pd.DataFrame:
    """Stage deltas rows whose true Q/K ratio is 1, with an error shared by the Q and K of a
    block (the error of their one estimated P̂, sd 0.3) and a smaller one of each matrix."""
    rows = []
    for layer in range(n_layers):
        e = rng.normal(0, 0.3)
        for role in ("q", "k"):
            rows.append({"key": f"layers.{layer}.{role}", "layer": layer, "role": role, "k": 8,
                         "moment": "raw", "family": "stage", "pair": "final→sft",
                         "enrichment": 50.0, "vs_weight": float(np.exp(e + rng.normal(0, 0.1)))})
    return pd.DataFrame(rows)


def test_the_qk_ci_covers_its_truth_when_q_and_k_share_their_blocks_error():
    # over the 16 matrices (a percentile bootstrap, Q and K as independent units) the one-sided
    # rows' 90% CI covered the truth on about 3 draws in 4; over the 8 blocks with a t interval,
    # at its level
    rng = np.random.default_rng(5)
    covered = []
    for _ in range(300):
        m = qk_measure(_shared_block(rng), S, family="stage", pair="final→sft")
        covered.append(m["ci_low"] <= 1.0 <= m["ci_high"])
    assert np.mean(covered) >= 0.85, np.mean(covered)
    assert m["n_units"] == 8


def test_ratio_summary_refuses_an_unknown_interval():
    with pytest.raises(ValueError, match="interval"):
        ratio_summary([1.0, 2.0], "greater", 10, 0, interval="bca")  # type: ignore[arg-type]


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


def test_too_few_blocks_read_undecidable_not_absent():
    # with the block as the unit, 4 blocks give the one-sided Wilcoxon a smallest p of 1/16:
    # the rule could never read "reproduced", so the row says so instead of "absent"
    from lamina.evidence.decide import UNDECIDABLE
    from lamina.weights.judging import judge_unit
    from lamina.weights.measure import PREFIX

    rng = np.random.default_rng(6)
    few = qk_measure(_shared_block(rng, n_layers=4).assign(vs_weight=3.0), S,
                     family="stage", pair="final→sft")  # fmt: skip
    assert few["n_units"] == 4 and "5 units would decide it" in few["undecidable"]
    cid = f"{PREFIX}align-qk-sft"
    rows = judge_unit("m", {cid: few}, {"sft": (True, "passed")}, only=[cid])
    assert rows["verdict"].item() == UNDECIDABLE
    enough = qk_measure(_shared_block(rng, n_layers=5).assign(vs_weight=3.0), S,
                        family="stage", pair="final→sft")  # fmt: skip
    assert "undecidable" not in enough and enough["p"] < 0.05
