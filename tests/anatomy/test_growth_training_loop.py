"""Growth Training schedules, freezing, the FLOP count and run comparisons."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from lamina.anatomy.growth import (
    Phase,
    growth_schedule,
    step_flops,
    train_with_schedule,
    uniform_schedule,
)
from lamina.anatomy.growth_compare import compare_runs
from lamina.sources.models import get_adapter

from ..conftest import tiny_model


def _ids(n: int, t: int = 10, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 320, (n, t), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_frozen_params_get_no_gradient_and_no_optimizer_update(arch):
    model = tiny_model(arch, n_layers=3)
    before = {k: p.detach().clone() for k, p in model.named_parameters()}
    trainable_prefix = get_adapter(model).blocks + ".1."
    seen: list[tuple[int, str, bool]] = []

    def check(step: int, m: torch.nn.Module) -> None:
        for k, p in m.named_parameters():
            seen.append((step, k, p.grad is not None))

    train_with_schedule(
        model,
        [Phase([1], steps=3, train_embeddings=False)],
        _ids(16),
        _ids(4, seed=1),
        lr=1e-2,
        batch_size=4,
        eval_every=2,
        weight_decay=0.1,
        on_step=check,
    )
    for step, k, has_grad in seen:
        assert has_grad == (trainable_prefix in k), (step, k)
    for k, p in model.named_parameters():
        if trainable_prefix in k:
            assert not torch.equal(p, before[k]), f"{k} was not trained"
        else:
            assert torch.equal(p, before[k]), f"frozen {k} changed"
    assert all(p.requires_grad for p in model.parameters()), "requires_grad flags not restored"


def test_growth_schedule_orders_groups_by_importance_and_ends_with_full_phase():
    phases = growth_schedule(
        [1.0, 50.0, 3.0, 900.0, 0.5, 20.0], n_groups=3, steps_per_phase=5, final_steps=7
    )
    assert [p.layers for p in phases] == [[1, 3], [2, 5], [0, 4], None]
    assert [p.steps for p in phases] == [5, 5, 5, 7]
    assert phases[-1].train_embeddings and phases[-1].name == "full"
    cumulative = growth_schedule([1.0, 50.0, 3.0, 900.0], 2, 5, 0, cumulative=True)
    assert [p.layers for p in cumulative[:2]] == [[1, 3], [0, 1, 2, 3]]
    with pytest.raises(ValueError, match="n_groups"):
        growth_schedule([1.0, 2.0], n_groups=3, steps_per_phase=1, final_steps=1)


def test_uniform_step_costs_three_forwards_and_freezing_saves_backward():
    model = tiny_model("llama", n_layers=4)
    full = step_flops(model, uniform_schedule(1)[0], 2, 16)
    top = step_flops(model, Phase([3], 1, train_embeddings=False), 2, 16)
    bottom = step_flops(model, Phase([0], 1, train_embeddings=False), 2, 16)
    forward = full / 3
    assert top < bottom < full
    assert top > forward  # the forward pass is never saved
    # freezing blocks 0-2 and the embeddings saves their weight grads (and the head's) and
    # the activation grads below block 3: tok = 2*16, A = 2 * seq_len * d per block and token
    n = sum(p.numel() for p in get_adapter(model).block_list(model)[0].parameters())
    n_head = model.lm_head.weight.numel() + model.model.norm.weight.numel()
    tok, attn = 32, 2 * 16 * 32
    assert full - top == pytest.approx(tok * (2 * (3 * n + n_head) + 2 * 3 * n + 2 * 3 * attn))


def test_train_with_schedule_logs_every_step_with_cumulative_cost():
    model = tiny_model("gpt2", n_layers=2)
    sched = growth_schedule([2.0, 1.0], 2, steps_per_phase=2, final_steps=2)
    df = train_with_schedule(
        model, sched, _ids(16), _ids(4, seed=1), lr=1e-3, batch_size=4, eval_every=3
    )
    assert list(df["step"]) == list(range(7))
    assert list(df["phase"]) == [-1, 0, 0, 1, 1, 2, 2]
    assert df["flops"].is_monotonic_increasing and df["wall_s"].is_monotonic_increasing
    assert df["val_loss"].notna().tolist() == [True, False, True, True, True, False, True]
    with pytest.raises(ValueError, match="out of range"):
        train_with_schedule(model, [Phase([5], 1)], _ids(8), _ids(2))


def _run(losses: list[float], flops_per_step: float, wall_per_step: float) -> pd.DataFrame:
    steps = np.arange(len(losses))
    return pd.DataFrame(
        {
            "step": steps,
            "val_loss": losses,
            "flops": steps * flops_per_step,
            "wall_s": steps * wall_per_step,
        }
    )


def test_compare_runs_reports_equal_budget_losses_and_cost_to_target():
    runs = {
        "uniform": _run([5.0, 4.0, 3.0, 2.0], 3.0, 1.0),
        "growth": _run([5.0, 3.0, 2.0, 1.0], 1.5, 1.0),
    }
    out = compare_runs(runs).set_index("run")
    g = out.loc["growth"]
    assert g["val_loss_equal_steps"] == 1.0 and g["loss_ratio_equal_steps"] == 2.0
    assert g["val_loss_equal_flops"] == 1.0  # growth's 3 steps cost 4.5 <= uniform's 9
    assert g["steps_to_target"] == 2 and g["flops_to_target"] == 3.0
    assert g["flops_saving"] == pytest.approx(1 - 3.0 / 9.0)
    assert out.loc["uniform", "loss_ratio_equal_steps"] == 1.0
    with pytest.raises(ValueError, match="baseline run"):
        compare_runs(runs, baseline="nope")
