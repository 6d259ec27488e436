"""Growth Training controls (issue 12 item 5): the optimiser state carries across phases, the
ordering controls spend the same phases and budget, and the order verdict can fail."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from lamina.anatomy.growth import Phase, train_with_schedule
from lamina.chapters.growth_training import (
    CONTROLS,
    GrowthConfig,
    order_claims,
    schedules_for,
)

from .conftest import tiny_model


def _ids(n: int, t: int = 10, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 320, (n, t), generator=torch.Generator().manual_seed(seed))


def _train(phases: list[Phase], carry: bool) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    model = tiny_model("llama", n_layers=2)
    train_with_schedule(model, phases, _ids(16), _ids(4, seed=1), lr=1e-2, batch_size=4,
                        eval_every=100, carry_optimizer=carry)  # fmt: skip
    return {k: p.detach().clone() for k, p in model.named_parameters()}


def test_carried_optimizer_makes_two_phases_one_continuous_run():
    one = _train([Phase([0], 4, True)], carry=True)
    split = _train([Phase([0], 2, True), Phase([0], 2, True)], carry=True)
    fresh = _train([Phase([0], 2, True), Phase([0], 2, True)], carry=False)
    assert all(torch.allclose(one[k], split[k], atol=1e-6) for k in one)
    assert not all(torch.allclose(one[k], fresh[k], atol=1e-6) for k in one)


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


def _orders(ratio: float, n: int = 3) -> pd.DataFrame:
    return pd.DataFrame([{"run": "growth", "control": c, "seed": s,
                          "loss_ratio": ratio * (1 + 0.02 * s)}
                         for c in CONTROLS for s in range(n)])  # fmt: skip


@pytest.mark.parametrize(("ratio", "word"), [(2.0, "reproduced"), (0.6, "not reproduced")])
def test_order_verdict_follows_growth_against_its_controls(ratio, word):
    rows = order_claims(_orders(ratio))
    assert {r["claim_id"] for r in rows} == {f"G-order-{c}" for c in CONTROLS}
    assert all(r["verdict"] == word for r in rows)


def test_order_verdict_is_not_testable_without_controls():
    rows = order_claims(pd.DataFrame(columns=["run", "control", "seed", "loss_ratio"]))
    assert all(r["verdict"] == "not testable" for r in rows)
