"""The rendered book reads well in a real browser, offline, at 1300 px and at 800 px: no
console errors, no failed or outgoing requests, nothing wider than the text column outside an
explicit scroll container, every chart visible with headers that do not overlap, every verdict
badge readable text (never an emoji), and no code on a chapter's first screen. Builds a quick
version of the whole book; screenshots go to artifacts/screenshots-quick/<width>px/."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import WIDTHS, check_book, chromium_path, format_report
from tests.conftest import PEER

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def screenshots() -> Path:
    """Screenshots of the quick book, one per page and width, kept as CI artefacts."""
    folder = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots-quick"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def reports(quick_book, screenshots):
    if chromium_path() is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    return check_book(quick_book.html, screenshots)


def test_every_page_reads_well_at_both_widths(reports, quick_book):
    assert {r.width for r in reports} == set(WIDTHS)
    pages = {(r.path, r.width): r for r in reports}
    for width in WIDTHS:
        assert ("book/intro.html", width) in pages and ("book/methods.html", width) in pages
    # The page-size targets (the landing picture within 1,100 px, chapters under 15,000 px) are
    # about the real book and its models; `make check-book` enforces them there. The quick book
    # runs other models (tiny ones named by temporary paths) in quick mode, so its page sizes
    # say nothing about the book's; every other check applies to it unchanged.
    book_size_only = {"landing", "too_long"}
    bad = [format_report(r) for r in reports if set(r.problems) - book_size_only]
    assert not bad, "\n".join(bad)
    for chapter in quick_book.chapters:
        if chapter == "reanalysis" and not PEER.is_dir():
            continue  # without paper 1's released states the chapter only says they are absent
        for width in WIDTHS:
            assert pages[(f"book/executed/{chapter}.html", width)].n_charts >= 1, (
                f"{chapter} shows no chart at {width} px"
            )
    assert all(r.screenshot and Path(r.screenshot).is_file() for r in reports)


def test_landing_page_and_scorecard_open_with_the_verdict_matrix(quick_book):
    """The matrix is the first thing after the landing page's title and the scorecard's
    introduction, and every verdict on them is a badge or matrix cell, not an emoji."""
    for page in ("intro", "scorecard"):
        html = (quick_book.html / "book" / f"{page}.html").read_text()
        article = html[html.index('<article class="bd-article"') :]
        assert 'class="lamina-matrix"' in article, page
        first_section = article.index("<section")
        nested = article.find("<section", first_section + 1)
        matrix = article.index('class="lamina-matrix"')
        assert nested == -1 or matrix < nested, f"{page}: the matrix is not in the opening section"
    scorecard = (quick_book.html / "book" / "scorecard.html").read_text()
    assert scorecard.count('class="lamina-verdict') >= 1
