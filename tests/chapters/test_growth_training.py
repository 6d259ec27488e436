"""The Growth Training chapter: a quick run judges every declared claim."""

from __future__ import annotations

import pytest

from lamina.anatomy.growth_claims import BASE_SPECS
from lamina.chapters.growth_training import GrowthConfig, run_growth

from ..conftest import lamina_env

MICRO = "organism-llama-micro"


@pytest.fixture(scope="module")
def micro_data(micro_organisms, tmp_path_factory):
    """LAMINA_DATA with the micro organisms, LAMINA_RESULTS in a tmp folder of this module."""
    root = tmp_path_factory.mktemp("growth-results")
    with lamina_env(micro_organisms, root / "results"):
        yield root


def test_a_quick_run_judges_every_declared_claim(micro_data):
    result = run_growth(GrowthConfig(organism=MICRO, quick=True, seeds=[0, 1]))
    assert list(result.claims["claim_id"]) == [s.id for s in BASE_SPECS]
    assert {"curves", "budgets", "orders", "timing"} <= set(result.tables)
    timing = result.tables["timing"]
    assert timing["repeat"].nunique() >= 2 and (timing["seconds"] > 0).all()


@pytest.mark.slow
def test_the_notebook_executes_in_quick_mode(micro_data, tmp_path):
    import json

    from lamina.book import execute_chapter

    execute_chapter("growth_training", tmp_path, {"model": MICRO, "quick": True}, progress=False)
    found = list((micro_data / "results").rglob("growth_training.json"))
    assert found
    record = json.loads(found[-1].read_text())
    assert [c["claim_id"] for c in record["summary"]["claims"]] == [s.id for s in BASE_SPECS]
