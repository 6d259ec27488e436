"""The calibration page's outcome per claim reaches the matrix: a claim whose calibration misses
a target (its false-positive rate on its null above 5%) is marked in every cell, beside the
mark of a claim with no calibration (lamina.book.calibration.claim_outcomes,
lamina.book.scorecard.calibration_misses, lamina.book.matrix)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from lamina.book.calibration import Section, claim_outcomes
from lamina.book.matrix import matrix_html
from lamina.book.scorecard import (
    CALIBRATION_OUTCOMES,
    calibration_misses,
    claims_table,
    read_calibration_outcomes,
    write_pages,
)
from lamina.evidence.declare import ClaimSpec

LOOSE, SOUND = "p1-curvature-gap", "p1-curvature-reasoning-range"


def _spec(cid: str) -> ClaimSpec:
    return ClaimSpec(id=cid, claim=f"claim {cid}", paper_value="0.4", kind="effect",
                     statistic="a difference", unit="rad", calibrated="null, planted",
                     test="a test", direction=1)  # fmt: skip


def _runs(false_positives: dict[str, int], n: int = 40) -> pd.DataFrame:
    """n null and n planted seeds per claim; ``false_positives[cid]`` null seeds present."""
    rows = []
    for cid, k in false_positives.items():
        for seed in range(n):
            yes = seed < k
            rows.append({"claim_id": cid, "source": "null", "seed": seed, "kind": "effect",
                         "verdict": "reproduced" if yes else "absent", "present": yes,
                         "reason": ""})  # fmt: skip
            rows.append({"claim_id": cid, "source": "planted", "seed": seed, "kind": "effect",
                         "verdict": "reproduced", "present": True, "reason": ""})  # fmt: skip
    return pd.DataFrame(rows)


def _outcomes() -> dict:
    section = Section("Paper 1", [_spec(LOOSE), _spec(SOUND)], _runs({LOOSE: 8, SOUND: 0}), {})
    return claim_outcomes([section])


def _record(model: str) -> dict:
    rows = [{"claim_id": cid, "claim": f"claim {cid}", "paper_value": "0.4", "model": model,
             "measured": 0.5, "ci_low": 0.4, "ci_high": 0.6, "p": 0.01, "verdict": "reproduced",
             "calibration": "calibrated"} for cid in (LOOSE, SOUND)]  # fmt: skip
    return {"chapter": "curvature", "model": model, "summary": {"claims": rows}}


def test_outcomes_name_the_missed_target_with_the_rate():
    out = _outcomes()
    assert out[LOOSE]["targets"] == "FPR above 5%" and out[LOOSE]["fpr"] == pytest.approx(0.2)
    assert out[LOOSE]["fpr_low"] < 0.2 < out[LOOSE]["fpr_high"] and out[LOOSE]["n_null"] == 40
    assert out[SOUND]["targets"] == "met"
    json.dumps(out)  # written as the page's data


def test_matrix_marks_every_cell_of_a_claim_that_misses_a_target():
    table = claims_table([_record("organism-gpt2"), _record("organism-llama")])
    plain = matrix_html(table)
    assert "lamina-miscalibrated" not in plain  # no outcomes: nothing marked
    html = matrix_html(calibration_misses(table, _outcomes()))
    cells = html.split('<tr id=')
    loose = next(c for c in cells if f"claim {LOOSE}" in c)
    sound = next(c for c in cells if f"claim {SOUND}" in c)
    assert loose.count("lamina-miscalibrated") == 2 and "lamina-miscalibrated" not in sound
    assert "its calibration misses a target: FPR above 5% (FPR 20% [" in loose
    assert "‡ = the claim" in html


def _book(tmp_path):
    """(results folder, book/generated) of a book with two organisms' records under tmp_path."""
    from lamina.states.io import write_results

    results = tmp_path / "results"
    for model in ("organism-gpt2", "organism-llama"):
        rec = _record(model)
        write_results(rec["chapter"], model, summary=rec["summary"], config={}, root=results)
    (tmp_path / "book" / "executed").mkdir(parents=True)
    generated = tmp_path / "book" / "generated"
    generated.mkdir(parents=True)
    return results, generated


