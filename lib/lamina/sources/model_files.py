"""A model folder's files, checked before and after loading: never a random or recast weight.

Hugging Face's ``from_pretrained`` fills a tensor missing from the checkpoint with a random
initialisation and casts any stored dtype to the one asked for, reporting both only in a log.
lamina refuses both, naming the file and the tensor (:class:`ModelFileError`):

* :func:`check_config`: ``config.json`` is a JSON object, and its ``dtype`` (or older
  ``torch_dtype``) field, when present, names a floating torch dtype.
* :func:`check_stored_tensors`: the tensors stored in the folder's safetensors files (their
  headers only) against the model the config describes (built on the meta device, so no
  memory): a tensor of another shape, an integer tensor where the model holds a float, or a
  float of another dtype than the config's ``dtype``.
* :func:`check_loading_info`: after loading, no tensor the model needs was missing from the
  files (transformers' own ``missing_keys``, which knows tied and non-persistent weights).
* :func:`check_lamina_folder`: a folder lamina wrote (an organism checkpoint, a dequantised
  GGUF) matches its manifest (:mod:`lamina.core.manifest`): sizes and SHA-256 of every file.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import torch

from lamina.core.manifest import MANIFEST, ManifestError, check_folder, safetensors_table

__all__ = [
    "FLOAT_DTYPES",
    "ModelFileError",
    "check_config",
    "check_lamina_folder",
    "check_loading_info",
    "check_stored_tensors",
    "stored_tensors",
]

FLOAT_DTYPES = {"float16": "F16", "bfloat16": "BF16", "float32": "F32", "float64": "F64"}
"""The floating dtypes a config may name, with their safetensors codes."""
_FLOAT_CODES = {"F16", "BF16", "F32", "F64", "F8_E4M3", "F8_E5M2"}


class ModelFileError(ValueError):
    """A model folder whose files do not give the model its config describes: the message
    names the file and the tensor or field at fault."""


def check_config(folder: str | os.PathLike) -> dict[str, Any]:
    """``<folder>/config.json`` as a dict; :class:`ModelFileError` naming the file and the
    field when its ``dtype``/``torch_dtype`` is not one of :data:`FLOAT_DTYPES` (e.g.
    ``"float128"``, which transformers meets as an AttributeError naming neither). A missing or
    unreadable config gives ``{}``: the loader then names the folder and the cause."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        return {}  # not a model folder: the loader says so, naming it
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return {}  # unreadable: transformers' loader reports it, with its cause
    if not isinstance(config, dict):
        return {}
    for field in ("dtype", "torch_dtype"):
        value = config.get(field)
        if value is not None and value not in FLOAT_DTYPES:
            raise ModelFileError(
                f"{path}: field {field!r} is {value!r}, not a floating dtype lamina can load "
                f"({', '.join(FLOAT_DTYPES)})"
            )
    return config


