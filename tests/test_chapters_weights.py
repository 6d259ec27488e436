"""The weight-update-signature chapter (paper 2): its pipeline, its verdicts and its execution."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from lamina.chapters.weight_update_signature.config import SignatureConfig, check_pair
from lamina.chapters.weight_update_signature.deltas import signature_from_deltas
from lamina.chapters.weight_update_signature.gate import ALIGNMENT_CLAIMS, NOT_MEASURED
from lamina.chapters.weight_update_signature.units import Checkpoints, checkpoint_pairs
from lamina.chapters.weight_update_signature.verdicts import (
    CLAIMS,
    QK,
    WRITE,
    close_verdict,
    enriched_verdict,
    enrichments,
    summary,
)
from lamina.weights import (
    LinearMap,
    random_matrix_null,
    random_orthonormal,
    random_subspace_baseline,
    random_subspace_null,
)

from .conftest import lamina_env

VERDICTS = {"reproduced", "partially", "not reproduced", "not testable"}
D, K, N_LAYERS = 64, 8, 12


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Small linear algebra is fastest, and stable, on one thread when CPUs are shared."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def micro_data(micro_organisms, tmp_path_factory: pytest.TempPathFactory):
    """LAMINA_DATA at the micro organisms (built once per run), LAMINA_RESULTS in a tmp folder
    of this module; set for this process and hence for the papermill kernels it starts.
    -> that folder's parent, whose ``results/`` the chapter writes."""
    root = tmp_path_factory.mktemp("signature-results")
    with lamina_env(micro_organisms, root / "results"):
        yield root


def _planted(read_inside: bool, write_inside: bool, seed: int = 0):
    """Block maps of a fake 12-layer model with d = 64: Q/K deltas either inside the top-K
    eigenvectors of their input moment or isotropic; writes inside the prediction basis or
    isotropic."""
    gen = torch.Generator().manual_seed(seed)
    basis = random_orthonormal(D, D, gen)  # columns = eigenvectors, by decreasing eigenvalue
    moment = basis @ torch.diag(torch.linspace(10, 0.1, D, dtype=torch.float64)) @ basis.T
    pred = random_orthonormal(D, D, gen)
    maps, deltas, moments = [], {}, {}
    for layer in range(N_LAYERS):
        for role, kind in (
            ("q", "read"),
            ("k", "read"),
            ("attn_out", "write"),
            ("mlp_out", "write"),
        ):
            m = LinearMap(layer, role, kind, f"layers.{layer}.{role}")
            maps.append(m)
            noise = torch.randn(D, D, generator=gen, dtype=torch.float64)
            if kind == "read" and read_inside:
                noise = noise @ basis[:, :K] @ basis[:, :K].T
            if kind == "write" and write_inside:
                noise = pred[:, :K] @ pred[:, :K].T @ noise
            deltas[m.key] = noise
            if kind == "read":
                moments[m.key] = moment
    table = signature_from_deltas(deltas, maps, moments, pred, [1, K, 32], n_random=10, seed=seed)
    return table.assign(moment="raw", family="stage", pair="final→sft")


def test_update_inside_the_input_subspace_has_enrichment_d_over_k_and_is_reproduced():
    table = _planted(read_inside=True, write_inside=False)
    config = SignatureConfig(k=K, n_bootstrap=500)
    qk = enrichments(table, config, QK)
    assert np.allclose(qk, D / K)
    assert enriched_verdict(summary(qk, config)) == "reproduced"
    # isotropic writes: enrichment ~ 1, "close to random"
    writes = summary(enrichments(table, config, WRITE), config)
    assert 0.85 < writes["geo"] < 1.15
    assert close_verdict(writes, config.random_margin) == "reproduced"


def test_isotropic_reads_are_not_enriched_and_planted_writes_are_not_random():
    table = _planted(read_inside=False, write_inside=True, seed=1)
    config = SignatureConfig(k=K, n_bootstrap=500)
    assert enriched_verdict(summary(enrichments(table, config, QK), config)) != "reproduced"
    writes = summary(enrichments(table, config, WRITE), config)
    assert np.isclose(writes["geo"], D / K)
    assert close_verdict(writes, config.random_margin) == "not reproduced"


