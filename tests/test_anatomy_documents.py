"""Paper 3 on real models (issue 10, issue 12 item 4): held-out text that mixes sources, CIs
that resample documents, per-model budgets, and the paper's layer numbers tested as stated on
30 layers and "not testable" elsewhere when no depth mapping is allowed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lamina.chapters.layer_anatomy.claims import importance_claims, mapped_layers
from lamina.chapters.layer_anatomy.config import BUDGETS, AnatomyConfig
from lamina.chapters.layer_anatomy.documents import (
    document_delta_ci,
    document_ppl_ci,
    document_sums,
    mixed_heldout,
    regroup_sweep,
)
from lamina.chapters.layer_anatomy.measures import importance_bootstrap
from lamina.chapters.layer_anatomy.run import (
    expand_anatomy_models,
    recovery_layer_list,
    robustness_layer_list,
    run_anatomy,
)

MICRO = "organism-llama-micro"


class CharTokenizer:
    """One token per character (ids 1..255), EOS = 0."""

    eos_token_id = 0

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": [1 + ord(c) % 255 for c in text]}


def _docs() -> tuple[list[str], list[str]]:
    play = "".join(f"KING. line {i} of the play, spoken aloud.\n" for i in range(400))
    curriculum = [f"Document {i}: the river {i} flows to the sea.\n" * 3 for i in range(60)]
    return [play, *curriculum], ["play"] + ["curriculum"] * 60


# ----------------------------------------------------------------------------- mixed text
def test_mixed_heldout_interleaves_sources_and_is_seeded():
    docs, sources = _docs()
    held = mixed_heldout(docs, sources, CharTokenizer(), 4096, 64, seed=0)
    assert held.windows.shape == (64, 64)
    kinds = held.summary()["documents_by_source"]
    assert kinds.get("play") == 1 and kinds.get("curriculum", 0) >= 5
    # play windows come after curriculum windows somewhere: the play (first in the document
    # list) is not one block at the start
    is_play = (held.doc_ids == 0).astype(int)
    assert np.any(np.diff(is_play) == 1)
    again = mixed_heldout(docs, sources, CharTokenizer(), 4096, 64, seed=0)
    other = mixed_heldout(docs, sources, CharTokenizer(), 4096, 64, seed=1)
    assert np.array_equal(again.doc_ids, held.doc_ids)
    assert not np.array_equal(other.windows.numpy(), held.windows.numpy())


def test_mixed_heldout_window_owner_is_the_majority_document():
    docs = ["a" * 100, "b" * 100]
    held = mixed_heldout(docs, ["x", "y"], CharTokenizer(), 200, 50, seed=0)
    ids = held.windows.numpy()
    for row, d in zip(ids, held.doc_ids, strict=True):
        letter = 1 + ord("ab"[d]) % 255
        assert (row == letter).sum() > len(row) / 2


def test_mixed_heldout_rejects_too_short_text_and_mismatched_labels():
    with pytest.raises(ValueError, match="tokens; 10000 were asked"):
        mixed_heldout(["short text"], ["x"], CharTokenizer(), 10_000, 64, seed=0)
    with pytest.raises(ValueError, match="source labels"):
        mixed_heldout(["a", "b"], ["x"], CharTokenizer(), 64, 32, seed=0)


# ----------------------------------------------------------------------------- bootstrap
def test_document_sums_aggregate_windows_by_document():
    s, c = document_sums(np.array([1.0, 2.0, 3.0, 4.0]), np.full(4, 10.0), np.array([5, 2, 5, 2]))
    assert np.allclose(s, [60.0, 40.0]) and np.allclose(c, [20.0, 20.0])


def test_document_bootstrap_is_wider_than_window_bootstrap_under_clustering():
    """Windows of one document share a document effect: resampling windows as if they were
    independent understates the CI; resampling documents does not."""
    rng = np.random.default_rng(0)
    n_docs, per_doc = 12, 10
    effect = np.repeat(rng.normal(0, 0.5, n_docs), per_doc)
    nll = 3.0 + effect + rng.normal(0, 0.02, n_docs * per_doc)
    counts = np.full(nll.size, 63.0)
    docs = np.repeat(np.arange(n_docs), per_doc)
    _, lo_d, hi_d = document_ppl_ci(nll, counts, docs, 1000, 0)
    _, lo_w, hi_w = document_ppl_ci(nll, counts, np.arange(nll.size), 1000, 0)
    assert hi_d - lo_d > 2 * (hi_w - lo_w)
    # a paired delta with a per-document shift: the document CI must bracket the truth
    ablated = nll + np.log1p(0.2) + np.repeat(rng.normal(0, 0.05, n_docs), per_doc)
    lo, hi = document_delta_ci(ablated, nll, counts, docs, 1000, 0)
    assert lo < 100 * (np.exp(np.mean(ablated - nll)) - 1) < hi


def _sweep(delta: list[float], n_docs: int = 15, per_doc: int = 4, seed: int = 0) -> pd.DataFrame:
    """A skip sweep (rows by layer) whose layer l raises every window's NLL by
    log1p(delta[l] / 100), with per-document noise; base_nll_per_seq as in run_anatomy."""
    rng = np.random.default_rng(seed)
    n = n_docs * per_doc
    base = 3.0 + np.repeat(rng.normal(0, 0.2, n_docs), per_doc) + rng.normal(0, 0.01, n)
    rows = []
    for l, d in enumerate(delta):
        noise = np.repeat(rng.normal(0, 0.003, n_docs), per_doc)
        per = base + np.log1p(d / 100) + noise
        rows.append({"layer": l, "surgery": "skip", "nll_per_seq": per, "base_nll_per_seq": base,
                     "delta_pct": 100 * np.expm1(np.mean(per - base))})  # fmt: skip
    df = pd.DataFrame(rows)
    return regroup_sweep(df, np.repeat(np.arange(n_docs), per_doc), 64, 300, 0)


def test_regroup_sweep_gives_document_cis_that_bracket_each_layers_delta():
    sweep = _sweep([50.0, -3.0, 5.0, 0.5])
    assert (sweep["n_documents"] == 15).all()
    assert (sweep["delta_ci_low"] < sweep["delta_pct"]).all()
    assert (sweep["delta_ci_high"] > sweep["delta_pct"]).all()
    assert sweep.loc[1, "delta_ci_high"] < 0 < sweep.loc[2, "delta_ci_low"]


def test_peak_ci_is_the_bootstrap_of_the_maximum_over_layers():
    """Two layers tie at the top: the CI of the maximum is re-selected in each resample, so
    its lower end is not below the better of the two layers' own lower ends."""
    docs = np.repeat(np.arange(15), 4)
    sweep = _sweep([100.0, 100.0, 5.0, 1.0])
    ci = importance_bootstrap(sweep, 400, 0, [0], docs)["max_delta"]
    assert ci[0] <= sweep["delta_pct"].max() <= ci[1]
    assert ci[0] >= sweep[["delta_ci_low"]].max().item() - 1.0


