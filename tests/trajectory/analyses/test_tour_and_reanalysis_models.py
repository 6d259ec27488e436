"""The trajectory tour's model set and SIM table, and the released prompts run through other
models beside the released states (lamina.trajectory.analyses.tour and .reanalysis_models,
lamina.chapters.trajectory_tour),
on tiny random models."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lamina.chapters.models import chapter_models
from lamina.core.registry import by_name
from lamina.sources.gguf_models import OFFLINE_GGUF
from lamina.trajectory import convergence_index_per_prompt, mean_curvature
from lamina.trajectory.analyses.reanalysis_models import (
    PAPER_TEXT_RANGE,
    ROLE_PEER,
    ROLE_REAL,
    convergence_profile,
    curvature_range_summary,
    extract_released_prompts,
    headline_table,
    real_model_table,
    real_models,
)
from lamina.trajectory.analyses.tour import tour_similarity, tour_summary
from lamina.trajectory.model_states import CONVENTIONS, ModelStates, PooledStates


@pytest.fixture
def data_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LAMINA_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("LAMINA_RESULTS", str(tmp_path / "results"))
    return tmp_path


# ----------------------------------------------------------------------------- tour
def test_tour_default_leads_with_the_pretrained_causal_lms():
    default = by_name("trajectory_tour").default_models
    assert default[: len(OFFLINE_GGUF)] == tuple(OFFLINE_GGUF) and default[-1] == "minilm"
    models, notes = chapter_models("trajectory_tour", "default")
    assert models[-1] == "minilm"
    # every default model is run or skipped with a note naming it
    assert sorted(models + [n.split(" ")[0] for n in notes]) == sorted(default)


def test_tour_similarity_has_one_panel_per_model(tiny_model_dirs, data_env):
    models = [str(tiny_model_dirs["gpt2"]), str(tiny_model_dirs["llama"])]
    prompts = ["The cat sat.", "A truck rolled down the hill.", "Rome is in Italy."]
    frame = tour_similarity(models, prompts, "mean")
    assert list(frame["model"].unique()) == models
    assert len(frame) == 2 * 3 * 4  # models x prompts x transitions (4 blocks)
    assert frame["SIM"].between(-1, 1).all() and frame["depth"].between(0, 1).all()
    summary = tour_summary(frame)
    assert summary["model"].tolist() == models
    mean = frame[frame["model"] == models[1]].groupby("transition")["SIM"].mean()
    assert summary.loc[1, "min_mean_SIM"] == pytest.approx(mean.min())
    assert summary.loc[1, "lowest_transition"] == mean.idxmin()
    with pytest.raises(ValueError, match="pooling"):
        tour_similarity(models, prompts, "max")


# ----------------------------------------------------------------------------- reanalysis
def test_real_models_parameter():
    names, notes = real_models("default")
    assert set(names) <= set(OFFLINE_GGUF) and len(names) + len(notes) == len(OFFLINE_GGUF)
    assert real_models([]) == ([], []) and real_models(None) == ([], [])
    assert real_models("x") == (["x"], [])
    with pytest.raises(TypeError, match="models must be"):
        real_models(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reference"):
        real_models(["peer-gpt2"])


def _distinct_pairs_profile(x: np.ndarray, cats: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Brute force: CI_i over resampled rows, pairs of distinct prompts only, row-averaged."""
    xn = x / np.linalg.norm(x, axis=-1, keepdims=True)
    out = []
    for a in idx:
        other = [b for b in idx if b != a]
        d = {b: np.linalg.norm(xn[a] - xn[b], axis=-1) for b in set(other)}
        within = [d[b] for b in other if cats[b] == cats[a]]
        between = [d[b] for b in other if cats[b] != cats[a]]
        if within and between:
            out.append(np.mean(between, 0) - np.mean(within, 0))
    return np.mean(out, 0)


def test_convergence_profile_equals_the_metric_and_ignores_repeats_within_a_resample():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(24, 5, 7))
    cats = np.repeat(np.array(["a", "b", "c"]), 8)
    profile = convergence_profile(x, cats)
    full = np.nanmean(convergence_index_per_prompt(x, cats), axis=0)
    np.testing.assert_allclose(profile(np.arange(24)), full, atol=1e-9)
    for _ in range(3):
        idx = rng.integers(0, 24, 24)
        np.testing.assert_allclose(profile(idx), _distinct_pairs_profile(x, cats, idx), atol=1e-7)
    # repeats inflate the library metric on x[idx]; the profile does not count them
    idx = np.repeat(np.arange(0, 24, 2), 2)
    naive = np.nanmean(convergence_index_per_prompt(x[idx], cats[idx]), axis=0)
    assert (naive > profile(idx) + 1e-3).all()