def test_empirical_nulls_are_centred_on_k_over_d_like_the_library_baseline():
    gen = torch.Generator().manual_seed(3)
    delta = torch.randn(24, D, generator=gen) @ torch.diag(torch.linspace(5, 0.01, D))
    null = random_subspace_null({"x": delta}, {"x": "input"}, [K, D], n=200, seed=0)
    mean_k = float(null.loc[null["k"] == K, "null_mean"].iloc[0])
    assert abs(mean_k - K / D) < 0.03
    assert float(null.loc[null["k"] == D, "null_mean"].iloc[0]) == pytest.approx(1.0)
    ref = random_subspace_baseline(delta, K, "input", n=200, seed=1)
    assert abs(mean_k - ref.mean) < 0.03
    # random matrices against a fixed basis: also k/d, on either side
    basis = random_orthonormal(D, 16, gen)
    for side, shape in (("input", (24, D)), ("output", (D, 24))):
        rmat = random_matrix_null({"x": shape}, {"x": (basis, side)}, [K], n=200, seed=0)
        assert abs(float(rmat["rmat_mean"].iloc[0]) - K / D) < 0.03


def test_checkpoints_of_different_organisms_give_a_clear_error():
    with pytest.raises(ValueError, match="different organisms"):
        check_pair("organism-llama-micro@final", "organism-gpt2-micro@sft")


def test_unknown_checkpoint_lists_the_existing_ones(micro_data):
    ck = Checkpoints("organism-llama-micro")
    with pytest.raises(ValueError, match="organism-llama-micro@final"):
        ck.spec("step-99999")


def test_pairs_cover_pretraining_phases_and_every_stage(micro_data):
    ck = Checkpoints("organism-llama-micro")
    pairs = checkpoint_pairs(ck, SignatureConfig(model="organism-llama-micro"))
    assert set(pairs["family"]) == {"pretraining", "early→late", "stage"}
    assert {"early", "late"} <= set(pairs["phase"])
    assert list(pairs.loc[pairs["family"] == "stage", "pair"]) == [
        "final→lm",
        "final→sft",
        "final→dpo",
    ]


def test_not_an_organism_is_refused_with_the_known_names():
    from lamina.chapters.weight_update_signature.config import expand_organisms

    with pytest.raises(ValueError, match="organism-llama"):
        expand_organisms(SignatureConfig(model="gpt2"))


@pytest.mark.slow
def test_pipeline_on_gpt2_micro_splits_fused_qkv_and_decides_every_claim(micro_data):
    from lamina.chapters.weight_update_signature.run import run_weight_signature

    config = SignatureConfig(model="organism-gpt2-micro", targets=("sft",), quick=True)
    result = run_weight_signature(config)
    deltas = result.tables["deltas"]
    assert {"q", "k", "v", "attn_out", "mlp_up", "mlp_out"} <= set(deltas["role"])
    stage = deltas[
        (deltas["family"] == "stage") & (deltas["k"] == config.k) & (deltas["moment"] == "raw")
    ]
    main = stage[stage["prediction"] == "W_U"]
    assert main["null_mean"].between(0, 1).all()  # the empirical null came with every matrix
    assert main["weight_rsf"].between(0, 1).all()  # and the "RSF of W itself" baseline
    folded = stage[stage["prediction"] == "W_U diag(gamma)"]
    assert len(folded) == len(main)  # the final-norm-gain sensitivity copy
    sens = result.tables["sensitivity"]
    assert {"W_U", "W_U diag(gamma)"} == set(sens["prediction"])
    grads = result.tables["gradients"]
    assert (grads["basis_tokens"] == "held-out").all()
    assert (grads["cancellation_null"] < grads["cancellation"].max()).all()
    claims = result.claims
    assert {f"P2.{c}" for c in CLAIMS} == set(claims["claim_id"])
    assert set(claims["verdict"]) <= VERDICTS
    edits = result.tables["edits"]
    from lamina.chapters.weight_update_signature.units import Checkpoints

    gate = Checkpoints("organism-gpt2-micro").gates()["sft"]  # recorded by the micro build
    assert any("@sft alignment gate" in n for n in result.notes)
    unemb = edits[edits["direction"] == "unembedding"]["delta_logp"].mean()
    rand = edits[edits["direction"] == "random"]["delta_logp"].abs().mean()
    if gate.passed:  # the random-direction null is spent only where the gate passed
        assert unemb > rand  # the unembedding write raises its own token more than random ones
    else:
        assert edits[edits["direction"] == "random"].empty
        edit = claims[claims["claim_id"] == "P2.write_edit_after_alignment"]
        assert edit["note"].str.startswith("not testable: alignment did not take").all()


def _written(model_dir: Path, suffix: str = ".json") -> Path:
    """The one ``weight_update_signature<suffix>`` under a model's results folder: a run whose
    parameters differ from the book's (quick mode) writes into ``<model>/<namespace>/``."""
    found = sorted(model_dir.rglob(f"weight_update_signature{suffix}"))
    assert len(found) == 1, f"expected one weight_update_signature{suffix}: {found}"
    return found[0]


