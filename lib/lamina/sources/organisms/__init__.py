"""Model organisms: small GPT-2- and Llama-style LMs trained offline, with their full history.

A *spec* names one loadable checkpoint of an organism:

* ``"organism-llama"`` or ``"organism-llama@final"``: the final pretraining checkpoint;
* ``"organism-llama@step-N"``: a pretraining checkpoint (log-spaced, from ``step-0``, the init);
* ``"organism-llama@lm"``, ``"@sft"``, ``"@dpo"``: the alignment stages;
* ``"organism-llama~s1@sft"``: the same, trained with seed 1 (``~s0`` is the plain name; see
  :func:`lamina.sources.organisms.configs.organism_config`). ``make organisms SEEDS="0 1 2"`` builds
  several seeds side by side.

:func:`stage_loss` is the loss each alignment stage trains (answers end with a scored EOS; SFT
can add its LM replay): chapters computing gradients "with the training loss" use it.

:func:`resolve` maps a spec to a Hugging Face folder (``AutoModelForCausalLM`` and
``AutoTokenizer`` load it); :func:`load_optimizer_state` reads its AdamW moments.
Organisms are built by ``python -m lamina.sources.organisms build`` (or ``make organisms``) into
``$LAMINA_DATA/organisms/<name>-<config hash>/`` (default ``<repo>/data/organisms``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import torch

from lamina.core.manifest import MANIFEST
from lamina.sources.model_files import check_lamina_folder
from lamina.sources.organisms.build import BUILD_MARKER, build_atomically
from lamina.sources.organisms.checkpoints import read_optimizer_state
from lamina.sources.organisms.configs import (
    ORGANISMS,
    ORGANISMS_CODE_VERSION,
    SEED_MARK,
    OrganismConfig,
    organism_config,
    seed_name,
)  # fmt: skip
from lamina.sources.organisms.stages import STAGE_BASE, dpo_margins, qa_batch, stage_loss
from lamina.sources.organisms.train import STAGES

__all__ = [
    "ORGANISMS",
    "ORGANISMS_CODE_VERSION",
    "SEED_MARK",
    "STAGES",
    "STAGE_BASE",
    "OrganismConfig",
    "OrganismError",
    "OrganismNotBuiltError",
    "UnknownCheckpointError",
    "UnknownOrganismError",
    "build",
    "build_all",
    "built_seeds",
    "dpo_margins",
    "list_checkpoints",
    "list_organisms",
    "load_optimizer_state",
    "organism_config",
    "organism_dir",
    "qa_batch",
    "resolve",
    "seed_name",
    "stage_loss",
]

BUILD_HINT = "build it with `python -m lamina.sources.organisms build` (or `make organisms`)"


class OrganismError(ValueError):
    """Base class of the organisms' lookup errors."""


class UnknownOrganismError(OrganismError):
    """The organism name is not in the registry."""


class UnknownCheckpointError(OrganismError):
    """The organism exists but has no checkpoint of that name."""


class OrganismNotBuiltError(OrganismError):
    """The organism is known but its cache folder has not been built."""


def organisms_root(root: str | os.PathLike | None = None) -> Path:
    """Folder holding the organisms: ``root`` if given, else ``$LAMINA_DATA/organisms``."""
    if root is not None:
        return Path(root)
    from lamina.core.provenance import data_dir

    return data_dir() / "organisms"


def list_organisms(micro: bool = False) -> list[str]:
    """Registered organism names; the ``-micro`` test variants too when ``micro=True``."""
    return [n for n in ORGANISMS if micro or not n.endswith("-micro")]


def _config(name: str, config: OrganismConfig | None = None) -> OrganismConfig:
    if config is not None:
        return config
    try:
        return organism_config(name)
    except KeyError:
        raise UnknownOrganismError(
            f"unknown organism {name!r}; known organisms: {', '.join(list_organisms(micro=True))}"
            f" (a training seed k > 0 is ``<organism>{SEED_MARK}k``)"
        ) from None


def organism_dir(
    name: str, root: str | os.PathLike | None = None, config: OrganismConfig | None = None
) -> Path:
    """The cache folder ``<root>/<name>-<config hash>`` of an organism (built or not)."""
    return organisms_root(root) / _config(name, config).folder_name


