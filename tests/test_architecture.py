"""The shape of lib/: the lamina import graph has no cycle, no private name is imported across
modules, and lamina imports sit at the top of a module (issue 13).

The graph is read with ``ast`` from the sources (nothing is imported, see
``lamina.core.imports``), so these tests also see imports inside functions and under
``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from lamina.core.imports import import_graph, lamina_modules

LIB = Path(__file__).resolve().parents[1] / "lib"

# Lazy lamina imports that are allowed, each with its reason: a heavy optional dependency.
LAZY_ALLOWED = {
    # resolving "organism-..." names needs the organisms (training code); `import lamina`
    # stays cheap without them
    "lamina.sources.models",
    # organisms are owned by their own package; they read provenance and the curriculum lazily
    "lamina.sources.organisms",
    "lamina.sources.organisms.build",
    "lamina.sources.organisms.corpus",
    # the reuse key hashes the organisms' build records and paper 1's released files; their
    # folders are named by lamina.sources.organisms and lamina.chapters.trajectory (training code)
    "lamina.book.reuse",
    # the lamina command: each verb imports only what it runs (``lamina chapters`` loads no torch)
    "lamina.__main__",
}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_the_cycle_finder_finds_a_cycle(tmp_path):
    """The check can fail: a two-module cycle (one import inside a function) is found."""
    pkg = tmp_path / "lamina"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from lamina.b import g\n\ndef f():\n    return g()\n")
    (pkg / "b.py").write_text("def g():\n    from lamina.a import f\n    return f\n")
    (pkg / "c.py").write_text("from lamina.a import _hidden\n")
    edges, private = import_graph(tmp_path)
    assert cycles(edges) == [["lamina.a", "lamina.b"]]
    assert private == [("lamina.c", "lamina.a", "_hidden")]


def test_lamina_has_no_import_cycle():
    edges, _ = import_graph(LIB)
    assert "lamina.chapters" in edges and "lamina.weights.maps" in edges
    assert cycles(edges) == []


def test_no_private_name_is_imported_across_modules():
    _, private = import_graph(LIB)
    assert private == []


def test_lamina_imports_sit_at_the_top_of_a_module():
    lazy = []
    for module, path in lamina_modules(LIB).items():
        if module in LAZY_ALLOWED:
            continue
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                name = (
                    node.module
                    if isinstance(node, ast.ImportFrom)
                    else node.names[0].name
                    if isinstance(node, ast.Import)
                    else None
                )
                if name and name.split(".")[0] == "lamina":
                    lazy.append(f"{module}:{node.lineno} imports {name}")
    assert lazy == []


def test_no_experiments_package_remains():
    assert not (LIB / "lamina" / "experiments").exists()


@pytest.mark.parametrize(
    "chapter",
    sorted(p.stem for p in (LIB.parent / "notebooks").glob("*.py")),
)
def test_every_notebook_has_a_chapter_module_of_its_name(chapter):
    chapters = LIB / "lamina" / "chapters"
    assert (chapters / f"{chapter}.py").is_file() or (chapters / chapter / "__init__.py").is_file()


def test_the_methods_page_quotes_every_definition_from_its_defining_module():
    from lamina.book.methods import METHODS, methods_markdown

    text = methods_markdown()
    for names in METHODS.values():
        for dotted in names:
            assert f"### `{dotted}`" in text
            module, _, name = dotted.rpartition(".")
            obj = getattr(__import__(module, fromlist=[name]), name)
            if inspect.ismodule(obj):  # a module's docstring (e.g. the verdict rules)
                assert obj.__name__ == dotted
                continue
            assert obj.__module__ == module, f"{dotted} is a re-export"


# The pipeline, lowest layer first (issue 24). A module may import its own package and any
# package of a lower layer; packages of one layer do not import one another.
LAYERS: list[tuple[str, ...]] = [
    ("core",),
    ("evidence",),  # statistics and the claim record: a foundation the sources' gates use too
    ("sources",),
    ("states",),
    ("trajectory", "weights", "anatomy"),
    ("book",),
    ("chapters",),
]


def layer_violations(edges: dict[str, set[str]]) -> list[str]:
    """``importer -> imported`` edges that run up the pipeline or sideways between the
    packages of one layer (the root package ``lamina`` re-exports and sits above all)."""
    rank = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}

    def package(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 and parts[1] != "__main__" else None  # the command sits on top

    bad = []
    for src, targets in edges.items():
        a = package(src)
        for dst in targets:
            b = package(dst)
            if a is None or b is None or a == b:
                if a is not None and b is None and dst == "lamina":
                    bad.append(f"{src} -> {dst}")  # a layer importing the root package
                continue
            if a not in rank or b not in rank:
                bad.append(f"{src} -> {dst} (a package outside LAYERS)")
            elif rank[b] >= rank[a]:
                bad.append(f"{src} -> {dst}")
    return sorted(bad)


def test_the_layer_check_finds_an_arrow_up_the_pipeline(tmp_path):
    """The check can fail: a source importing a chapter, and two sciences importing each other."""
    for pkg in ("sources", "chapters", "weights", "anatomy"):
        (tmp_path / "lamina" / pkg).mkdir(parents=True)
        (tmp_path / "lamina" / pkg / "__init__.py").write_text("")
    (tmp_path / "lamina" / "__init__.py").write_text("")
    (tmp_path / "lamina" / "sources" / "m.py").write_text("from lamina.chapters import x\n")
    (tmp_path / "lamina" / "weights" / "w.py").write_text("import lamina.anatomy\n")
    edges, _ = import_graph(tmp_path)
    assert layer_violations(edges) == [
        "lamina.sources.m -> lamina.chapters",
        "lamina.weights.w -> lamina.anatomy",
    ]


def test_imports_flow_one_way_along_the_pipeline():
    edges, _ = import_graph(LIB)
    assert layer_violations(edges) == []


def test_the_top_level_holds_at_most_ten_modules():
    top = sorted(
        p.stem if p.is_file() else p.name
        for p in (LIB / "lamina").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    )
    assert len(top) <= 10, top
    assert {pkg for layer in LAYERS for pkg in layer} <= set(top)


# The test files that sit at the top of tests/, each with what it checks: the project as a whole
# (this file: lib's shape; the book's chapters and table of contents; the CI workflows) and the
# top-level module lamina/__main__.py (the lamina command).
TOP_LEVEL_TESTS = {"test_architecture.py", "test_project.py", "test_workflows.py", "test_cli.py",
                   "test_snakemake.py"}  # the Snakefile and its profiles (workflow/)
# test folders that mirror a folder of the repository other than lib/lamina
OTHER_MIRRORS = {"notebooks": "notebooks"}


def layout_violations(tests: Path, lib: Path) -> list[str]:
    """Test files not arranged as the library is: a ``test_*.py`` under ``tests/<a>/<b>/`` whose
    ``lib/lamina/<a>/<b>/`` is not a package (nor a folder named in :data:`OTHER_MIRRORS`), and a
    ``test_*.py`` at the top of ``tests/`` that is not in :data:`TOP_LEVEL_TESTS`."""
    out = []
    for path in sorted(tests.rglob("test_*.py")):
        parts = path.relative_to(tests).parent.parts
        if not parts:
            if path.name not in TOP_LEVEL_TESTS:
                out.append(f"{path.name}: at the top of tests/; move it beside its module's mirror")
        elif parts[0] in OTHER_MIRRORS:
            if not (lib.parent / OTHER_MIRRORS[parts[0]]).joinpath(*parts[1:]).is_dir():
                out.append(f"{path.relative_to(tests)}: no folder {'/'.join(parts)} in the repository")
        elif not (lib / "lamina").joinpath(*parts, "__init__.py").is_file():
            out.append(f"{path.relative_to(tests)}: no package lamina.{'.'.join(parts)}")
    return out


def test_the_layout_check_finds_a_misplaced_test(tmp_path):
    (tmp_path / "lib" / "lamina" / "states").mkdir(parents=True)
    (tmp_path / "lib" / "lamina" / "states" / "__init__.py").write_text("")
    (tmp_path / "notebooks").mkdir()
    for name in ("test_io.py", "test_project.py", "states/test_io.py", "notebooks/test_a.py",
                 "stats/test_io.py", "states/deep/test_io.py", "pages/test_a.py"):  # fmt: skip
        (tmp_path / "tests" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "tests" / name).write_text("")
    assert layout_violations(tmp_path / "tests", tmp_path / "lib") == [
        "pages/test_a.py: no package lamina.pages",
        "states/deep/test_io.py: no package lamina.states.deep",
        "stats/test_io.py: no package lamina.stats",
        "test_io.py: at the top of tests/; move it beside its module's mirror",
    ]


def test_tests_are_arranged_as_the_library_is():
    assert layout_violations(LIB.parent / "tests", LIB) == []
