"""The Growth Training runs (lamina.anatomy.growth_runs): the schedules and the tokenizer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lamina.anatomy.growth_orders import random_order
from lamina.anatomy.growth_runs import schedules_for, training_tokenizer
from lamina.chapters.growth_training import CONTROLS, GrowthConfig


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
    tok = training_tokenizer(GrowthConfig(model="organism-llama-micro", vocab_size=300))
    assert len(tok) == 300 and tok.eos_token_id is not None
    with pytest.raises(ValueError, match="vocab_size"):
        GrowthConfig(vocab_size=100)
    with pytest.raises(ValueError, match="registered organism"):
        training_tokenizer(GrowthConfig(model="organism-nope", vocab_size=300))


def test_extra_orders_get_the_same_phases_as_growth():
    cfg = GrowthConfig(n_layers=6, n_groups=3, total_steps=30, schedules=["uniform", "growth"])
    imp = np.array([1.0, 9.0, 2.0, 8.0, 3.0, 7.0])
    plans = schedules_for(cfg, imp, {"growth (x order)": imp[::-1].copy()})
    assert [p.steps for p in plans["growth (x order)"]] == [p.steps for p in plans["growth"]]
    assert plans["growth"][0].layers == [1, 3]
    assert plans["growth (x order)"][0].layers == [2, 4]  # reversed values 9, 8 at 4, 2
    with pytest.raises(ValueError, match="has 4 layers, not 6"):
        schedules_for(cfg, imp, {"bad": np.ones(4)})