def _weight_files(folder: Path) -> list[Path]:
    """The safetensors files of a folder: ``model.safetensors``, the shards its index lists,
    else every ``*.safetensors`` but the optimizer state; [] when it has none."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelFileError(f"{index}: not a readable safetensors index ({exc})") from exc
        return [folder / s for s in shards]
    if (folder / "model.safetensors").is_file():
        return [folder / "model.safetensors"]
    return sorted(p for p in folder.glob("*.safetensors") if p.name != "optimizer.safetensors")


def stored_tensors(folder: str | os.PathLike) -> dict[str, tuple[str, list[int], Path]]:
    """``{name: (safetensors dtype code, shape, file)}`` of every tensor in the folder's
    safetensors files, read from their headers; a file listed but missing is an error."""
    out: dict[str, tuple[str, list[int], Path]] = {}
    for path in _weight_files(Path(folder)):
        if not path.is_file():
            raise ModelFileError(f"{path}: listed in the folder's safetensors index but missing")
        try:
            table = safetensors_table(path)
        except ManifestError as exc:
            raise ModelFileError(str(exc)) from None
        out.update({name: (t["dtype"], t["shape"], path) for name, t in table.items()})
    return out


def _expected(auto: Any, config: Any) -> tuple[dict[str, torch.Tensor], str]:
    """(state dict as meta tensors: names, shapes, dtypes; the base model's prefix) of the
    model ``auto.from_config(config)`` builds, on the meta device (no memory)."""
    with torch.device("meta"):
        model = auto.from_config(config)
    return dict(model.state_dict()), str(getattr(model, "base_model_prefix", "") or "")


def check_stored_tensors(folder: str | os.PathLike, auto: Any, config: Any) -> None:
    """Compare the folder's stored tensors with the model ``auto.from_config(config)``
    builds: :class:`ModelFileError` naming the file and each tensor (at most 6) stored with
    another shape, as an integer where the model holds a float, or as a float of another dtype
    than the config's ``dtype``. Tensors whose names the model lacks are left to transformers
    (renamed legacy keys); missing ones to :func:`check_loading_info`."""
    stored = stored_tensors(folder)
    if not stored:
        return
    want_code = FLOAT_DTYPES.get(str(getattr(config, "dtype", None) or "").replace("torch.", ""))
    expected, prefix = _expected(auto, config)
    problems = []
    for name, (code, shape, path) in stored.items():
        tensor = expected.get(name)
        for alt in (f"{prefix}.{name}", name.removeprefix(f"{prefix}.")):
            tensor = tensor if tensor is not None else expected.get(alt)
        if tensor is None:
            continue
        if list(tensor.shape) != shape:
            problems.append(f"{path.name}: tensor {name!r} has shape {shape}, the config's "
                            f"model needs {list(tensor.shape)}")  # fmt: skip
        elif tensor.is_floating_point() and code not in _FLOAT_CODES:
            problems.append(f"{path.name}: tensor {name!r} is stored as {code}, an integer "
                            "type, where the model holds floats (it would be cast silently)")  # fmt: skip
        elif tensor.is_floating_point() and want_code is not None and code != want_code:
            problems.append(f"{path.name}: tensor {name!r} is stored as {code}, but config.json "
                            f"says dtype {str(config.dtype).replace('torch.', '')}")  # fmt: skip
    if problems:
        raise ModelFileError(
            f"{folder}: {len(problems)} stored tensor(s) do not fit the model its config "
            "describes: " + "; ".join(problems[:6]) + (f"; ... ({len(problems) - 6} more)" if len(problems) > 6 else "")
        )  # fmt: skip


def check_loading_info(folder: str | os.PathLike, info: dict[str, Any]) -> None:
    """:class:`ModelFileError` when transformers' loading info (``output_loading_info=True``)
    lists a tensor the model needs that the folder's files lack (it would run with a random
    initialisation), or a tensor it could not load."""
    missing = sorted(info.get("missing_keys") or [])
    mismatched = sorted(str(k) for k in info.get("mismatched_keys") or [])
    errors = [str(e) for e in info.get("error_msgs") or []]
    if missing or mismatched or errors:
        files = ", ".join(p.name for p in _weight_files(Path(folder))) or "weight files"
        what = [f"missing: {missing[:6]}" if missing else "",
                f"of another shape: {mismatched[:6]}" if mismatched else "",
                f"errors: {errors[:2]}" if errors else ""]  # fmt: skip
        raise ModelFileError(
            f"{folder}: its {files} lack tensors the model needs ({'; '.join(w for w in what if w)}): "
            "it would run with random weights there"
        )


_WARNED: set[str] = set()


def check_lamina_folder(folder: str | os.PathLike, what: str, *, warn: bool = True) -> dict[str, Any] | None:
    """The manifest of a folder lamina wrote (``what`` names it, e.g. "organism checkpoint
    organism-llama@sft"), checked (:func:`lamina.core.manifest.check_folder`):
    :class:`ModelFileError` naming the damaged file. A folder without a manifest (built by a
    lamina before manifests) gets one warning per process and None: its tensors are still
    checked on load, its bytes cannot be (``warn=False``: no warning, when the folder holding
    it has said so already)."""
    folder = Path(folder)
    if not (folder / MANIFEST).is_file():
        if warn and str(folder) not in _WARNED:
            _WARNED.add(str(folder))
            warnings.warn(
                f"{what} ({folder}) has no {MANIFEST} (built before lamina wrote manifests): "
                "its tensors are checked for missing or misshapen ones, but its bytes cannot "
                "be verified; rebuild it to have them checked",
                RuntimeWarning,
                stacklevel=3,
            )
        return None
    try:
        return check_folder(folder)
    except ManifestError as exc:
        raise ModelFileError(f"{what}: {exc}") from None
