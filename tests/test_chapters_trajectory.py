"""The trajectory-geometry experiments (paper 1) and their chapters."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lamina.chapters.bifurcation import bifurcation_stats
from lamina.chapters.convergence import _effect_ok as convergence_ok
from lamina.chapters.convergence import convergence_stats
from lamina.chapters.curvature import _effect_ok as curvature_ok
from lamina.chapters.curvature import curvature_stats
from lamina.chapters.results import claim_record, range_verdict
from lamina.chapters.skeleton import vanish_verdict
from lamina.chapters.states import PooledStates, load_model_states
from lamina.chapters.three_phase import phase_stats
from lamina.chapters.trajectory import Convention, TrajectoryConfig, expand_models


# ----------------------------------------------------------------------------- synthetic states
def _clustered(n_per: int, n_cat: int, layers: int, d: int, onset: int, seed: int = 0):
    """Categories that share a direction only from layer ``onset`` on (a planted convergence)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_cat, d)) * 3
    x = rng.normal(size=(n_per * n_cat, layers, d))
    labels = np.repeat(np.arange(n_cat), n_per)
    x[:, onset:] += centres[labels][:, None]
    return x, labels


def test_convergence_verdict_is_reproduced_when_categories_converge_late():
    x, labels = _clustered(8, 4, 9, 32, onset=5)
    s = convergence_stats(x, labels, list(range(9)), 200, 0)
    assert s["peak_fraction"] >= 0.5 and s["peak"] >= 0.41 and s["p"] < 0.001
    assert (
        claim_record("c", "", "", "m", s["peak"], p=s["p"], effect_ok=convergence_ok(s))["verdict"]
        == "reproduced"
    )


def test_convergence_verdict_is_not_reproduced_without_categories():
    rng = np.random.default_rng(1)
    x, labels = rng.normal(size=(32, 9, 32)), np.repeat(np.arange(4), 8)
    s = convergence_stats(x, labels, list(range(9)), 200, 0)
    verdict = claim_record("c", "", "", "m", s["peak"], p=s["p"], effect_ok=convergence_ok(s))
    assert abs(s["peak"]) < 0.1 and verdict["verdict"] != "reproduced"


def test_convergence_labels_of_the_wrong_length_are_a_clear_error():
    x, labels = _clustered(4, 3, 5, 8, onset=2)
    with pytest.raises(ValueError, match="labels has length 11"):
        convergence_stats(x, labels[:-1], list(range(5)), 50, 0)


