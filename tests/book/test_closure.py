"""The reuse key's import closure is honest and narrow (lamina.core.imports, issue 10 §5).

Honest: every lamina module that a chapter notebook's imports really load (run in a fresh
interpreter) is in its static closure, and editing a module a chapter uses changes its key.
Narrow: ``lamina.book``'s executor, methods page and scorecard (which import every chapter
package) are imported lazily, so editing a module only another chapter uses keeps the key.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lamina.book import reuse
from lamina.core.imports import LIB, import_closure

NOTEBOOKS = LIB.parent / "notebooks"
CHAPTERS = sorted(p.stem for p in NOTEBOOKS.glob("*.py"))

_PROBE = """
import ast, json, sys
out = {}
for path in sys.argv[1:]:
    for name in [m for m in sys.modules if m == "lamina" or m.startswith("lamina.")]:
        del sys.modules[name]
    tree = ast.parse(open(path).read())
    code = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    exec(compile(ast.Module(body=code, type_ignores=[]), path, "exec"), {})
    out[path] = sorted(m for m in sys.modules if m == "lamina" or m.startswith("lamina."))
print(json.dumps(out))
"""


def test_every_module_a_notebook_imports_at_run_time_is_in_its_closure():
    paths = [str(NOTEBOOKS / f"{c}.py") for c in CHAPTERS]
    env_path = str(LIB)
    run = subprocess.run(
        [sys.executable, "-c", _PROBE, *paths], capture_output=True, text=True, timeout=600,
        env={"PYTHONPATH": env_path, "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    loaded = json.loads(run.stdout.strip().splitlines()[-1])
    for path, modules in loaded.items():
        closure = import_closure(path)
        assert closure is not None
        assert set(modules) - set(closure) == set(), path
        assert "lamina.book.execute" not in modules  # the point of the lazy exports


def test_no_chapter_closure_holds_the_executor_or_the_scorecard():
    for chapter in CHAPTERS:
        closure = import_closure(NOTEBOOKS / f"{chapter}.py")
        assert closure is not None
        assert {"lamina.book.execute", "lamina.book.scorecard"} & set(closure) == set(), chapter


@pytest.fixture
def lib_copy(tmp_path, monkeypatch):
    copy = tmp_path / "lib"
    shutil.copytree(LIB / "lamina", copy / "lamina", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(reuse, "LIB", copy)
    monkeypatch.setenv("LAMINA_DATA", str(tmp_path / "data"))
    return copy


def _keys(results: Path) -> dict[str, str]:
    params = {"results_root": str(results)}
    return {
        c: reuse.input_key(NOTEBOOKS / f"{c}.py", params)[0] for c in ("curvature", "layer_anatomy")
    }


@pytest.mark.parametrize(
    ("edited", "changes", "keeps"),
    [
        ("trajectory/metrics.py", "curvature", "layer_anatomy"),  # curvature's metric
        ("anatomy/ablation.py", "layer_anatomy", "curvature"),  # paper 3's ablation
        ("trajectory/stat_tests.py", "curvature", "layer_anatomy"),
    ],
)
def test_an_edit_changes_the_key_of_the_chapter_using_it_only(
    lib_copy, tmp_path, edited, changes, keeps
):
    before = _keys(tmp_path / "results")
    path = lib_copy / "lamina" / edited
    path.write_text(path.read_text() + "\n# an edit\n")
    after = _keys(tmp_path / "results")
    assert after[changes] != before[changes]
    assert after[keeps] == before[keeps]


def test_an_edit_to_a_module_both_use_changes_both(lib_copy, tmp_path):
    before = _keys(tmp_path / "results")
    path = lib_copy / "lamina" / "sources" / "models.py"
    path.write_text(path.read_text() + "\n# an edit\n")
    after = _keys(tmp_path / "results")
    assert all(after[c] != before[c] for c in before)


def _package(tmp_path: Path, init: str) -> Path:
    pkg = tmp_path / "lamina"
    (pkg / "book").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "book" / "__init__.py").write_text(init)
    (pkg / "book" / "light.py").write_text("def glue():\n    return 1\n")
    (pkg / "book" / "heavy.py").write_text("import lamina.other\nCHAPTERS = []\n")
    (pkg / "other.py").write_text("")
    return pkg


_LAZY_INIT = """import importlib
from lamina.book.light import glue
_LAZY = {"CHAPTERS": "lamina.book.heavy"}
__all__ = ["CHAPTERS", "glue"]
def __getattr__(name):
    return getattr(importlib.import_module(_LAZY[name]), name)
"""


@pytest.mark.parametrize(
    ("script", "heavy"),
    [
        ("from lamina.book import glue\n", False),
        ("from lamina.book import glue\nimport glob\nglob.glob('*')\n", False),  # a glob, not import *
        ("from lamina.book import CHAPTERS\n", True),
        ("import lamina.book\nprint(lamina.book.CHAPTERS)\n", True),
        ("from lamina.book import *\n", True),
        ("import importlib\ngetattr(importlib.import_module('lamina.book'), 'CHAPTERS')\n", True),
    ],
)
def test_lazy_exports_count_only_when_named(tmp_path, script, heavy):
    _package(tmp_path, _LAZY_INIT)
    nb = tmp_path / "nb.py"
    nb.write_text(script)
    closure = import_closure(nb, tmp_path)
    assert closure is not None
    assert ("lamina.book.heavy" in closure) is heavy
    assert ("lamina.other" in closure) is heavy  # and what the lazy module imports


def test_a_getattr_without_a_lazy_table_counts_every_import(tmp_path):
    """Without ``_LAZY`` the imports in ``__getattr__`` count, as any import in a function."""
    init = _LAZY_INIT.replace("_LAZY = ", "TABLE = ").replace("_LAZY[", "TABLE[")
    init = init.replace("importlib.import_module(TABLE[name])", "__import__('lamina.book.heavy')")
    _package(tmp_path, init)
    nb = tmp_path / "nb.py"
    nb.write_text("from lamina.book import glue\n")
    closure = import_closure(nb, tmp_path)
    assert closure is not None and "lamina.book.heavy" in closure


def test_the_book_package_still_exports_its_lazy_names():
    import lamina.book

    assert callable(lamina.book.execute_chapter) and "curvature" in lamina.book.CHAPTERS
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = lamina.book.nope  # type: ignore[attr-defined]
    assert ast.parse((LIB / "lamina" / "book" / "__init__.py").read_text())
