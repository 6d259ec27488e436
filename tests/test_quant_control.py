"""Quantisation control (lamina.states.quant_control): the shift table, the flip rule, and the
trajectory skeleton running each organism as +Q4_1 / +Q8_0 (micro organisms, seconds)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from lamina.chapters import skeleton
from lamina.chapters.skeleton import ChapterSpec, main_pool, run_chapter
from lamina.chapters.trajectory import TrajectoryConfig, subsample
from lamina.evidence.claims import Claim, claim_id, claims_frame
from lamina.states.quant_control import (
    apply_quant_control,
    proxy_qtype,
    run_quant_control,
    shift_table,
)

from .conftest import lamina_env

CID = claim_id(1, "toy", "norm")


def _claims(model: str, measured: float, verdict: str) -> pd.DataFrame:
    return claims_frame([Claim(claim_id=CID, claim="toy", paper_value="-", model=model,
                               measured=measured, verdict=verdict, reason="rule", unit="rad")])


@pytest.mark.parametrize(("file_type", "want"), [
    ("MOSTLY_Q4_1", ("Q4_1", True)),
    ("MOSTLY_Q4_K_M", ("Q4_1", False)),
    ("MOSTLY_Q8_0", ("Q8_0", True)),
    ("MOSTLY_Q6_K", ("Q4_1", False)),
    ("ALL_F32", (None, True)),
    ("MOSTLY_BF16", (None, True)),
    (None, (None, True)),
])
def test_proxy_qtype_from_the_file_type(file_type, want):
    assert proxy_qtype(file_type) == want


def _run(verdicts: dict[str, tuple[float, str]], quantization: dict[str, str | None]):
    """run_quant_control on one organism and the models of ``quantization``, the quantised
    organism runs answering from ``verdicts`` (qtype -> (measured, verdict))."""
    claims = pd.concat([_claims("organism-toy", 1.0, "reproduced")]
                       + [_claims(m, 0.8, "reproduced") for m in quantization], ignore_index=True)

    def run_claims(name: str) -> pd.DataFrame:
        return _claims(name, *verdicts[name.rpartition("+")[2]])

    models = ["organism-toy", *quantization]
    return run_quant_control(models, claims, quantization, run_claims)


def test_a_flip_under_the_proxy_marks_the_quantised_model_not_testable():
    quant = {"real-k": "MOSTLY_Q4_K_M", "real-8": "MOSTLY_Q8_0", "real-fp": "MOSTLY_F16"}
    out, shifts = _run({"Q4_1": (0.9, "partially"), "Q8_0": (0.99, "reproduced")}, quant)
    assert set(shifts["qtype"]) == {"Q4_1", "Q8_0"}
    s = shifts.set_index("qtype")
    assert s.loc["Q4_1", "shift"] == pytest.approx(-0.1) and bool(s.loc["Q4_1", "flipped"])
    assert not bool(s.loc["Q8_0", "flipped"])
    out = out.set_index("model")
    k = out.loc["real-k"]
    assert k["verdict"] == "not testable" and k["verdict_unquantised_rules"] == "reproduced"
    assert "quantised weights" in k["reason"] and "organism-toy Q4_1" in k["reason"]
    assert "reproduced -> partially" in k["reason"] and "-0.1 rad" in k["reason"]
    assert out.loc["real-8", "verdict"] == "reproduced"  # its proxy Q8_0 did not flip
    assert "organism-toy Q8_0" in out.loc["real-8", "quant_shift"]
    for m in ("organism-toy", "real-fp"):  # unquantised models are untouched
        assert out.loc[m, "verdict"] == "reproduced" and out.loc[m, "quant_shift"] == ""


def test_no_flip_keeps_the_verdict_and_shows_the_shift():
    out, shifts = _run({"Q4_1": (0.95, "reproduced"), "Q8_0": (1.0, "reproduced")},
                       {"real-k": "MOSTLY_Q4_K_M"})
    assert not shifts["flipped"].any()
    row = out.set_index("model").loc["real-k"]
    assert row["verdict"] == "reproduced" and row["verdict_unquantised_rules"] == ""
    assert "-0.05 rad" in row["quant_shift"] and "proxy Q4_1" in row["quant_shift"]


def test_without_organisms_nothing_is_measured_and_nothing_flips():
    claims = _claims("real-k", 0.8, "reproduced")
    shifts = shift_table(pd.DataFrame(), pd.DataFrame())
    out = apply_quant_control(claims, shifts, {"real-k": "MOSTLY_Q4_1"})
    assert out.loc[0, "verdict"] == "reproduced"
    assert out.loc[0, "quant_shift"].startswith("no organism measured under Q4_1")


# --------------------------------------------------------------- through the skeleton
SPEC = ChapterSpec("toy", families=("reasoning",), required=("family",), tables=(),
                   quick=lambda p, seed: subsample(p, "family", 6, seed))


def _analysis(flip_q4: bool):
    """A toy chapter: measured = mean final-state norm (mean pool); verdict "reproduced",
    or, with ``flip_q4``, "partially" on any model loaded as +Q4_1 (a forced flip)."""

    def analyse(ms, prompts, config):
        _, conv, pooled = main_pool(ms, "mean")
        x, _ = pooled.states(conv)
        value = float(np.linalg.norm(x[:, -1], axis=-1).mean())
        verdict = "partially" if flip_q4 and ms.name.endswith("+Q4_1") else "reproduced"
        return {"claims": claims_frame([Claim(
            claim_id=CID, claim="toy", paper_value="-", model=ms.name, measured=value,
            verdict=verdict, unit="norm")])}

    return analyse


@pytest.mark.parametrize("flip", [True, False])
def test_skeleton_runs_each_organism_quantised(flip, micro_organisms, tmp_path, monkeypatch):
    organism = "organism-gpt2-micro"
    quantised = f"{organism}+Q4_1"  # run as a model: provenance says Q4_1
    monkeypatch.setattr(skeleton, "expand_models", lambda config: ([organism, quantised], []))
    config = TrajectoryConfig(model="unused", quick=True, sensitivity=False)
    with lamina_env(micro_organisms, tmp_path / "results"):
        result = run_chapter(SPEC, config, _analysis(flip))
    shifts = result.tables["quantisation"]
    assert sorted(shifts["qtype"]) == ["Q4_1", "Q8_0"] and set(shifts["model"]) == {organism}
    claims = result.claims.set_index("model")
    fp32 = claims.loc[organism, "measured"]
    s = shifts.set_index("qtype")
    # the Q4_1 control measures what the Q4_1 model measures: the same rounding of the same weights
    assert s.loc["Q4_1", "measured_quantised"] == pytest.approx(claims.loc[quantised, "measured"])
    assert s.loc["Q4_1", "shift"] == pytest.approx(s.loc["Q4_1", "measured_quantised"] - fp32)
    assert math.isfinite(s.loc["Q8_0", "shift"]) and s.loc["Q4_1", "shift"] != 0
    qm = result.tables["quantised_models"].set_index("model")
    assert list(qm.index) == [quantised] and qm.loc[quantised, "control_qtype"] == "Q4_1"
    assert claims.loc[organism, "verdict"] == "reproduced"
    if flip:
        assert claims.loc[quantised, "verdict"] == "not testable"
        assert "partially" == claims.loc[quantised, "verdict_unquantised_rules"]
    else:
        assert claims.loc[quantised, "verdict"] == "reproduced"
        assert "Q4_1" in claims.loc[quantised, "quant_shift"]


def test_scorecard_and_matrix_show_the_shift_of_a_quantised_model():
    from lamina.book.matrix import matrix_html, scorecard_markdown
    from lamina.book.scorecard import claims_table

    out, _ = _run({"Q4_1": (0.9, "partially"), "Q8_0": (1.0, "reproduced")},
                  {"real-k": "MOSTLY_Q4_K_M"})
    rows = out.replace({np.nan: None}).to_dict(orient="records")
    table = claims_table([{"chapter": "curvature", "summary": {"claims": rows}}])
    real = table[table["model"] == "real-k"].iloc[0]
    assert real["verdict"] == "not testable" and "organism-toy Q4_1" in real["quant_shift"]
    md = scorecard_markdown(table)
    assert "`real-k`, quantisation control: [MOSTLY_Q4_K_M, proxy Q4_1]" in md
    assert "quantised weights" in md  # the not-testable reason is listed
    assert "quantisation control: [MOSTLY_Q4_K_M" in matrix_html(table)
