"""The one calibration page (lamina.book.calibration): every paper's declared claims appear,
with their rates or the reason they have none, and a second build reads the seeds' cache."""

from __future__ import annotations

import pytest

from lamina.book.calibration import PAPERS, paper_section, section_markdown


@pytest.mark.slow
@pytest.mark.parametrize(("title", "module"), PAPERS, ids=[t.split(":")[0] for t, _ in PAPERS])
def test_each_paper_section_lists_every_declared_claim_and_reads_its_cache(
    title, module, tmp_path, monkeypatch
):
    monkeypatch.setenv("LAMINA_DATA", str(tmp_path))
    text = section_markdown(paper_section(title, module, 1, jobs=1))
    assert text.startswith(f"## {title}")
    assert all(f"`{c.id}`" in text for c in module.CLAIMS)
    assert "1 seeds per source: " in text
    again = section_markdown(paper_section(title, module, 1, jobs=1))
    assert again.split("| claim |")[1] == text.split("| claim |")[1]  # the same rates
    assert any(tmp_path.joinpath("cache", "calibration").rglob("*.json"))
