"""Results files with provenance, sealed and written all or nothing (paper 1's released states:
:mod:`lamina.states.peer_states`)."""

from __future__ import annotations

import glob
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from lamina.core.manifest import ManifestError, check_seal, seal, sha256_file
from lamina.core.provenance import (
    atomic_write_text,
    clean_stale_temporaries,
    data_dir,
    env_dir,
    provenance,
    temporary_beside,
)
from lamina.states.runs import RUN_ENV, model_folder, run_record

__all__ = [
    "RUN_ENV",
    "UNFINISHED",
    "ResultsFileError",
    "ResultsWriteError",
    "mark_run",
    "read_result_file",
    "read_results",
    "results_dir",
    "run_record",
    "write_results",
]


UNFINISHED = "unfinished"
"""Infix of a run's results until it ends well, beside the last finished run's (:func:`mark_run`)."""


def results_dir(*, create: bool = True) -> Path:
    """Where chapters write machine-readable results: ``$LAMINA_RESULTS`` (absolute against the
    working directory; created unless ``create=False``, when a missing folder is an error
    naming the variable) or ``<data>/results``."""
    if "LAMINA_RESULTS" in os.environ:
        return env_dir("LAMINA_RESULTS", create=create)
    return data_dir() / "results"


class ResultsFileError(ValueError):
    """A results file that is not valid JSON, not a results record, or whose bytes changed
    since it was written (its seal or a table's SHA-256); names the file."""


class ResultsWriteError(OSError):
    """Results that could not be written (a full disk, a read-only folder): nothing of them
    was left behind; the message names the folder and the system's reason."""


def _table_slug(name: str) -> str:
    """A table's file name part: letters, digits and ``-_.@``, anything else as ``_``."""
    return "".join(c if c.isalnum() or c in "-_.@" else "_" for c in name)


def _table_entry(path: Path, table: pd.DataFrame) -> dict[str, Any]:
    """A table file's manifest entry: size, SHA-256, rows and each column's dtype."""
    return {"size": path.stat().st_size, "sha256": sha256_file(path), "rows": int(len(table)),
            "columns": {str(c): str(t) for c, t in table.dtypes.items()}}  # fmt: skip


def _previous_run(path: Path) -> dict[str, Any] | None:
    """{"date", "commit"} of the finished run whose results are at ``path``, or None when there
    are none (read without verification: it only names the run being replaced)."""
    try:
        prov = json.loads(path.read_text(encoding="utf-8"))["provenance"]
        return {"date": prov.get("date"), "commit": prov.get("lamina_commit")}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_results(
    chapter: str,
    model: str,
    *,
    summary: dict[str, Any],
    config: dict[str, Any],
    tables: dict[str, pd.DataFrame] | None = None,
    root: str | os.PathLike | None = None,
) -> Path:
    """Write a chapter's results for one model, all or nothing.

    ``<root>/<model>/[<namespace>/]<chapter>.json`` holds ``summary`` (claims, measured
    values, verdicts), ``config`` (the experiment's parameters), the run
    (:func:`lamina.states.runs.run_record`: the book's own build, or the namespace of the
    parameters it varied, its status), a provenance record, the manifest of its tables
    (``files``: size, SHA-256, rows, column dtypes) and its own SHA-256 seal
    (:func:`lamina.core.manifest.seal`); each table goes to ``<chapter>.<name>.parquet``
    beside it. ``<model>`` is :func:`lamina.states.runs.model_folder`; only the book's build
    writes without a namespace. Every file is written to a temporary beside its final name
    and renamed only when all are written, the JSON last; on a failure (a full disk) the
    temporaries are removed and :class:`ResultsWriteError` names the folder. A
    ``lamina.book.execute`` run (``staged``) writes ``<chapter>.unfinished.*`` instead
    (:data:`UNFINISHED`), moved into place when it ends well. Results that replace a finished
    run's name it in the run record (``replaces``: its date and commit) and on stderr. Returns
    the JSON path."""
    run = run_record(chapter, config)
    folder = (Path(root) if root is not None else results_dir()) / model_folder(model)
    folder = folder / str(run["namespace"]) if run.get("namespace") else folder
    stem = f"{chapter}.{UNFINISHED}" if run.get("staged") else chapter
    previous = _previous_run(folder / f"{chapter}.json")
    if previous is not None:  # never silent: recorded, and said on the terminal
        run = {**run, "replaces": previous}
        print(f"lamina: the {chapter} results of {model!r} in {folder} replace those of "
              f"{previous['date']} (commit {previous['commit']})", file=sys.stderr)  # fmt: skip
    staged: list[tuple[Path, Path]] = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        clean_stale_temporaries(folder)
        files = {}
        for name, table in (tables or {}).items():
            final = folder / f"{stem}.{_table_slug(name)}.parquet"
            staged.append((temporary_beside(final), final))
            table.to_parquet(staged[-1][0], index=False)
            files[final.name] = _table_entry(staged[-1][0], table)
        record = {"chapter": chapter, "model": model, "summary": summary, "config": config,
                  "tables": sorted(tables or {}), "files": files, "run": run,
                  "provenance": provenance()}  # fmt: skip
        staged.append((temporary_beside(folder / f"{stem}.json"), folder / f"{stem}.json"))
        staged[-1][0].write_text(json.dumps(seal(record), indent=2) + "\n", encoding="utf-8")
        for tmp, final in staged:
            os.chmod(tmp, 0o644)
            os.replace(tmp, final)
    except OSError as exc:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise ResultsWriteError(
            f"cannot write the {chapter} results of {model!r} into {folder}: "
            f"{exc.strerror or exc}; nothing was written"
        ) from None
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    return folder / f"{stem}.json"


