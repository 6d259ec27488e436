"""lamina's import graph, read with ``ast`` from the sources (nothing is imported), so it also
sees imports inside functions and under ``TYPE_CHECKING``.

Used by the architecture tests (no cycle, no private name imported across modules) and by
:mod:`lamina.book.reuse`, which hashes the lamina modules a chapter notebook imports,
transitively (:func:`import_closure`).

Lazy exports. A package ``__init__`` may define names on first use: a top-level dict literal
``_LAZY = {"name": "lamina.x.y", ...}`` and a top-level ``def __getattr__`` that imports
``_LAZY[name]`` (PEP 562). :func:`import_graph` keeps those edges (a cycle through them is
still a cycle), but :func:`import_closure`, which answers "what does running this file
import", follows ``_LAZY[name]`` only when ``name`` is mentioned (as an imported name, an
attribute, a bare name or a string constant, ``*`` meaning all) in a file of the closure.
Not seen: a lazy name built at run time (``getattr(pkg, "CHAP" + "TERS")``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "import_closure", "import_graph", "imported_modules", "lamina_modules", "lazy_exports",
]  # fmt: skip

LIB = Path(__file__).resolve().parents[2]  # the folder holding the ``lamina`` package


def lamina_modules(root: Path = LIB) -> dict[str, Path]:
    """``{dotted module name: source file}`` of every ``*.py`` under ``root`` (a package is
    named by its ``__init__.py``)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _base(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imported_modules(
    tree: ast.AST, modules: dict[str, Path], module: str = "", is_package: bool = False
) -> tuple[set[str], list[tuple[str, str]]]:
    """The lamina modules of ``modules`` that the code ``tree`` (of ``module``, ``""`` for a
    script) imports anywhere, and the private names it imports from them:
    -> ({module}, [(from module, private name)])."""
    found: set[str] = set()
    private = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, node, is_package) if module else node.module or ""
            for alias in node.names:
                full = f"{base}.{alias.name}"
                targets.append(full if full in modules else base)
                is_private = alias.name.startswith("_") and not alias.name.startswith("__")
                if is_private and base.split(".")[0] == "lamina" and full not in modules:
                    private.append((base, alias.name))
        for target in targets:
            if target.split(".")[0] != "lamina":
                continue
            owner = _owner(target, modules)
            if owner and owner != module:
                found.add(owner)
    return found, private


def _dynamic_targets(tree: ast.AST, modules: dict[str, Path]) -> set[str]:
    """Modules named by whole string constants (``"lamina.trajectory.mean_curvature"``) in code
    that imports by name (``importlib.import_module``, ``__import__``); empty otherwise."""
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    if not ({"import_module", "__import__"} & (names | attrs)):
        return set()
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if text.startswith("lamina") and text.replace(".", "").replace("_", "").isalnum():
                owner = _owner(text, modules)
                if owner:
                    out.add(owner)
    return out


_Edges = tuple[set[str], list[tuple[str, str]]]  # (imported modules, [(from, private name)])