# ----------------------------------------------------------------------------- paper layers
def _claims(delta: list[float], mapping: str) -> pd.DataFrame:
    cfg = AnatomyConfig(model="x", n_bootstrap=0, depth_mapping=mapping)
    docs = np.repeat(np.arange(15), 4)
    rows = importance_claims(cfg, _sweep(delta), len(delta), docs)
    return pd.DataFrame(rows).set_index("claim_id")


def test_paper_layer_claims_are_not_testable_off_30_layers_without_a_mapping():
    delta = [5.0] * 12
    delta[3], delta[6] = 300.0, -4.0
    none = _claims(delta, "none")
    assert none.loc["P3-core", "verdict"] == "not testable"
    assert none.loc["P3-anti-at", "verdict"] == "not testable"
    assert none.loc["P3-anti", "verdict"] != "not testable"  # existence needs no position
    span = _claims(delta, "span")
    assert span.loc["P3-core", "verdict"] != "not testable"
    assert mapped_layers([8, 9, 10, 11], 12, "none") is None
    assert mapped_layers([8, 9, 10, 11], 30, "none") == [8, 9, 10, 11]


@pytest.mark.parametrize("mapping", ["none", "span"])
def test_paper_layers_are_tested_as_stated_on_30_layers(mapping):
    delta = [5.0] * 30
    for l in (8, 9, 10, 11):
        delta[l] = 1000.0 + l
    delta[14], delta[17] = -6.0, -8.0
    hit = _claims(delta, mapping)
    assert hit.loc["P3-core", "verdict"] == "reproduced"
    assert hit.loc["P3-anti-at", "verdict"] == "reproduced"
    moved = list(delta)
    moved[14], moved[17], moved[3], moved[25] = 5.0, 5.0, -6.0, -8.0
    miss = _claims(moved, mapping)
    assert miss.loc["P3-anti", "verdict"] == "reproduced"  # anti-layers exist ...
    assert miss.loc["P3-anti-at", "verdict"] == "not reproduced"  # ... elsewhere
    one = list(delta)
    one[17] = 5.0
    assert _claims(one, mapping).loc["P3-anti-at", "verdict"] == "partially"


