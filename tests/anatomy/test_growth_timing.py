"""Wall time measured side by side: every kind of step timed in interleaved blocks, and each
run's clock modelled from those timings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from lamina.anatomy.growth import Phase, train_with_schedule
from lamina.anatomy.growth_timing import modelled_wall, phase_key, schedule_seconds, time_phases

from ..conftest import tiny_model

PLANS = {
    0: {"uniform": [Phase(None, 4, True)], "growth": [Phase([0], 2, True), Phase(None, 2, True)]}
}


def test_every_kind_of_step_is_timed_in_every_repeat_in_a_shuffled_order():
    ids = torch.randint(0, 320, (8, 10), generator=torch.Generator().manual_seed(0))
    phases = [p for ps in PLANS[0].values() for p in ps]
    t = time_phases(
        lambda: tiny_model("llama", n_layers=2), phases, ids, 4, 1e-3, repeats=3, steps=1
    )
    assert set(t["key"]) == {"all+emb", "0+emb"} and (t.groupby("key").size() == 3).all()
    assert (t["seconds"] > 0).all() and set(t["device"]) == {"cpu"}
    assert set(t["clock"]) == {"process CPU time"}
    assert phase_key(Phase([3, 1], 5, False)) == "1,3"


def test_the_modelled_clock_sums_each_steps_median_time():
    timing = pd.DataFrame(
        {
            "repeat": [0, 0, 1, 1],
            "key": ["all+emb", "0+emb"] * 2,
            "seconds": [1.0, 0.5, 3.0, 0.5],
            "device": "cpu",
        }
    )
    ids = torch.randint(0, 320, (8, 10), generator=torch.Generator().manual_seed(0))
    curves = []
    for run, phases in PLANS[0].items():
        df = train_with_schedule(
            tiny_model("llama", n_layers=2),
            phases,
            ids,
            ids[:2],
            lr=1e-3,
            batch_size=4,
            eval_every=100,
        )
        curves.append(df.assign(run=run, seed=0))
    frame = pd.concat(curves, ignore_index=True)
    wall = modelled_wall(frame, PLANS, timing)
    last = frame.assign(w=wall).groupby("run")["w"].max()
    assert np.isclose(last["uniform"], 4 * 2.0) and np.isclose(last["growth"], 2 * 0.5 + 2 * 2.0)
    assert np.allclose(
        schedule_seconds(PLANS[0]["growth"], timing), [2 * 0.5 + 2 * 1, 2 * 0.5 + 2 * 3]
    )


def test_on_a_cpu_a_block_is_timed_by_cpu_time_not_by_the_wall(monkeypatch):
    """Another process holding the cores advances the wall clock, not this process's CPU
    time: a wall clock that jumps 100 s inside every block must not reach the timing (it did
    while the blocks were timed by time.perf_counter)."""
    import time as real_time

    from lamina.anatomy import growth, growth_timing

    jump = {"t": 0.0}

    def loaded_wall() -> float:
        jump["t"] += 100.0
        return real_time.monotonic() + jump["t"]

    monkeypatch.setattr(growth.time, "perf_counter", loaded_wall)
    ids = torch.randint(0, 320, (8, 10), generator=torch.Generator().manual_seed(0))
    t = time_phases(lambda: tiny_model("llama", n_layers=2), [Phase(None, 1, True)], ids, 4, 1e-3, repeats=2, steps=1)
    assert (t["seconds"] < 10).all()
    assert growth_timing.step_clock(torch.device("cpu")) >= 0
