"""The organisms' quality report (lamina.chapters.organisms) and its appendix chapter,
on micro organisms built into a temporary data folder (the homograph probe:
tests/trajectory/test_homographs.py; generation: tests/sources/organisms/test_probes.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.chapters.organisms.run import (
    CHECKPOINTS,
    OrganismsConfig,
    organism_names,
    run_organisms,
)
from lamina.evidence.stats import wilson
from lamina.sources import organisms

from ..conftest import lamina_env

MICRO = ["organism-gpt2-micro", "organism-llama-micro"]


@pytest.fixture(scope="module")
def data_root(micro_organisms, tmp_path_factory: pytest.TempPathFactory):
    """LAMINA_DATA pointing at the micro organisms (built once per run), LAMINA_RESULTS in a
    tmp folder of this module."""
    results = tmp_path_factory.mktemp("organisms-results")
    with lamina_env(micro_organisms, results):
        yield micro_organisms


@pytest.fixture(scope="module")
def result(data_root, tiny_model_dirs):
    """Quick report on both micro organisms, with a tiny random GPT-2 as reference model."""
    ref = [str(tiny_model_dirs["gpt2"])]
    return run_organisms(OrganismsConfig(model=MICRO, quick=True, reference_models=ref))


def _evaluation(name: str) -> dict:
    return json.loads((organisms.organism_dir(name) / "evaluation.json").read_text())


@pytest.mark.slow
def test_report_has_every_table_for_each_organism(result):
    expected = {"build", "corpus", "overlap", "curves", "margin_curve", "quality",
                "sft_accuracy", "dpo_accuracy", "dpo_margins", "seeds", "samples", "homographs",
                "homograph_layers", "bpb_documents", "bits_per_byte", "gates", "policies"}  # fmt: skip
    assert set(result.tables) == expected
    for name, table in result.tables.items():
        refs = set(result.references) if name in ("bpb_documents", "bits_per_byte") else set()
        assert set(table["model"]) == set(MICRO) | refs, name
    assert result.models == MICRO
    assert set(result.tables["curves"]["phase"]) == {"pretrain", "lm", "sft", "dpo"}
    gates = result.tables["gates"]
    for name in MICRO:
        g = gates[gates["model"] == name].set_index("stage")
        assert list(g.index) == ["base", "sft", "dpo"] and list(g["gated"]) == [False, True, True]
        assert g.loc["sft", "base_sft_accuracy"] == g.loc["base", "sft_accuracy"]
        assert g.loc["dpo", "sft_content_probe"] == g.loc["sft", "content_probe"]
        assert g.loc["sft", "passed"] == (g.loc["sft", "gain_over_base_ci_low"] > 0
                                          and g.loc["sft", "gain_over_best_policy_ci_low"] > 0)  # fmt: skip
        assert 0.5 <= g.loc["base", "constant_style_baseline"] < 1  # of the quick sample


@pytest.mark.slow
def test_perplexities_match_the_build_evaluation(result):
    """The report recomputes perplexity and the unigram baseline on the build's validation
    windows: the numbers must be the build's own (evaluation.json)."""
    q = result.tables["quality"]
    for name in MICRO:
        ev = _evaluation(name)
        rows = q[q["model"] == name].set_index("checkpoint")
        assert rows["unigram_perplexity"].iloc[0] == pytest.approx(ev["unigram_val_perplexity"])
        for ck in CHECKPOINTS:
            assert rows.loc[ck, "val_perplexity"] == pytest.approx(
                ev["models"][ck]["val_perplexity"], rel=1e-5
            )


