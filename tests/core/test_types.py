"""The shape-typed public API (lamina.core.types): a checker tells a layer profile from a
states tensor, statically (mypy, on planted snippets) and at run time (jaxtyping), and the
public signatures of extraction, geometry, weights and anatomy mention no ``Any``."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from lamina.core.types import (
    Basis,
    LayerBands,
    MeanProfile,
    Moment,
    PerPrompt,
    Profile,
    States,
    StatesArray,
    TokenStates,
)
from lamina.trajectory.metrics import (
    convergence_index_pooled,
    curvature,
    layerwise_cosine,
    mean_curvature,
    stability,
    trajectory_length,
)
from lamina.trajectory.phases import detect_phases, fixed_phase_bands
from lamina.weights.subspace_fraction import random_orthonormal

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "lib" / "lamina"
TYPED_MODULES = [
    LIB / "states" / "extract.py",
    LIB / "states" / "trajectories.py",
    LIB / "trajectory" / "metrics.py",
    LIB / "trajectory" / "phases.py",
    *sorted((LIB / "weights").glob("*.py")),
    *sorted((LIB / "anatomy").glob("*.py")),
]


@pytest.fixture(scope="module")
def states() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(5, 7, 4))  # (n, L+1, d)


# ----------------------------------------------------------------------------- run time
def test_runtime_checker_tells_profile_from_states(states: np.ndarray) -> None:
    sim = layerwise_cosine(states)
    assert isinstance(states, States) and isinstance(states, StatesArray)
    assert isinstance(torch.from_numpy(states), States)
    assert isinstance(sim, Profile)
    assert not isinstance(sim, States), "a (n, L) profile passed for (n, L+1, d) states"
    assert not isinstance(states, Profile), "(n, L+1, d) states passed for a (n, L) profile"
    assert not isinstance(states.astype(np.int64), States), "States are float"


def test_results_match_their_annotations(states: np.ndarray) -> None:
    """Each geometry result is an instance of its annotated alias (and of no other rank)."""
    labels = ["a", "b", "a", "b", "a"]
    for result, alias in [
        (curvature(states), Profile),
        (layerwise_cosine(states), Profile),
        (stability(states, states + 0.1), Profile),
        (trajectory_length(states), PerPrompt),
        (mean_curvature(states), PerPrompt),
        (convergence_index_pooled(states, labels), MeanProfile),
        (fixed_phase_bands(6), LayerBands),
        (detect_phases(layerwise_cosine(states)).bands, LayerBands),
    ]:
        assert isinstance(result, alias), (alias, np.shape(result))
        assert not isinstance(result, States)
    token_states = np.zeros((7, 3, 4), dtype=np.float32)  # (L+1, T, d) of one text
    assert isinstance(token_states, TokenStates)


def test_dimension_names_bind_within_an_annotation() -> None:
    """(d, k) is a Basis; a Moment is (d, d): the repeated name binds one size."""
    basis = random_orthonormal(8, 3, torch.Generator().manual_seed(0))
    assert isinstance(basis, Basis)
    assert not isinstance(basis, Moment)
    assert isinstance(basis @ basis.T, Moment)


# ----------------------------------------------------------------------------- mypy
PLANTED = textwrap.dedent(
    """
    import numpy as np
    from lamina.trajectory.metrics import curvature, layerwise_cosine, trajectory_length
    from lamina.trajectory.phases import detect_phases, phase_summary

    states = np.random.default_rng(0).normal(size=(4, 6, 8))
    sim = layerwise_cosine(states)
    per_prompt = trajectory_length(states)
    detect_phases(sim)
    phase_summary(sim, detect_phases(sim).bands)
    curvature(sim)  # PLANTED: a profile where states are expected
    layerwise_cosine(per_prompt)  # PLANTED: a per-prompt vector where states are expected
    """
)


@pytest.mark.slow
def test_mypy_catches_a_profile_passed_as_states(tmp_path: Path) -> None:
    """mypy on a snippet with two planted mix-ups reports exactly those two lines."""
    mypy_api = pytest.importorskip("mypy.api")
    snippet = tmp_path / "planted.py"
    snippet.write_text(PLANTED)
    planted = {i for i, line in enumerate(PLANTED.splitlines(), 1) if "# PLANTED" in line}
    stdout, stderr, _ = mypy_api.run(
        [
            str(snippet),
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            "--no-error-summary",
        ]
    )
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    flagged = {int(line.split(":")[1]) for line in errors}
    assert flagged == planted, "\n".join(errors) or stderr or stdout
    assert all("[arg-type]" in line for line in errors), errors


# ----------------------------------------------------------------------------- signatures
def _mentions_any(node: ast.AST | None) -> bool:
    for sub in ast.walk(node) if node is not None else ():
        if isinstance(sub, ast.Name | ast.Attribute) and getattr(
            sub, "id", getattr(sub, "attr", None)
        ) == "Any":
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                if _mentions_any(ast.parse(sub.value, mode="eval")):
                    return True
            except SyntaxError:
                pass
    return False


def _loose_public_signatures(path: Path, root: Path = ROOT) -> list[str]:
    """Public functions and methods of public classes whose signature has ``Any`` or an
    unannotated parameter or return."""
    out = []
    tree = ast.parse(path.read_text())
    scopes = [(None, tree.body)] + [
        (node.name, node.body)
        for node in tree.body
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_")
    ]
    for owner, body in scopes:
        for fn in body:
            if not isinstance(fn, ast.FunctionDef) or fn.name.startswith("_"):
                continue
            a = fn.args
            params = [
                p
                for p in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]
                if p is not None and p.arg not in ("self", "cls")
            ]
            if fn.returns is None or any(p.annotation is None for p in params) or any(
                _mentions_any(x) for x in [fn.returns, *(p.annotation for p in params)]
            ):
                out.append(f"{path.relative_to(root)}:{fn.lineno} {owner or ''}.{fn.name}")
    return out


def test_public_signatures_have_no_any() -> None:
    loose = [name for path in TYPED_MODULES for name in _loose_public_signatures(path)]
    assert not loose, "public signatures with Any or without annotations:\n" + "\n".join(loose)


def test_signature_scan_can_fail(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from typing import Any\n"
        "def f(x: Any) -> int: ...\n"
        "def g(x) -> int: ...\n"
        "def h(x: 'dict[str, Any]') -> None: ...\n"
        "def ok(x: int) -> int: ...\n"
        "class C:\n    def m(self, y: list[Any]) -> None: ...\n"
    )
    names = [n.split(" ")[1] for n in _loose_public_signatures(bad, tmp_path)]
    assert names == [".f", ".g", ".h", "C.m"]