# ----------------------------------------------------------------------------- budgets
def test_budgets_fill_only_unset_fields_by_model_kind():
    cfg = AnatomyConfig(n_tokens=4096)
    org = cfg.for_model("organism-llama@final")
    real = cfg.for_model("smollm2-135m-instruct")
    assert org.n_tokens == real.n_tokens == 4096
    assert org.recovery_budget == BUDGETS["organism"]["recovery_budget"]
    assert real.recovery_budget == BUDGETS["pretrained"]["recovery_budget"]
    assert real.recovery_layers == BUDGETS["pretrained"]["recovery_layers"]
    assert real.model == "smollm2-135m-instruct"
    assert recovery_layer_list(real, 30) == [0, 6, 12, 17, 23, 29]
    assert recovery_layer_list(real, 30, "robustness_layers") == [0, 6, 12, 17, 23, 29]
    # plus the mapped core L8-11, anti-layers L14/L17 and the joint replacement's 0..k_max-1
    assert robustness_layer_list(real, 30) == [0, 1, 2, 3, 6, 8, 9, 10, 11, 12, 14, 17, 23, 29]
    assert recovery_layer_list(org, 12) == list(range(12))
    with pytest.raises(ValueError, match="recovery_layers"):
        AnatomyConfig(recovery_layers=1)
    with pytest.raises(ValueError, match="depth_mapping"):
        AnatomyConfig(depth_mapping="relative")
    assert expand_anatomy_models("some/model") == (["some/model"], [])


def test_run_on_a_tiny_llama_uses_mixed_text_and_document_units(tiny_model_dirs):
    cfg = AnatomyConfig(
        model=str(tiny_model_dirs["llama"]),
        corpus=MICRO,
        quick=True,
        surgeries=["skip", "scale"],
        recovery_layers=[0, 3],
        depth_mapping="none",
        n_bootstrap=50,
    )
    result = run_anatomy(cfg)
    ppl = result.tables["perplexity"].iloc[0]
    assert ppl["n_documents"] >= 3 and ppl["ci_low"] < ppl["ppl"] < ppl["ci_high"]
    assert sorted(result.tables["recovery"]["layer"]) == [0, 3]
    claims = result.claims.set_index("claim_id")
    assert claims.loc["P3-core", "verdict"] == "not testable"  # 4 layers, no mapping
    assert claims.loc["P3-anti-at", "verdict"] == "not testable"
    assert any("documents" in n for n in result.notes)
    assert (claims["quant_shift"] == "").all()  # fp32 folder: no quantisation control


def test_delta_figure_title_follows_the_gap_ci_not_a_fixed_threshold():
    """A small gap whose CI excludes 0 departs from the null; a large one whose CI spans 0 and
    an undefined CI do not."""
    import pandas as pd

    from lamina.chapters.layer_anatomy.figures import delta_figure

    delta = pd.DataFrame(
        {"matrix": ["q", "q"], "layer": [0, 1], "corr": [-0.49, -0.48], "corr_null": [-0.5, -0.5]}
    )

    def title(ci):
        return delta_figure(delta, "m", ci).chart.layer[0].title

    assert "depart from" in title((0.01, 0.02))
    assert "depart from" in title((-0.02, -0.01))
    assert "sit on" in title((-0.2, 0.3))
    assert "sit on" in title((float("nan"), float("nan")))


