"""Growth Training with layer orders from real pretrained models (issue 10): the relative-depth
mapping, the skip sweep of a saved causal LM (tiny random Llama and Gemma 3 folders, offline),
the rank correlations, and the claim rows scored as G-loss."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from lamina.chapters.growth_training import (
    GrowthConfig,
    depth_map,
    rank_correlations,
    real_importance,
    real_label,
    resolve_real_models,
    schedules_for,
    source_claims,
    source_run,
)
from lamina.chapters.growth_training.figures import correlation_title, source_verdicts
from lamina.chapters.layer_anatomy.nulls import paper_layers

from .conftest import _byte_tokenizer, lamina_env, tiny_model

MICRO = "organism-llama-micro"


# ----------------------------------------------------------------------------- mapping
def test_depth_map_is_the_identity_at_equal_depth_and_averages_overlaps():
    v = np.array([5.0, -1.0, 300.0, 2.0])
    assert np.allclose(depth_map(v, 4), v)
    # 30 -> 12: trained layer 0 covers real layers 0, 1 and half of 2
    mapped = depth_map(np.arange(30.0), 12)
    assert mapped[0] == pytest.approx((0 + 1 + 0.5 * 2) / 2.5)
    assert np.all(np.diff(mapped) > 0)  # a monotone profile stays monotone
    # 18 -> 12: layer 1 covers the second half of real layer 1 and real layer 2
    assert depth_map(np.arange(18.0), 12)[1] == pytest.approx((0.5 * 1 + 2) / 1.5)


@pytest.mark.parametrize("n_real", [30, 18, 7])
def test_depth_map_uses_the_span_convention_of_the_anatomy_chapter(n_real):
    """Trained layer l draws on exactly the real layers whose spans overlap its own: the real
    layers that ``paper_layers`` maps onto l (the same depth convention, both directions)."""
    for r in range(n_real):
        spike = np.zeros(n_real)
        spike[r] = 1.0
        touched = set(np.flatnonzero(depth_map(spike, 12) > 1e-12))
        assert touched == set(paper_layers([r], 12, paper_l=n_real))


def test_depth_map_rejects_bad_input():
    with pytest.raises(ValueError, match="non-empty 1-D"):
        depth_map(np.array([]), 12)
    with pytest.raises(ValueError, match="n_layers"):
        depth_map(np.ones(3), 0)


def test_rank_correlations():
    a = np.arange(6.0)
    out = rank_correlations({"ref": a, "same": a**3, "flip": -a, "flat": np.ones(6)})
    rho = out.set_index(["a", "b"])["rho"]
    assert rho[("ref", "same")] == pytest.approx(1.0)
    assert rho[("ref", "flip")] == pytest.approx(-1.0)
    assert np.isnan(rho[("ref", "flat")])
    with pytest.raises(ValueError, match="differ in length"):
        rank_correlations({"a": a, "b": np.ones(4)})


# ----------------------------------------------------------------------------- config
def test_real_models_parameter_is_checked_and_quick_mode_skips_the_default():
    with pytest.raises(TypeError, match="real_models must be None or a list"):
        GrowthConfig(real_models="smollm2-135m-instruct")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="real_tokens"):
        GrowthConfig(real_tokens=64, real_seq_len=128)
    models, notes = resolve_real_models(GrowthConfig(quick=True))
    assert models == [] and "quick mode" in notes[0]
    assert resolve_real_models(GrowthConfig(real_models=[]))[0] == []
    assert real_label("/tmp/models/tiny-llama/") == "tiny-llama"
    with pytest.raises(ValueError, match="clashing labels"):
        resolve_real_models(GrowthConfig(real_models=["/a/m", "/b/m"]))


def test_extra_orders_get_the_same_phases_as_growth():
    cfg = GrowthConfig(n_layers=6, n_groups=3, total_steps=30, schedules=["uniform", "growth"])
    imp = np.array([1.0, 9.0, 2.0, 8.0, 3.0, 7.0])
    plans = schedules_for(cfg, imp, {"growth (x order)": imp[::-1].copy()})
    assert [p.steps for p in plans["growth (x order)"]] == [p.steps for p in plans["growth"]]
    assert plans["growth"][0].layers == [1, 3]
    assert plans["growth (x order)"][0].layers == [2, 4]  # reversed values 9, 8 at 4, 2
    with pytest.raises(ValueError, match="has 4 layers, not 6"):
        schedules_for(cfg, imp, {"bad": np.ones(4)})


# ----------------------------------------------------------------------------- claims
def _budgets(ratios: list[float], run: str) -> pd.DataFrame:
    rows = [{"run": run, "seed": s, "budget": "step", "loss_ratio": r} for s, r in enumerate(ratios)]
    return pd.DataFrame(rows, columns=["run", "seed", "budget", "loss_ratio"])


@pytest.mark.parametrize(
    "ratios, word",
    [([5.1, 4.9, 5.3], "reproduced"), ([0.9, 0.95, 0.92], "not reproduced")],
)
def test_source_claims_score_each_real_order_like_g_loss(ratios, word):
    run = source_run("smollm2-135m-instruct")
    claims = source_claims(_budgets(ratios, run), {"smollm2-135m-instruct": run}, 1000)
    row = claims.iloc[0]
    assert row["claim_id"] == "G-loss-smollm2-135m-instruct"
    assert row["verdict"] == word
    assert row["measured"] == pytest.approx(np.exp(np.mean(np.log(ratios))))
    assert row["ci_low"] < row["measured"] < row["ci_high"]
    corr = pd.DataFrame(
        [{"a": "organism-llama", "b": "smollm2-135m-instruct", "rho": 0.25, "p": 0.4,
          "n_layers": 12}]  # fmt: skip
    )
    text = source_verdicts(claims, corr, "organism-llama")
    assert "smollm2-135m-instruct" in text and f"**{word}**" in text and "0.25" in text
    assert "smollm2-135m-instruct 0.25" in correlation_title(corr, "organism-llama")


def test_a_real_order_without_runs_is_not_testable():
    claims = source_claims(_budgets([], "other"), {"m": source_run("m")}, 10)
    assert claims.iloc[0]["verdict"] == "not testable"


# ----------------------------------------------------------------------------- real models
def _save(arch: str, n_layers: int, folder, dead: int | None = None) -> str:
    """A tiny random causal LM folder with a tokenizer; layer ``dead`` writes nothing to the
    residual stream (its attention and MLP output projections are zero)."""
    model = tiny_model(arch, n_layers=n_layers)
    if dead is not None:
        layer = model.model.layers[dead]
        with torch.no_grad():
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    model.save_pretrained(folder)
    _byte_tokenizer().save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def micro_env(micro_organisms, tmp_path_factory):
    root = tmp_path_factory.mktemp("growth-real")
    with lamina_env(micro_organisms, root / "results"):
        yield root


@pytest.mark.parametrize("arch, n_layers", [("llama", 5), ("gemma3", 6)])
def test_real_importance_finds_a_layer_that_does_nothing(arch, n_layers, micro_env, tmp_path):
    folder = _save(arch, n_layers, tmp_path / arch, dead=2)
    delta, info = real_importance(folder, MICRO, 64, 32)
    assert delta.shape == (n_layers,) and info["n_layers"] == n_layers
    assert info["n_tokens"] == 64 and info["n_windows"] == 2
    assert abs(delta[2]) < 1e-6  # skipping a layer that writes nothing changes nothing
    assert np.all(np.abs(np.delete(delta, 2)) > 1e-3)  # the others do change the loss


@pytest.mark.slow
def test_growth_chapter_runs_an_extra_schedule_per_real_model(micro_env, tmp_path):
    """The chapter notebook, quick mode, with two real-model orders (tiny random folders):
    the extra runs, their claim rows, the profiles and correlations, and the figure."""
    import json

    from lamina.book import execute_chapter

    llama = _save("llama", 5, tmp_path / "tiny-llama")
    gemma = _save("gemma3", 6, tmp_path / "tiny-gemma")
    params = {"model": MICRO, "quick": True, "seeds": [0, 1], "real_models": [llama, gemma]}
    nb = execute_chapter("growth_training", tmp_path / "out", params, progress=False)
    found = list((micro_env / "results").rglob("growth_training.json"))
    assert len(found) == 1
    record = json.loads(found[0].read_text())
    ids = {c["claim_id"] for c in record["summary"]["claims"]}
    assert {"G-loss", "G-loss-tiny-llama", "G-loss-tiny-gemma"} <= ids
    T = {t: pd.read_parquet(found[0].parent / f"growth_training.{t}.parquet")
         for t in ("curves", "budgets", "importance", "profiles", "correlations")}  # fmt: skip
    assert {source_run("tiny-llama"), source_run("tiny-gemma")} <= set(T["curves"]["run"])
    step = T["budgets"][T["budgets"]["budget"] == "step"]
    assert len(step[step["run"] == source_run("tiny-gemma")]) == 2  # one ratio per seed
    assert set(T["profiles"]["n_layers"]) == {4, 5, 6}
    assert set(T["importance"].groupby("source").size()) == {4}  # all on the trained 4 layers
    assert len(T["correlations"]) == 3  # reference and two real models: three pairs
    text = nb.read_text()
    assert "Spearman ρ with" in text and "importance from **tiny-gemma**" in text
