"""Folder manifests (lamina.core.manifest): written last, checked on read, hashed once per
change of the files' stat signature."""

from __future__ import annotations

import json
import os

import pytest
import torch
from safetensors.torch import save_file

from lamina.core import manifest
from lamina.core.manifest import ManifestError, check_folder, write_manifest


@pytest.fixture
def folder(tmp_path):
    save_file({"w": torch.ones(2, 3)}, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / ".hidden.tmp").write_text("a temporary is not listed")
    write_manifest(tmp_path, {"kind": "test"})
    return tmp_path


def test_the_manifest_lists_sizes_hashes_and_tensors(folder):
    record = json.loads((folder / manifest.MANIFEST).read_text())
    assert record["kind"] == "test" and set(record["files"]) == {"model.safetensors", "config.json"}
    assert record["files"]["model.safetensors"]["tensors"] == {"w": {"dtype": "F32", "shape": [2, 3]}}
    assert check_folder(folder)["kind"] == "test"


@pytest.mark.parametrize(
    ("damage", "message"),
    [("delete", "listed in its folder's manifest but missing"), ("truncate", "its manifest says"),
     ("flip", "its bytes do not match"), ("no manifest", "has no lamina-manifest.json")],
)  # fmt: skip
def test_each_damage_is_named(folder, damage, message):
    path = folder / "model.safetensors"
    if damage == "delete":
        path.unlink()
    elif damage == "truncate":
        path.write_bytes(path.read_bytes()[:-4])
    elif damage == "flip":
        raw = bytearray(path.read_bytes())
        raw[-1] ^= 1
        path.write_bytes(bytes(raw))
    else:
        (folder / manifest.MANIFEST).unlink()
    with pytest.raises(ManifestError, match=message):
        check_folder(folder)


def test_hashes_run_once_per_change(folder, monkeypatch):
    check_folder(folder)
    hashed = []
    real = manifest.sha256_file
    monkeypatch.setattr(manifest, "sha256_file", lambda p: (hashed.append(p), real(p))[1])
    check_folder(folder)
    assert hashed == []
    os.utime(folder / "config.json")  # any write changes the signature
    check_folder(folder)
    assert len(hashed) == 2


def test_extra_files_can_be_refused(folder):
    (folder / "stray.bin").write_bytes(b"x")
    check_folder(folder)
    with pytest.raises(ManifestError, match="does not list"):
        check_folder(folder, extra_files=False)