# ----------------------------------------------------------------------------- gemma-3-270m
def test_a_small_budget_spans_many_documents_when_plays_are_long():
    """Three long plays and many short curriculum documents: 8 windows take half their
    tokens from each source and span at least 5 documents (a uniform shuffle of passages
    draws almost only play passages, and so only the 3 plays)."""
    from lamina.chapters.layer_anatomy.documents import round_robin
    from lamina.chapters.runtime import tagged_passages

    plays = ["".join(f"ACT {p}. line {i} of play {p}, spoken aloud.\n" for i in range(2000))
             for p in range(3)]  # fmt: skip
    short = [f"Doc {i}: the river {i} flows.\n" for i in range(300)]
    docs, sources = [*plays, *short], ["play"] * 3 + ["curriculum"] * 300
    held = mixed_heldout(docs, sources, CharTokenizer(), 8 * 64, 64, seed=0)
    info = held.summary()
    assert info["n_documents"] >= 5 and set(info["documents_by_source"]) == {"play", "curriculum"}
    assert min(info["windows_by_source"].values()) >= 2  # neither source is a token
    queues = round_robin(tagged_passages(docs, 0, 256), sources)
    assert [d for d, _ in queues["play"][:3]] != [] and len({d for d, _ in queues["play"][:3]}) == 3
    assert len({d for d, _ in queues["curriculum"][:50]}) == 50  # documents in turn


def test_gemma_has_its_own_budget_row_and_quick_caps_apply_after_filling():
    gemma = AnatomyConfig().for_model("gemma-3-270m")
    row = BUDGETS["gemma-3-270m"]
    assert gemma.n_tokens == row["n_tokens"] < BUDGETS["pretrained"]["n_tokens"]
    assert gemma.importance_surgeries == ["skip"] and gemma.recovery_layers == []
    assert recovery_layer_list(gemma, 18, "robustness_layers") == [0, 17]
    assert robustness_layer_list(gemma, 18) == [0, 1, 4, 5, 6, 7, 8, 10, 17]
    smol = AnatomyConfig().for_model("smollm2-135m-instruct")
    assert smol.importance_surgeries == ["skip"] and smol.recovery_layers == 6
    organism = AnatomyConfig().for_model("organism-llama")
    assert organism.importance_surgeries == ["skip", "interpolate"]
    hub = AnatomyConfig().for_model("google/gemma-3-270m")  # not the offline alias
    assert hub.n_tokens == BUDGETS["pretrained"]["n_tokens"]
    assert AnatomyConfig(n_tokens=4096).for_model("gemma-3-270m").n_tokens == 4096
    quick = AnatomyConfig(quick=True)
    assert quick.n_tokens is None  # filled per model, then capped
    assert quick.for_model("gemma-3-270m").n_tokens == row["n_tokens"]
    assert quick.for_model("smollm2-135m-instruct").robustness_tokens == 256
    assert quick.for_model("organism-llama").n_tokens == AnatomyConfig.QUICK["n_tokens"]
    with pytest.raises(ValueError, match="importance_surgeries must include 'skip'"):
        AnatomyConfig(importance_surgeries=["interpolate"])
    with pytest.raises(ValueError, match="robustness_layers must not be empty"):
        AnatomyConfig(robustness_layers=[])


def test_default_models_are_smollm2_gemma_then_the_organism(monkeypatch):
    import lamina.chapters.layer_anatomy.run as run_mod
    import lamina.sources.gguf_models as gguf_models

    monkeypatch.setattr(gguf_models, "locate_offline", lambda name: name)
    monkeypatch.setattr(run_mod.organisms, "resolve", lambda name: name)
    models, notes = expand_anatomy_models("default")
    assert models == ["smollm2-135m-instruct", "gemma-3-270m", "organism-llama"] and not notes


