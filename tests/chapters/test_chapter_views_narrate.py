"""The views and sentences that the organisms and reanalysis notebooks call (issue 24 item 4):
configs from a notebook's globals, sentences whose verdict words are computed, and the
released-data-absent path. The notebooks' outputs themselves are checked by the chapters'
execution tests."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lamina.chapters import reanalysis_views as RV
from lamina.chapters.organisms import narrative as N
from lamina.chapters.organisms.run import OrganismsConfig, OrganismsResult
from lamina.sources.gguf_models import OFFLINE_GGUF


@pytest.fixture
def glued(monkeypatch) -> dict[str, object]:
    """What the code under test glues, by name (instead of myst_nb's glue)."""
    out: dict[str, object] = {}
    for module in (N, RV):
        monkeypatch.setattr(module, "glue", lambda name, value: out.__setitem__(name, value))
    return out


def _result(summaries: dict[str, dict]) -> OrganismsResult:
    return OrganismsResult(OrganismsConfig(model=list(summaries), quick=True), {}, summaries)


def test_configs_take_their_fields_from_the_notebook_globals():
    params = {"model": "organism-x", "quick": True, "n_samples": 3, "results_root": "r",
              "real_models": ["m"], "V": object(), "In": []}  # fmt: skip
    cfg = OrganismsConfig.from_globals({k: v for k, v in params.items() if k not in ("real_models",)})
    assert (cfg.model, cfg.quick, cfg.n_samples) == ("organism-x", True, 2)  # quick caps 3 -> 2
    tcfg = RV.Config.from_globals({"n_bootstrap": 70, "seed": 3, "real_models": ["m"], "V": RV})
    assert (tcfg.n_bootstrap, tcfg.seed) == (70, 3)


def test_span_and_per_organism():
    assert N.span([1.04, 0.96]) == "1.0"  # both ends format alike: one value
    assert N.span([1.0, 2.0], "{:.0f}") == "1–2"
    result = _result({"b": {}, "a": {}})
    assert N.per_organism(result, "{name}={v}", v={"a": 1, "b": 2}) == "b=2; a=1"


def test_overlap_and_targets_sentences_compute_their_verdicts(glued):
    result = _result({
        "clean": {"eval_8gram_overlap": 0, "gloss_hits": 2,
                  "targets": [{"claim_id": "overlap", "value": 0, "verdict": "check passed"}]},
        "leaky": {"eval_8gram_overlap": 3, "gloss_hits": 0,
                  "targets": [{"claim_id": "overlap", "value": 3, "verdict": "check failed"}]},
    })  # fmt: skip
    N._overlap(result)
    N._targets(result)
    assert glued["org_overlap_detail"] == (
        "clean: 0 shared 8-grams (meets the target of 0), 2 glosses found; "
        "leaky: 3 shared 8-grams (misses the target of 0), 0 glosses found"
    )
    assert glued["org_targets_met"] == "1 of 2"
    assert glued["org_missed"] == "leaky: overlap"
    assert list(N.targets_table(result)["model"]) == ["clean", "leaky"]


def test_pick_keeps_rows_matching_every_column():
    t = pd.DataFrame({"a": [1, 1, 2], "b": ["x", "y", "x"]})
    assert N.pick(t, a=1, b="x").index.tolist() == [0]
    assert len(N.pick(t)) == 3


def test_reanalysis_without_released_data_glues_not_testable(glued):
    RV.glue_reanalysis(None)
    for key in RV.GLUED_CLAIMS.values():
        assert math.isnan(glued[key])  # type: ignore[arg-type]
        assert glued[f"{key}_verdict"] == "not testable"
        assert glued[f"{key}_reason"] == "released data absent"
    assert math.isnan(glued["re_other_min_diff"])  # type: ignore[arg-type]


def test_reanalysis_notes_follow_the_requested_models():
    """A string ``real_models`` is one name (or the default set), never its characters."""
    assert RV._requested("default") == list(OFFLINE_GGUF)
    assert RV._requested("gemma-3-270m") == ["gemma-3-270m"]
    assert RV._requested(None) == [] and RV._requested(["a", "b"]) == ["a", "b"]