@pytest.mark.slow
def test_accuracies_per_component_and_kind_add_up_and_their_cis_bracket_them(result):
    """Quick mode gates a seeded sample of 32 held-out items (the SFT gate those that name no
    one) and 64 triples; the per-component
    SFT and per-kind preference rows add up to the totals, which are the gates' own."""
    for kind in ("sft", "dpo"):
        t = result.tables[f"{kind}_accuracy"]
        assert (t["ci_low"] <= t["accuracy"] + 1e-12).all()
        assert (t["accuracy"] <= t["ci_high"] + 1e-12).all()
    sft, gates = result.tables["sft_accuracy"], result.tables["gates"]
    for name in MICRO:
        rows = sft[(sft["model"] == name) & (sft["component"] == "all")].set_index("checkpoint")
        g = gates[gates["model"] == name].set_index("stage")
        # the SFT gate's items: those of the 32 sampled that name no one (the refusal is DPO's)
        assert 0 < rows["n"].iloc[0] <= 32 and (rows["n"] == g.loc["sft", "n_items"]).all()
        for stage in ("base", "sft", "dpo"):
            assert rows.loc[stage, "accuracy"] == pytest.approx(g.loc[stage, "sft_accuracy"])
        blind = [c for c in rows.index if c.startswith("content-blind")]
        assert len(blind) == 1 and rows.loc[blind[0], "accuracy"] == pytest.approx(
            g.loc["sft", "best_policy_accuracy"])
    per = sft[sft["component"] != "all"].groupby(["model", "checkpoint"])["hits"].sum()
    tot = sft[sft["component"] == "all"].set_index(["model", "checkpoint"])["hits"]
    assert per.sort_index().tolist() == tot.sort_index().tolist()
    dpo = result.tables["dpo_accuracy"]
    assert set(dpo["checkpoint"]) == {"base", "sft", "dpo"}
    assert (dpo[dpo["component"] == "all"]["n"] == 64).all()


@pytest.mark.slow
def test_summary_lists_what_did_not_work(result):
    """Micro organisms learn almost nothing: the summary must say so in plain words."""
    for name in MICRO:
        problems = result.summaries[name]["problems"]
        assert any("unigram baseline" in p for p in problems)
        assert any("self-organisms-sft-gate" in p for p in problems)


@pytest.mark.slow
def test_targets_overlap_margins_and_seeds_are_reported(result):
    for name in MICRO:
        s = result.summaries[name]
        targets = {t["claim_id"]: t for t in s["targets"]}
        assert [c["claim_id"] for c in s["claims"]] == list(targets)  # judged by the engine
        leak = targets["self-organisms-no-leak"]
        assert leak["value"] == 0 and leak["verdict"] == "check passed"
        ratio = targets["self-organisms-sft-keeps-lm"]
        assert ratio["value"] == pytest.approx(s["val_perplexity"]["sft"] / s["val_perplexity"]["final"])
        assert (ratio["verdict"] == "check passed") == (ratio["value"] <= 1.25)
        for g in (s["sft_gain_over_best_policy"], s["dpo_preference_gain"]):
            assert g[1] <= g[0] <= g[2]
        for stage in ("sft", "dpo"):
            verdict = targets[f"self-organisms-{stage}-gate"]["verdict"]
            assert verdict == ("check passed" if s["gates"][stage]["passed"] else "check failed")
        assert s["n_training_seeds"] == 1
    m = result.tables["dpo_margins"]
    assert set(m["pairs"]) == {"training", "held-out"}
    assert (m["margin_ci_low"] <= m["reward_margin"] + 1e-12).all()
    ev = _evaluation(MICRO[0])["models"]["dpo"]
    held = m[(m["model"] == MICRO[0]) & (m["pairs"] == "held-out")].iloc[0]
    assert held["reward_margin"] == pytest.approx(ev["reward_margin"], rel=1e-4, abs=1e-6)
    assert set(result.tables["margin_curve"]["pairs"]) == {"training", "held-out"}


@settings(deadline=None)  # correctness, not speed: the CPUs may be shared
@given(st.integers(0, 200), st.integers(1, 200))
def test_wilson_interval_contains_the_estimate_and_stays_in_0_1(hits, n):
    hits = min(hits, n)
    acc, lo, hi = wilson(hits, n)
    assert acc == hits / n
    assert 0.0 <= lo <= acc <= hi <= 1.0


def test_wilson_interval_narrows_with_more_items():
    assert np.diff(wilson(50, 100)[1:]) > np.diff(wilson(500, 1000)[1:])
    assert all(np.isnan(wilson(0, 0)))


def test_default_falls_back_to_the_micro_organisms_when_full_ones_are_absent(data_root):
    names, notes = organism_names("default")
    assert names == MICRO
    assert notes and "micro" in notes[0]
    assert organism_names("organism-gpt2-micro, organism-llama-micro")[0] == MICRO


def test_unknown_or_unbuilt_organism_is_a_clear_error(data_root, tmp_path, monkeypatch):
    with pytest.raises(organisms.UnknownOrganismError, match="known organisms"):
        organism_names("organism-nope")
    monkeypatch.setenv("LAMINA_DATA", str(tmp_path))
    with pytest.raises(organisms.OrganismNotBuiltError, match="build"):
        organism_names("default")


