"""The Growth Training chapter: a quick run judges every declared claim."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lamina.anatomy.growth_claims import BASE_CLAIMS
from lamina.anatomy.growth_orders import random_order, real_label
from lamina.chapters.growth_training import CONTROLS, GrowthConfig, run_growth, schedules_for
from lamina.chapters.growth_training.importance import resolve_real_models
from lamina.chapters.growth_training.run import source_run

from ..anatomy.test_growth_schedules import _save
from ..conftest import lamina_env

MICRO = "organism-llama-micro"


@pytest.fixture(scope="module")
def micro_data(micro_organisms, tmp_path_factory):
    """LAMINA_DATA with the micro organisms, LAMINA_RESULTS in a tmp folder of this module."""
    root = tmp_path_factory.mktemp("growth-results")
    with lamina_env(micro_organisms, root / "results"):
        yield root


def test_a_quick_run_judges_every_declared_claim(micro_data):
    result = run_growth(GrowthConfig(model=MICRO, quick=True, seeds=[0, 1]))
    assert list(result.claims["claim_id"]) == [s.id for s in BASE_CLAIMS]
    assert {"curves", "budgets", "orders", "timing"} <= set(result.tables)
    timing = result.tables["timing"]
    assert timing["repeat"].nunique() >= 2 and (timing["seconds"] > 0).all()


@pytest.mark.slow
def test_the_notebook_executes_in_quick_mode(micro_data, tmp_path):
    import json

    from lamina.book import execute_chapter

    execute_chapter("growth_training", tmp_path, {"model": MICRO, "quick": True}, progress=False)
    found = list((micro_data / "results").rglob("growth_training.json"))
    assert found
    record = json.loads(found[-1].read_text())
    assert [c["claim_id"] for c in record["summary"]["claims"]] == [s.id for s in BASE_CLAIMS]


def test_ordering_controls_spend_the_same_phases_and_budget():
    config = GrowthConfig(n_layers=6, n_groups=3, total_steps=30)
    imp = pd.Series([5.0, 1.0, 9.0, 3.0, 7.0, 2.0]).to_numpy()
    plans = schedules_for(config, imp)
    assert set(CONTROLS) <= set(plans)
    for name in ("growth", *CONTROLS):
        assert [p.steps for p in plans[name]] == [p.steps for p in plans["growth"]]
        assert sum(p.steps for p in plans[name]) == config.total_steps
        groups = [sorted(p.layers) for p in plans[name][:-1]]
        assert sorted(sum(groups, [])) == list(range(6))
    assert plans["growth"][0].layers == [2, 4]  # most important first
    assert plans["reverse"][0].layers == [1, 5]  # least important first


def test_random_control_draws_a_fresh_order_per_seed():
    config = GrowthConfig(n_layers=12, n_groups=3, total_steps=30, seeds=[0, 1, 2])
    imp = np.arange(12.0)
    plans = {s: schedules_for(config, imp, seed=s) for s in config.seeds}
    groups = {s: [tuple(p.layers) for p in plans[s]["random"][:-1]] for s in config.seeds}
    assert len(set(map(tuple, groups.values()))) == 3, groups  # three different orders
    for s in config.seeds:  # growth and reverse do not depend on the seed
        assert plans[s]["growth"] == plans[0]["growth"]
        assert plans[s]["reverse"] == plans[0]["reverse"]
        assert sorted(sum(map(list, groups[s]), [])) == list(range(12))
    again = schedules_for(config, imp, seed=1)["random"]
    assert again == plans[1]["random"]  # seeded: reproducible
    assert np.array_equal(np.sort(random_order(12, 5)), np.arange(12.0))


def test_training_tokenizer_is_a_bpe_of_the_asked_size_or_rejected():
    from lamina.chapters.growth_training.run import training_tokenizer

    tok = training_tokenizer(GrowthConfig(model="organism-llama-micro", vocab_size=300))
    assert len(tok) == 300 and tok.eos_token_id is not None
    with pytest.raises(ValueError, match="vocab_size"):
        GrowthConfig(vocab_size=100)
    with pytest.raises(ValueError, match="registered organism"):
        training_tokenizer(GrowthConfig(model="organism-nope", vocab_size=300))


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


@pytest.mark.slow
def test_growth_chapter_runs_an_extra_schedule_per_real_model(micro_data, tmp_path):
    """The chapter notebook, quick mode, with two real-model orders (tiny random folders):
    the extra runs, their claim rows, the profiles and correlations, and the figure."""
    import json

    from lamina.book import execute_chapter

    llama = _save("llama", 5, tmp_path / "tiny-llama")
    gemma = _save("gemma3", 6, tmp_path / "tiny-gemma")
    params = {"model": MICRO, "quick": True, "seeds": [0, 1], "real_models": [llama, gemma]}
    nb = execute_chapter("growth_training", tmp_path / "out", params, progress=False)
    found = sorted(
        (micro_data / "results").rglob("growth_training.json"), key=lambda f: f.stat().st_mtime
    )
    found = found[-1:]
    record = json.loads(found[0].read_text())
    ids = {c["claim_id"] for c in record["summary"]["claims"]}
    assert {"p3-growth-loss", "p3-growth-loss-tiny-llama", "p3-growth-loss-tiny-gemma"} <= ids
    T = {t: pd.read_parquet(found[0].parent / f"growth_training.{t}.parquet")
         for t in ("curves", "budgets", "importance", "profiles", "correlations")}  # fmt: skip
    assert {source_run("tiny-llama"), source_run("tiny-gemma")} <= set(T["curves"]["run"])
    step = T["budgets"][T["budgets"]["budget"] == "step"]
    assert len(step[step["run"] == source_run("tiny-gemma")]) == 2  # one ratio per seed
    assert set(T["profiles"]["n_layers"]) == {4, 5, 6}
    assert set(T["importance"].groupby("source").size()) == {4}  # all on the trained 4 layers
    assert len(T["correlations"]) == 3  # reference and two real models: three pairs
    assert nb.exists()


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