def _module_edges(module: str, path: Path, modules: dict[str, Path], dynamic: bool) -> _Edges:
    """The lamina modules ``module`` (source ``path``) imports, and the private names."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found, private = imported_modules(tree, modules, module, path.name == "__init__.py")
    if dynamic:
        found |= _dynamic_targets(tree, modules) - {module}
    return found, private


def _assigns_lazy(node: ast.stmt, name: str = "_LAZY") -> bool:
    """Whether ``node`` is the top-level ``_LAZY = ...`` (or ``_LAZY: T = ...``)."""
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    return isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == name


def lazy_exports(tree: ast.Module) -> dict[str, str]:
    """``{name: module}`` that a package ``__init__`` defines lazily: its top-level
    ``_LAZY`` dict literal of strings, when it also defines a top-level ``__getattr__``
    (empty otherwise)."""
    if not any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body):
        return {}
    for node in tree.body:
        if _assigns_lazy(node):
            value = getattr(node, "value", None)
            if isinstance(value, ast.Dict):
                pairs = zip(value.keys, value.values, strict=True)
                return {
                    k.value: v.value
                    for k, v in pairs
                    if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)
                    and isinstance(k.value, str) and isinstance(v.value, str)
                }  # fmt: skip
    return {}


def _mentioned(tree: ast.AST) -> set[str]:
    """Every identifier and string constant in ``tree`` (``*:<module>`` for a star import of
    ``<module>``: it wants that module's lazy exports, not every package's)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            out.add(f"*:{node.module}")  # a star import wants every name of that module only
        elif isinstance(node, ast.alias) and node.name != "*":
            out.add(node.name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value != "*":
            out.add(node.value)  # a "*" string (a glob) is not a star import
    return out


_Runtime = tuple[set[str], dict[str, str], set[str]]  # (edges, lazy exports, mentioned)


def _runtime_edges(module: str, path: Path, modules: dict[str, Path]) -> _Runtime:
    """What importing ``module`` runs: its edges without its lazy ``__getattr__`` and
    ``_LAZY`` (by name, dynamic included), its lazy exports, and the names it mentions."""
    tree = ast.parse(path.read_text(), filename=str(path))
    lazy = lazy_exports(tree) if path.name == "__init__.py" else {}
    if lazy:
        skip = [
            n for n in tree.body
            if (isinstance(n, ast.FunctionDef) and n.name == "__getattr__")
            or _assigns_lazy(n) or _assigns_lazy(n, "__all__")  # "*" stands for __all__
        ]  # fmt: skip
        tree = ast.Module(body=[n for n in tree.body if n not in skip], type_ignores=[])
    found = imported_modules(tree, modules, module, path.name == "__init__.py")[0]
    found |= _dynamic_targets(tree, modules) - {module}
    return found, lazy, _mentioned(tree)


_PARSED: dict[tuple[str, str, int, int], _Runtime] = {}  # parsed once per file version


def _runtime_cached(module: str, path: Path, modules: dict[str, Path]) -> _Runtime:
    st = path.stat()
    key = (module, str(path), st.st_mtime_ns, st.st_size)
    if key not in _PARSED:
        _PARSED[key] = _runtime_edges(module, path, modules)
    return _PARSED[key]


def import_graph(
    root: Path = LIB, *, dynamic: bool = False
) -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    """-> ({module: lamina modules it imports}, [(module, from module, private name)]).

    With ``dynamic``, a module that imports by name (``importlib.import_module``) also gets an
    edge to every lamina module named by a string constant in it (conservative: what it may
    import at run time)."""
    modules = lamina_modules(root)
    edges: dict[str, set[str]] = {}
    private = []
    for module, path in modules.items():
        found, names = _module_edges(module, path, modules, dynamic)
        edges[module] = found
        private += [(module, base, name) for base, name in names]
    return edges, private


def _with_parents(names: Iterable[str], modules: dict[str, Path]) -> set[str]:
    """``names`` and their parent packages (importing ``a.b.c`` runs ``a`` and ``a.b``)."""
    out = set()
    for name in names:
        parts = name.split(".")
        out |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & set(modules)
    return out


def import_closure(source: str | Path, root: Path = LIB) -> dict[str, Path] | None:
    """``{module: source file}`` of every lamina module that running the Python file
    ``source`` imports, transitively, with the packages above each (whose ``__init__`` runs
    too), dynamic imports by name (see :func:`import_graph`), and the lazy exports of a
    package that a file of the closure mentions (see the module docstring). Imports inside
    functions count (the function may run). None when ``source`` does not parse (the caller
    then treats every module as imported). Only the modules reached are parsed, each once
    per process and file version."""
    modules = lamina_modules(root)
    try:
        tree = ast.parse(Path(source).read_text(encoding="utf-8"), filename=str(source))
    except (SyntaxError, ValueError):
        return None
    todo = _with_parents(imported_modules(tree, modules)[0] | _dynamic_targets(tree, modules),
                         modules)  # fmt: skip
    mentioned = _mentioned(tree)
    lazy: dict[str, dict[str, str]] = {}  # {package: {name: module}}
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        found, exports, names = _runtime_cached(module, modules[module], modules)
        mentioned |= names
        if exports:
            lazy[module] = exports
        todo |= _with_parents(found, modules) - seen
        if not todo:  # all reached: follow the lazy names mentioned so far
            wanted = {
                target for pkg, exports in lazy.items() for name, target in exports.items()
                if name in mentioned or f"*:{pkg}" in mentioned
            }  # fmt: skip
            todo = _with_parents({_owner(t, modules) or t for t in wanted}, modules) - seen
            todo &= set(modules)
    return {m: modules[m] for m in sorted(seen)}