@pytest.mark.slow
def test_chapter_executes_in_quick_mode_and_writes_results(micro_data, tmp_path):
    from lamina.book import execute_chapter

    out = execute_chapter(
        "weight_update_signature",
        tmp_path,
        {"model": "organism-llama-micro", "quick": True, "k_sweep": [1, 4, 8, 16]},
        progress=False,
    )
    assert out.is_file()
    record = json.loads(_written(Path(micro_data) / "results" / "organism-llama-micro").read_text())
    assert record["config"]["quick"] is True and record["provenance"]["lamina_version"]
    ids = {row["claim_id"] for row in record["summary"]["claims"]}
    assert ids == {f"P2.{c}" for c in CLAIMS}
    claims = pd.read_parquet(
        _written(Path(micro_data) / "results" / "organism-llama-micro", ".claims.parquet")
    )
    assert set(claims["verdict"]) <= VERDICTS
    notebook = out.read_text()
    assert "image/svg+xml" in notebook and '"ename"' not in notebook


def test_unbuilt_organism_stops_the_run_with_the_build_hint(tmp_path, monkeypatch):
    from lamina.chapters.weight_update_signature.run import run_weight_signature

    monkeypatch.setenv("LAMINA_DATA", str(tmp_path))
    with pytest.raises(RuntimeError, match="python -m lamina.sources.organisms build"):
        run_weight_signature(SignatureConfig(model="organism-llama"))


# ----------------------------------------------------------------------------- real pairs
HISTORY_CLAIMS = {
    "P2.late_pretraining_signature",
    "P2.every_objective_signature",
    "P2.stage_not_objective",
    "P2.optimizer_attenuates",
    "P2.write_grad_early_only",
    "P2.write_weights_acquire_early",
}