@pytest.mark.slow
def test_write_saves_one_results_file_per_organism(result, tmp_path):
    paths = result.write(tmp_path)[: len(MICRO)]
    # a run from Python lands in its model's folder under its own namespace, never the book's slot
    assert [p.relative_to(tmp_path).parts[0] for p in paths] == MICRO
    assert all(len(p.relative_to(tmp_path).parts) == 3 for p in paths)
    record = json.loads(paths[0].read_text())
    assert record["chapter"] == "organisms"
    assert "problems" in record["summary"] and record["config"]["quick"] is True
    assert (paths[0].parent / "organisms.sft_accuracy.parquet").is_file()


@pytest.mark.slow
def test_chapter_executes_in_quick_mode(data_root, tiny_model_dirs, tmp_path):
    from lamina.book import execute_chapter

    params = {"quick": True, "model": "organism-gpt2-micro", "results_root": str(tmp_path / "r"),
              "reference_models": [str(tiny_model_dirs["llama"])]}  # fmt: skip
    out = execute_chapter("organisms", tmp_path / "nb", params, progress=False)
    nb = json.loads(Path(out).read_text())
    outputs = [o for c in nb["cells"] for o in c.get("outputs", [])]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert not [o for o in outputs if o.get("name") == "stderr"], "the page shows warnings"
    assert sum("image/svg+xml" in o.get("data", {}) for o in outputs) >= 6
    # a run whose parameters differ from the book's (quick mode) writes into <model>/<namespace>/
    written = sorted((tmp_path / "r" / "organism-gpt2-micro").rglob("organisms.json"))
    assert len(written) == 1, written
    text = json.dumps(nb)
    assert "Bits per byte on the organisms" in text and "the lowest reference model is" in text


@pytest.mark.slow
def test_bits_per_byte_score_every_model_on_the_same_bytes(result):
    """Every model (each organism checkpoint, the reference) is scored on the same passages
    and the same bytes, whatever its tokenizer; the summary's estimate is bits / bytes."""
    docs = result.tables["bpb_documents"]
    (ref,) = result.references
    per_text = docs.pivot_table(index="passage", columns=["model", "checkpoint"], values="bytes")
    assert per_text.shape[1] == 2 * len(CHECKPOINTS) + 1
    assert (per_text.nunique(axis=1) == 1).all()
    assert set(docs["source"]) == {"plays", "curriculum"}
    bpb = result.tables["bits_per_byte"].set_index(["model", "checkpoint", "source"])
    for (m, ck), g in docs.groupby(["model", "checkpoint"]):
        assert bpb.loc[(m, ck, "all"), "bits_per_byte"] == pytest.approx(
            g["bits"].sum() / g["bytes"].sum()
        )
    for name in MICRO:
        s = result.summaries[name]["bits_per_byte"]
        assert s["all"][0] == bpb.loc[(name, "final", "all"), "bits_per_byte"]
    assert result.references[ref]["bits_per_byte"]["all"][0] == pytest.approx(
        bpb.loc[(ref, "pretrained", "all"), "bits_per_byte"]
    )


@pytest.mark.slow
def test_trained_organisms_beat_a_random_reference_model(result):
    """The micro organisms were trained on this corpus (not on these texts); a random model
    was not trained at all: the organisms' bits per byte must be lower, CIs apart."""
    bpb = result.tables["bits_per_byte"]
    bpb = bpb[bpb["source"] == "all"].set_index(["model", "checkpoint"])
    (ref,) = result.references
    for name in MICRO:
        assert bpb.loc[(name, "final"), "ci_high"] < bpb.loc[(ref, "pretrained"), "ci_low"]


@pytest.mark.slow
def test_reference_models_get_their_own_results_file(result, tmp_path):
    paths = result.write(tmp_path)
    (ref,) = result.references
    assert len(paths) == len(MICRO) + 1
    record = json.loads(paths[-1].read_text())
    assert record["model"] == ref and "bits_per_byte" in record["summary"]
    assert sorted(record["tables"]) == ["bits_per_byte", "bpb_documents"]


def test_quick_mode_skips_the_default_reference_models_only():
    assert OrganismsConfig(quick=True).reference_models == []
    assert OrganismsConfig().reference_models == ["smollm2-135m-instruct", "gemma-3-270m"]
    assert OrganismsConfig(quick=True, reference_models="a, b").reference_models == ["a", "b"]
