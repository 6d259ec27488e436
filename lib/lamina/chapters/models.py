"""Which models a chapter runs: the one meaning of ``model="default"``.

``"default"`` is the chapter's :class:`lamina.core.registry.ChapterRecord` ``default_models``, in
order, skipping with a note each one that cannot run here: an offline GGUF alias whose wheel is
not installed, an organism that is not built, and paper 1's released states when they are not
present (``"peer-*"`` in the registry stands for every released model folder). Any other value
names the models exactly -- one name, a comma-separated string or a list -- and a named model is
never skipped: it fails to load with its own error.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lamina.core.registry import by_name
from lamina.sources import organisms
from lamina.sources.gguf_models import installed_offline
from lamina.sources.peer import default_peer_root, peer_models

__all__ = ["PEER_ALL", "chapter_models", "named_models"]

PEER_ALL = "peer-*"  # in a registry record: every model folder of paper 1's release


def named_models(model: str | Sequence[str]) -> list[str]:
    """The models a non-default ``model`` names: one name, a comma-separated string or a list
    (duplicates dropped, order kept). ValueError for an empty name or list, TypeError for
    anything else."""
    if isinstance(model, str):
        names = [m.strip() for m in model.split(",")]
    elif isinstance(model, list | tuple) and all(isinstance(m, str) for m in model):
        names = [m.strip() for m in model]
    else:
        raise TypeError(f"model must be 'default', a model name or a list of names; got {model!r}")
    if not names or not all(names):
        raise ValueError(f"model {model!r} has an empty name; give a model name or 'default'")
    return list(dict.fromkeys(names))


def chapter_models(
    chapter: str, model: str | Sequence[str], *, peer_root: str | Path | None = None
) -> tuple[list[str], list[str]]:
    """(models to run, notes on the default models skipped) for ``chapter``; see the module
    docstring. ``peer_root``: where paper 1's release lies (default
    :func:`lamina.sources.peer.default_peer_root`)."""
    if model != "default":
        return named_models(model), []
    models: list[str] = []
    notes: list[str] = []
    for name in by_name(chapter).default_models:
        if name == PEER_ALL:
            root = Path(peer_root) if peer_root else default_peer_root()
            released = peer_models(root)
            if not released:
                notes.append(f"paper 1's released states skipped: not found under {root}")
            models.extend(released)
        elif name.startswith("organism-"):
            try:
                organisms.resolve(name)
            except Exception as exc:  # not built yet: skip with a visible note
                notes.append(f"{name} skipped: {exc}")
                continue
            models.append(name)
        else:
            kept, skipped = installed_offline([name])
            models.extend(kept)
            notes.extend(skipped)
    return list(dict.fromkeys(models)), notes
