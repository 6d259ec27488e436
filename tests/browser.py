"""Drive headless Chromium (Debian's ``chromium``) over a built book, offline, as a reader would.

Used by ``tests/book/test_browser.py`` and by ``python -m tests.browser BOOK_HTML_DIR [SHOTS]``. Every
page is served from a local HTTP server; the browser is started with the flags that keep it from
calling home, and every request that does not go to that server counts as a failure.

Each page is opened at every width of :data:`WIDTHS` (CSS px) and checked for:

* console errors, failed requests, requests leaving the machine;
* **overflow**: no element reaches outside the text column, and no element scrolls or clips its
  content sideways, except inside an explicit scroll container (class ``lamina-scroll``);
* **charts**: every chart (an SVG or PNG output image) is loaded, visible, and inside the column;
  the titles and facet headers drawn in each SVG chart do not overlap one another;
* **badges**: every verdict badge (``.lamina-verdict``) shows its verdict as text and is styled
  by the book's stylesheet, and no emoji glyph appears anywhere in the page's text;
* **first screen**: no code cell's source is visible in the first screen (code is folded);
* **landing**: the landing page's verdict picture (``.lamina-picture``) ends within the first
  :data:`PICTURE_BOTTOM` px and the page is under :data:`LANDING_MAX` px tall (at 1300 px);
* **length**: every chapter page (``executed/``) is under :data:`CHAPTER_MAX` px tall at 1300 px;
* **titles**: no chart title, facet header or axis title is truncated (Vega's "…") or reaches
  outside its SVG;
* **reading order**: no note ("Note:", notes, caveats, model notes) comes before a page's first
  chart.

A full-page screenshot per page and width goes to ``<screenshots>/<width>px/<page>.png``.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
WIDTHS = (1300, 800)  # window widths (CSS px): a laptop and a narrow window / tablet
HEIGHT = 900  # the first screen's height (CSS px)
# output images, and Vega's inline SVG (class "marks"); not the theme's icons
CHART_SELECTOR = (
    "img[src$='.svg'], img[src$='.png'], .cell_output svg.marks, .lamina-counts svg.marks"
)
LENGTH_WIDTH = 1300  # the width at which page lengths are checked (CSS px)
PICTURE_BOTTOM = 1100  # the verdict picture ends within this many px of the landing page's top
LANDING_MAX = 4000  # the landing page's height limit (CSS px, at LENGTH_WIDTH)
CHAPTER_MAX = 15000  # a chapter page's height limit (CSS px, at LENGTH_WIDTH)
LANDING_PAGES = ("book/intro.html",)  # the root page of _toc.yml, as built
CHAPTER_DIR = "executed/"  # chapter pages are the notebooks executed into book/executed/
# where `jupyter-book build .` writes _toc.yml's `file: book/executed/<chapter>`, under html/
CHAPTER_PAGES = "book/executed/"
MAX_LISTED = 8  # findings listed per check and page


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class PageReport:
    path: str
    width: int = WIDTHS[0]
    console_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)
    overflows: list[str] = field(default_factory=list)
    hidden_charts: list[str] = field(default_factory=list)
    overlapping_labels: list[str] = field(default_factory=list)
    bad_badges: list[str] = field(default_factory=list)
    emoji: list[str] = field(default_factory=list)
    code_on_first_screen: list[str] = field(default_factory=list)
    landing: list[str] = field(default_factory=list)
    too_long: list[str] = field(default_factory=list)
    truncated_titles: list[str] = field(default_factory=list)
    notes_before_figure: list[str] = field(default_factory=list)
    raw_outputs: list[str] = field(default_factory=list)
    height: int = 0
    n_charts: int = 0
    n_badges: int = 0
    screenshot: str | None = None

    @property
    def problems(self) -> dict[str, list[str]]:
        """Every non-empty list of findings, by check."""
        names = (
            "console_errors",
            "failed_requests",
            "external_requests",
            "overflows",
            "hidden_charts",
            "overlapping_labels",
            "bad_badges",
            "emoji",
            "code_on_first_screen",
            "landing",
            "too_long",
            "truncated_titles",
            "notes_before_figure",
            "raw_outputs",
        )
        return {n: getattr(self, n) for n in names if getattr(self, n)}

    @property
    def ok(self) -> bool:
        return not self.problems


@contextlib.contextmanager
def serve(folder: Path):
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # noqa: D401
        pass


# The reading-experience checks, run in the page. Returns {overflows, hiddenCharts, nCharts,
# badBadges, nBadges, emoji, code}. The column is the theme's article element.
_PAGE_CHECKS = """
([selector, maxListed, height]) => {
  const col = document.querySelector('article.bd-article') || document.querySelector('main')
    || document.body;
  const c = col.getBoundingClientRect();
  const describe = (el, why) => {
    const cls = (el.getAttribute('class') || '').trim().split(/\\s+/).slice(0, 3).join('.');
    const text = (el.textContent || el.getAttribute('src') || '').trim().replace(/\\s+/g, ' ');
    return `${el.tagName.toLowerCase()}${cls ? '.' + cls : ''} ${why}: "${text.slice(0, 60)}"`;
  };
  const inScroll = (el) => {
    for (let a = el.parentElement; a && a !== col; a = a.parentElement) {
      if (a.classList.contains('lamina-scroll')) return true;
    }
    return false;
  };
  const shown = (el) => el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true});
  const overflows = [];
  for (const el of col.querySelectorAll('*')) {
    if (overflows.length >= maxListed) break;
    const r = el.getBoundingClientRect();
    if ((r.width === 0 && r.height === 0) || !shown(el) || inScroll(el)) continue;
    const cs = getComputedStyle(el);
    if (cs.position === 'fixed') continue;
    if (r.right > c.right + 1 || r.left < c.left - 1) {
      overflows.push(describe(el, `spans x ${Math.round(r.left)}-${Math.round(r.right)} `
        + `outside the column ${Math.round(c.left)}-${Math.round(c.right)}`));
    } else if (['auto', 'scroll', 'hidden', 'clip'].includes(cs.overflowX)
               && el.scrollWidth > el.clientWidth + 1 && !el.classList.contains('lamina-scroll')) {
      overflows.push(describe(el, `scrolls or clips sideways (${el.scrollWidth} > ${el.clientWidth} px)`));
    }
  }
  const charts = [...col.querySelectorAll(selector)];
  const hiddenCharts = [];
  for (const el of charts) {
    if (el.closest('details:not([open])')) continue;  // folded on purpose: shown when opened
    const r = el.getBoundingClientRect();
    const loaded = el.tagName !== 'IMG' || (el.complete && el.naturalWidth > 0);
    const inside = inScroll(el) || (r.left >= c.left - 1 && r.right <= c.right + 1);
    if (!loaded || !shown(el) || r.width < 20 || r.height < 20 || !inside) {
      hiddenCharts.push(describe(el, `not visible (loaded ${loaded}, ${Math.round(r.width)}x`
        + `${Math.round(r.height)} px, inside the column ${inside})`));
    }
  }
  const badges = [...document.querySelectorAll('.lamina-verdict')];
  const badBadges = [];
  for (const el of badges) {
    const text = (el.textContent || '').trim();
    const bg = getComputedStyle(el).backgroundColor;
    const r = el.getBoundingClientRect();
    const styled = bg !== 'rgba(0, 0, 0, 0)' && bg !== 'transparent';
    if (!/^[a-z][a-z /-]*[a-z]$/i.test(text) || !styled || (shown(el) && r.width < 8)) {
      badBadges.push(describe(el, `badge text "${text}", background ${bg}, ${Math.round(r.width)} px`));
    }
  }
  const emoji = [...new Set((document.body.innerText.match(
    /\\p{Emoji_Presentation}|\\p{Extended_Pictographic}\\uFE0F/gu) || []))];
  const code = [];
  for (const el of document.querySelectorAll('.cell_input')) {
    const r = el.getBoundingClientRect();
    if (shown(el) && r.height > 0 && r.top < height && r.bottom > 0) {
      code.push(describe(el, `code shown at y ${Math.round(r.top)} px`));
    }
  }
  // a Python object printed as text: a cell that ends with an expression (a pandas Series or
  // DataFrame repr, "<module.Class object at 0x...>") instead of a rendered table or nothing
  const raw = [];
  const repr = /dtype: |object at 0x[0-9a-f]+|^<[A-Za-z_][\\w.]* |Name: .+, dtype|\\[\\d+ rows x \\d+ columns\\]/m;
  for (const el of document.querySelectorAll('.cell_output .output.text_plain, .cell_output .output.stream')) {
    const text = (el.textContent || '').trim();
    if (repr.test(text)) raw.push(describe(el, 'prints a Python object'));
  }
  return {overflows, hiddenCharts: hiddenCharts.slice(0, maxListed), nCharts: charts.length,
          badBadges: badBadges.slice(0, maxListed), nBadges: badges.length, emoji,
          code: code.slice(0, maxListed), raw: raw.slice(0, maxListed)};
}
"""

# A JS helper shared by the checks that read SVG images (prepended to their function bodies).
_LAY_OUT_SVG = """// An SVG image fetched and laid out invisibly in the page (the reader's fonts), or null.
const layOutSvg = async (img) => {
  let text;
  try { text = await (await fetch(img.src)).text(); } catch (e) { return null; }
  const box = document.createElement('div');
  box.style.cssText = 'position:absolute;left:0;top:0;visibility:hidden;pointer-events:none';
  box.innerHTML = text;
  document.body.appendChild(box);
  return box;
};
"""

# Titles and facet headers of every SVG chart on the page must not overlap: each SVG is
# fetched, laid out (invisibly) in the page with the reader's fonts, and the boxes of its
# title and facet-header label texts (Vega draws both as role-title-text) compared pairwise.
_LABEL_OVERLAPS = "\nasync ([maxListed]) => {\n" + _LAY_OUT_SVG + """  const col = document.querySelector('article.bd-article') || document.body;
  const found = [];
  for (const img of col.querySelectorAll("img[src$='.svg']")) {
    const box = await layOutSvg(img);
    if (!box) continue;
    const labels = [...box.querySelectorAll('.role-title-text text, text.role-title-text')];
    const rects = [...new Set(labels)].map((t) => [t, t.getBoundingClientRect()])
      .filter(([t, r]) => r.width > 0 && (t.textContent || '').trim());
    for (let i = 0; i < rects.length; i++) {
      for (let j = i + 1; j < rects.length; j++) {
        const [ta, a] = rects[i], [tb, b] = rects[j];
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 1 && h > 1) {
          found.push(`${img.getAttribute('src').split('/').pop()}: "${ta.textContent.trim()}" `
            + `overlaps "${tb.textContent.trim()}"`);
        }
      }
    }
    box.remove();
    if (found.length >= maxListed) break;
  }
  return found.slice(0, maxListed);
}
"""


# Page length, the verdict picture's bottom edge and the notes before the first chart.
# Returns {height, picture (bottom edge in px from the page's top, or null), notes}.
_LAYOUT = """
([selector, maxListed]) => {
  const col = document.querySelector('article.bd-article') || document.querySelector('main')
    || document.body;
  const height = Math.max(document.documentElement.scrollHeight, document.body.scrollHeight);
  const pic = document.querySelector('.lamina-picture');
  const picture = pic ? Math.round(pic.getBoundingClientRect().bottom + window.scrollY) : null;
  const first = col.querySelector(selector);
  const notes = [];
  if (first) {
    const isNote = /^(notes?|caveats?|model notes)\\b/i;
    for (const el of col.querySelectorAll('p, li, dt, summary, h2, h3, h4, .lamina-notes')) {
      const text = (el.textContent || '').trim();
      if (!(isNote.test(text) || el.classList.contains('lamina-notes'))) continue;
      if (el.tagName === 'P' && el.parentElement.closest('li, dt, summary')) continue;  // once
      if (first.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_PRECEDING) {
        notes.push(`${el.tagName.toLowerCase()} before the first chart: "${text.slice(0, 60)}"`);
      }
      if (notes.length >= maxListed) break;
    }
  }
  return {height, picture, notes};
}
"""

# Chart titles, facet headers and axis titles that Vega cut ("…") or that reach outside their
# SVG: inline charts are measured in place, SVG images fetched and laid out (invisibly) in the
# page with the reader's fonts.
_TRUNCATED_TITLES = "\nasync ([maxListed]) => {\n" + _LAY_OUT_SVG + """  const col = document.querySelector('article.bd-article') || document.body;
  const found = [];
  const check = (svg, name) => {
    const s = svg.getBoundingClientRect();
    const texts = svg.querySelectorAll(
      '.role-title-text text, text.role-title-text, .role-axis-title text, .role-title text');
    for (const t of new Set(texts)) {
      const text = (t.textContent || '').trim();
      const r = t.getBoundingClientRect();
      if (!text || r.width === 0) continue;
      if (text.endsWith('…') || text.endsWith('...')) {
        found.push(`${name}: title "${text.slice(0, 80)}" is cut`);
      } else if (r.left < s.left - 1 || r.right > s.right + 1) {
        found.push(`${name}: title "${text.slice(0, 80)}" spans x ${Math.round(r.left - s.left)}-`
          + `${Math.round(r.right - s.left)} outside its SVG 0-${Math.round(s.width)}`);
      }
    }
  };
  for (const svg of col.querySelectorAll('svg.marks')) check(svg, 'inline chart');
  for (const img of col.querySelectorAll("img[src$='.svg']")) {
    const box = await layOutSvg(img);
    if (!box) continue;
    const svg = box.querySelector('svg');
    if (svg) check(svg, img.getAttribute('src').split('/').pop());
    box.remove();
    if (found.length >= maxListed) break;
  }
  return found.slice(0, maxListed);
}
"""


def _length_problems(report: PageReport, picture: int | None) -> None:
    """Fill ``report.landing`` and ``report.too_long`` from its height and the picture's
    bottom edge (px from the top; None: no picture); lengths count at LENGTH_WIDTH only."""
    landing = report.path in LANDING_PAGES or picture is not None
    if report.width != LENGTH_WIDTH:
        return
    if landing and picture is None:
        report.landing.append("the landing page has no verdict picture (.lamina-picture)")
    elif landing and picture > PICTURE_BOTTOM:
        report.landing.append(
            f"the verdict picture ends at {picture} px, below the first {PICTURE_BOTTOM} px"
        )
    if landing and report.height > LANDING_MAX:
        report.too_long.append(f"the landing page is {report.height} px tall (> {LANDING_MAX})")
    if CHAPTER_DIR in report.path and report.height > CHAPTER_MAX:
        report.too_long.append(f"the chapter is {report.height} px tall (> {CHAPTER_MAX})")


def _pages(html_dir: Path) -> list[str]:
    return sorted(
        p.relative_to(html_dir).as_posix()
        for p in html_dir.rglob("*.html")
        if "_static" not in p.parts and "_sources" not in p.parts
    )


def check_book(
    html_dir: Path, screenshots: Path | None = None, widths: tuple[int, ...] = WIDTHS
) -> list[PageReport]:
    """Open every page of the built book at each of ``widths``; one report per page and width."""
    from playwright.sync_api import sync_playwright

    html_dir = Path(html_dir)
    reports = []
    with serve(html_dir) as base, tempfile.TemporaryDirectory() as profile, sync_playwright() as pw:
        # a fresh --user-data-dir per run (playwright passes it for a persistent context)
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=chromium_path(),
            args=CHROMIUM_FLAGS,
            headless=True,
            viewport={"width": widths[0], "height": HEIGHT},
        )
        for width in widths:
            for rel in _pages(html_dir):
                reports.append(_check_page(context, base, rel, width, screenshots))
        context.close()
    return reports


def _check_page(context, base: str, rel: str, width: int, screenshots: Path | None) -> PageReport:
    report = PageReport(rel, width)
    page = context.new_page()
    page.set_viewport_size({"width": width, "height": HEIGHT})
    page.on(
        "console",
        lambda m, r=report: r.console_errors.append(m.text) if m.type == "error" else None,
    )
    page.on("pageerror", lambda e, r=report: r.console_errors.append(str(e)))
    page.on(
        "requestfailed",
        lambda q, r=report: r.failed_requests.append(f"{q.url} ({q.failure})"),
    )
    page.on(
        "request",
        lambda q, r=report: (
            None
            if q.url.startswith((base, "data:", "blob:", "about:"))
            else r.external_requests.append(q.url)
        ),
    )
    page.on(
        "response",
        lambda q, r=report: (
            r.failed_requests.append(f"{q.url} (HTTP {q.status})") if q.status >= 400 else None
        ),
    )
    page.goto(f"{base}/{rel}", wait_until="networkidle")
    found = page.evaluate(_PAGE_CHECKS, [CHART_SELECTOR, MAX_LISTED, HEIGHT])
    report.overflows = found["overflows"]
    report.hidden_charts = found["hiddenCharts"]
    report.n_charts = found["nCharts"]
    report.bad_badges = found["badBadges"]
    report.n_badges = found["nBadges"]
    report.emoji = found["emoji"]
    report.code_on_first_screen = found["code"]
    report.raw_outputs = found["raw"]
    report.overlapping_labels = page.evaluate(_LABEL_OVERLAPS, [MAX_LISTED])
    report.truncated_titles = page.evaluate(_TRUNCATED_TITLES, [MAX_LISTED])
    layout = page.evaluate(_LAYOUT, [CHART_SELECTOR, MAX_LISTED])
    report.height = int(layout["height"])
    report.notes_before_figure = layout["notes"]
    _length_problems(report, layout["picture"])
    if screenshots is not None:
        name = rel.replace("/", "__").removesuffix(".html") + ".png"
        shot = Path(screenshots) / f"{width}px" / name
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shot), full_page=True)
        report.screenshot = str(shot)
    page.close()
    return report


def format_report(r: PageReport) -> str:
    """One status line for a page and width, then each problem indented."""
    head = (
        f"{'ok ' if r.ok else 'BAD'} {r.width}px {r.path}: {r.height} px tall, {r.n_charts} charts, "
        f"{r.n_badges} badges"
    )
    lines = [head]
    for check, items in r.problems.items():
        lines += [f"      {check}: {item}" for item in items]
    return "\n".join(lines)


def unbuilt(html_dir: Path) -> str | None:
    """Why ``html_dir`` is not a built book (no folder, no ``index.html``, or a chapter of the
    registry without its page ``book/executed/<chapter>.html``, where the book's own build
    writes it), or None when it is one."""
    from lamina.core.registry import names

    if not html_dir.is_dir():
        return f"{html_dir} does not exist: build the book first (make book)"
    if not (html_dir / "index.html").is_file():
        return f"{html_dir} has no index.html: it is not a built book (make book)"
    missing = [c for c in names() if not (html_dir / CHAPTER_PAGES / f"{c}.html").is_file()]
    if missing:
        return f"{html_dir} lacks the chapter pages {missing}: the book is not fully built (make book)"
    return None


if __name__ == "__main__":
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "book/_build/html")
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("artifacts/screenshots")
    why = unbuilt(folder)
    if why is not None:  # checking no page is not a pass
        print(f"check-book: {why}", file=sys.stderr)
        raise SystemExit(2)
    bad = 0
    for r in check_book(folder, out):
        print(format_report(r), flush=True)
        bad += not r.ok
    print(f"screenshots: {out}/<width>px/")
    raise SystemExit(1 if bad else 0)