def _fake_peer() -> ModelStates:
    """Released-like states: 18 prompts in 3 categories (last token), 9 of them mean-pooled."""
    rng = np.random.default_rng(0)
    words = ["cat", "dog", "lion", "car", "bus", "train", "If A then B", "so C", "hence D"]
    texts = [f"{w} {k}" for k in range(2) for w in words]
    table = pd.DataFrame({
        "id": [f"p{i:02d}" for i in range(len(texts))], "prompt": texts,
        "category": (["animals"] * 3 + ["objects"] * 3 + ["reasoning"] * 3) * 2,
    })
    x = rng.normal(size=(len(texts), 5, 8)).astype(np.float32)
    n = np.full(len(texts), 2)
    last = PooledStates(x[:, :-1], x[:, -1], False, table, n)
    mean = PooledStates(x[:9, :-1] + 1, x[:9, -1], False, table.iloc[:9].reset_index(drop=True), n[:9])
    return ModelStates("peer-gpt2", {"last": last, "mean": mean}, None)


def test_real_model_values_sit_beside_the_released_states(tiny_model_dirs, data_env):
    peer = _fake_peer()
    tiny = extract_released_prompts(str(tiny_model_dirs["llama"]), peer.pools["last"].prompts)
    table = real_model_table(peer, [tiny], n_bootstrap=50, seed=0)
    assert list(table["model"].unique()) == ["peer-gpt2", tiny.name]
    assert set(table.loc[table["model"] == "peer-gpt2", "role"]) == {ROLE_PEER}
    assert set(table.loc[table["model"] == tiny.name, "role"]) == {ROLE_REAL}
    assert set(table["convention"]) == set(CONVENTIONS)
    # each convention uses the released prompts of its pooling, for every model
    n = table[(table["metric"] == "length")].pivot(index="convention", columns="model",
                                                     values="n_prompts")
    assert (n["peer-gpt2"] == n[tiny.name]).all()
    assert n.loc["paper text", tiny.name] == 9 and n.loc["released code", tiny.name] == 18
    # means (not the peak, whose bootstrap re-selects the layer) lie inside their CIs
    ok = table[table["metric"] != "peak convergence index"]
    assert ((ok["ci_low"] <= ok["estimate"] + 1e-9) & (ok["estimate"] <= ok["ci_high"] + 1e-9)).all()
    # the tiny model's value is its own: recompute it from its extracted states
    x, _ = tiny.pools["last"].states(CONVENTIONS["released code"])
    row = table[(table["model"] == tiny.name) & (table["convention"] == "released code")
                & (table["metric"] == "curvature (rad)") & (table["category"] == "all")]
    assert row["estimate"].iloc[0] == pytest.approx(float(np.mean(mean_curvature(x))), rel=1e-6)
    peer_row = table[(table["model"] == "peer-gpt2") & (table["convention"] == "released code")
                     & (table["metric"] == "curvature (rad)") & (table["category"] == "all")]
    assert peer_row["estimate"].iloc[0] != pytest.approx(row["estimate"].iloc[0])
    wide = headline_table(table)
    assert len(wide) == 2 * len(CONVENTIONS)
    assert wide.loc[0, "model"] == "peer-gpt2" and wide.loc[1, "model"] == tiny.name
    lines = curvature_range_summary(table)
    assert len(lines) == 2 and lines[1].startswith(tiny.name)
    assert f"{PAPER_TEXT_RANGE[0]}–{PAPER_TEXT_RANGE[1]}" in lines[0]


def test_released_prompt_ids_missing_from_a_model_are_an_error(tiny_model_dirs, data_env):
    peer = _fake_peer()
    tiny = extract_released_prompts(str(tiny_model_dirs["gpt2"]),
                                    peer.pools["last"].prompts.iloc[:12])
    with pytest.raises(ValueError, match="were not run"):
        real_model_table(peer, [tiny], n_bootstrap=20, seed=0)


def test_tour_sentences_name_each_model_and_its_lowest_transition():
    import pandas as pd

    from lamina.chapters.trajectory_tour import tour_sentences

    summary = pd.DataFrame([
        {"model": "m1", "n_blocks": 4, "lowest_transition": "2→3", "lowest_depth": 0.625,
         "min_mean_SIM": 0.151, "mean_SIM": 0.461},
        {"model": "m2", "n_blocks": 6, "lowest_transition": "0→1", "lowest_depth": 0.083,
         "min_mean_SIM": 0.5, "mean_SIM": 0.7},
    ])
    lines = tour_sentences(summary).splitlines()
    assert lines[0].startswith("- **m1** (4 blocks)") and "transition 2→3 (depth 0.62)" in lines[0]
    assert "0.500" in lines[1] and "0.700" in lines[1] and len(lines) == 2
