"""Issue 32's structure: one engine decides every verdict; chapters are glue; modules are small."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from lamina.evidence.claims import VERDICTS

LIB = Path(__file__).resolve().parents[2] / "lib" / "lamina"
WORDS = {w for kind, ws in VERDICTS.items() for w in ws if w != "not testable"}
VERDICT_FUNCTION = re.compile(r"(^|_)verdict$|(^|_)decide($|_)")


def _modules(skip: str | None = None) -> list[Path]:
    return [p for p in sorted(LIB.rglob("*.py")) if skip is None or skip not in p.parts]


def _returned_words(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and n.value in WORDS}


def test_no_module_outside_evidence_returns_a_verdict_word_or_defines_a_verdict_function():
    found = []
    for path in _modules(skip="evidence"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Return) and node.value is not None:
                words = _returned_words(node.value)
                if words:
                    found.append(f"{path.relative_to(LIB)}:{node.lineno} returns {sorted(words)}")
            if isinstance(node, ast.FunctionDef) and VERDICT_FUNCTION.search(node.name):
                found.append(f"{path.relative_to(LIB)}:{node.lineno} defines {node.name}")
    assert found == []


def test_the_finder_finds_a_verdict_decided_outside_evidence(tmp_path):
    code = 'def enriched_verdict(s):\n    return "reproduced" if s else "partially"\n'
    tree = ast.parse(code)
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef) and VERDICT_FUNCTION.search(fn.name)
    ret = fn.body[0]
    assert isinstance(ret, ast.Return) and _returned_words(ret.value) == {"reproduced", "partially"}


CHAPTER_LINES = 3500
"""Issue 32's bound on the chapter layer (glue: configs, runs, claims, one chapter's
presentation). The methods, measurements and controls live in the science packages; a chapter
that needs more lines moves its science down, it does not raise this number."""


def test_the_chapter_layer_does_not_grow():
    lines = sum(len(p.read_text().splitlines()) for p in (LIB / "chapters").rglob("*.py"))
    assert lines <= CHAPTER_LINES, lines


def test_no_module_is_over_450_lines():
    long = {str(p.relative_to(LIB)): n for p in _modules()
            if (n := len(p.read_text().splitlines())) > 450}  # fmt: skip
    assert long == {}