def _zigzag(n: int, layers: int, d: int, angle_noise: float, seed: int) -> np.ndarray:
    """Random walks whose steps are independent (sharp turns) or nearly parallel (straight)."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n, 1, d))
    steps = base + angle_noise * rng.normal(size=(n, layers - 1, d))
    return np.concatenate([np.zeros((n, 1, d)), np.cumsum(steps, axis=1)], axis=1)


def test_curvature_difference_is_found_when_reasoning_paths_turn_and_lexical_are_straight():
    x = np.concatenate([_zigzag(12, 10, 16, 10.0, 0), _zigzag(12, 10, 16, 0.05, 1)])
    fam = np.array(["reasoning"] * 12 + ["lexical"] * 12)
    s = curvature_stats(x, fam, 200, 0)
    assert s["difference"] > 0.4 and s["p"] < 0.001 and curvature_ok(s)
    flipped = curvature_stats(x, fam[::-1].copy(), 200, 0)
    assert flipped["difference"] < 0 and not curvature_ok(flipped)


def test_curvature_needs_both_families():
    with pytest.raises(ValueError, match="reasoning and lexical"):
        curvature_stats(_zigzag(4, 5, 8, 1.0, 0), np.array(["reasoning"] * 4), 50, 0)


def test_bifurcation_ratio_separates_diverging_homographs_from_steady_controls():
    rng = np.random.default_rng(0)
    n, layers, d = 10, 8, 16
    base = np.repeat(rng.normal(size=(n, 1, d)) * 5, layers, axis=1)
    push = rng.normal(size=(n, 1, d))
    grow = np.linspace(0.2, 3.0, layers)[None, :, None]
    s = bifurcation_stats(
        base + grow * push, base - grow * push, base + 0.2 * push, base - 0.2 * push, 200, 0
    )
    assert s["ratio"] > 5 and abs(s["control_ratio"] - 1) < 1e-6 and s["p"] < 0.001
    flat = bifurcation_stats(
        base + 0.2 * push, base - 0.2 * push, base + 0.2 * push, base - 0.2 * push, 200, 0
    )
    assert abs(flat["ratio"] - 1) < 1e-6 and flat["p"] > 0.05


def test_phase_detection_finds_a_planted_three_phase_profile_and_no_phases_in_a_flat_one():
    rng = np.random.default_rng(0)
    levels = np.r_[np.full(4, 0.45), np.full(8, 0.8), np.full(4, 0.65)]
    s = phase_stats(levels + 0.01 * rng.normal(size=(30, 16)), 100, 0)
    assert s["k_bic"] == 3 and s["ordered"] and s["p"] < 0.001
    flat = phase_stats(0.8 + 0.01 * rng.normal(size=(30, 16)), 100, 0)
    assert flat["k_bic"] == 1


def test_vanish_and_range_verdicts():
    assert vanish_verdict([0.1, -0.2]) == "reproduced"
    assert vanish_verdict([0.1, 0.9]) == "partially"
    assert vanish_verdict([1.2, 0.8]) == "not reproduced"
    assert vanish_verdict([float("nan")]) == "not testable"
    assert range_verdict(0.7, 0.9, 0.71, 0.83) == "reproduced"
    assert range_verdict(0.7, 0.9, 0.71, 0.83, 0.75) == "reproduced"
    # a wide CI that merely overlaps the range is not a reproduction
    assert range_verdict(0.08, 1.0, 0.17, 0.27, 0.083) == "partially"
    assert range_verdict(1.0, 1.2, 0.71, 0.83) == "not reproduced"


def test_a_significant_effect_of_the_wrong_sign_is_not_reproduced():
    row = claim_record("c", "", "", "m", -0.3, p=1e-6, effect_ok=False, direction_ok=False)
    assert row["verdict"] == "not reproduced"


def test_conventions_drop_layer0_and_append_or_replace_the_post_norm_final_state():
    raw = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3) + 1
    post = -np.ones((2, 3), np.float32)
    ours = PooledStates(raw, post, True, pd.DataFrame(), np.zeros(2, int))
    released = PooledStates(raw, post, False, pd.DataFrame(), np.zeros(2, int))
    x, layers = ours.states(Convention("last", layer0=False, final="post_norm"))
    assert layers == [1, 2, 3] and np.array_equal(x[:, -1], post)
    x, layers = released.states(Convention("last", final="post_norm"))
    assert layers == [0, 1, 2, 3, 4] and np.array_equal(x[:, 3], raw[:, 3])
    x, _ = ours.states(Convention("mean", normalize=True))
    assert np.allclose(np.linalg.norm(x, axis=-1), 1)


# ----------------------------------------------------------------------------- models and states
def test_post_norm_final_state_equals_hugging_face_last_hidden_state(tiny_model_dirs):
    import torch

    import lamina

    folder = str(tiny_model_dirs["gpt2"])
    prompts = pd.DataFrame({"prompt": ["The cat sat on the mat", "A river bank"]})
    ms = load_model_states(folder, prompts, TrajectoryConfig(model=folder), random_init=False)
    model, tok = lamina.load_model(folder)
    with torch.no_grad():
        out = model(
            **tok(prompts["prompt"].tolist()[:1], return_tensors="pt"), output_hidden_states=True
        )
    last = ms.pools["last"]
    np.testing.assert_allclose(last.post_final[0], out.hidden_states[-1][0, -1], atol=1e-5)
    np.testing.assert_allclose(last.raw[0, 0], out.hidden_states[0][0, -1], atol=1e-5)


def test_default_model_set_skips_unbuilt_organisms_and_absent_peer_data(tmp_path, monkeypatch):
    monkeypatch.setenv("LAMINA_DATA", str(tmp_path))
    models, notes = expand_models(TrajectoryConfig(peer_root=str(tmp_path / "nope")))
    assert models == ["minilm"]
    assert any("organism-gpt2" in n and "not built" in n for n in notes)
    assert any("peer-gpt2 skipped" in n for n in notes)
    assert expand_models(TrajectoryConfig(model="some/path")) == (["some/path"], [])


# ----------------------------------------------------------------------------- bad input
def test_bad_pooling_is_a_clear_error():
    with pytest.raises(ValueError, match="pooling must be"):
        TrajectoryConfig(pooling="max")


def test_missing_prompt_file_is_a_clear_error(tmp_path):
    from lamina.chapters.convergence import run_convergence

    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        run_convergence(TrajectoryConfig(model="x", prompts=str(tmp_path / "missing.jsonl")))


def test_malformed_prompt_file_names_file_line_and_field(tmp_path):
    from lamina.chapters.convergence import run_convergence
    from lamina.prompts import PromptFileError

    bad = tmp_path / "semantic.jsonl"
    bad.write_text('{"id": "a", "family": "semantic", "prompt": "A fox", "item": "fox"}\n')
    with pytest.raises(PromptFileError, match=r"line 1, field 'category'"):
        run_convergence(TrajectoryConfig(model="x", prompts=str(bad)))


def test_prompts_without_the_chapters_label_column_are_a_clear_error():
    from lamina.chapters.convergence import run_convergence

    with pytest.raises(ValueError, match=r"lack the column\(s\) \['category'\]"):
        run_convergence(TrajectoryConfig(model="x", prompts="reasoning"))


# ----------------------------------------------------------------------------- chapters
def _executed(tmp_path: Path, chapter: str, params: dict) -> tuple[dict, list[dict]]:
    from lamina.book import execute_chapter

    out = execute_chapter(chapter, tmp_path / "nb", params, progress=False)
    nb = json.loads(out.read_text())
    outputs = [o for c in nb["cells"] for o in c.get("outputs", [])]
    return nb, outputs


@pytest.mark.slow
@pytest.mark.parametrize(
    ("chapter", "arch"),
    [
        ("convergence", "gpt2"),
        ("curvature", "llama"),
        ("bifurcation", "gpt2"),
        ("three_phase", "llama"),
    ],
)
def test_chapter_executes_in_quick_mode_and_writes_results(
    chapter, arch, tiny_model_dirs, tmp_path, monkeypatch
):
    monkeypatch.setenv("LAMINA_DATA", str(tmp_path / "data"))  # caches out of the repo
    model = str(tiny_model_dirs[arch])
    params = {
        "model": model,
        "quick": True,
        "results_root": str(tmp_path / "results"),
        "peer_root": str(tmp_path / "no-peer"),
    }
    _, outputs = _executed(tmp_path, chapter, params)
    assert any("image/svg+xml" in o.get("data", {}) for o in outputs), "no SVG chart"
    records = list((tmp_path / "results").glob(f"*/{chapter}.json"))
    assert len(records) == 1
    record = json.loads(records[0].read_text())
    assert record["model"] == model and record["config"]["quick"] is True
    assert {"lamina_version", "lamina_commit", "date"} <= set(record["provenance"])
    claims = record["summary"]["claims"]
    assert claims and all(
        c["verdict"] in {"reproduced", "partially", "not reproduced", "not testable"}
        for c in claims
    )
    assert all(c["model"] == model for c in claims)
    assert list((tmp_path / "results").glob(f"*/{chapter}.sensitivity.parquet"))


@pytest.mark.slow
def test_reanalysis_chapter_says_so_when_the_released_data_are_absent(tmp_path):
    _, outputs = _executed(tmp_path, "reanalysis", {"peer_root": str(tmp_path / "absent")})
    text = json.dumps(outputs)
    assert "released states are absent" in text


@pytest.mark.slow
@pytest.mark.peer
def test_released_code_convention_comes_close_to_the_released_numbers(peer_root):
    from lamina.chapters.reanalysis import run_reanalysis

    result = run_reanalysis(TrajectoryConfig(peer_root=str(peer_root)))
    claims = result.claims.set_index("claim_id")
    sens = result.tables["sensitivity"].set_index("convention")
    assert (
        0.9
        < sens.loc["released code", "curvature_min"]
        < sens.loc["released code", "curvature_max"]
        < 1.35
    )
    assert claims.loc["reanalysis_released_curvature", "measured"] < 1e-3  # per prompt, exact
    assert claims.loc["reanalysis_released_ci", "measured"] < 0.05
    assert sens["peak_ci"].max() < 0.41  # the paper's 0.41-0.58 is out of reach
