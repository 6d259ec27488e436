"""The layer-anatomy chapter: its run on a tiny model, its budgets and its bad-input errors."""

from __future__ import annotations

import pytest

from lamina.anatomy.claims import SPECS
from lamina.chapters.layer_anatomy import AnatomyConfig, run_anatomy

from ..conftest import lamina_env

MICRO = "organism-llama-micro"


@pytest.fixture(scope="module")
def micro_data(micro_organisms, tmp_path_factory):
    """LAMINA_DATA with the micro organisms, LAMINA_RESULTS in a tmp folder of this module."""
    root = tmp_path_factory.mktemp("anatomy-results")
    with lamina_env(micro_organisms, root / "results"):
        yield root


def test_a_quick_run_judges_every_declared_claim(micro_data, tiny_model_dirs):
    cfg = AnatomyConfig(model=str(tiny_model_dirs["llama"]), corpus=MICRO, quick=True,
                        n_bootstrap=200, n_permutations=50, quant_control=False)
    result = run_anatomy(cfg)
    assert list(result.claims["claim_id"]) == [s.id for s in SPECS]
    assert {"sweep", "perplexity", "recovery", "delta", "predictability"} <= set(result.tables)


def test_out_of_range_layer_gives_a_clear_error(micro_data, tiny_model_dirs):
    cfg = AnatomyConfig(model=str(tiny_model_dirs["llama"]), corpus=MICRO, layers=[7], quick=True)
    with pytest.raises(ValueError, match="layer 7 is out of range.*4 layers"):
        run_anatomy(cfg)


def test_unknown_surgery_gives_a_clear_error():
    with pytest.raises(ValueError, match="unknown surgery"):
        AnatomyConfig(surgeries=["skip", "transplant"])


@pytest.mark.slow
def test_the_notebook_executes_in_quick_mode(micro_data, tiny_model_dirs, tmp_path):
    import json

    from lamina.book import execute_chapter

    model = str(tiny_model_dirs["llama"])
    execute_chapter("layer_anatomy", tmp_path, {"model": model, "corpus": MICRO, "quick": True},
                    progress=False)
    found = list((micro_data / "results").rglob("layer_anatomy.json"))
    assert found
    record = json.loads(found[-1].read_text())
    assert [c["claim_id"] for c in record["summary"]["claims"]] == [s.id for s in SPECS]
