"""``peer-<folder>`` for every released model folder: a fake release built here (tensors only)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from lamina.chapters.models import chapter_models
from lamina.sources.peer import is_peer, peer_folder, peer_models
from lamina.states.peer_states import PeerDataError, read_latent_trajectories
from lamina.trajectory.model_states import load_model_states

SHAPES = {"gpt2": (12, 16), "qwen2.5": (24, 8), "tinyllama": (22, 12)}
PROMPTS = [
    {
        "id": f"animal_{i:03d}",
        "group": "animals",
        "subcategory": "x",
        "prompt_type": "atomic",
        "difficulty": "easy",
        "prompt": f"animal {i}",
    }
    for i in range(1, 5)
] + [
    {
        "id": f"reason_{i:03d}",
        "group": "reasoning",
        "subcategory": "y",
        "prompt_type": "chain",
        "difficulty": "hard",
        "prompt": f"if {i} then {i + 1}",
    }
    for i in range(1, 5)
]


def _release(root: Path, folders: dict[str, tuple[int, int]], bad: str | None = None) -> Path:
    (root / "data" / "prompts").mkdir(parents=True)
    with open(root / "data" / "prompts" / "prompts.jsonl", "w") as f:
        for row in PROMPTS:
            f.write(json.dumps(row) + "\n")
    gen = torch.Generator().manual_seed(0)
    for folder, (n_layers, d) in folders.items():
        out = root / "data" / "trajectories" / folder
        out.mkdir(parents=True)
        for row in PROMPTS:
            record = {
                "prompt_id": row["id"],
                "prompt": row["prompt"],
                "model": folder,
                "num_layers": n_layers + (1 if folder == bad else 0),
                "hidden_dim": d,
                "embedding_state": torch.randn(d, generator=gen),
                "trajectory": torch.randn(n_layers, d, generator=gen),
            }
            torch.save(record, out / f"{row['id']}.pt")
    (root / "data" / "trajectories" / "empty").mkdir()
    return root


def test_every_released_folder_is_a_peer_model(tmp_path):
    root = _release(tmp_path, SHAPES)
    assert peer_models(root) == ["peer-gpt2", "peer-qwen2.5", "peer-tinyllama"]
    assert peer_models(tmp_path / "absent") == []
    assert is_peer("peer-qwen2.5") and peer_folder("peer-qwen2.5") == "qwen2.5"
    assert not is_peer("peer-") and not is_peer("organism-gpt2")


@pytest.mark.parametrize("folder", list(SHAPES))
def test_each_folder_reads_with_its_own_shape_and_convention(tmp_path, folder):
    root = _release(tmp_path, SHAPES)
    traj = read_latent_trajectories(root, folder)
    n_layers, d = SHAPES[folder]
    assert traj.states.shape == (len(PROMPTS), n_layers + 1, d)
    assert traj.meta["final_row_post_norm"] is True
    norm = {"gpt2": "ln_f", "qwen2.5": "model.norm", "tinyllama": "model.norm"}[folder]
    assert norm in traj.meta["convention"]
    record = torch.load(root / "data" / "trajectories" / folder / "reason_002.pt")
    i = traj.ids.index("reason_002")
    np.testing.assert_array_equal(traj.states[i, 0], record["embedding_state"].numpy())
    np.testing.assert_array_equal(traj.states[i, 1:], record["trajectory"].numpy())


def test_default_model_set_lists_every_released_model_and_loads_them(tmp_path, monkeypatch):
    monkeypatch.setenv("LAMINA_DATA", str(tmp_path / "data-home"))
    root = _release(tmp_path / "release", {"gpt2": (12, 16), "qwen2.5": (24, 8)})
    models, _ = chapter_models("convergence", "default", peer_root=str(root))
    assert [m for m in models if is_peer(m)] == ["peer-gpt2", "peer-qwen2.5"]
    first_peer = models.index("peer-gpt2")  # pretrained LMs, released states, then the rest
    assert first_peer < models.index("minilm")
    assert all(m in ("smollm2-135m-instruct", "gemma-3-270m") for m in models[:first_peer])
    ms = load_model_states("peer-qwen2.5", None, peer_root=str(root))
    assert ms.name == "peer-qwen2.5"
    last = ms.pools["last"]
    assert last.raw.shape == (len(PROMPTS), 24, 8) and last.post_final.shape == (len(PROMPTS), 8)
    assert set(last.prompts["family"]) == {"lexical", "reasoning"}
    assert any("peer-qwen2.5" in n and "block 23" in n for n in ms.notes)


def test_a_record_that_contradicts_its_own_fields_is_refused(tmp_path):
    root = _release(tmp_path, {"qwen2.5": (24, 8)}, bad="qwen2.5")
    with pytest.raises(PeerDataError, match="num_layers"):
        read_latent_trajectories(root, "qwen2.5")
    with pytest.raises(PeerDataError, match="no released trajectories"):
        read_latent_trajectories(root, "tinyllama")
