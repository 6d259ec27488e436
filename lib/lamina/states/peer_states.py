"""The reader for the states released with paper 1: its pickles, loaded with
``torch.load(weights_only=True)`` and numpy's array reconstruction as the only allowed global."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lamina.core.provenance import provenance
from lamina.sources.peer import peer_convention
from lamina.states.extract import Trajectories

__all__ = ["PeerDataError", "read_latent_hidden_states", "read_latent_trajectories",
           "safe_torch_load"]  # fmt: skip

class PeerDataError(ValueError):
    """The released data are missing, malformed, or not safe to unpickle."""


def _numpy_globals() -> list[Any]:
    """The only globals a released pickle may name: numpy's array reconstruction."""
    try:
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct  # type: ignore[no-redef]
    dtypes = {
        type(np.dtype(t)) for t in ("float16", "float32", "float64", "int32", "int64", "bool")
    }
    return [_reconstruct, np.ndarray, np.dtype, *dtypes]


def safe_torch_load(path: str | os.PathLike) -> Any:
    """``torch.load(path, weights_only=True)`` with numpy's array reconstruction allowlisted
    and nothing else. Any other global raises :class:`PeerDataError` naming the file."""
    import torch

    try:
        with torch.serialization.safe_globals(_numpy_globals()):
            return torch.load(path, weights_only=True, map_location="cpu")
    except (pickle.UnpicklingError, RuntimeError, AttributeError) as exc:
        raise PeerDataError(
            f"{path}: refused to unpickle ({exc.__class__.__name__}): {str(exc)[:300]}"
        ) from exc
    except (EOFError, OSError, ValueError) as exc:
        raise PeerDataError(f"{path}: unreadable ({exc.__class__.__name__}: {exc})") from exc


def _record(path: Path) -> dict[str, Any]:
    record = safe_torch_load(path)
    if not isinstance(record, dict):
        raise PeerDataError(f"{path}: expected a dict of fields, got {type(record).__name__}")
    return record


def _field(path: Path, record: dict[str, Any], key: str, ndims: tuple[int, ...]) -> Any:
    """``record[key]`` as a finite float32 torch tensor with one of ``ndims`` dimensions
    (numpy arrays are accepted); otherwise :class:`PeerDataError` naming the file."""
    import torch

    if key not in record:
        raise PeerDataError(f"{path}: missing field {key!r}; fields: {sorted(record)}")
    value = record[key]
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(value)
    if not isinstance(value, torch.Tensor):
        raise PeerDataError(f"{path}: field {key!r} is {type(value).__name__}, not an array")
    if value.dim() not in ndims:
        raise PeerDataError(
            f"{path}: field {key!r} has shape {tuple(value.shape)}; expected {ndims} dimensions"
        )
    value = value.float()
    if not torch.isfinite(value).all():
        raise PeerDataError(f"{path}: field {key!r} holds NaN or infinite values")
    return value


def _read_prompts(root: Path) -> pd.DataFrame:
    path = root / "data" / "prompts" / "prompts.jsonl"
    if not path.is_file():
        raise PeerDataError(
            f"{path} is missing: is {root} the released latent-trajectories folder?"
        )
    try:
        table = pd.read_json(path, lines=True)
    except ValueError as exc:
        raise PeerDataError(f"{path}: not valid JSON lines ({exc})") from exc
    if not {"id", "prompt"} <= set(table.columns):
        raise PeerDataError(f"{path}: needs 'id' and 'prompt' fields; has {list(table.columns)}")
    return table


def _check_record(path: Path, record: dict, n_layers: int, d: int) -> None:
    """Refuse a released record whose tensors disagree with its own ``num_layers`` /
    ``hidden_dim`` fields."""
    want_l, want_d = record.get("num_layers"), record.get("hidden_dim")
    if want_l is not None and int(want_l) != n_layers:
        raise PeerDataError(f"{path}: trajectory has {n_layers} rows, num_layers says {want_l}")
    if want_d is not None and int(want_d) != d:
        raise PeerDataError(f"{path}: states have width {d}, hidden_dim says {want_d}")


def _trajectory_record(path: Path) -> tuple[dict, str, np.ndarray]:
    """(record, prompt id, states (L+1, d)) of one released trajectory file: its
    ``embedding_state`` (d,) stacked over its ``trajectory`` (L, d); a :class:`PeerDataError`
    for a missing or malformed field, an empty prompt id or mismatched widths."""
    record = _record(path)
    emb = _field(path, record, "embedding_state", (1,))  # (d,)
    traj = _field(path, record, "trajectory", (2,))  # (L, d)
    pid = record.get("prompt_id")
    if not isinstance(pid, str) or not pid:
        raise PeerDataError(f"{path}: field 'prompt_id' is {pid!r}, not a non-empty str")
    if emb.shape[0] != traj.shape[1]:
        raise PeerDataError(
            f"{path}: embedding_state has width {emb.shape[0]} but trajectory {traj.shape[1]}"
        )
    _check_record(path, record, int(traj.shape[0]), int(traj.shape[-1]))
    return record, pid, np.concatenate([emb.numpy()[None], traj.numpy()], 0)  # (L+1, d)


