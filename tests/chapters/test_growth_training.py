"""The Growth Training chapter: a quick run judges every declared claim."""

from __future__ import annotations

import pandas as pd
import pytest

from lamina.anatomy.growth_claims import BASE_CLAIMS
from lamina.anatomy.growth_orders import real_label
from lamina.chapters.growth_training import GrowthConfig, run_growth
from lamina.chapters.growth_training.run import resolve_real_models, source_run

from ..anatomy.test_growth_schedules import _save
from ..conftest import lamina_env

MICRO = "organism-llama-micro"


@pytest.fixture(scope="module")
def micro_data(micro_organisms, tmp_path_factory):
    """LAMINA_DATA with the micro organisms, LAMINA_RESULTS in a tmp folder of this module."""
    root = tmp_path_factory.mktemp("growth-results")
    with lamina_env(micro_organisms, root / "results"):
        yield root


def test_a_quick_run_judges_every_declared_claim(micro_data):
    result = run_growth(GrowthConfig(model=MICRO, quick=True, seeds=[0, 1]))
    assert list(result.claims["claim_id"]) == [s.id for s in BASE_CLAIMS]
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
    assert [c["claim_id"] for c in record["summary"]["claims"]] == [s.id for s in BASE_CLAIMS]


def test_real_models_parameter_is_checked_and_quick_mode_skips_the_default():
    with pytest.raises(TypeError, match="real_models must be None or a list"):
        GrowthConfig(real_models="smollm2-135m-instruct")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="real_tokens"):
        GrowthConfig(real_tokens=64, real_seq_len=128)
    models, notes = resolve_real_models(GrowthConfig(quick=True))
    assert models == [] and "quick mode" in notes[0]
    assert resolve_real_models(GrowthConfig(real_models=[]))[0] == []
    assert real_label("/tmp/models/tiny-llama/") == "tiny-llama"
    with pytest.raises(ValueError, match="clashing labels"):
        resolve_real_models(GrowthConfig(real_models=["/a/m", "/b/m"]))


@pytest.mark.slow
def test_growth_chapter_runs_an_extra_schedule_per_real_model(micro_data, tmp_path):
    """The chapter notebook, quick mode, with two real-model orders (tiny random folders):
    the extra runs, their claim rows, the profiles and correlations, and the figure."""
    import json

    from lamina.book import execute_chapter

    llama = _save("llama", 5, tmp_path / "tiny-llama")
    gemma = _save("gemma3", 6, tmp_path / "tiny-gemma")
    params = {"model": MICRO, "quick": True, "seeds": [0, 1], "real_models": [llama, gemma]}
    nb = execute_chapter("growth_training", tmp_path / "out", params, progress=False)
    found = sorted(
        (micro_data / "results").rglob("growth_training.json"), key=lambda f: f.stat().st_mtime
    )
    found = found[-1:]
    record = json.loads(found[0].read_text())
    ids = {c["claim_id"] for c in record["summary"]["claims"]}
    assert {"p3-growth-loss", "p3-growth-loss-tiny-llama", "p3-growth-loss-tiny-gemma"} <= ids
    T = {t: pd.read_parquet(found[0].parent / f"growth_training.{t}.parquet")
         for t in ("curves", "budgets", "importance", "profiles", "correlations")}  # fmt: skip
    assert {source_run("tiny-llama"), source_run("tiny-gemma")} <= set(T["curves"]["run"])
    step = T["budgets"][T["budgets"]["budget"] == "step"]
    assert len(step[step["run"] == source_run("tiny-gemma")]) == 2  # one ratio per seed
    assert set(T["profiles"]["n_layers"]) == {4, 5, 6}
    assert set(T["importance"].groupby("source").size()) == {4}  # all on the trained 4 layers
    assert len(T["correlations"]) == 3  # reference and two real models: three pairs
    assert nb.exists()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"schedules": ["uniform", "sideways"]}, "schedules"),
        ({"importance": "oracle"}, "importance"),
        ({"n_groups": 13}, "n_groups"),
        ({"seeds": []}, "seeds"),
    ],
)
def test_growth_config_rejects_bad_input_clearly(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GrowthConfig(**kwargs)
