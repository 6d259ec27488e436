"""The Q/K and write measurements on planted deltas, and the empirical nulls."""

from __future__ import annotations

import pytest
import torch

from lamina.weights import (
    random_matrix_null,
    random_orthonormal,
    random_subspace_baseline,
    random_subspace_null,
)
from lamina.weights.judging import judge_unit
from lamina.weights.measures_signature import beyond_both, qk_measure, writes_measure
from lamina.weights.settings import SignatureSettings, check_pair
from tests.weights.known_answers import signature_deltas

S = SignatureSettings(k=8, n_bootstrap=300)
D, K = 64, 8


def _rows(d, pair="final→sft"):
    where = {"family": "stage", "pair": pair}
    m = {"p2-signature-align-qk-sft": qk_measure(d, S, **where),
         "p2-signature-align-writes-sft": writes_measure(d, S, 1.25, **where)}  # fmt: skip
    return judge_unit("known", m, {"sft": (True, "")}, only=list(m)).set_index("claim_id")


def test_an_update_inside_the_input_subspace_is_enriched_d_over_k_and_isotropic_writes_are_random():
    d = signature_deltas(0, "stage", ("sft",))
    assert (beyond_both(d, S, pair="final→sft") > 2).all()
    rows = _rows(d)
    assert rows.loc["p2-signature-align-qk-sft", "verdict"] == "reproduced"
    assert rows.loc["p2-signature-align-writes-sft", "verdict"] == "reproduced"


def test_an_update_as_concentrated_as_its_weight_is_not_enriched():
    d = signature_deltas(1, "stage", ("sft",))
    qk = d["role"].isin(["q", "k"])
    d.loc[qk, "vs_weight"] = 1.0  # RSF(ΔW) = RSF(W): the update inherits W's concentration
    rows = _rows(d)
    assert rows.loc["p2-signature-align-qk-sft", "verdict"] not in ("reproduced", "partially")


def test_concentrated_writes_are_not_close_to_random():
    d = signature_deltas(2, "stage", ("sft",))
    w = d["role"].isin(["attn_out", "mlp_out"])
    d.loc[w, "enrichment"] = D / K
    assert _rows(d).loc["p2-signature-align-writes-sft", "verdict"] != "reproduced"


def test_empirical_nulls_are_centred_on_k_over_d_like_the_library_baseline():
    gen = torch.Generator().manual_seed(3)
    delta = torch.randn(24, D, generator=gen) @ torch.diag(torch.linspace(5, 0.01, D))
    null = random_subspace_null({"x": delta}, {"x": "input"}, [K, D], n=200, seed=0)
    mean_k = float(null.loc[null["k"] == K, "null_mean"].iloc[0])
    assert abs(mean_k - K / D) < 0.03
    assert float(null.loc[null["k"] == D, "null_mean"].iloc[0]) == pytest.approx(1.0)
    ref = random_subspace_baseline(delta, K, "input", n=200, seed=1)
    assert abs(mean_k - ref.mean) < 0.03
    basis = random_orthonormal(D, 16, gen)
    for side, shape in (("input", (24, D)), ("output", (D, 24))):
        rmat = random_matrix_null({"x": shape}, {"x": (basis, side)}, [K], n=200, seed=0)
        assert abs(float(rmat["rmat_mean"].iloc[0]) - K / D) < 0.03


def test_checkpoints_of_different_organisms_give_a_clear_error():
    with pytest.raises(ValueError, match="different organisms"):
        check_pair("organism-llama-micro@final", "organism-gpt2-micro@sft")