def build(
    name: str,
    *,
    config: OrganismConfig | None = None,
    root: str | os.PathLike | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> Path:
    """Build an organism (idempotent: returns the cached folder when already built).

    Trains into a temporary folder and renames it to ``<root>/<name>-<hash>`` when complete.
    """
    cfg = _config(name, config)
    return build_atomically(cfg, organism_dir(name, root, cfg), progress, log)


def build_all(
    *,
    root: str | os.PathLike | None = None,
    micro: bool = False,
    progress: bool = True,
    seeds: tuple[int, ...] = (0,),
) -> list[Path]:
    """Build every full organism (or every ``-micro`` one when ``micro=True``) for each seed."""
    names = [n for n in ORGANISMS if n.endswith("-micro") == micro]
    return [build(seed_name(n, s), root=root, progress=progress) for s in seeds for n in names]


def built_seeds(name: str, root: str | os.PathLike | None = None) -> list[str]:
    """Names of the built training seeds of an organism: ``[name, name~s1, ...]``, by seed."""
    base = name.split(SEED_MARK)[0]
    _config(base)
    folder = organisms_root(root)
    if not folder.is_dir():
        return []
    out = []
    for p in folder.iterdir():
        stem = p.name.rsplit("-", 1)[0]
        if (p / BUILD_MARKER).is_file() and stem.split(SEED_MARK)[0] == base:
            try:
                if organism_dir(stem, root) == p:
                    out.append(stem)
            except (OrganismError, ValueError):
                continue
    return sorted(out, key=lambda n: organism_config(n).seed)


def _built_dir(name: str, root: str | os.PathLike | None, config: OrganismConfig | None) -> Path:
    """The folder of a built organism, its build record and evaluation checked against its
    manifest (:func:`lamina.sources.model_files.check_lamina_folder`)."""
    folder = organism_dir(name, root, config)
    if not (folder / BUILD_MARKER).is_file():
        raise OrganismNotBuiltError(
            f"organism {name!r} is not built yet (expected {folder}); {BUILD_HINT}"
            + f", e.g. `python -m lamina.sources.organisms build --name {name}`"
        )
    check_lamina_folder(folder, f"organism build {name}")
    return folder


def _step_of(folder_name: str) -> int:
    return int(folder_name.removeprefix("step-"))


def _checkpoint_folders(folder: Path) -> dict[str, Path]:
    """{checkpoint name: folder}: step-N (by step), final, then the stages."""
    steps = sorted(
        (p for p in (folder / "checkpoints").glob("step-*") if re.fullmatch(r"step-\d+", p.name)),
        key=lambda p: _step_of(p.name),
    )
    out = {p.name: p for p in steps}
    if steps:
        out["final"] = steps[-1]
    for stage in STAGES:
        if (folder / "stages" / stage / "config.json").is_file():
            out[stage] = folder / "stages" / stage
    return out


def list_checkpoints(
    name: str, root: str | os.PathLike | None = None, config: OrganismConfig | None = None
) -> list[str]:
    """Every spec of a built organism that loads, e.g. ["organism-llama@step-0", ...,
    "organism-llama@final", "organism-llama@lm", "organism-llama@sft", "organism-llama@dpo"].

    Raises UnknownOrganismError or OrganismNotBuiltError.
    """
    folder = _built_dir(name, root, config)
    return [f"{name}@{ck}" for ck in _checkpoint_folders(folder)]


def parse_spec(spec: str) -> tuple[str, str]:
    """``"name@checkpoint"`` -> (name, checkpoint); no ``@`` means ``final``."""
    name, _, ck = str(spec).partition("@")
    return name, (ck or "final")


def resolve(
    spec: str, root: str | os.PathLike | None = None, config: OrganismConfig | None = None
) -> Path:
    """The Hugging Face folder of a spec (see the module docstring).

    Raises UnknownOrganismError, OrganismNotBuiltError, or UnknownCheckpointError (which lists
    the checkpoints that exist); all are ValueError subclasses. The checkpoint's files are
    checked against its manifest (:func:`lamina.sources.model_files.check_lamina_folder`:
    ``ModelFileError`` naming a damaged file).
    """
    name, ck = parse_spec(spec)
    folder = _built_dir(name, root, config)
    found = _checkpoint_folders(folder)
    if ck not in found:
        raise UnknownCheckpointError(
            f"organism {name!r} has no checkpoint {ck!r}; it has: {', '.join(found)}"
        )
    # the checkpoint's manifest; a build from before manifests has been warned about once
    check_lamina_folder(found[ck], f"organism checkpoint {name}@{ck}",
                        warn=(folder / MANIFEST).is_file())  # fmt: skip
    return found[ck]


def load_optimizer_state(
    spec: str, root: str | os.PathLike | None = None, config: OrganismConfig | None = None
) -> dict[str, dict[str, torch.Tensor]]:
    """AdamW state saved with a checkpoint: {param name: {"exp_avg", "exp_avg_sq", "step"}}.

    Moments have the parameter's shape (float32); "step" is a 0-d int64 tensor (0 at init).
    Parameter names are those of ``model.named_parameters()`` (tied weights appear once).
    """
    return read_optimizer_state(resolve(spec, root, config))
