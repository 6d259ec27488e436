"""Results files and the safe reader for paper 1's released states."""

from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pandas as pd
import pytest
import torch

from lamina.states.io import read_results, write_results
from lamina.states.peer_states import (
    PeerDataError,
    read_latent_hidden_states,
    read_latent_trajectories,
    safe_torch_load,
)


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


class Innocent:
    pass


@pytest.mark.parametrize("payload", [Evil(), Innocent(), pd.DataFrame({"a": [1]})])
def test_pickle_with_any_other_global_is_refused(tmp_path, payload):
    path = tmp_path / "bad.pt"
    torch.save({"embedding_state": torch.zeros(3), "x": payload}, path, pickle_protocol=2)
    with pytest.raises(PeerDataError, match="refused to unpickle"):
        safe_torch_load(path)


def test_numpy_arrays_are_allowed(tmp_path):
    path = tmp_path / "ok.pt"
    torch.save({"t": torch.ones(2), "a": np.arange(3, dtype=np.float32)}, path)
    record = safe_torch_load(path)
    np.testing.assert_array_equal(record["a"], [0, 1, 2])


def test_released_trajectories_stack_embedding_and_blocks(peer_root):
    t = read_latent_trajectories(peer_root)
    assert t.states.shape == (170, 13, 768)
    assert t.states.dtype == np.float32
    assert t.meta["final_row_post_norm"] is True
    assert len(t.ids) == 170 and list(t.prompts["id"]) == t.ids
    assert {"animals", "reasoning"} <= set(t.prompts["group"])
    # the released per-file cosines are cos(trajectory[l], trajectory[l+1]) on layers 1..12
    record = safe_torch_load(peer_root / "data" / "trajectories" / "gpt2" / f"{t.ids[0]}.pt")
    a, b = t.states[0, 1:-1], t.states[0, 2:]
    cos = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
    np.testing.assert_allclose(cos, record["layer_cosines"], rtol=1e-4, atol=1e-5)


def test_released_hidden_states_pool(peer_root):
    mean = read_latent_hidden_states(peer_root, pool="mean")
    last = read_latent_hidden_states(peer_root, pool="last")
    assert mean.states.shape == last.states.shape == (50, 13, 768)
    full = read_latent_trajectories(peer_root)
    i = full.ids.index(last.ids[0])
    np.testing.assert_allclose(last.states[0], full.states[i], rtol=1e-5, atol=1e-4)


def test_missing_peer_folder_is_a_clear_error(tmp_path):
    with pytest.raises(PeerDataError, match="no released trajectories"):
        read_latent_trajectories(tmp_path)


def test_results_are_written_with_provenance_and_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("LAMINA_RUN", json.dumps({"book": True, "namespace": None}))  # make book
    table = pd.DataFrame({"layer": [0, 1], "value": [0.5, 0.25]})
    path = write_results(
        "curvature",
        "organism-gpt2@sft",
        summary={"verdict": "reproduced"},
        config={"seed": 0},
        tables={"per layer": table},
        root=tmp_path,
    )
    record = json.loads(path.read_text())
    assert record["provenance"]["lamina_commit"]
    assert record["config"] == {"seed": 0}
    back = pd.read_parquet(path.parent / "curvature.per_layer.parquet")
    pd.testing.assert_frame_equal(back, table)
    assert [r["chapter"] for r in read_results(tmp_path)] == ["curvature"]
    assert not list(tmp_path.rglob("*.tmp"))


def test_results_that_replace_a_finished_run_name_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LAMINA_RUN", json.dumps({"book": True, "namespace": None}))
    kw = dict(summary={}, config={"seed": 0}, root=tmp_path)
    first = json.loads(write_results("curvature", "m", **kw).read_text())
    assert "replaces" not in first["run"] and "replace" not in capsys.readouterr().err
    second = json.loads(write_results("curvature", "m", **kw).read_text())
    prov = first["provenance"]
    assert second["run"]["replaces"] == {"date": prov["date"], "commit": prov["lamina_commit"]}
    assert f"replace those of {prov['date']}" in capsys.readouterr().err
    write_results("curvature", "other", **kw)  # another model's results replace nothing
    assert "replace" not in capsys.readouterr().err


def test_pickle_module_is_not_used_directly():
    import inspect

    import lamina.states.io
    import lamina.states.peer_states

    for module in (lamina.states.io, lamina.states.peer_states):
        assert "pickle.load(" not in inspect.getsource(module)
    assert pickle  # the test module itself builds hostile pickles