def _prompt_text(path: Path, record: dict, pid: str, table: pd.DataFrame) -> str:
    """The prompt of a released file: its ``prompt`` field, else its id's row of
    ``prompts.jsonl`` (``table`` indexed by id); a :class:`PeerDataError` when neither gives a
    non-empty string."""
    text = record.get("prompt")
    if text is None:
        if pid not in table.index:
            raise PeerDataError(
                f"{path}: prompt_id {pid!r} is not in prompts.jsonl and the file has no "
                "'prompt' field"
            )
        text = table.loc[pid, "prompt"]
    if not isinstance(text, str) or not text.strip():
        raise PeerDataError(f"{path}: prompt for {pid!r} is {text!r}, not a non-empty str")
    return text


def read_latent_trajectories(root: str | os.PathLike, model: str = "gpt2") -> Trajectories:
    """Paper 1's released last-token trajectories as :class:`Trajectories`.

    ``states[i]`` stacks ``embedding_state`` and the 12 ``trajectory`` rows: shape
    (n_prompts, 13, 768) for GPT-2, float32; ``model`` is any released folder
    (``qwen2.5``, ``tinyllama``: see :mod:`lamina.sources.peer` for their conventions). Row 0 is the last token's embedding output;
    rows 1..11 are the residual stream after blocks 1..11; row 12 is Hugging Face's
    ``hidden_states[12]``, which is AFTER the final layer norm (recorded in ``meta``).
    ``ids`` are the prompt ids and ``prompts`` their rows of ``prompts.jsonl``.
    """
    root = Path(root)
    folder = root / "data" / "trajectories" / model
    files = sorted(folder.glob("*.pt"))
    if not files:
        raise PeerDataError(f"no released trajectories under {folder}")
    table = _read_prompts(root).set_index("id")
    ids, texts, rows = [], [], []
    shape: tuple[int, ...] | None = None
    for path in files:
        record, pid, row = _trajectory_record(path)
        if shape is not None and row.shape != shape:
            raise PeerDataError(
                f"{path}: states of shape {row.shape}, unlike {shape} in {files[0].name}"
            )
        shape = row.shape
        rows.append(row)
        ids.append(pid)
        texts.append(_prompt_text(path, record, pid, table))
    states = np.stack(rows).astype(np.float32)  # (n, L+1, d)
    conv = peer_convention(model)
    meta = provenance(
        model=model,
        hf_model=conv.hf_model,
        source=str(folder),
        pool="last",
        dtype="float32",
        convention=(
            f"row 0 = {conv.layer0} of the last token; rows 1..L-1 = residual stream after "
            f"blocks 1..L-1; row L = hidden_states[L], AFTER the final norm ({conv.final_norm})"
        ),
        final_row_post_norm=conv.final_row_post_norm,
    )
    prompts = table.reindex(ids).reset_index()
    return Trajectories(states, texts, list(range(states.shape[1])), meta, ids=ids, prompts=prompts)


def read_latent_hidden_states(
    root: str | os.PathLike, model: str = "gpt2", pool: str = "mean"
) -> Trajectories:
    """The 50 released prompts whose every token's states were kept, pooled by ``pool``
    ("mean" over tokens, or "last"): states (n, 13, 768). As above, row 12 is post-final-norm."""
    root = Path(root)
    folder = root / "data" / "hidden_states" / model
    files = sorted(folder.glob("*.pt"))
    if not files:
        raise PeerDataError(f"no released hidden states under {folder}")
    if pool not in ("mean", "last"):
        raise ValueError(f"pool must be 'mean' or 'last', got {pool!r}")
    table = _read_prompts(root).set_index("id")
    ids: list[str] = []
    rows: list[np.ndarray] = []
    for path in files:
        record = _record(path)
        hs = _field(path, record, "hidden_states", (3, 4))  # (13, T, d) or (13, 1, T, d)
        if hs.dim() == 4:
            if hs.shape[1] != 1:
                raise PeerDataError(f"{path}: hidden_states {tuple(hs.shape)} holds a batch > 1")
            hs = hs[:, 0]
        mask = _field(path, record, "attention_mask", (1, 2)).reshape(-1).bool()
        if mask.numel() != hs.shape[1] or not mask.any():
            raise PeerDataError(
                f"{path}: attention_mask has {mask.numel()} entries ({int(mask.sum())} set) "
                f"for {hs.shape[1]} tokens"
            )
        hs = hs[:, mask]
        row = (hs.mean(1) if pool == "mean" else hs[:, -1]).numpy()
        if rows and row.shape != rows[0].shape:
            raise PeerDataError(
                f"{path}: states of shape {row.shape}, unlike {rows[0].shape} in {files[0].name}"
            )
        if path.stem not in table.index:
            raise PeerDataError(f"{path}: prompt id {path.stem!r} is not in prompts.jsonl")
        rows.append(row)
        ids.append(path.stem)
    states = np.stack(rows).astype(np.float32)
    texts = [str(table.loc[i, "prompt"]) for i in ids]
    meta = provenance(
        model=model, source=str(folder), pool=pool, dtype="float32", final_row_post_norm=True
    )
    return Trajectories(
        states,
        texts,
        list(range(states.shape[1])),
        meta,
        ids=ids,
        prompts=table.reindex(ids).reset_index(),
    )
