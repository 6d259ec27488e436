"""Reading an aligned build: its stage gates (both record formats) and the Adam state it keeps."""

from __future__ import annotations

import json

import pytest
import torch

from lamina.sources.organisms.pretrained import save_adam_state
from lamina.weights.aligned import aligned_optimizer_state, real_gates
from tests.conftest import tiny_model


def test_stage_gates_of_both_record_formats(tmp_path):
    old = {"sft": {"sft": {"passed": True, "values": {"acc": 0.9}, "reason": "ok"}},
           "dpo": {"preference": {"passed": False, "values": {"probe": 0.5, "x": float("nan")},
                                  "reason": "probe"}}}  # fmt: skip
    (tmp_path / "gates.json").write_text(json.dumps(old))
    g = real_gates(tmp_path)
    assert g["sft"].passed and not g["dpo"].passed and g["dpo"].values == {"probe": 0.5}
    assert "did not require @dpo to beat @sft" in g["dpo"].reason  # format 1 predates it
    new = {"format": 4, "sft": {"passed": False, "values": {"gain": -0.1}, "reason": "base"},
           "dpo": {"passed": True, "values": {"gain": 0.2}, "reason": "ok"}}  # fmt: skip
    (tmp_path / "gates.json").write_text(json.dumps(new))
    g = real_gates(tmp_path)
    assert not g["sft"].passed and g["dpo"].passed and g["sft"].reason == "base"
    # formats 2 and 3: the same layout, but their DPO gates never compared @dpo with the base
    # (2) or @dpo's preference accuracy with @sft's (3) (issue 51)
    for fmt in (2, 3):
        (tmp_path / "gates.json").write_text(json.dumps({**new, "format": fmt}))
        g = real_gates(tmp_path)
        assert not g["sft"].passed and g["sft"].reason == "base"
        assert not g["dpo"].passed and f"format {fmt}" in g["dpo"].reason and g["dpo"].values == {"gain": 0.2}
    (tmp_path / "gates.json").write_text(json.dumps({"format": 4}))
    assert "missing from its record" in real_gates(tmp_path)["sft"].reason


def test_the_adam_state_an_aligned_build_keeps_reads_back_as_torch_writes_it(tmp_path):
    model = tiny_model("llama", n_layers=1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95))
    for _ in range(3):
        opt.zero_grad()
        model(input_ids=torch.randint(0, 300, (2, 8))).logits.square().mean().backward()
        opt.step()
    assert aligned_optimizer_state(tmp_path, "sft") is None  # a build that kept none
    save_adam_state(tmp_path / "sft.adam.safetensors", model, opt)
    state = aligned_optimizer_state(tmp_path, "sft")
    assert state is not None
    for name, p in model.named_parameters():
        st = opt.state[p]
        assert int(state[name]["step"]) == 3
        assert torch.allclose(state[name]["exp_avg"], st["exp_avg"])
        assert torch.allclose(state[name]["exp_avg_sq"], st["exp_avg_sq"])


def test_an_adam_file_without_its_step_is_refused(tmp_path):
    from safetensors.torch import save_file

    save_file({"exp_avg/w": torch.zeros(2), "exp_avg_sq/w": torch.zeros(2)},
              str(tmp_path / "sft.adam.safetensors"))  # fmt: skip
    with pytest.raises(ValueError, match="no 'step'"):
        aligned_optimizer_state(tmp_path, "sft")
