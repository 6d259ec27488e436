"""The reading-order and length checks of tests/browser.py can fail (issue 25): on small
hand-made pages, a verdict picture below the first screen, a landing page or a chapter too
long, a cut or overflowing chart title and a note before the first figure are each reported,
and the same pages without the defects pass. Needs Debian's chromium (skipped without it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import (
    CHAPTER_MAX,
    LANDING_MAX,
    PICTURE_BOTTOM,
    PageReport,
    _length_problems,
    check_book,
    chromium_path,
)

CSS = "article.bd-article { width: 700px; margin-left: 100px; } body { margin: 0; }"


def _svg(title: str, x: int = 0, cls: str = "") -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="marks{cls}" width="300" height="80">'
        '<g class="mark-text role-title-text"><text x="{x}" y="20" font-size="14">{title}</text></g>'
        '<rect x="0" y="30" width="200" height="40" fill="#0072B2"></rect></svg>'
    ).replace("{x}", str(x)).replace("{title}", title)


def _page(body: str) -> str:
    return (
        "<!doctype html><html><head><meta charset='utf-8'><link rel='icon' href='data:,'><style>"
        f"{CSS}</style></head><body><article class='bd-article'>{body}</article></body></html>"
    )


def _block(px: int, text: str = "") -> str:
    return f'<div style="height:{px}px">{text}</div>'


def _picture(px: int) -> str:
    return f'<div class="lamina-picture" style="height:{px}px">claims × models</div>'


def _figure(svg: str) -> str:
    return f'<div class="cell_output">{svg}</div>'


PAGES = {
    "book/intro.html": _picture(600) + _block(LANDING_MAX - 1200),
    "landing_low.html": _block(PICTURE_BOTTOM - 200) + _picture(400),
    "landing_long.html": _picture(500) + _block(LANDING_MAX + 500),
    "executed/good.html": (
        "<p>The claim and the method.</p>" + _figure(_svg("Convergence per layer"))
        + '<div class="cell_output"><img src="../fits.svg"></div>'
        + "<ul><li><em>Note:</em> after the result.</li></ul>" + _block(CHAPTER_MAX - 2000)
    ),
    "executed/notes_first.html": (
        "<p>The method.</p><ul><li><em>Note:</em> a model note, too early.</li></ul>"
        + "<h3>Caveats</h3>" + _figure(_svg("Convergence per layer"))
    ),
    "executed/long.html": _figure(_svg("Per layer")) + _block(CHAPTER_MAX + 500),
    "executed/raw.html": (
        _figure(_svg("Per layer"))
        + '<div class="cell_output"><div class="output text_plain"><pre>claim_id    p1-curvature-gap\n'
        + 'verdict     reproduced\nName: 0, dtype: object</pre></div></div>'
        + '<div class="cell_output"><div class="output text_plain"><pre>'
        + '&lt;lamina.chapters.results.ExperimentResult object at 0x7f3a2c&gt;</pre></div></div>'
    ),
    "executed/cut.html": (
        _figure(_svg("Convergence per layer (paper: diff…"))
        + _figure(_svg("A title drawn past the right edge of its chart", x=150))
        + '<div class="cell_output"><img src="../cut.svg"></div>'
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    if chromium_path() is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    root: Path = tmp_path_factory.mktemp("layout")
    for rel, body in PAGES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(_page(body))
    (root / "fits.svg").write_text(_svg("A short title"))
    (root / "cut.svg").write_text(_svg("A title Vega cut at its limit…"))
    return {(r.path, r.width): r for r in check_book(root, None, widths=(1300, 800))}


def test_pages_without_the_defects_pass(reports):
    for rel in ("book/intro.html", "executed/good.html"):
        for width in (1300, 800):
            r = reports[(rel, width)]
            assert r.ok, (rel, width, r.problems)
    assert reports[("executed/good.html", 1300)].n_charts == 2


def test_landing_picture_below_the_first_screen_is_reported(reports):
    r = reports[("landing_low.html", 1300)]
    assert len(r.landing) == 1 and f"below the first {PICTURE_BOTTOM} px" in r.landing[0]
    assert reports[("landing_low.html", 800)].ok  # lengths are checked at 1300 px only


def test_a_landing_page_without_its_picture_is_reported():
    r = PageReport("book/intro.html", 1300, height=2000)
    _length_problems(r, None)
    assert r.landing == ["the landing page has no verdict picture (.lamina-picture)"]


def test_long_pages_are_reported(reports):
    r = reports[("landing_long.html", 1300)]
    assert not r.landing and len(r.too_long) == 1 and f"(> {LANDING_MAX})" in r.too_long[0]
    r = reports[("executed/long.html", 1300)]
    assert len(r.too_long) == 1 and f"(> {CHAPTER_MAX})" in r.too_long[0]
    assert r.height > CHAPTER_MAX


def test_cut_and_overflowing_titles_are_reported(reports):
    found = " | ".join(reports[("executed/cut.html", 1300)].truncated_titles)
    assert '"Convergence per layer (paper: diff…" is cut' in found  # inline chart
    assert "cut.svg: title" in found  # an SVG image, fetched and laid out
    assert "past the right edge" in found and "outside its SVG" in found


def test_a_python_object_printed_into_a_page_is_reported(reports):
    # a cell that ends with glue_claim(...) printed the glued pandas Series under the claim
    raw = reports[("executed/raw.html", 1300)].raw_outputs
    assert len(raw) == 2 and all("prints a Python object" in r for r in raw)
    assert not reports[("executed/good.html", 1300)].raw_outputs


def test_notes_before_the_first_figure_are_reported(reports):
    notes = reports[("executed/notes_first.html", 1300)].notes_before_figure
    assert any("a model note" in n for n in notes) and any("Caveats" in n for n in notes)
