"""``make check-book`` on a book that was never built is an error, not a pass over zero pages
(issue 35, "BAD 12": on 2a683dc it exited 0)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_bad12_check_book_fails_on_a_book_that_was_never_built(tmp_path):
    done = subprocess.run([sys.executable, "-m", "tests.browser", str(tmp_path / "html"),
                           str(tmp_path / "shots")], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "check-book:" in done.stderr and "make book" in done.stderr


@pytest.mark.parametrize("state", ["empty", "no chapters", "other layout", "built"])
def test_an_empty_or_partial_book_is_named(tmp_path, state):
    from lamina.core.registry import names
    from tests.browser import CHAPTER_PAGES, unbuilt

    html = tmp_path / "html"
    html.mkdir()
    if state != "empty":
        (html / "index.html").write_text("<html><body>lamina</body></html>")
    if state in ("built", "other layout"):
        pages = html / (CHAPTER_PAGES if state == "built" else "executed")
        pages.mkdir(parents=True)
        for chapter in names():
            (pages / f"{chapter}.html").write_text("<html></html>")
    why = unbuilt(html)
    if state == "built":
        assert why is None
    else:
        assert why is not None and "make book" in why
        assert ("index.html" in why) if state == "empty" else ("chapter pages" in why)


def test_the_chapter_pages_are_looked_for_where_the_book_puts_them():
    """``unbuilt`` looks for ``<html>/book/executed/<chapter>.html``: where `jupyter-book build .`
    writes each `file: book/executed/<chapter>` of _toc.yml (on 2026-12-04 it looked in
    ``<html>/executed/`` and so would have called a whole built book unbuilt)."""
    from lamina.core.registry import names
    from tests.browser import CHAPTER_PAGES

    toc = (ROOT / "_toc.yml").read_text()
    files = {line.split("file:", 1)[1].strip() for line in toc.splitlines() if "file:" in line}
    assert {f"{CHAPTER_PAGES}{c}" for c in names()} <= files