@pytest.fixture(scope="module")
def pair_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny random Llama and GPT-2 causal LMs saved as Hugging Face folders, each as a base and
    a target of the same config with perturbed weights (a stand-in for SmolLM2 -> -Instruct)."""
    from tests.conftest import _byte_tokenizer, tiny_model

    root = tmp_path_factory.mktemp("pairs")
    tok = _byte_tokenizer()
    gen = torch.Generator().manual_seed(1)
    dirs = {}
    for arch in ("llama", "gpt2"):
        model = tiny_model(arch, n_layers=2)
        for end in ("base", "target"):
            folder = root / f"{arch}-{end}"
            model.save_pretrained(folder)
            tok.save_pretrained(folder)
            dirs[f"{arch}-{end}"] = folder
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(0.05 * p.std() * torch.randn(p.shape, generator=gen))
    return dirs


def _check_pair_result(result, config: SignatureConfig) -> pd.DataFrame:
    base, target = Path(config.base).name, Path(str(config.target)).name
    assert result.models == [f"{base}→{target}"]
    deltas = result.tables["deltas"]
    stage = deltas[(deltas["k"] == config.k) & (deltas["moment"] == "raw")]
    stage = stage[stage["prediction"] == "W_U"]  # the gain-folded copy carries no nulls
    assert len(stage) and stage["enrichment"].gt(0).all()
    assert stage["null_mean"].between(0, 1).all() and stage["rmat_mean"].between(0, 1).all()
    assert set(deltas["moment"]) == {"raw", "centred"}  # the sensitivity copy
    assert set(deltas["k"]) == set(config.k_sweep)
    assert set(result.tables["gradients"]["objective"]) == {"lm", "sft", "dpo"}
    assert set(result.tables["edits"]["stage"]) == {base, target}
    assert result.tables["adam"].empty and result.tables["write_gradients"].empty
    claims = result.claims
    assert {f"P2.{c}" for c in CLAIMS} == set(claims["claim_id"])
    assert set(claims["verdict"]) <= VERDICTS
    history = claims[claims["claim_id"].isin(HISTORY_CLAIMS)]
    assert len(history) == len(HISTORY_CLAIMS)  # one row each, with the reason
    assert (history["verdict"] == "not testable").all() and history["note"].str.len().gt(20).all()
    runnable = claims[
        claims["claim_id"].str.startswith("P2.read_grad")
        | claims["claim_id"].isin(["P2.single_group_effective"])
    ]
    assert (runnable["verdict"] != "not testable").all()
    # no alignment gate was measured: the rows that rest on the aligned checkpoint say so
    gated = claims[claims["claim_id"].isin([f"P2.{c}" for c in ALIGNMENT_CLAIMS])]
    assert len(gated) == 3 and (gated["verdict"] == "not testable").all()
    assert gated["note"].str.startswith(NOT_MEASURED).all()
    return deltas


@pytest.mark.slow
def test_real_llama_pair_runs_by_parameters_and_history_claims_are_not_testable(
    pair_dirs, tmp_path
):
    from lamina.chapters.weight_update_signature.run import run_weight_signature

    config = SignatureConfig(
        base=str(pair_dirs["llama-base"]),
        target=str(pair_dirs["llama-target"]),
        quick=True,
        k=4,
        k_sweep=(1, 4, 8),
    )
    result = run_weight_signature(config)
    deltas = _check_pair_result(result, config)
    assert {"q", "k", "v", "mlp_gate", "mlp_up", "attn_out", "mlp_out"} == set(deltas["role"])
    assert result.tables["sensitivity"]["stage"].eq("llama-target").all()
    (path,) = result.write(tmp_path)
    record = json.loads(path.read_text())
    assert record["config"]["target"] == str(pair_dirs["llama-target"])
    assert "held-out" in " ".join(record["summary"]["notes"]) or "curriculum" in " ".join(
        record["summary"]["notes"]
    )


@pytest.mark.slow
def test_real_gpt2_pair_splits_fused_qkv_into_read_maps(pair_dirs):
    from lamina.chapters.weight_update_signature.run import run_weight_signature

    config = SignatureConfig(
        base=str(pair_dirs["gpt2-base"]),
        target=str(pair_dirs["gpt2-target"]),
        quick=True,
        k=4,
        k_sweep=(1, 4),
    )
    deltas = _check_pair_result(run_weight_signature(config), config)
    assert {"q", "k", "v", "mlp_up", "attn_out", "mlp_out"} == set(deltas["role"])


def test_pair_of_different_architectures_gives_a_clear_error(pair_dirs):
    from lamina.chapters.weight_update_signature.run import run_weight_signature

    config = SignatureConfig(
        base=str(pair_dirs["llama-base"]), target=str(pair_dirs["gpt2-target"]), quick=True
    )
    with pytest.raises(ValueError, match="different architectures"):
        run_weight_signature(config)


def test_pair_parameters_take_model_as_base_and_keep_revisions_apart_from_organism_specs():
    from lamina.chapters.weight_update_signature.units import ModelPair

    config = SignatureConfig(model="HuggingFaceTB/SmolLM2-135M", target="x/SmolLM2-Instruct")
    assert config.base == "HuggingFaceTB/SmolLM2-135M" and config.is_pair
    assert not SignatureConfig().is_pair
    with pytest.raises(ValueError, match="name its base model"):
        SignatureConfig(target="HuggingFaceTB/SmolLM2-135M-Instruct")
    # "@" stays an organism spec; revisions are separate parameters and show in the labels
    pair = ModelPair("EleutherAI/pythia-70m", "EleutherAI/pythia-70m", "step1000", "step2000")
    assert pair.name == "EleutherAI/pythia-70m (step1000)→EleutherAI/pythia-70m (step2000)"
    assert ModelPair("organism-llama@final", "organism-llama@sft").specs == [
        "organism-llama@final",
        "organism-llama@sft",
    ]
    with pytest.raises(ValueError, match="same checkpoint"):
        ModelPair("gpt2", "gpt2")


@pytest.mark.slow
def test_chapter_executes_on_a_real_pair_with_model_as_base(pair_dirs, tmp_path, monkeypatch):
    """The chapter's parameters alone switch it to a pair (``make chapter MODEL=<base>
    PARAMS="-p target <target>"``); the charts that need a history give way to a note."""
    from lamina.book import execute_chapter

    monkeypatch.setenv("LAMINA_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("LAMINA_NUM_THREADS", "1")
    params = {
        "model": str(pair_dirs["llama-base"]),
        "target": str(pair_dirs["llama-target"]),
        "quick": True,
        "k": 4,
        "k_sweep": [1, 4],
    }
    notebook = execute_chapter("weight_update_signature", tmp_path, params, progress=False)
    text = notebook.read_text()
    assert '"ename"' not in text and "image/svg+xml" in text
    assert "Not testable on a real pair" in text
    record = json.loads(_written(tmp_path / "results" / "llama-base_llama-target").read_text())
    verdicts = {r["claim_id"]: r["verdict"] for r in record["summary"]["claims"]}
    assert verdicts["P2.optimizer_attenuates"] == "not testable"
    assert verdicts["P2.align_write_random"] == "not testable"  # no alignment gate measured
    assert verdicts["P2.read_grad_inherits"] != "not testable"
