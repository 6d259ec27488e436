"""The layer-anatomy chapter: its run on a tiny model, its budgets and its bad-input errors."""

from __future__ import annotations

import numpy as np
import pytest

from lamina.anatomy.claims import CLAIMS
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
    cfg = AnatomyConfig(
        model=str(tiny_model_dirs["llama"]),
        corpus=MICRO,
        quick=True,
        n_bootstrap=200,
        n_permutations=50,
        quant_control=False,
    )
    result = run_anatomy(cfg)
    assert list(result.claims["claim_id"]) == [s.id for s in CLAIMS]
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
    execute_chapter(
        "layer_anatomy", tmp_path, {"model": model, "corpus": MICRO, "quick": True}, progress=False
    )
    found = list((micro_data / "results").rglob("layer_anatomy.json"))
    assert found
    record = json.loads(found[-1].read_text())
    assert [c["claim_id"] for c in record["summary"]["claims"]] == [s.id for s in CLAIMS]


def test_budgets_fill_only_unset_fields_by_model_kind():
    from lamina.anatomy.run_plan import recovery_layer_list, robustness_layer_list
    from lamina.chapters.layer_anatomy.config import BUDGETS
    from lamina.chapters.models import chapter_models

    cfg = AnatomyConfig(n_tokens=4096)
    org = cfg.for_model("organism-llama@final")
    real = cfg.for_model("smollm2-135m-instruct")
    assert org.n_tokens == real.n_tokens == 4096
    assert org.plays == "heldout" and real.plays == "all"
    assert real.recovery_budget == BUDGETS["pretrained"]["recovery_budget"]
    assert recovery_layer_list(real, 30) == list(range(30))  # every layer of SmolLM2
    assert recovery_layer_list(real, 60) == [round(x) for x in np.linspace(0, 59, 30)]
    # plus the mapped core L8-11, anti-layers L14/L17 and the replacement curve's 0..k_max-1
    assert robustness_layer_list(real, 30) == [0, 1, 2, 3, 6, 8, 9, 10, 11, 12, 14, 17, 23, 29]
    assert recovery_layer_list(org, 12) == list(range(12))
    with pytest.raises(ValueError, match="recovery_layers"):
        AnatomyConfig(recovery_layers=1)
    with pytest.raises(ValueError, match="depth_mapping"):
        AnatomyConfig(depth_mapping="relative")
    with pytest.raises(ValueError, match="plays"):
        AnatomyConfig(plays="some")
    assert chapter_models("layer_anatomy", "some/model") == (["some/model"], [])


def test_gemma_has_its_own_budget_row_and_quick_caps_apply_after_filling():
    from lamina.anatomy.run_plan import robustness_layer_list
    from lamina.chapters.layer_anatomy.config import BUDGETS

    gemma = AnatomyConfig().for_model("gemma-3-270m")
    assert gemma.n_tokens == 6144 and gemma.recovery_layers == []  # 48 units, as SmolLM2
    assert robustness_layer_list(gemma, 18) == [0, 1, 4, 5, 6, 7, 8, 10, 17]
    hub = AnatomyConfig().for_model("google/gemma-3-270m")  # not the offline alias
    assert hub.recovery_layers == BUDGETS["pretrained"]["recovery_layers"]
    quick = AnatomyConfig(quick=True)
    assert quick.n_tokens is None  # filled per model, then capped
    assert quick.for_model("smollm2-135m-instruct").robustness_tokens == 1024  # QUICK's cap
    with pytest.raises(ValueError, match="importance_surgeries must include 'skip'"):
        AnatomyConfig(importance_surgeries=["interpolate"])


def test_default_models_are_smollm2_gemma_then_the_organism(monkeypatch):
    import lamina.chapters.models as models_mod
    import lamina.sources.gguf_models as gguf_models

    monkeypatch.setattr(gguf_models, "locate_offline", lambda name: name)
    monkeypatch.setattr(models_mod.organisms, "resolve", lambda name: name)
    models, notes = models_mod.chapter_models("layer_anatomy", "default")
    assert models == ["smollm2-135m-instruct", "gemma-3-270m", "organism-llama"] and not notes


def test_a_tiny_gemma3_maps_the_papers_layers_by_depth_and_skips_recovery(micro_data, tmp_path):
    from ..conftest import _byte_tokenizer, tiny_model

    folder = tmp_path / "gemma3"
    tiny_model("gemma3", n_layers=6).save_pretrained(folder)
    _byte_tokenizer().save_pretrained(folder)
    cfg = AnatomyConfig(
        model=str(folder),
        corpus=MICRO,
        quick=True,
        surgeries=["skip", "interpolate", "scale"],
        importance_surgeries=["skip"],
        robustness_layers=[0, 3],
        recovery_layers=[],
        n_bootstrap=50,
    )
    result = run_anatomy(cfg)
    sweep = result.tables["sweep"]
    assert sorted(sweep.query("surgery == 'skip'")["layer"]) == list(range(6))
    assert sorted(sweep.query("surgery == 'interpolate'")["layer"]) == [0, 3]
    claims = result.claims.set_index("claim_id")
    assert claims.loc["p3-anatomy-recovery", "verdict"] == "not testable"
    assert claims.loc["p3-anatomy-core", "verdict"] != "not testable"
    assert any("core L8-11 -> layers 1, 2" in n and "L14 -> 2; L17 -> 3" in n for n in result.notes)


def test_a_quantised_gguf_gets_the_requantisation_control_on_its_weight_deltas(
    micro_data, tmp_path, monkeypatch
):
    """A model from a quantised GGUF: the delta rows are re-measured on its weights
    re-quantised and say whether they flip; every other claim reads "not run: cost"."""
    from lamina.anatomy.quant_claims import QUANT_CONTROL_CLAIMS
    from tests.sources.gguf_writer import write_gguf

    from ..conftest import _byte_tokenizer, tiny_model

    monkeypatch.setenv("LAMINA_GGUF_CACHE", str(tmp_path / "gguf-cache"))
    gguf = write_gguf(
        tiny_model("llama", n_layers=4), _byte_tokenizer(), tmp_path / "tiny-q8.gguf", qtype="Q8_0"
    )
    cfg = AnatomyConfig(
        model=str(gguf),
        corpus=MICRO,
        quick=True,
        surgeries=["skip"],
        recovery_layers=[],
        depth_mapping="none",
        n_bootstrap=50,
    )
    result = run_anatomy(cfg)
    claims = result.claims.set_index("claim_id")
    for cid in QUANT_CONTROL_CLAIMS:
        assert claims.loc[cid, "quant_shift"].startswith(("Q4_0: same (", "Q4_0: flips to "))
    rest = claims.drop(index=list(QUANT_CONTROL_CLAIMS))
    assert rest["quant_shift"].str.startswith("Q4_0: not run: cost").all()