def mark_run(paths: Iterable[str | os.PathLike], status: str) -> list[Path]:
    """Set ``run.status`` ("ok"/"failed") of the records at ``paths`` of a ``lamina.book.execute``
    run, sealed again -> their paths. An "ok" ``<chapter>.unfinished.json`` moves into place (its
    JSON written first: a full disk fails before anything moves; tables renamed; JSON renamed over
    ``<chapter>.json``; leftover tables removed); a "failed" or killed one stays beside it."""
    out = []
    for path in (Path(p) for p in paths):
        record = read_result_file(path)
        record.setdefault("run", {})["status"] = status
        chapter = str(record["chapter"])
        if status != "ok" or path.name != f"{chapter}.{UNFINISHED}.json":
            atomic_write_text(path, json.dumps(seal(record), indent=2) + "\n")
            out.append(path)
            continue
        prefix = f"{chapter}.{UNFINISHED}."
        moves = {n: chapter + n[len(prefix) - 1 :] if n.startswith(prefix) else n
                 for n in record.get("files") or {}}  # fmt: skip
        record["files"] = {moves[n]: e for n, e in (record.get("files") or {}).items()}
        target, folder, tmp, moved = path.with_name(f"{chapter}.json"), path.parent, None, 0
        try:
            tmp = temporary_beside(target)
            tmp.write_text(json.dumps(seal(record), indent=2) + "\n", encoding="utf-8")
            for old, new in moves.items():
                os.replace(folder / old, folder / new)
                moved += 1
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except OSError as exc:
            if tmp is not None:
                tmp.unlink(missing_ok=True)
            kept = f"{moved} of its tables moved" if moved else f"the last finished run's {target.name} is kept"
            raise ResultsWriteError(f"cannot move the finished {chapter} results {path} into "
                                    f"place: {exc.strerror or exc}; {kept}") from None  # fmt: skip
        path.unlink(missing_ok=True)
        for leftover in folder.glob(f"{glob.escape(prefix)}*.parquet"):
            leftover.unlink(missing_ok=True)
        out.append(target)
    return out


def read_result_file(path: str | os.PathLike) -> dict[str, Any]:
    """One results record (what :func:`write_results` wrote), checked: its seal and every
    table its manifest lists (size and SHA-256). :class:`ResultsFileError` names ``path``
    (or the table) when it is not JSON, lacks the record's fields, or changed since it was
    written. A record without a seal (written before lamina sealed them) is read unchecked."""
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ResultsFileError(f"{path}: not a valid results JSON file ({exc})") from exc
    missing = (
        [k for k in ("chapter", "model", "summary") if k not in record]
        if isinstance(record, dict)
        else ["(not a JSON object)"]
    )
    if missing:
        raise ResultsFileError(f"{path}: not a lamina results record; missing {missing}")
    if "sha256" in record:
        try:
            record = {k: v for k, v in check_seal(record, path).items() if k != "sha256"}
        except ManifestError as exc:
            raise ResultsFileError(str(exc)) from None
    for name, entry in (record.get("files") or {}).items():
        table = path.parent / name
        if not table.is_file() or table.stat().st_size != entry.get("size") or (
                sha256_file(table) != entry.get("sha256")):  # fmt: skip
            raise ResultsFileError(f"{table}: missing, or changed since {path.name} recorded it")
    return record


def read_results(root: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """Every results record under ``root`` (default :func:`results_dir`): the book's
    (``<model>/<chapter>.json``) and other runs' (``<model>/<namespace>/<chapter>.json``).
    A ``root`` that is not a folder raises ``FileNotFoundError`` naming it; a corrupt file
    raises :class:`ResultsFileError` naming it."""
    folder = Path(root) if root is not None else results_dir()
    if not folder.is_dir():
        raise FileNotFoundError(f"results folder {str(folder)!r} does not exist")
    paths = sorted(folder.glob("*/*.json")) + sorted(folder.glob("*/*/*.json"))
    return [read_result_file(p) for p in paths]
