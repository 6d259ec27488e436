"""Paper 1's chapters: conventions, states of a model, bad input, quick runs of the notebooks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lamina.chapters.results import ALL_SOURCES
from lamina.chapters.trajectory import TrajectoryConfig
from lamina.evidence.claims import PAPER_VERDICTS
from lamina.trajectory.claims import CLAIMS
from lamina.trajectory.model_states import Convention, PooledStates, load_model_states


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
    ms = load_model_states(folder, prompts, random_init=False)
    model, tok = lamina.load_model(folder)
    with torch.no_grad():
        out = model(
            **tok(prompts["prompt"].tolist()[:1], return_tensors="pt"), output_hidden_states=True
        )
    last = ms.pools["last"]
    np.testing.assert_allclose(last.post_final[0], out.hidden_states[-1][0, -1], atol=1e-5)
    np.testing.assert_allclose(last.raw[0, 0], out.hidden_states[0][0, -1], atol=1e-5)


def test_random_embedding_control_shares_draws_between_prompts(tiny_model_dirs):
    """Defect 6 (issue 22): the chapters' random-embedding control feeds each prompt's own
    tokens through one random vocabulary, so repeated prompts (and shared words) share their
    random inputs; per-prompt draws gave every prompt new inputs."""
    folder = str(tiny_model_dirs["gpt2"])
    prompts = pd.DataFrame({"prompt": ["A river bank", "A river bank", "The cat sat"]})
    ms = load_model_states(folder, prompts, random_init=False)
    assert ms.random_input is not None
    x = ms.random_input["mean"].raw  # (3, L+1, d)
    # rows of one padded batch: equal up to the rounding of batched matmuls, not bitwise
    np.testing.assert_allclose(x[0], x[1], rtol=1e-5, atol=1e-6)
    assert not np.allclose(x[0], x[2])


# ----------------------------------------------------------------------------- bad input
def test_bad_pooling_is_a_clear_error():
    with pytest.raises(ValueError, match="pooling must be"):
        TrajectoryConfig(pooling="max")


def test_missing_prompt_file_is_a_clear_error(tmp_path):
    from lamina.chapters.convergence import Config, run

    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        run(Config(model="x", prompts=str(tmp_path / "missing.jsonl")))


def test_malformed_prompt_file_names_file_line_and_field(tmp_path):
    from lamina.chapters.convergence import Config, run
    from lamina.sources.prompts import PromptFileError

    bad = tmp_path / "semantic.jsonl"
    bad.write_text('{"id": "a", "family": "semantic", "prompt": "A fox", "item": "fox"}\n')
    with pytest.raises(PromptFileError, match=r"line 1, field 'category'"):
        run(Config(model="x", prompts=str(bad)))


def test_prompts_without_the_chapters_label_column_are_a_clear_error():
    from lamina.chapters.convergence import Config, run

    with pytest.raises(ValueError, match=r"lack the column\(s\) \['category'\]"):
        run(Config(model="x", prompts="reasoning"))


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
    # <model>/[<run>/]<chapter>.json, and for a chapter with an across claim (three-phase's
    # "universal") also all_sources/[<run>/]<chapter>.json: each checked on its own
    paths = list((tmp_path / "results").rglob(f"{chapter}.json"))
    by_model: dict[str, list[Path]] = {}
    for p in paths:
        by_model.setdefault(json.loads(p.read_text())["model"], []).append(p)
    assert set(by_model) <= {model, ALL_SOURCES}, sorted(by_model)
    assert len(by_model.get(model, [])) == 1, paths  # the model's own file
    stem = f"p1-{chapter.replace('_', '-')}-"
    across = [s for s in CLAIMS if s.kind == "across" and s.id.startswith(stem)]
    assert len(by_model.get(ALL_SOURCES, [])) == (1 if across else 0), paths
    if across:
        rows = json.loads(by_model[ALL_SOURCES][0].read_text())["summary"]["claims"]
        assert {r["claim_id"] for r in rows} == {s.id for s in across}
    record = json.loads(by_model[model][0].read_text())
    assert record["model"] == model and record["config"]["quick"] is True
    assert {"lamina_version", "lamina_commit", "date"} <= set(record["provenance"])
    claims = record["summary"]["claims"]
    assert claims and all(
        c["verdict"] in PAPER_VERDICTS for c in claims
    )
    assert any(c["main"] for c in claims)
    assert all(c["model"] in (model, "all sources") for c in claims)  # three-phase universal
    assert list((tmp_path / "results").rglob(f"{chapter}.sensitivity.parquet"))


@pytest.mark.slow
def test_reanalysis_chapter_says_so_when_the_released_data_are_absent(tmp_path):
    _, outputs = _executed(tmp_path, "reanalysis", {"peer_root": str(tmp_path / "absent")})
    text = json.dumps(outputs)
    assert "released states are absent" in text
    assert "Not testable: released prompts absent" in text


@pytest.mark.slow
@pytest.mark.peer
def test_released_code_convention_comes_close_to_the_released_numbers(peer_root):
    from lamina.chapters.reanalysis import Config, run

    result = run(Config(peer_root=str(peer_root), n_bootstrap=100, n_permutations=1000,
                        real_models=None))
    claims = result.claims.set_index("claim_id")
    curv = result.tables["curvature"]
    released = curv[curv["convention"] == "released code"]["mean_curvature"]
    assert 0.9 < released.min() < released.max() < 1.35
    assert claims.loc["self-reanalysis-released-curvature", "measured"] < 1e-3  # per prompt
    assert claims.loc["self-reanalysis-released-curvature", "verdict"] == "check passed"
    assert claims.loc["self-reanalysis-bootstrap-table-source", "verdict"] == "check passed"
    assert claims.loc["self-reanalysis-released-ci", "measured"] < 0.05
    assert result.tables["sensitivity"]["peak_ci"].max() < 0.41  # 0.41-0.58 is out of reach
    # the single-token exclusion acts on the released states (defect 1 of issue 11)
    parts = result.tables["curvature_parts"].set_index(["convention", "single_token_prompts"])
    assert parts.loc[("released code", "excluded"), "n_prompts"] < parts.loc[
        ("released code", "included"), "n_prompts"]
    assert parts.loc[("released code", "excluded"), "difference"] != pytest.approx(
        parts.loc[("released code", "included"), "difference"])