def test_pages_read_the_outcomes_written_beside_the_calibration_page(tmp_path):
    results, generated = _book(tmp_path)
    assert "lamina-miscalibrated" not in write_pages(tmp_path, results)[0].read_text()
    (generated / CALIBRATION_OUTCOMES).write_text(json.dumps(_outcomes()))
    pages = {p.name: p.read_text() for p in write_pages(tmp_path, results)}
    assert pages["scorecard.md"].count("lamina-miscalibrated") == 2


def test_a_damaged_outcomes_file_is_an_error_naming_it(tmp_path):
    path = tmp_path / CALIBRATION_OUTCOMES
    assert read_calibration_outcomes(path) == {}  # none yet
    path.write_text("{not json")
    with pytest.raises(ValueError, match="calibration.json"):
        read_calibration_outcomes(path)
    path.write_text(json.dumps({LOOSE: {"status": "calibrated"}}))
    with pytest.raises(ValueError, match=f"{LOOSE}.*no targets"):
        read_calibration_outcomes(path)


def test_the_audit_finds_a_miss_the_pages_do_not_mark(tmp_path):
    """make check-book fails a book whose pages show a claim that misses a calibration target
    without its mark (issue 50, item 5); the pages as written pass."""
    from lamina.book.audit import audit_marks
    results, generated = _book(tmp_path)
    (generated / CALIBRATION_OUTCOMES).write_text(json.dumps(_outcomes()))
    pages = {p.name: p.read_text() for p in write_pages(tmp_path, results)
             if p.name in ("scorecard.md", "abstract.md")}  # fmt: skip
    ids = [LOOSE, SOUND]
    assert audit_marks(_outcomes(), pages, ids) == []
    stripped = {k: v.replace(" lamina-miscalibrated", "") for k, v in pages.items()}
    found = audit_marks(_outcomes(), stripped, ids)
    assert {f.claim_id for f in found} == {LOOSE} and {f.rule for f in found} == {"mark"}
    assert any("abstract.md" in f.detail for f in found)  # the picture is audited too


def test_chapter_badges_carry_the_same_marks_as_the_matrix(tmp_path):
    """Every chapter's verdict badge names its claim, and the pages step writes the stylesheet
    that marks (‡) the badges of a claim that misses a target: the same claims the matrix
    marks, none other (issue 50, item 1; before, only the matrix showed ‡)."""
    from lamina.book.badges import MARKS_CSS
    from lamina.book.tables import table_html, verdict_grid_html

    frame = pd.DataFrame([{"claim_id": LOOSE, "model": "m", "verdict": "reproduced"},
                          {"claim_id": SOUND, "model": "m", "verdict": "reproduced"}])  # fmt: skip
    for html in (table_html(frame), verdict_grid_html(frame)):
        assert f'data-claim="{LOOSE}"' in html and f'data-claim="{SOUND}"' in html
    results, generated = _book(tmp_path)
    (generated / CALIBRATION_OUTCOMES).write_text(json.dumps(_outcomes()))
    write_pages(tmp_path, results)
    css = (generated / "static" / MARKS_CSS).read_text()
    assert f'[data-claim="{LOOSE}"]::after {{ content: " ‡"; }}' in css
    assert SOUND not in css


def _with_coverage(runs: pd.DataFrame, cid: str, covered: int) -> pd.DataFrame:
    """``runs`` with the coverage column: ``covered`` of ``cid``'s planted seeds cover."""
    runs = runs.copy()
    planted = (runs["claim_id"] == cid) & (runs["source"] == "planted")
    runs["covered"] = float("nan")
    runs.loc[planted, "covered"] = [1.0 if i < covered else 0.0 for i in range(int(planted.sum()))]
    return runs


