"""Paper 3's section of the calibration page (lamina.chapters.rules_calibration): every declared
claim appears, with its rates or its reason, and a second build reads the seeds' cache."""

from __future__ import annotations

from lamina.anatomy.calibration import CLAIMS
from lamina.chapters import rules_calibration as R


def test_paper3_section_lists_every_declared_claim_and_reads_its_cache(tmp_path):
    text = R.rules_markdown(1, jobs=1, cache=tmp_path)
    assert text.startswith(f"## {R.TITLE}")
    assert all(f"`{c.id}`" in text for c in CLAIMS)
    assert "1 seeds per source: " in text and "(0 read from the cache)" in text
    assert "P2" not in text and "p2-" not in text  # paper 2's section is lamina.weights'
    again = R.rules_markdown(1, jobs=1, cache=tmp_path)
    assert "every seed read from the cache" in again
    assert again.split("| claim |")[1] == text.split("| claim |")[1]  # the same rates
