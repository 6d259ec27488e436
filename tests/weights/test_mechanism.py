"""Paper 2 method fixes (issue 12 item 3, issue 11 item 7): gradients of the trained stage
losses, a held-out read basis, the "RSF of W itself" baseline, the sign-randomised
cancellation null and the final-norm gain folded into W_U. Tiny random models only."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import torch

from lamina.sources.models import get_adapter
from lamina.sources.organisms.configs import ORGANISMS
from lamina.sources.organisms.stages import stage_loss
from lamina.sources.organisms.tokenizer import train_tokenizer
from lamina.sources.organisms.train import make_model
from lamina.weights import linear_maps
from lamina.weights.gradients import gradient_geometry, sign_null_cancellation
from lamina.weights.judging import judge_unit
from lamina.weights.measures_mechanism import cancellation_scale
from lamina.weights.mechanism import stage_factors
from lamina.weights.probes import prediction_subspace, signature_from_deltas
from lamina.weights.settings import SignatureSettings
from lamina.weights.texts import split_sample

MICRO = ORGANISMS["organism-llama-micro"]
NOUNS = ["cat", "dog", "owl", "fox", "hen", "cow", "pig", "elk", "ant", "bee"]
TEXT = [f"Question: Is the {n} here?\nAnswer: yes" for n in NOUNS] + [
    f"Question: Is the {n} gone?\nAnswer: no" for n in NOUNS
]


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    tok = train_tokenizer(TEXT * 5, 300)
    return make_model(MICRO, tok).eval(), tok


def _planted_terms(T: int, d: int, aligned: bool, seed: int):
    g = torch.Generator().manual_seed(seed)
    if aligned:  # every term the same outer product up to a positive scale
        delta = torch.randn(1, d, generator=g) * torch.rand(T, 1, generator=g)
        act = torch.randn(1, d, generator=g).expand(T, d).clone()
    else:
        delta, act = torch.randn(T, d, generator=g), torch.randn(T, d, generator=g)
    return delta, act


def _null_row(delta, act, seed: int) -> dict:
    geo = gradient_geometry(delta, act, torch.eye(delta.shape[1])[:, :2], "input")
    null = sign_null_cancellation(delta, act, n=200, seed=seed)
    p = (1 + float((null["draws"] >= geo.cancellation).sum())) / 201
    return {
        "cancellation": geo.cancellation,
        "cancellation_null": null["median"],
        "cancellation_p_aligned": p,
    }


def _scale_row(table: pd.DataFrame) -> pd.Series:
    cid = "p2-signature-cancellation-scale"
    m = cancellation_scale(table.assign(objective="lm"), 1.25, SignatureSettings(n_bootstrap=200))
    return judge_unit("known", {cid: m}, {}).set_index("claim_id").loc[cid]


def test_sign_null_rejects_a_planted_aligned_sum_and_accepts_unrelated_terms():
    aligned = pd.DataFrame([_null_row(*_planted_terms(300, 16, True, s), s) for s in range(8)])
    random_ = pd.DataFrame([_null_row(*_planted_terms(300, 16, False, s), s) for s in range(8)])
    assert (aligned["cancellation"] > 0.99).all()  # no cancellation at all
    assert (aligned["cancellation_p_aligned"] < 0.01).all()
    assert _scale_row(aligned)["verdict"] != "reproduced"
    # unrelated terms: c ≈ 1/√T, both below the old "< 0.5" threshold and inside the null
    assert (random_["cancellation"] < 0.2).all()
    assert _scale_row(random_)["verdict"] == "reproduced"
    assert random_["cancellation_p_aligned"].min() > 0.01


def test_a_closeness_row_whose_equivalence_test_fails_is_never_partially():
    # at 2a683dc the cancellation row read "partially" at p = 0.56 (the two-sided p of a
    # difference, beside a rule that said "partially" for any estimate inside the margin)
    wide = pd.DataFrame({"cancellation": [0.5, 0.9, 1.3, 0.7], "cancellation_null": [0.5] * 4})
    row = _scale_row(wide)
    assert row["p"] >= 0.05 and row["verdict"] not in ("reproduced", "partially")


def test_sign_null_p_values_are_roughly_uniform_for_unrelated_terms():
    ps = np.array([_null_row(*_planted_terms(120, 8, False, s), s)["cancellation_p_aligned"]
                   for s in range(60)])  # fmt: skip
    assert 0.3 < ps.mean() < 0.7
    assert (ps < 0.05).mean() <= 0.15


def test_sign_null_matches_its_expectation():
    delta, act = _planted_terms(200, 12, False, 3)
    null = sign_null_cancellation(delta, act, n=400, seed=0)
    norms = delta.double().norm(dim=1) * act.double().norm(dim=1)
    expected = float((norms**2).sum().sqrt() / norms.sum())  # E[c_s²] = Σ‖g‖² / (Σ‖g‖)²
    assert abs(float(np.sqrt((null["draws"] ** 2).mean())) - expected) < 0.05 * expected


@pytest.mark.parametrize("objective", ["sft", "dpo"])
def test_stage_factors_sum_to_the_autograd_gradient_of_the_trained_loss(tiny, objective):
    model, tok = tiny
    cfg = MICRO.replace(context=32)
    items = (
        [(f"Is the {n} here?", "yes") for n in NOUNS[:4]]
        if objective == "sft"
        else [(f"Is the {n} here?", "yes", "no") for n in NOUNS[:4]]
    )
    replay = torch.randint(0, len(tok), (2, 16)) if objective == "sft" else None
    factors = stage_factors(objective, model, tok, items, cfg, replay)
    maps = [m for m in linear_maps(model, embeddings=False) if m.layer == 0][:3]
    params = [model.get_submodule(m.module).weight for m in maps]
    ref = None
    if objective == "dpo":  # the reference is a frozen copy, as in stage_factors
        ref = copy.deepcopy(model).requires_grad_(False)
    with torch.enable_grad():
        for p in params:
            p.requires_grad_(True)
        loss = stage_loss(objective, model, ref, tok, items, cfg, replay)
        grads = torch.autograd.grad(loss, params)
    for m, g in zip(maps, grads, strict=True):
        summed = factors[m.key].summed()
        assert torch.allclose(summed, m.as_matrix(g), atol=1e-5, rtol=1e-3), m.key
    # the sft loss scores EOS: dropping it changes the gradient
    if objective == "sft":
        assert any(float(factors[m.key].deltas.abs().sum()) > 0 for m in maps)


def test_rsf_of_w_itself_baseline_is_one_for_an_update_proportional_to_w(tiny):
    model, _ = tiny
    maps = linear_maps(model, embeddings=False)
    weights = {m.key: m.weight(model) for m in maps if m.layer is not None}
    d = get_adapter(model).d_model(model)
    g = torch.Generator().manual_seed(0)
    moments = {m.key: (lambda x: x @ x.T)(torch.randn(m.weight(model).shape[1], 64, generator=g))
               for m in maps if m.kind == "read"}  # fmt: skip
    pred = prediction_subspace(model, 8, False)
    shrink = {k: -0.1 * w for k, w in weights.items()}  # weight decay: ΔW ∝ W
    t = signature_from_deltas(shrink, maps, moments, pred, (2, 8), weights=weights)
    assert np.allclose(t["vs_weight"], 1.0)
    noise = {k: torch.randn(w.shape, generator=g) for k, w in weights.items()}
    t2 = signature_from_deltas(noise, maps, moments, pred, (8,), weights=weights)
    assert not np.allclose(t2["vs_weight"], 1.0, atol=0.05)
    assert d == pred.shape[0]


def test_folding_the_final_norm_gain_moves_the_prediction_subspace(tiny):
    model, _ = tiny
    norm = get_adapter(model).final_norm_module(model)
    base = prediction_subspace(model, 4, False)
    with torch.no_grad():
        norm.weight.fill_(1.0)
        same = prediction_subspace(model, 4, False, fold_gain=True)
        gain = torch.ones_like(norm.weight)
        gain[:4] = 50.0  # a planted gain on four coordinates pulls the subspace onto them
        norm.weight.copy_(gain)
        folded = prediction_subspace(model, 4, False, fold_gain=True)
    proj = lambda b, c: float(torch.linalg.matrix_norm(b.T @ c) ** 2 / b.shape[1])  # noqa: E731
    assert proj(base, same) > 0.999
    assert proj(folded, torch.eye(base.shape[0], dtype=torch.float64)[:, :4]) > 0.9
    assert proj(base, folded) < 0.9


def test_split_sample_is_disjoint_and_seeded():
    docs = [f"doc {i}" for i in range(11)]
    a, b = split_sample(docs, 0)
    assert not set(a) & set(b) and set(a) | set(b) == set(docs)
    assert split_sample(docs, 0) == (a, b) and split_sample(docs, 1) != (a, b)
