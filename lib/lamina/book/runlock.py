"""One run at a time per output folder and chapter: a lock file beside the notebook.

Two ``lamina run``\\ s of the same chapter, model and parameters land in the same folder
(:func:`lamina.book.execute.default_out`); run together they would overwrite each other's
notebook and report. :func:`run_lock` makes the second refuse, with one line naming the first
run's process and the lock file, before it starts a kernel. The lock is
``<out>/.<chapter>.lock``, created by a hard link (atomic, and failing when it exists) and
holding ``{"pid", "host", "started"}``. A lock whose process no longer exists on this host
(``kill -9``, a lost machine) is stale: it is removed, with a warning, and the run goes on. A
lock from another host cannot be checked and is never broken: delete it by hand.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["RunLockedError", "lock_path", "run_lock"]


class RunLockedError(ValueError):
    """The same chapter is running into the same folder now (the message names its pid)."""


def lock_path(out: Path, chapter: str) -> Path:
    """The lock file of ``chapter`` in output folder ``out``."""
    return Path(out) / f".{chapter}.lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _holder(path: Path) -> dict | None:
    """The lock's record, or None when it is unreadable or half written."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _try_create(path: Path) -> bool:
    """Create the lock with its record in one step: the record is written to a file of this
    process's own, then hard-linked to ``path`` (which fails when ``path`` exists), so no
    reader ever sees a lock without its pid."""
    record = {"pid": os.getpid(), "host": socket.gethostname(),
              "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}  # fmt: skip
    own = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}")
    own.write_text(json.dumps(record))
    try:
        os.link(own, path)
    except FileExistsError:
        return False
    finally:
        own.unlink(missing_ok=True)
    return True


@contextmanager
def run_lock(out: Path, chapter: str) -> Iterator[Path]:
    """Hold ``<out>/.<chapter>.lock`` for the duration of the block; :class:`RunLockedError`
    when a live process holds it (see the module docstring). Yields the lock's path."""
    path = lock_path(out, chapter)
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(3):
        if _try_create(path):
            break
        holder = _holder(path)
        pid, host = (holder or {}).get("pid"), (holder or {}).get("host")
        if holder is None or not isinstance(pid, int):
            raise RunLockedError(f"{chapter}: lock file {path} is unreadable; if no run of it is "
                                 "going on, delete it and run again")  # fmt: skip
        if host == socket.gethostname() and not _alive(pid):
            print(f"[lamina] {chapter}: removing the stale lock {path} of process {pid}, which "
                  "no longer runs", file=sys.stderr, flush=True)  # fmt: skip
            path.unlink(missing_ok=True)
            continue
        raise RunLockedError(
            f"{chapter}: the same run is already going on into {path.parent} (process {pid} on "
            f"{host}, since {holder.get('started')}); wait for it to end, or delete {path} if "
            "it no longer runs"
        )
    else:
        raise RunLockedError(f"{chapter}: could not take the lock {path}")
    try:
        yield path
    finally:
        if (_holder(path) or {}).get("pid") == os.getpid():
            path.unlink(missing_ok=True)
