"""The browser checks can fail: on a small hand-made page with each defect the book must not
have, every check of tests/browser.py reports it, and on the same page without the defects
none does. Needs Debian's chromium (skipped without it); takes a few seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import check_book, chromium_path

CSS = """
article.bd-article { width: 600px; margin-left: 100px; }
.lamina-verdict { background: #dafbe1; }
.lamina-scroll { max-width: 100%; overflow-x: auto; }
"""

SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="300" height="60">'
    '<g class="mark-text role-title-text"><text x="{x1}" y="20" font-size="14">organism-gpt2</text></g>'
    '<g class="mark-text role-title-text"><text x="{x2}" y="20" font-size="14">organism-llama</text></g>'
    "</svg>"
)


def _page(body: str) -> str:
    return (
        "<!doctype html><html><head><meta charset='utf-8'><style>"
        f"{CSS}</style></head><body><article class='bd-article'>{body}</article></body></html>"
    )


GOOD = """
<h1>A chapter</h1><p>Prose first.</p>
<details class="hide above-input"><summary>Show code</summary>
<div class="cell_input"><pre>import lamina</pre></div></details>
<div class="cell_output"><img src="fine.svg" width="300" height="60"></div>
<div class="lamina-scroll"><table><tr><td style="min-width:1200px">wide, but scrolls</td></tr></table></div>
<p><span class="lamina-verdict lamina-verdict--reproduced">reproduced</span></p>
"""

BAD = """
<h1>A chapter</h1>
<div class="cell_input"><pre>import lamina  # code on the first screen</pre></div>
<div class="cell_output"><img src="overlap.svg" width="300" height="60"></div>
<div class="cell_output"><img src="fine.svg" style="display:none"></div>
<table><tr><td style="min-width:1200px">wider than the column</td></tr></table>
<div style="overflow-x:auto"><table><tr><td style="min-width:1200px">theme scroll</td></tr></table></div>
<p><span class="lamina-verdict lamina-verdict--reproduced">\u2705</span>
<span class="lamina-verdict"></span> and a loose \u274c</p>
"""


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    if chromium_path() is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    root: Path = tmp_path_factory.mktemp("pages")
    (root / "good.html").write_text(_page(GOOD))
    (root / "bad.html").write_text(_page(BAD))
    (root / "fine.svg").write_text(SVG.format(x1=0, x2=160))
    (root / "overlap.svg").write_text(SVG.format(x1=0, x2=40))
    return {(r.path, r.width): r for r in check_book(root, root / "shots", widths=(1300, 800))}


@pytest.mark.parametrize("width", [1300, 800])
def test_a_clean_page_passes(reports, width):
    r = reports[("good.html", width)]
    assert r.ok, r.problems
    assert r.n_charts == 1 and r.n_badges == 1 and r.screenshot


@pytest.mark.parametrize("width", [1300, 800])
def test_each_defect_is_reported(reports, width):
    r = reports[("bad.html", width)]
    overflows = " ".join(r.overflows)
    assert "wider than the column" in overflows  # outside the column
    assert "theme scroll" in overflows  # scrolls sideways, but not in a lamina-scroll box
    assert len(r.hidden_charts) == 1 and "not visible" in r.hidden_charts[0]  # display: none
    assert any("organism-gpt2" in o and "organism-llama" in o for o in r.overlapping_labels)
    assert len(r.bad_badges) == 2  # an emoji badge and an empty one
    assert "\u2705" in r.emoji and "\u274c" in r.emoji
    assert r.code_on_first_screen
