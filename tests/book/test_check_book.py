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


@pytest.mark.parametrize("state", ["empty", "no chapters", "built"])
def test_an_empty_or_partial_book_is_named(tmp_path, state):
    from lamina.core.registry import names
    from tests.browser import unbuilt

    html = tmp_path / "html"
    html.mkdir()
    if state != "empty":
        (html / "index.html").write_text("<html><body>lamina</body></html>")
    if state == "built":
        (html / "executed").mkdir()
        for chapter in names():
            (html / "executed" / f"{chapter}.html").write_text("<html></html>")
    why = unbuilt(html)
    if state == "built":
        assert why is None
    else:
        assert why is not None and "make book" in why
        assert ("index.html" in why) if state == "empty" else ("chapter pages" in why)
