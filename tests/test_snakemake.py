"""The Snakefile: Snakemake's dry run with the default and the Slurm profile, and a local run of
one cheap stage (paper 3's calibration on 1 seed) that reruns exactly when its key file changes.
Every run keeps its state, records and lamina data in a temporary folder; the runs are
skipped when Snakemake (a ``book`` extra) is not installed. Also the README stage table script."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).parent / "snakemake"
needs_snakemake = pytest.mark.skipif(not SNAKEMAKE.is_file(), reason="snakemake is not installed")


def _snakemake(tmp: Path, *args: str, config: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = {**os.environ, "LAMINA_DATA": str(tmp / "data")}
    env.pop("LAMINA_RESULTS", None)
    command = [str(SNAKEMAKE), "--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp / "wd"),
               *args, "--config", f"state={tmp / 'state'}", f"records={tmp / 'records'}", *config]  # fmt: skip
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def _stage_table():
    """workflow/scripts/stage_table.py as a module (workflow/ is no package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("stage_table", ROOT / "workflow/scripts/stage_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_stage_table_is_made_from_the_records(tmp_path):
    (tmp_path / "chapter-curvature.tsv").write_text(
        "s\th:m:s\tmax_rss\tcpu_time\n10\t0:00:10\t100\t9\n229.4\t0:03:49\t2048\t200\n"
    )
    (tmp_path / "organism-organism-gpt2-1.tsv").write_text("s\tmax_rss\tcpu_time\n3700\tNA\t3600\n")
    st = _stage_table()
    table = st.stage_table(st.read_records(tmp_path))
    lines = table.splitlines()
    assert lines[2] == "| organism-organism-gpt2-1 | 1 h 01 min | n/a | 1 h 00 min |"  # build order
    assert lines[3] == "| chapter-curvature | 3 min 49 s | 2.0 GiB | 3 min 20 s |"  # the last run
    assert "**1 h 05 min**" in lines[4]
    readme = tmp_path / "README.md"
    readme.write_text(f"a\n{st.BEGIN}\nold\n{st.END}\nb\n")
    assert st.main([str(tmp_path), "--readme", str(readme)]) == 0
    assert readme.read_text() == f"a\n{st.BEGIN}\n{table}{st.END}\nb\n"


def _job_counts(output: str) -> dict[str, int]:
    table = output.split("Job stats:", 1)[1]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def _check_plan(result: subprocess.CompletedProcess) -> dict[str, int]:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    counts = _job_counts(result.stdout + result.stderr)
    assert counts["organism"] == 2 and counts["aligned"] == 2
    assert counts["chapter"] == len(list((ROOT / "notebooks").glob("*.py")))
    assert counts["calibration_paper"] == 3
    assert counts["calibration_page"] == counts["pages"] == counts["html"] == counts["methods"] == 1
    return counts


@pytest.mark.slow
@needs_snakemake
def test_the_dry_run_with_the_default_profile_plans_every_stage(tmp_path):
    """What make book plans: every stage once; each chapter declares its last peak memory plus
    15% (lamina.book.memory.last_peak), capped at the memory make book gives Snakemake, so a
    chapter whose peak fits beside no other runs alone (as weight_update_signature, 16.0 GiB,
    beside layer_anatomy, 7.9 GiB, could not on the 24 GiB machine at 60b9c79)."""
    import math

    from lamina.book.memory import last_peak

    budget = 21694  # make book's mem_mb on the 24 GiB reference machine
    result = _snakemake(tmp_path, "--dry-run", "--profile", str(ROOT / "workflow/profiles/default"),
                        "--resources", f"mem_mb={budget}")  # fmt: skip
    _check_plan(result)
    declared = {m[1]: int(m[2]) for m in re.finditer(r"wildcards: chapter=(\w+)\n(?:\s+threads: \d+\n)?\s+resources: .*?mem_mb=(\d+)",
                                                      result.stdout + result.stderr)}  # fmt: skip
    executed = ROOT / "book" / "executed"
    assert declared == {c: min(budget, math.ceil(last_peak(executed, c) * 1024 * 1.15)) for c in declared}
    assert len(declared) == _check_plan(result)["chapter"]
    assert declared["weight_update_signature"] + declared["layer_anatomy"] > budget
    keys = sorted(p.name for p in (tmp_path / "state" / "keys").iterdir())
    assert "chapter-curvature.json" in keys and "calibration-3.json" in keys
    # a second plan recomputes the keys but rewrites no key file: nothing would rerun for it
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "state" / "keys").iterdir()}
    _check_plan(_snakemake(tmp_path, "--dry-run", "--profile", str(ROOT / "workflow/profiles/default")))
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps


