"""Drive headless Chromium (Debian's ``chromium``) over a built book, offline.

Used by ``tests/test_browser.py`` and by ``python -m tests.browser BOOK_HTML_DIR``. Every page
is served from a local HTTP server; the browser is started with the flags that keep it from
calling home, and every request that does not go to that server counts as a failure.
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


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class PageReport:
    path: str
    console_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)
    n_charts: int = 0
    screenshot: str | None = None

    @property
    def ok(self) -> bool:
        return not (self.console_errors or self.failed_requests or self.external_requests)


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


def check_book(html_dir: Path, screenshots: Path | None = None) -> list[PageReport]:
    """Open every page of the built book; return one report per page."""
    from playwright.sync_api import sync_playwright

    html_dir = Path(html_dir)
    pages = sorted(
        p.relative_to(html_dir).as_posix()
        for p in html_dir.rglob("*.html")
        if "_static" not in p.parts and "_sources" not in p.parts
    )
    reports = []
    with serve(html_dir) as base, tempfile.TemporaryDirectory() as profile, sync_playwright() as pw:
        # a fresh --user-data-dir per run (playwright passes it for a persistent context)
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=chromium_path(),
            args=CHROMIUM_FLAGS,
            headless=True,
            viewport={"width": 1280, "height": 900},
        )
        for rel in pages:
            report = PageReport(rel)
            page = context.new_page()
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
                    r.failed_requests.append(f"{q.url} (HTTP {q.status})")
                    if q.status >= 400
                    else None
                ),
            )
            page.goto(f"{base}/{rel}", wait_until="networkidle")
            report.n_charts = page.locator(
                "img[src$='.svg'], .output svg, .cell_output svg"
            ).count()
            if screenshots is not None:
                shot = Path(screenshots) / (rel.replace("/", "__").removesuffix(".html") + ".png")
                shot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(shot), full_page=True)
                report.screenshot = str(shot)
            page.close()
            reports.append(report)
        context.close()
    return reports


if __name__ == "__main__":
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "book/_build/html")
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("artifacts/screenshots")
    bad = 0
    for r in check_book(folder, out):
        status = "ok " if r.ok else "BAD"
        print(f"{status} {r.path}: {r.n_charts} charts", flush=True)
        for item in r.console_errors + r.failed_requests + r.external_requests:
            print(f"      {item}")
        bad += not r.ok
    raise SystemExit(1 if bad else 0)
