"""Quantisation control on the real models themselves (lamina.states.quant_control): the flip
table, the ``quant_shift`` column, and the trajectory chapters' run re-quantising a quantised GGUF
model (a tiny Q8_0 GGUF written here) as +Q4_0 / +Q8_0."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lamina.chapters import trajectory as skeleton
from lamina.chapters.trajectory import ChapterSpec, TrajectoryConfig, run_chapter
from lamina.evidence.claims import Claim, claim_id, claims_frame
from lamina.states.quant_control import (
    apply_quant_control,
    control_models,
    flip_table,
    is_quantised,
    not_run_control,
    run_quant_control,
)
from lamina.trajectory.analyses.shared import main_pool
from lamina.trajectory.chapter_prompts import subsample
from tests.conftest import _byte_tokenizer, lamina_env, tiny_model
from tests.sources.gguf_writer import write_gguf

CID = claim_id(1, "toy", "norm")


def _claims(model: str, measured: float, verdict: str) -> pd.DataFrame:
    return claims_frame([Claim(claim_id=CID, claim="toy", paper_value="-", model=model,
                               measured=measured, verdict=verdict, reason="rule", unit="rad")])


@pytest.mark.parametrize(("file_type", "want"), [
    ("MOSTLY_Q4_1", True), ("MOSTLY_Q4_K_M", True), ("Q8_0", True),
    ("ALL_F32", False), ("MOSTLY_F16", False), ("MOSTLY_BF16", False), (None, False),
])
def test_is_quantised_from_the_file_type(file_type, want):
    assert is_quantised(file_type) is want


def test_control_models_are_the_quantised_ones_not_their_control_runs():
    quant = {"real": "MOSTLY_Q4_1", "real+Q4_0": "MOSTLY_Q4_1", "organism-toy": None}
    assert control_models(["organism-toy", "real", "real+Q4_0"], quant) == ["real"]


def _run(answers: dict[str, tuple[float, str]], fail: tuple[str, ...] = ()):
    """run_quant_control on an organism and a quantised model "real", whose re-quantised runs
    answer from ``answers`` (qtype -> (measured, verdict)); qtypes in ``fail`` raise."""
    quantization = {"organism-toy": None, "real": "MOSTLY_Q4_K_M"}
    claims = pd.concat([_claims("organism-toy", 1.0, "reproduced"),
                        _claims("real", 0.8, "reproduced")], ignore_index=True)
    calls = []

    def run_claims(name: str) -> pd.DataFrame:
        calls.append(name)
        qtype = name.rpartition("+")[2]
        if qtype in fail:
            raise RuntimeError("out of memory")
        return _claims(name, *answers[qtype])

    notes: list[str] = []
    out, shifts = run_quant_control(list(quantization), claims, quantization, run_claims,
                                    notes=notes)
    return out.set_index("model"), shifts, calls, notes


def test_a_flip_is_shown_next_to_the_verdict_which_is_kept():
    out, shifts, calls, _ = _run({"Q4_0": (0.7, "partially"), "Q8_0": (0.79, "reproduced")})
    assert calls == ["real+Q4_0", "real+Q8_0"]  # the organism (fp32) is not re-quantised
    s = shifts.set_index("qtype")
    assert s.loc["Q4_0", "shift"] == pytest.approx(-0.1) and bool(s.loc["Q4_0", "flipped"])
    assert not bool(s.loc["Q8_0", "flipped"])
    real = out.loc["real"]
    assert real["verdict"] == "reproduced"  # the rules' verdict stands; the column shows the flip
    assert real["quant_shift"] == ("Q4_0: flips to partially (0.8 -> 0.7 rad); "
                                   "Q8_0: same (0.8 -> 0.79 rad)")
    assert out.loc["organism-toy", "quant_shift"] == ""


def test_q8_runs_only_where_a_verdict_flips_under_q4():
    out, shifts, calls, _ = _run({"Q4_0": (0.75, "reproduced"), "Q8_0": (0.8, "absent")})
    assert calls == ["real+Q4_0"] and list(shifts["qtype"]) == ["Q4_0"]
    assert out.loc["real", "quant_shift"] == (
        "Q4_0: same (0.8 -> 0.75 rad); Q8_0: not run: no verdict of real flips under Q4_0")


def test_a_failed_control_run_reads_not_run_with_its_reason():
    out, shifts, _, notes = _run({"Q8_0": (0.8, "reproduced")}, fail=("Q4_0",))
    assert shifts.empty
    assert out.loc["real", "quant_shift"].startswith(
        "Q4_0: not run: RuntimeError: out of memory; Q8_0: not run: no verdict")
    assert any("real+Q4_0 failed" in n for n in notes)


def test_not_run_control_marks_every_quantised_row_with_the_reason():
    claims = pd.concat([_claims("real", 0.8, "reproduced"), _claims("organism-toy", 1, "absent")], ignore_index=True)
    out = not_run_control(claims, {"real": "MOSTLY_Q4_1"}, "cost (retraining)").set_index("model")
    assert out.loc["real", "quant_shift"] == (
        "Q4_0: not run: cost (retraining); Q8_0: not run: cost (retraining)")
    assert out.loc["organism-toy", "quant_shift"] == ""


def test_a_claim_missing_from_the_control_run_is_not_run():
    claims = _claims("real", 0.8, "reproduced")
    out = apply_quant_control(claims, flip_table(claims, pd.DataFrame()), {"real": "Q4_1"})
    assert out.loc[0, "quant_shift"].startswith("Q4_0: not run: the claim has no row there")


# --------------------------------------------------------------- through the chapters' run
SPEC = ChapterSpec("toy", families=("reasoning",), required=("family",), tables=(),
                   quick=lambda p, seed: subsample(p, "family", 6, seed))


def _planted_at_threshold(tolerance: float):
    """A toy chapter whose claim sits right at its threshold: measured = mean final-state norm
    (mean pool); "reproduced" when it lies within ``tolerance`` (relative) of the value the
    first model analysed (the model as loaded) measured, else "not reproduced"."""
    threshold: list[float] = []

    def analyse(ms, prompts, config):
        _, conv, pooled = main_pool(ms, "mean")
        x, _ = pooled.states(conv)
        value = float(np.linalg.norm(x[:, -1], axis=-1).mean())
        threshold.append(threshold[0] if threshold else value)
        near = abs(value - threshold[0]) <= tolerance * threshold[0]
        return {"claims": claims_frame([Claim(
            claim_id=CID, claim="toy", paper_value="-", model=ms.name, measured=value,
            verdict="reproduced" if near else "not reproduced", unit="norm")])}

    return analyse


def test_skeleton_requantises_the_quantised_model_and_a_planted_threshold_claim_flips(
    tmp_path, monkeypatch
):
    gguf = str(write_gguf(tiny_model("llama", n_layers=4), _byte_tokenizer(),
                          tmp_path / "tiny-q8.gguf", qtype="Q8_0"))
    monkeypatch.setenv("LAMINA_GGUF_CACHE", str(tmp_path / "gguf-cache"))
    monkeypatch.setattr(skeleton, "chapter_models", lambda chapter, model, peer_root=None: ([gguf], []))
    config = TrajectoryConfig(model="unused", quick=True, sensitivity=False)
    with lamina_env(tmp_path / "data", tmp_path / "results"):
        result = run_chapter(SPEC, config, _planted_at_threshold(1e-4))
    shifts = result.tables["quantisation"].set_index("qtype")
    assert sorted(shifts.index) == ["Q4_0", "Q8_0"] and set(shifts["model"]) == {gguf}
    # Q8_0 weights re-quantised to Q8_0 stay on their grid; Q4_0 moves them by ~10%
    assert abs(shifts.loc["Q8_0", "shift"]) < 1e-5 * shifts.loc["Q8_0", "measured_fp32"]
    assert abs(shifts.loc["Q4_0", "shift"]) > 1e-3 * shifts.loc["Q4_0", "measured_fp32"]
    row = result.claims.set_index("model").loc[gguf]
    assert row["verdict"] == "reproduced"
    assert row["quant_shift"].startswith("Q4_0: flips to not reproduced (")
    assert "; Q8_0: same (" in row["quant_shift"]
    qm = result.tables["quantised_models"]
    assert list(qm["model"]) == [gguf] and qm.loc[0, "quantization"] == "MOSTLY_Q8_0"


def test_scorecard_and_matrix_show_the_control_of_a_quantised_model():
    from lamina.book.matrix import matrix_html, scorecard_markdown
    from lamina.book.scorecard import claims_table

    out, _, _, _ = _run({"Q4_0": (0.7, "partially"), "Q8_0": (0.8, "reproduced")})
    rows = out.reset_index().replace({np.nan: None}).to_dict(orient="records")
    table = claims_table([{"chapter": "curvature", "summary": {"claims": rows}}])
    real = table[table["model"] == "real"].iloc[0]
    assert real["verdict"] == "reproduced" and "Q4_0: flips to partially" in real["quant_shift"]
    assert "`real`, quantisation control: Q4_0: flips to partially" in scorecard_markdown(table)
    assert "quantisation control: Q4_0: flips to partially" in matrix_html(table)


def test_rows_of_one_claim_per_stage_are_matched_by_stage():
    def rows(model: str, values: dict[str, tuple[float, str]]) -> pd.DataFrame:
        out = pd.concat([_claims(model, m, v).assign(stage=s) for s, (m, v) in values.items()],
                        ignore_index=True)
        return out

    claims = rows("real", {"sft": (2.0, "reproduced"), "dpo": (0.5, "not reproduced")})
    again = rows("real+Q4_0", {"sft": (2.1, "reproduced"), "dpo": (1.5, "reproduced")})
    shifts = flip_table(claims, again)
    assert list(zip(shifts["stage"], shifts["flipped"], strict=True)) == [
        ("sft", False), ("dpo", True)]
    out = apply_quant_control(claims, shifts, {"real": "MOSTLY_Q4_1"}).set_index("stage")
    assert out.loc["sft", "quant_shift"].startswith("Q4_0: same (2 -> 2.1 rad)")
    assert out.loc["dpo", "quant_shift"].startswith("Q4_0: flips to reproduced (0.5 -> 1.5 rad)")
