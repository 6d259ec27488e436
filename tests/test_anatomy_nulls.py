"""Paper 3 verdicts that can fail (issue 11 item 7, issue 12 item 4): the core share against a
random layer order, recovery as a partial correlation, the delta value conditional on the
structure test, one depth convention, the range over significant layers only."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from lamina.anatomy.predictability import (
    ridge_depth_fit,
    summary_predictability,
    summary_stacks,
)
from lamina.chapters.layer_anatomy.claims import _recovery_claim, importance_claims
from lamina.chapters.layer_anatomy.claims_weights import (
    predictability_claims as _predictability_claims,
)
from lamina.chapters.layer_anatomy.config import AnatomyConfig
from lamina.chapters.layer_anatomy.measures import core_layers
from lamina.chapters.layer_anatomy.nulls import core_share_p, paper_layers, partial_spearman
from lamina.chapters.layer_anatomy.run import permuted_r2
from lamina.chapters.runtime import shuffled_documents

CONFIG = AnatomyConfig(model="organism-llama-micro", n_bootstrap=200)
FAST = AnatomyConfig(model="organism-llama-micro", n_bootstrap=0)  # no CIs: verdicts only


def _skip_sweep(delta: np.ndarray, seed: int = 0, n_seq: int = 40) -> pd.DataFrame:
    """A skip sweep whose layer l raises the per-token NLL by log1p(delta[l] / 100)."""
    rng = np.random.default_rng(seed)
    base = rng.normal(3.0, 0.1, n_seq)
    rows = []
    for l, d in enumerate(delta):
        per = base + np.log1p(d / 100) + rng.normal(0, 0.002, n_seq)
        diff = per - base
        boot = diff[rng.integers(0, n_seq, (200, n_seq))].mean(1)
        lo, hi = (100 * np.expm1(np.quantile(boot, q)) for q in (0.025, 0.975))
        rows.append({"surgery": "skip", "layer": l, "delta_pct": 100 * np.expm1(diff.mean()),
                     "delta_ci_low": lo, "delta_ci_high": hi, "nll_per_seq": per,
                     "base_nll_per_seq": base})  # fmt: skip
    return pd.DataFrame(rows)


def test_core_share_passes_at_most_alpha_under_a_random_layer_order():
    rng = np.random.default_rng(0)
    words = []
    for s in range(100):
        delta = np.exp(rng.normal(2, 1.5, 12))  # random importances: no core
        claims = importance_claims(FAST, _skip_sweep(delta, s, 20), 12)
        words.append(next(r["verdict"] for r in claims if r["claim_id"] == "P3-core"))
    passed = np.mean([w in ("reproduced", "partially") for w in words])
    assert passed <= 0.05  # the old "share >= 0.5" rule passed ~32% of the time here


def test_core_share_is_reproduced_when_the_core_dominates():
    delta = np.full(12, 1.0)
    delta[core_layers(12)] = 500.0
    claims = importance_claims(FAST, _skip_sweep(delta), 12)
    row = next(r for r in claims if r["claim_id"] == "P3-core")
    assert row["verdict"] == "reproduced" and row["p"] < 0.05


def test_core_share_p_is_the_hypergeometric_tail():
    # 2 core layers of 12, top 2: P(both in the core) = 1 / C(12, 2)
    assert np.isclose(core_share_p(12, 2, 2, 2), 1 / 66)
    assert np.isclose(core_share_p(12, 2, 2, 1), 1 - 45 / 66)
    assert core_share_p(12, 2, 2, 0) == 1.0


def test_core_and_anti_layers_share_one_depth_convention():
    assert core_layers(30) == paper_layers([8, 9, 10, 11], 30) == [8, 9, 10, 11]
    assert paper_layers([14], 30) == [14] and paper_layers([17], 30) == [17]
    assert core_layers(12) == [3, 4]
    assert paper_layers([14], 12) == [5]


def test_range_divides_only_by_layers_whose_ci_excludes_zero():
    delta = np.array([300.0, 50.0, 10.0, 0.0001, 80.0, 20.0])  # layer 3: noise around 0
    claims = importance_claims(CONFIG, _skip_sweep(delta, 1), 6)
    row = next(r for r in claims if r["claim_id"] == "P3-range")
    assert np.isclose(row["measured"], np.log10(300 / 10), atol=0.05)
    assert row["effect_size"] == 5


def _recovery(importance: np.ndarray, steps: np.ndarray, damage: np.ndarray) -> tuple:
    sweep = pd.DataFrame({"surgery": "skip", "layer": np.arange(len(importance)),
                          "delta_pct": importance})  # fmt: skip
    rec = pd.DataFrame({"layer": np.arange(len(importance)), "steps_ranked": steps,
                        "perturbed_ppl": 10 * damage, "baseline_ppl": 10.0})  # fmt: skip
    return sweep, rec


def test_recovery_controls_for_initial_damage():
    rng = np.random.default_rng(0)
    damage = np.exp(rng.normal(0, 1, 40))
    importance = damage * np.exp(rng.normal(0, 0.4, 40))  # importance only tracks damage
    steps = 10 * damage * np.exp(rng.normal(0, 0.4, 40))  # and so do the steps
    row = _recovery_claim(CONFIG, *_recovery(importance, steps, damage))
    assert row["effect_size"] > 0.6  # the plain rho is high ...
    assert abs(row["measured"]) < 0.35 and row["verdict"] != "reproduced"  # ... the partial not


def test_a_significant_negative_recovery_correlation_is_not_reproduced():
    rng = np.random.default_rng(1)
    importance = np.exp(rng.normal(0, 1, 30))
    damage = np.exp(rng.normal(0, 1, 30))
    steps = 100 / importance * np.exp(rng.normal(0, 0.05, 30))
    row = _recovery_claim(CONFIG, *_recovery(importance, steps, damage))
    assert row["measured"] < -0.5 and row["p"] < 0.05
    assert row["verdict"] == "not reproduced"


def test_partial_spearman_matches_the_plain_one_when_the_control_is_unrelated():
    rng = np.random.default_rng(2)
    x = rng.normal(size=200)
    y = x + rng.normal(size=200)
    z = rng.normal(size=200)
    assert abs(partial_spearman(x, y, z)["rho"] - stats.spearmanr(x, y)[0]) < 0.05


def _delta_tables(stacks: np.ndarray) -> dict:
    """corr(W_{l+1}-W_l, W_{l+2}-W_{l+1}) and its independence null, per layer."""
    d = np.diff(stacks, axis=0)
    s2 = stacks.var(axis=1)
    rows = []
    for l in range(len(stacks) - 2):
        null = -s2[l + 1] / np.sqrt((s2[l] + s2[l + 1]) * (s2[l + 1] + s2[l + 2]))
        rows.append({"matrix": "q", "layer": l, "corr": np.corrcoef(d[l], d[l + 1])[0, 1],
                     "corr_null": null})  # fmt: skip
    return {"predictability": pd.DataFrame({"r2": [-0.25]}), "delta": pd.DataFrame(rows)}


def test_delta_of_independent_layers_is_minus_half_and_not_reproduced():
    stacks = np.random.default_rng(3).normal(size=(12, 4000))
    rows = _predictability_claims(CONFIG, _delta_tables(stacks), np.array([]))
    delta = next(r for r in rows if r["claim_id"] == "P3-delta")
    assert abs(delta["measured"] + 0.5) < 0.05  # the paper's value ...
    assert delta["verdict"] == "not reproduced"  # ... is the independence null


def test_structure_detects_an_oscillation_beyond_the_null():
    rng = np.random.default_rng(4)
    base = rng.normal(size=4000)
    # an oscillation: layers alternate around a shared matrix, so deltas anti-correlate
    # beyond independent draws (corr ≈ -0.5 would need anticorrelation of the increments)
    sign = np.array([(-1) ** l for l in range(12)])[:, None]
    stacks = base + 0.5 * sign * rng.normal(size=4000) * 0.3 + rng.normal(size=(12, 4000)) * 0.2
    rows = _predictability_claims(CONFIG, _delta_tables(stacks), np.array([]))
    structure = next(r for r in rows if r["claim_id"] == "P3-delta-structure")
    assert structure["measured"] < -0.05


def _perm_p(stacks: list[np.ndarray], seed: int) -> tuple[float, float]:
    r2 = np.mean([ridge_depth_fit(w, alpha=1.0, degree=2)[0] for w in stacks])
    null = permuted_r2(stacks, 1.0, 2, 99, seed)
    return float(r2), float((1 + np.sum(null >= r2)) / (1 + null.size))


def test_predictability_permutation_null_gives_uniform_p_on_iid_layers():
    rng = np.random.default_rng(5)
    raw, summ = [], []
    for s in range(40):
        raw.append(_perm_p([rng.normal(size=(12, 200))], s))
        summ.append(_perm_p([rng.normal(size=(12, 4)) for _ in range(3)], s))
    r2_raw = np.array([r for r, _ in raw])
    assert abs(r2_raw.mean() + 0.25) < 0.05  # i.i.d. layers: R² ≈ -0.25 at L = 12
    for ps in (np.array([p for _, p in raw]), np.array([p for _, p in summ])):
        assert 0.3 < ps.mean() < 0.7 and (ps < 0.05).mean() <= 0.15


def test_summary_target_finds_a_depth_trend_the_raw_entries_hide():
    rng = np.random.default_rng(6)
    depth = np.linspace(0, 1, 12)[:, None]
    # i.i.d. entries whose scale grows with depth: raw entries unpredictable, norms regular
    stacks = rng.normal(size=(12, 400)) * (1 + 2 * depth)
    structure = pd.DataFrame([
        {"layer": l, "matrix": "q", "frobenius": np.linalg.norm(w), "spectral": np.abs(w).max(),
         "stable_rank": 1 + l + rng.uniform(0, 0.1), "effective_rank": 2 + l ** 1.2}
        for l, w in enumerate(stacks)
    ])  # fmt: skip
    summary = summary_predictability(structure)
    assert summary["r2"].iloc[0] > 0.5
    assert _perm_p(list(summary_stacks(structure).values()), 0)[1] < 0.05
    r2_raw, p_raw = _perm_p([stacks], 0)
    assert r2_raw < 0 and p_raw > 0.05


def test_held_out_text_mixes_play_passages_with_curriculum_documents():
    play = "".join(f"KING. Line {i} of the one long play.\n" for i in range(400))
    curriculum = [f"A short curriculum document number {i}." for i in range(50)]
    out = shuffled_documents([play, *curriculum], seed=0, passage_chars=400)
    assert shuffled_documents([play, *curriculum], seed=0, passage_chars=400) == out
    assert "".join(p for p in out if p.startswith("KING")) != play  # shuffled passages
    assert sorted("".join(p for p in out if "KING" in p)) == sorted(play)  # nothing lost
    head = out[:20]
    assert any("KING" in p for p in head) and any("curriculum" in p for p in head)
    assert all(len(p) <= 400 for p in out if "KING" in p)