def test_make_chapter_model_parameter_reaches_one_model_with_its_budget():
    """``make chapter CH=layer_anatomy MODEL=smollm2-135m-instruct`` runs
    ``python -m lamina.book execute layer_anatomy -p model smollm2-135m-instruct``: the
    parameter parses against the notebook's cell and selects that model alone."""
    from pathlib import Path

    from lamina.book.params import cli_parameters

    nb = Path(__file__).resolve().parents[1] / "notebooks"
    params = cli_parameters(["layer_anatomy"], [["model", "smollm2-135m-instruct"]], nb)
    assert params == {"layer_anatomy": {"model": "smollm2-135m-instruct"}}
    cfg = AnatomyConfig.from_params(params["layer_anatomy"])
    assert expand_anatomy_models(cfg.model) == (["smollm2-135m-instruct"], [])
    assert cfg.for_model(cfg.model).n_tokens == BUDGETS["pretrained"]["n_tokens"]
    quick = cli_parameters(["layer_anatomy"], [["model", "gemma-3-270m"], ["quick", "true"]], nb)
    assert AnatomyConfig.from_params(quick["layer_anatomy"]).quick is True


def test_run_on_a_tiny_gemma3_maps_paper_layers_by_depth_and_skips_recovery(tmp_path):
    """A 6-layer Gemma 3 with Gemma's budget shape: skip on all layers, interpolate on the
    robustness layers, no recovery (P3-recovery not testable), the paper's core L8-11 read
    as layers 1, 2 by depth span, and every claim row naming the model."""
    from tests.conftest import _byte_tokenizer, tiny_model

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
    assert result.tables["recovery"].empty
    claims = result.claims.set_index("claim_id")
    assert claims.loc["P3-recovery", "verdict"] == "not testable"
    assert claims.loc["P3-core", "verdict"] != "not testable"
    assert "1, 2" in claims.loc["P3-core", "convention"]
    assert (result.claims["model"] == str(folder)).all()
    assert any("core L8-11 -> layers 1, 2" in n and "L14 -> 2; L17 -> 3" in n
               for n in result.notes)  # fmt: skip


def test_a_quantised_gguf_gets_the_requantisation_control_on_its_weight_deltas(
    tmp_path, monkeypatch
):
    """A model from a quantised GGUF (a tiny Q8_0 file): P3-delta and P3-delta-structure are
    re-measured on its weights re-quantised and say whether they flip; every other claim reads
    "not run: cost" (a model from a folder, fp32, gets none: the tiny-llama test above)."""
    from lamina.chapters.layer_anatomy.run import QUANT_CONTROL_CLAIMS

    from .conftest import _byte_tokenizer, tiny_model
    from .gguf_writer import write_gguf

    monkeypatch.setenv("LAMINA_GGUF_CACHE", str(tmp_path / "gguf-cache"))
    gguf = write_gguf(tiny_model("llama", n_layers=4), _byte_tokenizer(),
                      tmp_path / "tiny-q8.gguf", qtype="Q8_0")
    cfg = AnatomyConfig(model=str(gguf), corpus=MICRO, quick=True, surgeries=["skip"],
                        recovery_layers=[], depth_mapping="none", n_bootstrap=50)
    result = run_anatomy(cfg)
    flips = result.tables["quantisation"]
    q4 = flips[flips["qtype"] == "Q4_0"].set_index("claim_id")
    assert sorted(q4.index) == sorted(QUANT_CONTROL_CLAIMS)
    assert (q4["shift"].abs() > 0).all()  # the weights moved
    claims = result.claims.set_index("claim_id")
    for cid in QUANT_CONTROL_CLAIMS:
        assert claims.loc[cid, "quant_shift"].startswith(("Q4_0: same (", "Q4_0: flips to "))
    rest = claims.drop(index=list(QUANT_CONTROL_CLAIMS))
    assert rest["quant_shift"].str.startswith("Q4_0: not run: cost").all()