@pytest.mark.slow
@needs_snakemake
def test_the_dry_run_with_the_slurm_profile_submits_every_stage(tmp_path):
    pytest.importorskip("snakemake_executor_plugin_slurm")
    result = _snakemake(tmp_path, "--dry-run", "--profile", str(ROOT / "workflow/profiles/slurm"),
                        config=("matrix=['curvature:gpt2']",))  # fmt: skip
    counts = _check_plan(result)
    assert counts["run"] == 1  # the chapter x model run outside the book
    text = result.stdout + result.stderr
    assert "slurm_partition=cpu" in text and "runtime=240" in text  # the profile's resources
    assert "--jobs 2" in text  # the calibration's two workers, not capped to one core


@pytest.mark.slow
@needs_snakemake
def test_a_local_run_reruns_a_stage_exactly_when_its_key_changes(tmp_path):
    stamp = tmp_path / "state" / "calibration" / "paper3.json"
    seeds = ("calibration_seeds=1", "calibration_jobs=1")
    first = _snakemake(tmp_path, "--cores", "1", str(stamp), config=seeds)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    record = json.loads(stamp.read_text())
    assert record["paper"] == 3 and record["seeds"] == 1 and record["rows"] > 0
    assert record["key"] == json.loads((tmp_path / "state/keys/calibration-3.json").read_text())["key"]
    bench = (tmp_path / "records" / "calibration-paper3.tsv").read_text().splitlines()
    assert bench[0].split("\t")[:3] == ["s", "h:m:s", "max_rss"] and len(bench) == 2
    again = _snakemake(tmp_path, "--cores", "1", str(stamp), config=seeds)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    changed = _snakemake(tmp_path, "--cores", "1", str(stamp),
                         config=("calibration_seeds=2", "calibration_jobs=1"))  # fmt: skip
    assert changed.returncode == 0, changed.stderr[-3000:]
    assert "calibration_paper" in changed.stdout + changed.stderr
    assert json.loads(stamp.read_text())["seeds"] == 2

    table = _stage_table().stage_table(_stage_table().read_records(tmp_path / "records"))
    assert "| calibration-paper3 |" in table and "all stages" in table


def _make_n(*args: str) -> str:
    """The commands ``make -n ARGS`` would run (none runs)."""
    out = subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_make_book_is_the_snakemake_workflow():
    """Issue 52: make book runs Snakemake with the default profile, the machine's memory as a
    resource and the calibration's seeds; FORCE=1 reruns every chapter rule and makes each
    execute again (lamina run --force); make chapters names its target before --config, which
    would otherwise read it as a config item."""
    book = [line for line in _make_n("book").splitlines() if "snakemake" in line]
    assert len(book) == 1 and "--profile workflow/profiles/default" in book[0]
    assert re.search(r"--resources mem_mb=\d+", book[0]) and "calibration_seeds=130" in book[0]
    assert "--forcerun" not in book[0] and "force_chapters" not in book[0]
    forced = _make_n("book", "FORCE=1", "JOBS=3")
    assert "--forcerun chapter" in forced and "force_chapters=true" in forced
    assert "--cores 3" in forced and "calibration_jobs=3" in forced
    chapters = next(line for line in _make_n("chapters").splitlines() if "snakemake" in line)
    assert chapters.index(" chapters ") < chapters.index("--config")
    assert "lamina.book execute --all" not in _make_n("book") + _make_n("chapters")
