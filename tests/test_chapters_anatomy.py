"""Layer-anatomy and Growth Training experiments (paper 3): claims logic, budgets, chapters."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from lamina.anatomy.predictability import delta_correlation, ridge_depth_fit
from lamina.chapters.growth_training import GrowthConfig, budget_comparison, schedules_for
from lamina.chapters.layer_anatomy.claims import anatomy_claims
from lamina.chapters.layer_anatomy.config import AnatomyConfig
from lamina.chapters.layer_anatomy.measures import (
    core_layers,
    importance_bootstrap,
    recovery_correlation,
)
from lamina.chapters.layer_anatomy.run import delta_null, loo_hat_matrix, permuted_r2, run_anatomy

from .conftest import lamina_env, tiny_model

MICRO = "organism-llama-micro"
CLAIM_IDS = {
    "P3-R2",
    "P3-R2-gate",
    "P3-R2-summary",
    "P3-delta",
    "P3-delta-structure",
    "P3-predicted",
    "P3-accumulation",
    "P3-range",
    "P3-core",
    "P3-core-max",
    "P3-anti",
    "P3-anti-at",
    "P3-recovery",
    "P3-scaling",
}
VERDICTS = {"reproduced", "partially", "not reproduced", "not testable"}


# ----------------------------------------------------------------------------- synthetic sweeps
def _sweep(deltas: dict[str, list[float]], n_seq: int = 40, seed: int = 0) -> pd.DataFrame:
    """A sweep frame as ``_sweep`` builds it: per-sequence NLLs whose mean gives each delta."""
    rng = np.random.default_rng(seed)
    base = 3.0 + 0.01 * rng.standard_normal(n_seq)
    rows = []
    for surgery, ds in deltas.items():
        for layer, d in enumerate(ds):
            per = base + np.log1p(d / 100) + 0.001 * rng.standard_normal(n_seq)
            rows.append(
                {
                    "layer": layer,
                    "surgery": surgery,
                    "delta_pct": 100 * np.expm1(per.mean() - base.mean()),
                    "delta_ci_low": 100 * np.expm1(per.mean() - base.mean()) - 0.5,
                    "delta_ci_high": 100 * np.expm1(per.mean() - base.mean()) + 0.5,
                    "nll_per_seq": per,
                    "base_nll_per_seq": base,
                }
            )
    return pd.DataFrame(rows)


def _recovery(steps: list[int | None], budget: int = 8) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "layer": range(len(steps)),
            "steps_ranked": [budget + 1 if s is None else s for s in steps],
            "baseline_ppl": 10.0,
            "perturbed_ppl": [10.0 + (budget + 1 if s is None else s) for s in steps],
        }
    )


def _claims(sweep: pd.DataFrame, n_layers: int) -> pd.DataFrame:
    tables = {"recovery": _recovery(list(range(n_layers)))}
    cfg = AnatomyConfig(n_bootstrap=50)
    return anatomy_claims(cfg, sweep, tables, np.array([]), n_layers).set_index("claim_id")


def test_claims_table_has_every_abstract_claim_with_a_verdict():
    claims = _claims(_sweep({"skip": [500, 10, 1, 2], "scale": [1, 1, 1, 1]}), 4)
    assert set(claims.index) == CLAIM_IDS
    assert set(claims["verdict"]) <= VERDICTS


def test_scaling_claim_reproduced_only_when_scale_alone_preserves_quality():
    alone = _sweep({"skip": [50, 5, 9, 3], "scale": [1, 2, 0.5, 1], "noise": [1, 80, 2, 3]})
    both = _sweep({"skip": [50, 5, 9, 3], "scale": [1, 2, 0.5, 1], "noise": [1, 2, 2, 3]})
    broken = _sweep({"skip": [50, 5, 9, 3], "scale": [1, 20, 0.5, 1], "noise": [1, 80, 2, 3]})
    assert _claims(alone, 4).loc["P3-scaling", "verdict"] == "reproduced"
    assert _claims(both, 4).loc["P3-scaling", "verdict"] == "partially"
    assert _claims(broken, 4).loc["P3-scaling", "verdict"] == "not reproduced"


def test_anti_layer_needs_a_consistent_ppl_drop():
    claims = _claims(_sweep({"skip": [300, -4, 8, 2]}), 4)
    assert claims.loc["P3-anti", "measured"] == 1
    assert "1" in claims.loc["P3-anti", "effect_name"]
    none = _claims(_sweep({"skip": [300, 4, 8, 2]}), 4)
    assert none.loc["P3-anti", "measured"] == 0


def test_importance_range_bootstrap_brackets_the_true_log_range():
    sweep = _sweep({"skip": [1000.0, 1.0, 10.0, 100.0]}, n_seq=60)
    ci = importance_bootstrap(sweep, 200, 0, core=[1, 2])
    lo, hi = ci["log10_range"]
    assert lo <= 3.0 <= hi
    assert ci["core_share"] == (0.0, 0.0)  # the top two are layers 0 and 3, never the core


def test_core_layers_map_l8_to_l11_of_30_by_relative_depth():
    assert core_layers(30) == [8, 9, 10, 11]
    assert core_layers(12) == [3, 4]


def test_recovery_correlation_ranks_censored_layers_last_and_is_nan_without_variation():
    sweep = _sweep({"skip": [1, 10, 100, 1000, 5]})
    rc = recovery_correlation(sweep, _recovery([0, 2, 4, None, 1]), 100, 0)
    assert rc["rho"] == pytest.approx(1.0)
    flat = recovery_correlation(sweep, _recovery([3, 3, 3, 3, 3]), 100, 0)
    assert np.isnan(flat["rho"])


# ----------------------------------------------------------------------------- delta null
def test_delta_null_is_minus_half_for_equal_variances_and_matches_iid_weights():
    model = tiny_model("llama", n_layers=8)
    null = delta_null(model)
    measured = delta_correlation(model).merge(null, on=["matrix", "layer"])
    # iid init with equal std per type: null ~ -0.5 and measured ~ null
    assert np.allclose(null["corr_null"], -0.5, atol=0.05)
    assert abs(null["corr_null"].mean() + 0.5) < 0.01
    assert abs((measured["corr"] - measured["corr_null"]).mean()) < 0.02
    with (
        torch.no_grad()
    ):  # alternating variances: -9/10 after a quiet layer, -1/10 after a loud one
        for block in model.model.layers[1::2]:
            block.self_attn.q_proj.weight.mul_(3.0)
    q = delta_null(model).query("matrix == 'q'")["corr_null"].to_numpy()
    assert np.allclose(q[0::2], -0.9, atol=0.03) and np.allclose(q[1::2], -0.1, atol=0.03)


def test_gram_permutation_r2_equals_refitting_ridge_on_permuted_layers():
    rng = np.random.default_rng(0)
    w = np.linspace(0, 1, 7)[:, None] * rng.standard_normal(50) + 0.3 * rng.standard_normal((7, 50))
    h = loo_hat_matrix(7, alpha=0.5, degree=2)
    assert np.allclose(h @ w, ridge_depth_fit(w, alpha=0.5, degree=2)[2])
    null = permuted_r2([w], 0.5, 2, n_permutations=5, seed=3)
    gen = np.random.default_rng(3)
    orders = [gen.permutation(7) for _ in range(5)]
    refit = [ridge_depth_fit(w[o], alpha=0.5, degree=2)[0] for o in orders]
    assert np.allclose(null, refit)


# ----------------------------------------------------------------------------- growth
def test_budget_comparison_compares_at_the_smaller_budget_with_interpolation():
    steps = np.arange(0, 11)
    uniform = pd.DataFrame(
        {"step": steps, "flops": 2.0 * steps, "wall_s": 1.0 * steps, "val_loss": 20.0 - steps}
    ).assign(run="uniform", seed=0)
    growth = uniform.assign(run="growth", flops=1.0 * steps)
    frame = pd.concat([uniform, growth.iloc[::3]])  # growth evaluated at steps 0, 3, 6, 9
    out = budget_comparison(frame, "flops").iloc[0]
    assert out["budget_value"] == 9.0  # growth's last evaluated FLOPs
    assert out["val_loss"] == 11.0
    assert out["baseline_val_loss"] == pytest.approx(15.5)  # uniform at 9 FLOPs = step 4.5
    assert out["loss_ratio"] == pytest.approx(15.5 / 11.0)
    same = budget_comparison(pd.concat([uniform, growth]), "step").iloc[0]
    assert same["loss_ratio"] == pytest.approx(1.0)


def test_schedules_have_equal_steps_and_order_groups_by_importance():
    cfg = GrowthConfig(
        n_layers=6, n_groups=3, total_steps=30, schedules=["uniform", "growth", "reverse"]
    )
    imp = np.array([1.0, 50.0, 3.0, 40.0, 2.0, 0.5])
    plans = schedules_for(cfg, imp)
    assert {n: sum(p.steps for p in ps) for n, ps in plans.items()} == dict.fromkeys(plans, 30)
    assert plans["growth"][0].layers == [1, 3]
    assert plans["reverse"][0].layers == [0, 5]
    assert plans["growth"][-1].layers is None


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"schedules": ["uniform", "sideways"]}, "schedules"),
        ({"importance": "oracle"}, "importance"),
        ({"n_groups": 13}, "n_groups"),
        ({"seeds": []}, "seeds"),
    ],
)
def test_growth_config_rejects_bad_input_clearly(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GrowthConfig(**kwargs)


# ----------------------------------------------------------------------------- bad input
def test_unknown_surgery_gives_a_clear_error():
    with pytest.raises(ValueError, match="unknown surgery.*'transplant'"):
        AnatomyConfig(surgeries=["skip", "transplant"])


def test_out_of_range_layer_gives_a_clear_error(tiny_model_dirs):
    cfg = AnatomyConfig(model=str(tiny_model_dirs["llama"]), corpus=MICRO, layers=[7], quick=True)
    with pytest.raises(ValueError, match="layer 7 is out of range.*4 layers"):
        run_anatomy(cfg)


# ----------------------------------------------------------------------------- chapters
@pytest.fixture(scope="module")
def micro_data(micro_organisms, tmp_path_factory):
    """LAMINA_DATA with the micro organisms (built once per run), LAMINA_RESULTS in a tmp
    folder of this module; -> that folder's parent, whose ``results/`` the chapters write."""
    root = tmp_path_factory.mktemp("anatomy-results")
    with lamina_env(micro_organisms, root / "results"):
        yield root


