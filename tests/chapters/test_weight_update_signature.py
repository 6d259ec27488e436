"""The weight-update-signature chapter: config, the run on a real checkpoint, on the organisms,
and the notebook. Tiny random models only."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lamina.chapters.weight_update_signature import CLAIMS, Config, run
from lamina.evidence.claims import PAPER_VERDICTS
from lamina.evidence.declare import Gate
from lamina.weights.settings import real_budget
from lamina.weights.single import SINGLE_UNTESTABLE

IDS = [c.id for c in CLAIMS]
_SMALL_ALIGN = {"sft_steps": 3, "dpo_steps": 3, "batch_size": 2, "gate_items": 8}


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory, monkeypatch):
    """Aligned builds in a tmp folder; one thread."""
    root = tmp_path_factory.mktemp("aligned-data")
    monkeypatch.setattr("lamina.weights.aligned.data_dir", lambda: root)
    monkeypatch.setenv("LAMINA_NUM_THREADS", "1")


def test_config_from_globals_keeps_the_typo_check_and_ignores_other_globals():
    import altair

    from lamina.chapters.config import UnknownParameterError

    config = Config.from_globals({"k": 4, "quick": True, "alt": altair, "model": "x"})
    assert config.k == 4 and config.quick and config.objective_steps <= 4
    with pytest.raises(UnknownParameterError, match="did you mean 'k_sweep'"):
        Config.from_params({"k_swep": [1]})
    assert Config(model_budgets=None).model_budgets  # None keeps the per-model defaults


def test_real_budget_caps_the_runs_and_probes_evenly_spaced_blocks():
    config = Config(real_layers=8, real_tokens=1000, real_max_length=64)
    small = real_budget(config, 30, config.caps("gemma-3-270m"), "gemma-3-270m")
    assert small.layers == (0, 4, 8, 12, 17, 21, 25, 29)
    assert small.objective_steps == small.real_steps == 8  # Gemma's cap
    assert small.adapt_eval == 64 and small.adapt_steps == 8
    with pytest.raises(ValueError, match="unknown real_"):
        real_budget(config, 30, {"k": 2}, "x")


def test_not_an_organism_is_refused_with_the_known_names():
    from lamina.chapters.weight_update_signature.config import expand_organisms

    with pytest.raises(ValueError, match="organism-llama"):
        expand_organisms(Config(model="gpt2"))


def test_base_model_and_aligned_model_name_a_pair():
    config = Config(base_model="a/base", aligned_model="a/instruct")
    assert config.is_pair and (config.base, config.target) == ("a/base", "a/instruct")
    with pytest.raises(ValueError, match="give both or neither"):
        Config(base_model="a/base")


@pytest.mark.slow
def test_one_real_checkpoint_runs_every_declared_claim(tiny_model_dirs, tmp_path, monkeypatch):
    folder = tmp_path / "tiny-llama-instruct"  # an instruct name: the released edit row runs
    import gc
    import importlib
    import shutil
    import weakref

    chapter_run = importlib.import_module("lamina.chapters.weight_update_signature.run")

    shutil.copytree(tiny_model_dirs["llama"], folder)
    config = Config(model=str(folder), quick=True, k=4, k_sweep=(1, 4, 8), quant_control=False,
                    real_align=_SMALL_ALIGN)  # fmt: skip
    held, alive = [], []  # weak references to the models the unit held; which outlive it
    original = chapter_run.release_unit

    def release(ck):
        held.extend(weakref.ref(m) for m, _ in ck._models.values())
        held.extend(weakref.ref(v[0]) for v in ck.__dict__.get("_adopted", {}).values())
        original(ck)
        gc.collect()
        alive.extend(r() is not None for r in held)

    monkeypatch.setattr(chapter_run, "release_unit", release)
    beside: list[tuple[list[str], list[str]]] = []  # what the unit holds when the adaptation runs
    adapt = chapter_run.single_group_adaptation

    def adaptation(ck, s):
        beside.append((sorted(ck._models), sorted(ck.__dict__.get("_adopted", {}))))
        return adapt(ck, s)

    monkeypatch.setattr(chapter_run, "single_group_adaptation", adaptation)
    result = run(config)
    # the adaptation's full-parameter AdamW copy runs beside the base alone, before the targets
    # and the objective runs are held (beside them it set the chapter's 17.1 GiB peak on Gemma 3)
    assert len(beside) == 1 and len(beside[0][0]) == 1 and not beside[0][1], beside
    # base, stages and objectives were held, and none outlives its unit's measurement while
    # the run goes on (a run over SmolLM2 then Gemma-3 went past 22 GiB when they did)
    assert len(held) >= 4 and not any(alive), alive
    claims = result.claims
    assert list(claims["claim_id"]) == IDS  # one row per declared claim, in order
    assert set(claims["verdict"]) <= set(PAPER_VERDICTS)
    gates = result.tables["gates"]
    gated = {c.id for c in CLAIMS if any(isinstance(r, Gate) for r in c.requires)}
    failed = set(gates.loc[~gates["passed"].astype(bool), "gate"]) if len(gates) else set()
    for name, why in SINGLE_UNTESTABLE.items():
        row = claims[claims["claim_id"] == f"p2-signature-{name}"].iloc[0]
        assert row["verdict"] == "not testable"
        # a gated row whose gate failed on this tiny model says so first (the engine checks
        # gates before the measurement); otherwise the single checkpoint's reason
        assert row["reason"] == why or (
            row["claim_id"] in gated and failed and row["reason"].startswith("gate ")
        ), row["reason"]
    assert {"sft", "dpo", "objective-lm", "objective-sft", "objective-dpo", "adaptation"} <= set(gates["gate"])
    curves = result.tables["finetune"]
    objective = curves[curves["gate"].astype(str).str.startswith("held-out")]
    assert objective.groupby("objective")["step"].max().nunique() == 1  # equal budgets
    d = result.tables["deltas"]
    assert {"stage", "objective"} <= set(d["family"])
    edits = result.tables["edits"]
    assert "scrambled" in set(edits["direction"])  # the released checkpoint's null


@pytest.mark.slow
def test_organism_pipeline_and_notebook_in_quick_mode(micro_organisms, tmp_path):
    from lamina.book import execute_chapter
    from tests.conftest import lamina_env

    with lamina_env(micro_organisms, tmp_path / "results"):
        out = execute_chapter("weight_update_signature", tmp_path / "nb",
                              {"model": "organism-llama-micro", "quick": True,
                               "k_sweep": [1, 4, 8, 16]}, progress=False)  # fmt: skip
        found = sorted((tmp_path / "results" / "organism-llama-micro").rglob("weight_update_signature.json"))
        record = json.loads(found[0].read_text())
    ids = [row["claim_id"] for row in record["summary"]["claims"]]
    assert ids == IDS
    notebook = out.read_text()
    assert "image/svg+xml" in notebook and '"ename"' not in notebook
    claims = pd.DataFrame(record["summary"]["claims"])
    late = claims[claims["claim_id"].str.startswith("p2-signature-late-pretraining")]
    assert (late["verdict"] != "not testable").any()  # an organism has a pretraining history


def test_the_chapter_is_glue():
    root = Path(__file__).resolve().parents[2] / "lib" / "lamina" / "chapters" / "weight_update_signature"
    lines = sum(len(p.read_text().splitlines()) for p in root.glob("*.py"))
    assert lines <= 650, f"chapters/weight_update_signature is {lines} lines"
