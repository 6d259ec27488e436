"""The chapter helpers glue exactly the names the chapters' prose uses."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import lamina.book.chapter as chapter


def _claims() -> pd.DataFrame:
    row = dict(paper_value="x", ci_low=0.1, ci_high=0.3, p=0.01, effect_size=0.5)
    return pd.DataFrame(
        [
            dict(
                row, claim_id="peak", model="a", measured=0.2, verdict="partially", effect_name="r"
            ),
            dict(
                row, claim_id="peak", model="b", measured=0.4, verdict="reproduced", effect_name="r"
            ),
            dict(
                row,
                claim_id="other",
                model="a",
                measured=np.nan,
                verdict="not testable",
                effect_name="e",
            ),
        ]
    )


@pytest.fixture
def glued(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    out: dict[str, Any] = {}
    monkeypatch.setattr(chapter, "glue", lambda name, value, **kw: out.__setitem__(name, value))
    return out


def test_glue_claim_glues_head_row_and_counts_under_prefix(glued: dict[str, Any]) -> None:
    assert chapter.glue_claim("conv", _claims(), "peak", n_models=3) is None  # prints nothing
    assert glued == {
        "conv_model": "a",
        "conv_measured": 0.2,
        "conv_ci_low": 0.1,
        "conv_ci_high": 0.3,
        "conv_p": 0.01,
        "conv_effect": 0.5,
        "conv_verdict": "partially",
        "conv_n_models": 3,
        "conv_n_reproduced": 1,
        "conv_reason": "",
    }


def test_finding_title_is_computed_from_the_claims_table() -> None:
    claims = _claims()
    title = chapter.finding_title(claims, "peak", "Peak")
    assert title.startswith("Peak on a: 0.2 [0.1, 0.3] (paper: x)")
    assert "a: partially" in title and "reproduced on 1 of 2 sources" in title
    flipped = claims.assign(verdict=["reproduced", "not reproduced", "not testable"])
    assert "a: reproduced" in chapter.finding_title(flipped, "peak", "Peak")
    assert chapter.finding_title(claims, "absent", "Neutral") == "Neutral"


def test_glue_claim_strings_formats_missing_values_as_na(glued: dict[str, Any]) -> None:
    chapter.glue_claim_strings("anat", _claims().iloc[1:].set_index("claim_id"), detail=True)
    assert glued["anat_other_measured"] == "n/a"
    assert glued["anat_other_detail"] == "e"
    assert glued["anat_peak_ci"] == "[0.1, 0.3]"
    assert glued["anat_peak_p"] == "0.01"


def test_claims_view_keeps_the_displayed_columns_only() -> None:
    assert list(chapter.claims_view(_claims()).columns) == chapter.CLAIM_COLUMNS
