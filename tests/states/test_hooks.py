"""lamina.states.hooks: named hook points, and context managers that always remove their hooks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from lamina.states import hooks
from tests.conftest import tiny_model

ARCHS = ["gpt2", "llama", "gemma3", "bert"]
LIB = Path(__file__).resolve().parents[2] / "lib" / "lamina"
BARE_HOOK = re.compile(
    r"\.register_(forward_hook|forward_pre_hook|full_backward_hook|full_backward_pre_hook|"
    r"backward_hook|module_forward_hook|module_forward_pre_hook)\s*\("
)


@pytest.fixture(scope="module", params=ARCHS)
def model(request) -> torch.nn.Module:
    return tiny_model(request.param)


def _ids() -> torch.Tensor:
    return torch.randint(1, 300, (2, 7), generator=torch.Generator().manual_seed(0))


def _n_hooks(model: torch.nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_every_named_point_resolves_and_fires(model):
    names = hooks.points(model)
    assert {"embed", "block.0.in", "block.2.out", "block.1.attn.in", "block.1.mlp.in"} <= set(names)
    assert {"block.0.attn_out.in", "block.0.mlp_out.out", "block.0.q.in"} <= set(names)
    causal = model.config.model_type != "bert"
    assert {"final_norm", "unembed.in", "unembed"} <= set(names) if causal else "unembed" not in names
    with hooks.capture(model, names) as cache:
        model(input_ids=_ids())
    assert set(cache) == set(names)
    d = model.config.hidden_size
    for name in ("embed", "block.0.in", "block.1.out", "block.2.attn.in", "block.2.mlp.in"):
        assert cache[name].shape == (2, 7, d), name
    if causal:
        assert cache["unembed"].shape == (2, 7, model.config.vocab_size)
    assert _n_hooks(model) == 0


def test_capture_matches_output_hidden_states(model):
    """block.{i}.out is the stream after block i before any final norm: HF's hidden_states[i+1],
    except the last entry of a causal LM, which HF gives after the final norm (= final_norm)."""
    n = model.config.num_hidden_layers
    names = ["block.0.in"] + [f"block.{i}.out" for i in range(n)]
    causal = model.config.model_type != "bert"
    with hooks.capture(model, names + (["final_norm", "unembed.in"] if causal else [])) as cache:
        hf = model(input_ids=_ids(), output_hidden_states=True).hidden_states
    assert torch.equal(cache["block.0.in"], hf[0])
    for i in range(n - 1 if causal else n):
        assert torch.equal(cache[f"block.{i}.out"], hf[i + 1]), i
    if causal:
        assert torch.equal(cache["final_norm"], hf[n])
        assert not torch.allclose(cache[f"block.{n - 1}.out"], hf[n])  # pre- vs post-norm
        assert torch.equal(cache["unembed.in"], hf[n])


def test_read_points_see_the_normed_stream(model):
    """attn.in / mlp.in / q.in are what the read maps take in: the q map applied to attn.in
    gives q.out."""
    with hooks.capture(model, ["block.1.attn.in", "block.1.q.in", "block.1.q.out"]) as c:
        model(input_ids=_ids())
    assert torch.equal(c["block.1.attn.in"], c["block.1.q.in"])
    q = hooks.resolve(model, "block.1.q.out").module
    assert torch.equal(q(c["block.1.attn.in"]), c["block.1.q.out"])
    if model.config.model_type != "bert":  # pre-LN: the read maps see a normed stream
        with hooks.capture(model, ["block.1.in", "block.1.attn.in"]) as c:
            model(input_ids=_ids())
        assert not torch.allclose(c["block.1.in"], c["block.1.attn.in"])


def test_hooks_are_removed_after_an_exception_in_the_block(model):
    before = _n_hooks(model)
    with pytest.raises(RuntimeError, match="boom"):
        with hooks.capture(model, ["block.0.in", "block.1.out", "embed"]):
            assert _n_hooks(model) == before + 3
            raise RuntimeError("boom")
    assert _n_hooks(model) == before

    def explode(x: torch.Tensor) -> None:
        raise KeyError("inside the hook")

    with pytest.raises(KeyError, match="inside the hook"):
        with hooks.patch(model, "block.1.out", explode):
            model(input_ids=_ids())
    assert _n_hooks(model) == before


def test_unknown_point_names_itself_and_lists_the_valid_ones(model):
    before = _n_hooks(model)
    n = model.config.num_hidden_layers
    for bad in ("block.3.out" if n == 3 else "block.99.out", "blocks.0.out", "block.0.attn.out",
                "block.01.in", "block.0.nope.in", "lm_head"):
        with pytest.raises(ValueError, match=re.escape(repr(bad))) as info:
            with hooks.capture(model, ["block.0.in", bad]):  # the good one must not stay attached
                pass
        message = str(info.value)
        assert "block.{i}.out" in message and f"0..{n - 1}" in message and "embed" in message
        assert _n_hooks(model) == before
    if model.config.model_type == "bert":
        with pytest.raises(ValueError, match="'final_norm'"):
            hooks.resolve(model, "final_norm")
    with pytest.raises(TypeError):
        hooks.resolve(model, 3)


def test_patch_replaces_the_tensor_downstream(model):
    ids = _ids()
    with hooks.capture(model, ["block.1.in"]) as c:
        model(input_ids=ids)
    clean = c["block.1.in"].clone()
    with hooks.patch(model, "block.0.out", torch.zeros_like), hooks.capture(model, ["block.1.in"]) as c:
        model(input_ids=ids)
    assert torch.equal(c["block.1.in"], torch.zeros_like(clean))
    with hooks.patch(model, "block.0.out", lambda x: None), hooks.capture(model, ["block.1.in"]) as c:
        model(input_ids=ids)
    assert torch.equal(c["block.1.in"], clean)  # None leaves it unchanged
    with hooks.patch(model, "block.1.in", lambda x: 2 * x), hooks.capture(model, ["block.1.out"]) as c2:
        model(input_ids=ids)
    with hooks.capture(model, ["block.1.out"]) as c3:
        hooks.resolve(model, "block.1.in")  # resolving attaches nothing
        model(input_ids=ids)
    assert not torch.allclose(c2["block.1.out"], c3["block.1.out"])


def test_raw_hooks_get_torchs_arguments_and_several_hooks_share_a_point(model):
    seen: list[str] = []

    def raw_in(module, args, kwargs):
        seen.append(type(module).__name__)

    with hooks.attached(model, [("block.0.in", raw_in), ("block.0.in", raw_in)], raw=True):
        model(input_ids=_ids())
    assert len(seen) == 2 and seen[0] == type(hooks.resolve(model, "block.0.in").module).__name__


def test_map_point_names():
    assert hooks.map_point(3, "q", "in") == "block.3.q.in"
    assert hooks.map_point(0, "mlp_out", "out") == "block.0.mlp_out.out"
    assert hooks.map_point(None, "unembed", "in") == "unembed.in"
    assert hooks.map_point(None, "unembed", "out") == "unembed"


def bare_hook_sites(root: Path) -> list[str]:
    """file:line of every module-hook registration under ``root`` outside states/hooks.py."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).as_posix() == "states/hooks.py":
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if BARE_HOOK.search(line):
                found.append(f"{path.relative_to(root)}:{i}")
    return found


def test_no_bare_hook_registration_in_lib():
    assert (LIB / "states" / "hooks.py").is_file()
    assert bare_hook_sites(LIB) == [], "register module hooks through lamina.states.hooks"


def test_the_scan_finds_a_planted_hook(tmp_path):
    (tmp_path / "states").mkdir()
    (tmp_path / "states" / "hooks.py").write_text("m.register_forward_hook(f)\n")
    (tmp_path / "ok.py").write_text("x = 1\n")
    (tmp_path / "sneaky.py").write_text("x = 1\nh = blocks[0].register_forward_pre_hook(f, with_kwargs=True)\n")
    (tmp_path / "back.py").write_text("m.register_full_backward_hook (g)\n")
    assert bare_hook_sites(tmp_path) == ["back.py:1", "sneaky.py:2"]
