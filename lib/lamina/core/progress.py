"""Progress a person can see: on the terminal of ``lamina run``, even from inside a kernel.

A chapter executed by :mod:`lamina.book.execute` runs in a Jupyter kernel, whose output goes
into the executed notebook, not to the terminal that started it. The executor therefore sets
``$LAMINA_PROGRESS`` to a file; :func:`bar`, :func:`say` and :func:`heartbeat` then write
plain lines there (and nothing into the notebook), and the executor prints each new line on
its terminal as it comes (:func:`forward`). Without the variable (a script, an interactive
notebook) they show a tqdm bar and print on stderr, as usual.

Lines are throttled: a bar writes at most one line every :data:`LINE_SECONDS` seconds (and
its last state), a heartbeat one line every ``every`` seconds of a step that reports nothing
itself (dequantising a GGUF model).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "LINE_SECONDS", "PROGRESS_ENV", "bar", "forward", "heartbeat", "in_lamina_run",
    "library_bars_off", "say",
]  # fmt: skip

PROGRESS_ENV = "LAMINA_PROGRESS"
LINE_SECONDS = 10.0
T = TypeVar("T")


def _channel() -> Path | None:
    value = os.environ.get(PROGRESS_ENV, "").strip()
    return Path(value) if value else None


def in_lamina_run() -> bool:
    """Whether this process reports progress to a ``lamina run`` terminal (the variable is set)."""
    return _channel() is not None


@contextmanager
def library_bars_off() -> Iterator[None]:
    """Turn transformers' own progress bars ("Loading weights", GGUF conversion) off for the
    block, restoring them after: lamina reports those steps itself."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


def _append(path: Path, line: str) -> None:
    try:
        with open(path, "a", encoding="utf-8") as f:  # one write per line: appends interleave whole
            f.write(line.rstrip("\n") + "\n")
    except OSError:  # progress is a courtesy: never fail a computation over it
        pass


def say(message: str) -> None:
    """One line of progress: to the ``$LAMINA_PROGRESS`` file when set, else to stderr."""
    path = _channel()
    if path is None:
        print(message, file=sys.stderr, flush=True)
    else:
        _append(path, message)


class _Lines:
    """A file for tqdm that turns its carriage-return updates into whole lines, appended to
    ``path`` when tqdm flushes a changed status (tqdm throttles its own updates)."""

    def __init__(self, path: Path):
        self.path, self.text, self.last, self.when = path, "", "", 0.0

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        parts = [p.strip() for p in self.text.replace("\n", "\r").split("\r")]
        self.text = ""
        status = next((p for p in reversed(parts) if p), "")
        now = time.monotonic()
        due = now - self.when >= LINE_SECONDS or "100%" in status  # set_postfix refreshes often
        same = status.split("[")[0] == self.last.split("[")[0]  # only the clock moved
        if status and not same and due:
            self.last, self.when = status, now
            _append(self.path, status)


def bar(
    iterable: Iterable[T] | None = None,
    *,
    desc: str,
    total: int | None = None,
    disable: bool = False,
    leave: bool = False,
    unit: str = "it",
) -> Any:
    """A tqdm progress bar over ``iterable``: a live bar on a terminal or notebook (none when
    ``disable``), or, when ``$LAMINA_PROGRESS`` is set, a line such as ``extract: 45%|####5 |
    9/20 [00:12<00:14]`` at most every :data:`LINE_SECONDS` s in that file, whatever
    ``disable`` says: ``disable`` keeps bars out of a notebook, and these lines never go there."""
    path = _channel()
    if path is None:
        from tqdm.auto import tqdm

        return tqdm(iterable, desc=desc, total=total, disable=disable, leave=leave, unit=unit)
    from tqdm import tqdm as plain

    return plain(
        iterable, desc=desc, total=total, leave=True, unit=unit, file=_Lines(path),
        mininterval=LINE_SECONDS, ascii=True, ncols=80,
    )  # fmt: skip


@contextmanager
def _every(seconds: float, task: Callable[[], None]) -> Iterator[None]:
    """Run ``task`` in a thread every ``seconds`` while the block runs."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(seconds):
            task()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextmanager
def heartbeat(message: str, every: float = 20.0) -> Iterator[None]:
    """Say ``message`` now, then every ``every`` seconds how long it has run, then how long it
    took: for a step that reports no progress of its own."""
    start = time.perf_counter()
    say(f"{message} ...")
    with _every(every, lambda: say(f"{message}: {time.perf_counter() - start:.0f} s so far")):
        yield
    say(f"{message}: done in {time.perf_counter() - start:.0f} s")


@contextmanager
def forward(path: str | os.PathLike, prefix: str, poll: float = 0.5) -> Iterator[None]:
    """While the block runs, print every new whole line of the file ``path`` (a kernel's
    ``$LAMINA_PROGRESS``) on stderr, after ``prefix``; the last lines when it ends."""
    path = Path(path)
    offset = 0
    rest = b""

    def pump() -> None:
        nonlocal offset, rest
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read()
        except OSError:
            return
        offset += len(data)
        *lines, rest = (rest + data).split(b"\n")
        for line in lines:
            print(f"{prefix}{line.decode('utf-8', 'replace')}", file=sys.stderr, flush=True)

    try:
        with _every(poll, pump):
            yield
    finally:
        pump()