def _check_results(path, chapter: str) -> dict:
    record = json.loads(path.read_text())
    assert record["chapter"] == chapter
    claims = record["summary"]["claims"]
    assert claims and all(c["verdict"] in VERDICTS for c in claims)
    assert record["config"]["quick"] is True
    return record


@pytest.mark.slow
def test_layer_anatomy_chapter_executes_in_quick_mode(micro_data, tiny_model_dirs, tmp_path):
    from lamina.book import execute_chapter

    model = str(tiny_model_dirs["llama"])
    execute_chapter(
        "layer_anatomy", tmp_path, {"model": model, "corpus": MICRO, "quick": True}, progress=False
    )
    found = list((micro_data / "results").rglob("layer_anatomy.json"))  # <model>/<namespace>/
    assert len(found) == 1
    record = _check_results(found[0], "layer_anatomy")
    assert {c["claim_id"] for c in record["summary"]["claims"]} == CLAIM_IDS
    assert "layer_anatomy.sweep" in {f"layer_anatomy.{t}" for t in record["tables"]}


@pytest.mark.slow
def test_growth_chapter_executes_in_quick_mode(micro_data, tmp_path):
    from lamina.book import execute_chapter

    execute_chapter("growth_training", tmp_path, {"model": MICRO, "quick": True}, progress=False)
    found = list((micro_data / "results").rglob("growth_training.json"))  # <model>/<namespace>/
    assert len(found) == 1
    record = _check_results(found[0], "growth_training")
    ids = {c["claim_id"] for c in record["summary"]["claims"]}
    assert ids == {"G-loss", "G-loss-flops", "G-loss-wall", "G-faster", "G-cost",
                   "G-order-reverse", "G-order-random"}  # fmt: skip
