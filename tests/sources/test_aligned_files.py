"""The aligned builds of real models (``make aligned``) are checked like every cache (issue 35):
"BAD 5" fails on 2a683dc, where an ``sft.safetensors`` holding half of its trained tensors
was applied, and any folder with a ``build.json`` was accepted."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path, object]:
    """(aligned build folder, the source model folder, its config): a micro Llama aligned
    for 2 SFT and 2 DPO steps."""
    from lamina.sources.organisms.configs import ORGANISMS
    from lamina.sources.organisms.curriculum import generate_curriculum
    from lamina.sources.organisms.pretrained import PretrainedAlignConfig, build_aligned
    from lamina.sources.organisms.tokenizer import train_tokenizer
    from lamina.sources.organisms.train import make_model

    root = tmp_path_factory.mktemp("aligned")
    data = generate_curriculum(0, 1).alignment
    texts = [f"Question: {x.prompt}\nAnswer: {x.target}" for x in data.train[:200]]
    tok = train_tokenizer(texts, 384)
    make_model(ORGANISMS["organism-llama-micro"].replace(context=96), tok).save_pretrained(root / "src")
    tok.save_pretrained(root / "src")
    cfg = PretrainedAlignConfig(sft_steps=2, dpo_steps=2, batch_size=2, max_length=96,
                                warmup_steps=1, gate_items=8)  # fmt: skip
    return build_aligned(str(root / "src"), cfg, root / "cache", log=lambda s: None), root / "src", cfg


def _halve(path: Path) -> int:
    state = load_file(path)
    keep = dict(list(state.items())[: len(state) // 2])
    save_file(keep, path)
    return len(state)


def _base(src: Path) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(src).eval()


def test_an_aligned_build_lists_the_tensors_it_trained(built):
    import json

    folder, src, _ = built
    manifest = json.loads((folder / "lamina-manifest.json").read_text())
    assert set(manifest["trained"]) == set(load_file(folder / "sft.safetensors"))
    assert {"sft.safetensors", "dpo.safetensors", "gates.json", "build.json"} <= set(manifest["files"])


def test_bad5_a_partial_stage_file_is_rebuilt_never_applied(built, tmp_path):
    from lamina.sources.organisms.pretrained import build_aligned
    from lamina.weights.aligned import aligned_model

    folder, src, cfg = built
    damaged = tmp_path / "cache" / folder.name
    copy_tree(folder, damaged)
    n = _halve(damaged / "sft.safetensors")
    with pytest.raises(ValueError, match=r"sft\.safetensors: has \d+ bytes, its manifest says"):
        aligned_model(_base(src), damaged, "sft")
    with pytest.warns(RuntimeWarning, match=r"aligned build .*sft\.safetensors.*rebuilding"):
        again = build_aligned(str(src), cfg, tmp_path / "cache", log=lambda s: None)
    assert again == damaged and len(load_file(again / "sft.safetensors")) == n


def test_bad5_a_build_written_before_manifests_is_checked_stage_against_stage(built, tmp_path):
    from lamina.weights.aligned import aligned_model

    folder, src, _ = built
    legacy = tmp_path / "legacy"
    copy_tree(folder, legacy)
    (legacy / "lamina-manifest.json").unlink()
    _halve(legacy / "sft.safetensors")
    with pytest.warns(RuntimeWarning, match="no lamina-manifest.json"), pytest.raises(
        ValueError, match=r"sft\.safetensors: holds \d+ tensors, not the \d+ its build trained"
    ):  # fmt: skip
        aligned_model(_base(src), legacy, "sft")


def test_a_folder_with_only_a_build_record_is_rebuilt(built, tmp_path):
    from lamina.sources.organisms.pretrained import build_aligned

    folder, src, cfg = built
    stub = tmp_path / "cache" / folder.name
    stub.mkdir(parents=True)
    (stub / "build.json").write_text("{}")
    with pytest.warns(RuntimeWarning, match=r"files missing: \['sft\.safetensors'"):
        again = build_aligned(str(src), cfg, tmp_path / "cache", log=lambda s: None)
    assert (again / "sft.safetensors").is_file() and (again / "lamina-manifest.json").is_file()


def test_an_intact_build_applies_every_trained_tensor(built):
    from lamina.weights.aligned import aligned_model

    folder, src, _ = built
    base = _base(src)
    before = {k: p.detach().clone() for k, p in base.named_parameters()}
    model = aligned_model(base, folder, "dpo")
    state = load_file(folder / "dpo.safetensors")
    own, theirs = dict(model.named_parameters()), dict(base.named_parameters())
    assert all(torch.equal(own[k], v) for k, v in state.items())
    # what the stage did not train is the base's own tensor, shared (memory: Gemma 3's tied
    # embedding is 0.63 GiB of each copy); what it trained is new, and the base is unchanged
    untrained = set(own) - set(state)
    assert untrained and all(own[k] is theirs[k] for k in untrained)
    assert all(own[k] is not theirs[k] and not own[k].requires_grad for k in state)
    assert all(torch.equal(p, before[k]) for k, p in base.named_parameters())


def copy_tree(src: Path, dst: Path) -> None:
    import shutil

    shutil.copytree(src, dst)


# issue 53: every refusal of a damaged aligned build names the file at fault, whatever else
# of the build is missing ("A1": a halved sft.safetensors whose dpo.safetensors is gone was
# refused as "dpo.safetensors: not a readable safetensors file")


def _damaged(built, tmp_path: Path, *, manifest: bool, gone: tuple[str, ...]) -> Path:
    """A copy of the build with ``sft.safetensors`` halved, the files ``gone`` deleted and,
    unless ``manifest``, no ``lamina-manifest.json`` (a build from before manifests)."""
    folder, _, _ = built
    damaged = tmp_path / "damaged"
    copy_tree(folder, damaged)
    _halve(damaged / "sft.safetensors")
    for name in gone + (() if manifest else ("lamina-manifest.json",)):
        (damaged / name).unlink()
    return damaged


@pytest.mark.filterwarnings("ignore:aligned build.*has no lamina-manifest.json")
@pytest.mark.parametrize(
    ("manifest", "gone", "says"),
    [
        (False, ("dpo.safetensors",), r"holds \d+ tensors, not the \d+ its build trained"),
        (False, ("dpo.safetensors", "sft.adam.safetensors", "dpo.adam.safetensors"),
         r"cannot be verified: its build has no lamina-manifest\.json.*dpo\.safetensors is missing"),
        (False, (), r"holds \d+ tensors, not the \d+ its build trained"),
        (True, ("dpo.safetensors",), r"has \d+ bytes, its manifest says \d+.*dpo\.safetensors: listed"),
        (True, (), r"has \d+ bytes, its manifest says \d+"),
    ],
)  # fmt: skip
def test_a1_a_halved_stage_file_is_named_whatever_else_is_missing(built, tmp_path, manifest, gone, says):
    from lamina.sources.model_files import ModelFileError
    from lamina.sources.organisms.pretrained import aligned_state

    damaged = _damaged(built, tmp_path, manifest=manifest, gone=gone)
    with pytest.raises(ModelFileError, match=says) as info:
        aligned_state(damaged, "sft")
    at_fault = str(damaged / "sft.safetensors")
    assert str(info.value).removeprefix("aligned build: ").startswith(f"{at_fault}: "), info.value


@pytest.mark.filterwarnings("ignore:aligned build.*has no lamina-manifest.json")
@pytest.mark.parametrize("gone", [(), ("dpo.safetensors",)])
def test_a1_a_build_from_before_manifests_with_a_halved_stage_file_is_rebuilt(built, tmp_path, gone):
    """It was usable (aligned_damage None) when its files were all there: never rebuilt, and
    refused each time it was applied."""
    from lamina.sources.organisms.pretrained import aligned_damage

    damaged = _damaged(built, tmp_path, manifest=False, gone=gone)
    damage = aligned_damage(damaged)
    assert damage is not None and f"{damaged / 'sft.safetensors'}: holds" in damage
    assert ("files missing: ['dpo.safetensors']" in damage) == bool(gone)
    assert aligned_damage(built[0]) is None
