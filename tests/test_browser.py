"""The rendered book opens offline in a real browser: no console errors, no failed or
outgoing requests, every chart present. Builds a quick version of the whole book."""

from __future__ import annotations

import pytest

from .browser import check_book, chromium_path

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def screenshots():
    """Screenshots of the quick book, one per page, kept as CI artefacts."""
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "artifacts" / "screenshots-quick"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_every_page_opens_offline_without_errors(quick_book, screenshots):
    if chromium_path() is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    reports = check_book(quick_book.html, screenshots)
    pages = {r.path: r for r in reports}
    assert "book/intro.html" in pages and "book/methods.html" in pages
    bad = {
        r.path: r.console_errors + r.failed_requests + r.external_requests
        for r in reports
        if not r.ok
    }
    assert not bad, bad
    for chapter in quick_book.chapters:
        page = pages[f"book/executed/{chapter}.html"]
        assert page.n_charts >= 1, f"{chapter} shows no chart"
    assert all(r.screenshot for r in reports)
