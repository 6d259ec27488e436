"""Every chapter's papermill ``parameters`` cell parses cleanly with papermill's own inspector:
a line with more than one ``=`` (e.g. ``>=`` in a comment) is skipped with a warning, and the
parameter then vanishes from ``papermill --help-notebook``."""

from __future__ import annotations

import ast
import io
import logging
import tokenize
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.py"))


def _parameters_source(path: Path) -> str:
    jupytext = pytest.importorskip("jupytext")
    cells = [
        c for c in jupytext.read(path).cells
        if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])
    ]  # fmt: skip
    assert len(cells) == 1, f"{path.name}: {len(cells)} parameters cells"
    return cells[0].source


def _comments(source: str) -> list[str]:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [t.string for t in tokens if t.type == tokenize.COMMENT]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_parameter_comment_holds_an_equals_sign(path):
    bad = [c for c in _comments(_parameters_source(path)) if "=" in c]
    assert bad == [], f"{path.name}: reword these comments: {bad}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_papermill_sees_every_parameter_without_a_warning(path, caplog):
    translators = pytest.importorskip("papermill.translators")
    source = _parameters_source(path)
    assigned = [
        t.id for node in ast.parse(source).body if isinstance(node, ast.Assign | ast.AnnAssign)
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Name)
    ]  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="papermill"):
        found = translators.PythonTranslator.inspect({"source": source})
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert [p.name for p in found] == assigned


def test_the_check_can_fail():
    source = "n = 2000  # label permutations (>= 1000)\nquick = False\n"
    assert [c for c in _comments(source) if "=" in c] == ["# label permutations (>= 1000)"]
    translators = pytest.importorskip("papermill.translators")
    assert [p.name for p in translators.PythonTranslator.inspect({"source": source})] == ["quick"]