def test_a_ci_that_covers_too_rarely_misses_a_target_and_the_page_shows_coverage():
    """Issue 50, item 4: coverage is on the calibration page and a CI covering under 90% is
    marked (at 69acbaf coverage was measured but neither shown nor judged)."""
    from lamina.book.calibration import section_markdown

    runs = _with_coverage(_runs({LOOSE: 0, SOUND: 0}), LOOSE, 30)  # 75% of 40
    section = Section("Paper 1", [_spec(LOOSE), _spec(SOUND)], runs, {})
    out = claim_outcomes([section])
    assert out[LOOSE]["targets"] == "CI coverage below 90%" and out[LOOSE]["coverage"] == 0.75
    assert out[SOUND]["targets"] == "met" and "coverage" not in out[SOUND]
    page = section_markdown(section)
    assert "CI coverage of the known value" in page and "75% [" in page and "(30/40)" in page
    assert ".0 testable" not in section_markdown(Section("P", [_spec(LOOSE)], _runs({LOOSE: 8}, n=130), {}))
    good = _with_coverage(_runs({LOOSE: 0, SOUND: 0}), LOOSE, 38)
    assert claim_outcomes([Section("P", [_spec(LOOSE)], good[good.claim_id == LOOSE], {})])[
        LOOSE]["targets"] == "met"  # fmt: skip


def test_a_rate_over_its_target_says_whether_its_interval_reaches_it():
    """A rule of exactly 5% size reads above 5% on about half of all pages: such a miss is
    still marked, and says that its Wilson interval reaches the target."""
    near = claim_outcomes([Section("P", [_spec(LOOSE)], _runs({LOOSE: 7}, n=130), {})])
    assert near[LOOSE]["targets"] == "FPR above 5% (its interval reaches 5%)"
    far = claim_outcomes([Section("P", [_spec(LOOSE)], _runs({LOOSE: 20}, n=130), {})])
    assert far[LOOSE]["targets"] == "FPR above 5%"


def test_a_one_sided_rows_coverage_is_judged_against_its_own_nominal_level():
    """A one-sided row's CI has two one-sided 95% bounds: a 90% interval, which covers 90% of
    the time when exact. Judged against 90% (before), an exact interval read "below 90%" on
    about half of all pages; its target is its nominal level less 5 points, as 90% is a 95%
    CI's."""
    from dataclasses import replace

    from lamina.book.calibration import section_markdown

    spec = replace(_spec(LOOSE), sided="greater")
    assert spec.ci_level == pytest.approx(0.90)
    ok = _with_coverage(_runs({LOOSE: 0}), LOOSE, 35)  # 87.5% of 40
    out = claim_outcomes([Section("P", [spec], ok, {})])
    assert out[LOOSE]["targets"] == "met", out
    assert "of a 90% CI" in section_markdown(Section("P", [spec], ok, {}))
    low = _with_coverage(_runs({LOOSE: 0}), LOOSE, 30)  # 75%
    assert claim_outcomes([Section("P", [spec], low, {})])[LOOSE]["targets"].startswith(
        "CI coverage below 85%")


def test_a_row_with_too_little_power_misses_a_target_whether_main_or_not():
    """Issue 50, item 5: every claim shows power >= 80% at the paper's size or says it cannot
    decide. Before, only a main row's power was judged, so a row reading "reproduced" on 28%
    of planted seeds (paper 1's homograph ratio) read "met"."""
    runs = _runs({LOOSE: 0})
    planted = runs.index[(runs["source"] == "planted")]
    runs.loc[planted[:20], ["verdict", "present"]] = ["absent", False]  # 20 of 40 reproduce
    out = claim_outcomes([Section("P", [_spec(LOOSE)], runs, {})])
    assert not _spec(LOOSE).main
    assert out[LOOSE]["targets"] == "power below 80%", out
