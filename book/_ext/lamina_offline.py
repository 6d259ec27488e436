"""Keep the rendered book fully offline.

* Serves MathJax from ``_static/mathjax`` (copied from the ``jupyter-server-mathjax`` wheel,
  a MathJax 2.7 distribution) instead of a CDN.
* Adds lamina's stylesheet (``book/_static/lamina.css``: verdict badges, the verdict matrix,
  figure captions, charts that fit the column) and script (``lamina.js``: a "show all code"
  toggle on every chapter, whose code cells are folded).
* Drops sphinx-thebe's scripts: live kernels are off in this book, and sphinx-thebe 0.3
  declares its configuration twice, which is a console error, and names a CDN bundle.
"""

from __future__ import annotations

import shutil
from pathlib import Path

MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full"


def _copy_mathjax(app) -> None:
    import jupyter_server_mathjax

    source = Path(jupyter_server_mathjax.__file__).parent / "static"
    target = Path(app.outdir) / "_static" / "mathjax"
    if not (target / "MathJax.js").is_file():
        shutil.copytree(source, target, dirs_exist_ok=True)


def _page_context(app, pagename, templatename, context, doctree) -> None:
    # sphinx-book-theme does not pass pydata's default_mode: an empty mode is a console error
    context["default_mode"] = "light"
    scripts = context.get("script_files")
    if not scripts:
        return
    kept = []
    for script in scripts:
        text = f"{getattr(script, 'filename', script)} {script.attributes.get('body', '') if hasattr(script, 'attributes') else ''}"
        if "thebe" in text.lower():
            continue
        kept.append(script)
    scripts[:] = kept


STATIC = Path(__file__).resolve().parents[1] / "_static"
# the calibration marks of the chapters' badges, written by `lamina pages` (lamina.book.badges)
GENERATED_STATIC = Path(__file__).resolve().parents[1] / "generated" / "static"
MARKS_CSS = "calibration-marks.css"


def _add_static(app) -> None:
    for folder in (STATIC, GENERATED_STATIC):
        if folder.is_dir() and str(folder) not in map(str, app.config.html_static_path):
            app.config.html_static_path.append(str(folder))


def setup(app):
    app.config.mathjax_path = f"mathjax/MathJax.js?config={MATHJAX_CONFIG}"
    app.connect("config-inited", lambda app, config: _add_static(app))
    app.add_css_file("lamina.css")
    if (GENERATED_STATIC / MARKS_CSS).is_file():
        app.add_css_file(MARKS_CSS)
    app.add_js_file("lamina.js")
    app.connect("builder-inited", _copy_mathjax)
    app.connect("html-page-context", _page_context, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
