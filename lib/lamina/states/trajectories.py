"""Hidden-state trajectories as an object: :class:`Trajectories`, validated on construction,
saved atomically as one safetensors file with lamina's JSON metadata in its header."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lamina.core.manifest import sha256_arrays
from lamina.core.provenance import atomic_write
from lamina.core.types import StatesArray, TokenStates

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Trajectories", "TrajectoriesFileError"]


@dataclass
class Trajectories:
    """Hidden-state trajectories of a list of texts.

    states: (n_texts, n_layers_kept, d_model) float32 for pooled modes, or a list of
        (n_layers_kept, T_i, d_model) arrays for ``pool="none"``.
    layers: the layer index of each row of axis 1 (0 = embedding output).
    meta: model, revision, dtype, pool, lamina version and commit, conventions.
    ids / prompts: optional prompt ids and their table (set by readers of prompt files).
    """

    states: StatesArray | list[TokenStates]
    texts: list[str]
    layers: list[int]
    meta: dict[str, Any] = field(default_factory=dict)
    ids: list[str] | None = None
    prompts: pd.DataFrame | None = None

    def __post_init__(self) -> None:
        _check_trajectories(self)

    def __len__(self) -> int:
        return len(self.texts)

    def save(self, path: str | os.PathLike) -> Path:
        """Write states (safetensors) and metadata (JSON in the safetensors header, with the
        SHA-256 of the states' bytes, :func:`lamina.core.manifest.sha256_arrays`) atomically."""
        from safetensors.numpy import save_file

        if isinstance(self.states, np.ndarray):
            tensors = {"states": np.ascontiguousarray(self.states)}
        else:
            tensors = {f"states.{i}": np.ascontiguousarray(s) for i, s in enumerate(self.states)}
        header = {
            "sha256": sha256_arrays(tensors.values()),  # checked by load
            "texts": self.texts,
            "layers": self.layers,
            "meta": self.meta,
            "ids": self.ids,
            "prompts": None if self.prompts is None else self.prompts.to_json(orient="records"),
            "ragged": not isinstance(self.states, np.ndarray),
        }
        metadata = {"lamina": json.dumps(header, default=str)}
        return atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata=metadata))

    @classmethod
    def load(cls, path: str | os.PathLike) -> Trajectories:
        """Read what :meth:`save` wrote. A missing file raises ``FileNotFoundError``; a file
        that is truncated, not safetensors, lacks lamina's header, holds an inconsistent
        object or states whose SHA-256 differs from the one :meth:`save` recorded (a file
        written before lamina recorded it has none, and is read unchecked) raises
        :class:`TrajectoriesFileError` naming the path and the reason."""
        from safetensors import safe_open

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such Trajectories file")
        try:
            with safe_open(str(path), framework="numpy") as f:
                metadata = f.metadata() or {}
                if "lamina" not in metadata:
                    raise TrajectoriesFileError(
                        path, "the safetensors header has no 'lamina' key (not written by lamina)"
                    )
                header = json.loads(metadata["lamina"])
                if header["ragged"]:
                    n = len(header["texts"])
                    states: Any = [f.get_tensor(f"states.{i}") for i in range(n)]
                else:
                    states = f.get_tensor("states")
            stored = header.get("sha256")
            got = sha256_arrays(states if header["ragged"] else [states])
            if stored is not None and got != stored:
                raise TrajectoriesFileError(
                    path, "its states do not match the SHA-256 recorded when it was written "
                    "(damaged or edited since)"
                )  # fmt: skip
            prompts = None
            if header.get("prompts") is not None:
                import io

                import pandas as pd

                prompts = pd.read_json(io.StringIO(header["prompts"]), orient="records")
            return cls(
                states, header["texts"], header["layers"], header["meta"], header["ids"], prompts
            )
        except TrajectoriesFileError:
            raise
        except Exception as exc:  # SafetensorError, JSON, missing keys, failed validation
            raise TrajectoriesFileError(path, f"{type(exc).__name__}: {exc}") from exc


class TrajectoriesFileError(ValueError):
    """A Trajectories file that cannot be read: ``path`` and ``reason`` say which and why."""

    def __init__(self, path: str | os.PathLike, reason: str):
        self.path, self.reason = Path(path), reason
        super().__init__(f"{path}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.reason))


def _check_trajectories(t: Trajectories) -> None:
    """Raise ValueError unless states, texts, layers and ids describe the same texts."""
    if not isinstance(t.texts, list) or not all(isinstance(x, str) for x in t.texts):
        raise ValueError("Trajectories.texts must be a list of str")
    n = len(t.texts)
    if not isinstance(t.layers, list) or not all(
        isinstance(x, int | np.integer) and not isinstance(x, bool) for x in t.layers
    ):
        raise ValueError(f"Trajectories.layers must be a list of ints; got {t.layers!r}")
    m = len(t.layers)
    if isinstance(t.states, np.ndarray):
        if t.states.ndim != 3 or t.states.shape[:2] != (n, m):
            raise ValueError(
                f"Trajectories.states has shape {t.states.shape}; expected ({n}, {m}, d) for "
                f"{n} texts and {m} layers"
            )
    else:
        if not isinstance(t.states, list) or len(t.states) != n:
            raise ValueError(
                f"Trajectories.states must be an array or a list of {n} arrays (one per text)"
            )
        widths = set()
        for i, s in enumerate(t.states):
            if not isinstance(s, np.ndarray) or s.ndim != 3 or s.shape[0] != m:
                shape = getattr(s, "shape", type(s).__name__)
                raise ValueError(
                    f"Trajectories.states[{i}] has shape {shape}; expected ({m}, T, d)"
                )
            widths.add(s.shape[2])
        if len(widths) > 1:
            raise ValueError(f"Trajectories.states have different widths: {sorted(widths)}")
    if t.ids is not None and len(t.ids) != n:
        raise ValueError(f"Trajectories.ids has {len(t.ids)} entries for {n} texts")
    if not isinstance(t.meta, dict):
        raise ValueError(f"Trajectories.meta must be a dict; got {type(t.meta).__name__}")
