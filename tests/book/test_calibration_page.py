"""The one calibration page (lamina.book.calibration): every paper's declared claims appear,
with their rates or the reason they have none, and a second build reads the seeds' cache."""

from __future__ import annotations

import time

import pytest

from lamina.book.calibration import PAPERS, new_results, paper_section, section_markdown


@pytest.mark.slow
@pytest.mark.parametrize(("title", "module"), PAPERS, ids=[t.split(":")[0] for t, _ in PAPERS])
def test_each_paper_section_lists_every_declared_claim_and_reads_its_cache(
    title, module, tmp_path, monkeypatch, calibration_cache
):
    """Seed 0 is shared with the quick book's page (the session's ``calibration_cache``):
    whichever runs first computes it, and the second call here reads it in any case."""
    from tests.conftest import link_calibration_cache

    monkeypatch.setenv("LAMINA_DATA", str(tmp_path))
    link_calibration_cache(tmp_path, calibration_cache)
    text = section_markdown(paper_section(title, module, 1, jobs=1))
    assert text.startswith(f"## {title}")
    assert all(f"`{c.id}`" in text for c in module.CLAIMS)
    assert "1 seeds per source: " in text
    before_again = time.time()
    again = section_markdown(paper_section(title, module, 1, jobs=1))
    assert again.split("| claim |")[1] == text.split("| claim |")[1]  # the same rates
    assert any((calibration_cache / "calibration").rglob("*.json"))
    # the second build read every seed from the cache: it wrote none (a paper whose cost line
    # counts the cached seeds also says so there)
    assert new_results(calibration_cache / "calibration", before_again) == 0
    if "read from the cache" in again:
        assert ", 0 of them" not in again


def test_progress_reports_the_seeds_written_during_the_block_only(tmp_path, capsys):
    """The cache is where a worker's finished seed shows: an entry from an earlier build is
    not counted, and each new one is (printed only when the count changed)."""
    import os
    import time

    from lamina.book.calibration import new_results, progress

    old = tmp_path / "p1-key" / "seed-0.json"
    old.parent.mkdir()
    old.write_text("{}")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    with progress("Paper 1", tmp_path, every=0.05):
        time.sleep(0.2)
        (tmp_path / "p1-key" / "seed-1.json").write_text("{}")
        (tmp_path / "paper3-key-0.json").write_text("{}")
        time.sleep(0.3)
    lines = [x for x in capsys.readouterr().out.splitlines() if "seed result" in x]
    assert lines and lines[-1].startswith("[lamina] calibration: Paper 1: 2 seed result(s) computed")
    assert not any(": 0 seed" in x for x in lines)  # no line while nothing was written
    assert len(lines) == len(set(lines))  # a line only when the count changed
    assert new_results(tmp_path / "absent", 0.0) == 0
