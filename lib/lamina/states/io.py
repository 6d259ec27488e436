"""Results files with provenance, and the reader for the states released with paper 1."""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from lamina.core.provenance import (
    atomic_write,
    atomic_write_json,
    data_dir,
    env_dir,
    provenance,
)
from lamina.sources.peer import peer_convention
from lamina.states.extract import Trajectories

__all__ = [
    "PeerDataError",
    "ResultsFileError",
    "read_latent_hidden_states",
    "read_latent_trajectories",
    "read_result_file",
    "read_results",
    "results_dir",
    "run_record",
    "safe_torch_load",
    "write_results",
]


# ----------------------------------------------------------------------------------------
# results
# ----------------------------------------------------------------------------------------


RUN_ENV = "LAMINA_RUN"
"""The environment variable through which ``python -m lamina.book execute`` tells the chapter's
kernel which run it is (JSON: parameters, key, namespace); see :func:`run_record`."""


def results_dir(*, create: bool = True) -> Path:
    """Where chapters write machine-readable results: ``$LAMINA_RESULTS`` (absolute against the
    working directory; created unless ``create=False``, when a missing folder is an error
    naming the variable) or ``<data>/results``."""
    if "LAMINA_RESULTS" in os.environ:
        return env_dir("LAMINA_RESULTS", create=create)
    return data_dir() / "results"


def run_record() -> dict[str, Any]:
    """The run a results file comes from: what ``python -m lamina.book execute`` put in
    ``$LAMINA_RUN`` (``parameters``: every parameter given, checked; ``varied``: those that
    differ from the book's defaults, model names aside; ``namespace``: a hash of ``varied``, or
    None for the book's own parameters; ``key``: the run's input key; ``quick``), else a record
    saying the results were written from Python directly (``via: "python"``)."""
    text = os.environ.get(RUN_ENV)
    if not text:
        return {"via": "python", "parameters": None, "varied": None, "namespace": None,
                "key": None, "quick": None}  # fmt: skip
    try:
        run = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"${RUN_ENV} is not valid JSON ({exc}): {text[:200]!r}") from exc
    if not isinstance(run, dict):
        raise ValueError(f"${RUN_ENV} is not a JSON object: {text[:200]!r}")
    return {"via": "lamina.book execute", **run}


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.@" else "_" for c in name)


def write_results(
    chapter: str,
    model: str,
    *,
    summary: dict[str, Any],
    config: dict[str, Any],
    tables: dict[str, pd.DataFrame] | None = None,
    root: str | os.PathLike | None = None,
) -> Path:
    """Write a chapter's results for one model, atomically.

    ``<root>/<model>/<chapter>.json`` holds ``summary`` (claims, measured values, verdicts),
    ``config`` (the experiment's parameters), the run (:func:`run_record`: its full parameters
    and key) and a provenance record; each table goes to
    ``<root>/<model>/<chapter>.<name>.parquet``. A run whose parameters differ from the
    book's writes into its own namespace, ``<root>/<model>/<namespace>/``, and so never
    replaces the book's results. Returns the JSON path.
    """
    run = run_record()
    folder = Path(root) if root is not None else results_dir()
    folder = folder / _slug(model)
    if run.get("namespace"):
        folder = folder / _slug(str(run["namespace"]))
    for name, table in (tables or {}).items():
        target = folder / f"{chapter}.{_slug(name)}.parquet"
        atomic_write(
            target, cast(Callable[[Path], object], lambda tmp, t=table: t.to_parquet(tmp, index=False))
        )
    record = {
        "chapter": chapter,
        "model": model,
        "summary": summary,
        "config": config,
        "tables": sorted(tables or {}),
        "run": run,
        "provenance": provenance(),
    }
    return atomic_write_json(folder / f"{chapter}.json", record)


class ResultsFileError(ValueError):
    """A results file that is not valid JSON or not a results record; names the file."""


def read_result_file(path: str | os.PathLike) -> dict[str, Any]:
    """One results record (what :func:`write_results` wrote); :class:`ResultsFileError`
    naming ``path`` when it is not JSON or lacks the record's fields."""
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultsFileError(f"{path}: not a valid results JSON file ({exc})") from exc
    missing = (
        [k for k in ("chapter", "model", "summary") if k not in record]
        if isinstance(record, dict)
        else ["(not a JSON object)"]
    )
    if missing:
        raise ResultsFileError(f"{path}: not a lamina results record; missing {missing}")
    return record


def read_results(root: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """Every results record under ``root`` (default :func:`results_dir`), newest layout.
    A ``root`` that is not a folder raises ``FileNotFoundError`` naming it; a corrupt file
    raises :class:`ResultsFileError` naming it."""
    folder = Path(root) if root is not None else results_dir()
    if not folder.is_dir():
        raise FileNotFoundError(f"results folder {str(folder)!r} does not exist")
    return [read_result_file(p) for p in sorted(folder.glob("*/*.json"))]


# ----------------------------------------------------------------------------------------
# paper 1's released states
# ----------------------------------------------------------------------------------------


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
