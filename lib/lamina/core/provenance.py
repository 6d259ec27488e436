"""Where lamina keeps its data, what it records about a run, and atomic writes."""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import json
import os
import platform
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from lamina.core.version import __version__

__all__ = [
    "atomic_write",
    "atomic_write_text",
    "clean_stale_temporaries",
    "ENV_PATHS",
    "EnvPathError",
    "absolute_env_paths",
    "data_dir",
    "env_dir",
    "git_commit",
    "json_default",
    "provenance",
    "repo_root",
    "temporary_beside",
    "temporary_environ",
    "writable_folder",
]


def repo_root() -> Path | None:
    """The lamina checkout this package was imported from, or None when installed elsewhere."""
    here = Path(__file__).resolve().parents[3]
    return (
        here if (here / "pyproject.toml").is_file() and (here / "lib" / "lamina").is_dir() else None
    )


ENV_PATHS = ("LAMINA_DATA", "LAMINA_RESULTS", "LAMINA_GGUF_CACHE", "LAMINA_NOTEBOOKS")
"""The environment variables that name folders (each read through :func:`env_dir`)."""


class EnvPathError(ValueError):
    """A ``LAMINA_*`` folder variable that names a file, or a folder that cannot be created."""


def env_dir(name: str, *, create: bool = True) -> Path:
    """The folder that the environment variable ``name`` names, made absolute against the
    current working directory (``~`` expanded). ``create``: make it when missing. Raises
    :class:`EnvPathError` naming the variable and its value when it is empty, names a file,
    cannot be created, or (``create=False``) does not exist."""
    value = os.environ.get(name, "")
    if not value.strip():
        raise EnvPathError(f"${name} is set but empty; unset it or name a folder")
    path = Path(value).expanduser()
    path = path if path.is_absolute() else Path.cwd() / path
    if path.exists() and not path.is_dir():
        raise EnvPathError(f"${name}={value!r} names a file ({path}), not a folder")
    if not path.exists():
        if not create:
            raise EnvPathError(f"${name}={value!r}: the folder {path} does not exist")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise EnvPathError(f"${name}={value!r}: cannot create {path} ({exc.strerror})") from exc
    return path


def absolute_env_paths() -> dict[str, str]:
    """Rewrite every set :data:`ENV_PATHS` variable of this process as an absolute path
    (against the current working directory), so that child processes started elsewhere (the
    papermill kernel runs in ``notebooks/``) read the same folders. Returns the rewritten
    values. Does not create or check the folders."""
    out = {}
    for name in ENV_PATHS:
        value = os.environ.get(name)
        if value and value.strip():
            path = Path(value).expanduser()
            os.environ[name] = out[name] = str(path if path.is_absolute() else Path.cwd() / path)
    return out


@contextlib.contextmanager
def temporary_environ(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the block (child processes inherit them), then restore
    each one as it was (unset if it was unset)."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def writable_folder(path: Path, name: str) -> Path:
    """``path`` as a writable folder, created when missing; the error names it as ``name``:
    NotADirectoryError (a file is there), OSError (it cannot be created, with the system's
    reason) or PermissionError (not writable)."""
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"{name} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OSError(f"{name} cannot be created: {exc.strerror or exc}") from exc
    if not os.access(path, os.W_OK | os.X_OK):
        raise PermissionError(f"{name} is not writable")
    return path


def data_dir() -> Path:
    """Root for organisms, caches and results: ``$LAMINA_DATA`` (absolute, created; see
    :func:`env_dir`), else ``<repo>/data``, else ``~/.cache/lamina``."""
    if "LAMINA_DATA" in os.environ:
        return env_dir("LAMINA_DATA")
    root = repo_root()
    return root / "data" if root is not None else Path.home() / ".cache" / "lamina"


@functools.lru_cache(maxsize=1)
def git_commit() -> str:
    """The commit of the lamina checkout (with ``+dirty`` when it has local changes), or
    ``"unknown"`` outside a git checkout."""
    root = repo_root()
    if root is None:
        return "unknown"
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (sha or "unknown") + ("+dirty" if dirty and sha else "")


def provenance(**extra: Any) -> dict[str, Any]:
    """A provenance record: lamina version and commit, library versions, date, plus ``extra``
    (model, revision, dtype, pooling, seed, parameters, elapsed seconds ...)."""
    import numpy
    import torch
    import transformers

    record = {
        "lamina_version": __version__,
        "lamina_commit": git_commit(),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": numpy.__version__,
        "machine": f"{platform.machine()} ({os.cpu_count()} cpus)",
    }
    record.update(extra)
    return record


_TMP_TAG = "pid"
_STALE_SECONDS = 3600.0  # a temporary without a pid (older lamina) is stale after an hour


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def clean_stale_temporaries(folder: str | os.PathLike) -> list[Path]:
    """Delete the hidden ``.<name>.pid<PID>.<random>.tmp`` files that :func:`atomic_write`
    left in ``folder`` when its process was killed (SIGKILL, power loss): those whose process
    no longer runs, or, without a pid, those older than an hour. Returns what it deleted."""
    import re
    import time

    removed = []
    for tmp in Path(folder).glob(".*.tmp"):
        m = re.search(rf"\.{_TMP_TAG}(\d+)\.[a-z0-9_]{{8}}\.tmp$", tmp.name)
        if m is None and not re.search(r"\.[a-z0-9_]{8}\.tmp$", tmp.name):
            continue  # not one of ours
        try:
            stale = (
                not _pid_alive(int(m.group(1)))
                if m
                else time.time() - tmp.stat().st_mtime > _STALE_SECONDS
            )
            if stale:
                tmp.unlink()
                removed.append(tmp)
        except OSError:  # vanished meanwhile, or not ours to delete
            continue
    return removed


def temporary_beside(path: str | os.PathLike) -> Path:
    """A new empty hidden file ``.<name>.pid<PID>.<random>.tmp`` in ``path``'s folder, to be
    renamed onto ``path`` (what :func:`clean_stale_temporaries` removes if the process dies)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{path.name}.{_TMP_TAG}{os.getpid()}.", suffix=".tmp", dir=path.parent
    )
    os.close(fd)
    return Path(tmp)


def atomic_write(path: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp_path)`` on a temporary file beside ``path``, then rename it into place,
    so a reader never sees a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temporaries(path.parent)
    tmp = temporary_beside(path)
    try:
        write(Path(tmp))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as indented JSON to ``path`` atomically (numpy scalars allowed)."""
    return atomic_write_text(path, json.dumps(obj, indent=2, default=json_default) + "\n")


def json_default(obj: Any) -> Any:
    """JSON for the values lamina writes that ``json`` does not know: numpy scalars and
    arrays (as numbers and lists) and paths (as text); TypeError for anything else."""
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
