"""The built-book audit flags each broken rule, and passes a book whose rows obey them."""

from lamina.book.audit import audit_rows
from lamina.book.scorecard import CHAPTER_PAPER


def _row(**kw):
    row = {"claim_id": "p3-anatomy-recovery", "kind": "effect", "verdict": "reproduced",
           "measured": 0.7, "ci_low": 0.4, "ci_high": 0.99, "p": 0.002, "alpha": 0.05,
           "ci_of": "", "present": True, "model": "m"}  # fmt: skip
    return row | kw


def _book(rows, page="`p3-anatomy-recovery` `p1-three-phase-universal`"):
    records = [{"chapter": c, "model": "m", "summary": {"claims": []}} for c in CHAPTER_PAPER]
    records[0]["summary"]["claims"] = rows + [
        _row(claim_id="p1-three-phase-universal", kind="across", present=False, p=None)
    ]
    return audit_rows(records, page)


def test_a_book_that_obeys_the_rules_has_no_findings():
    assert _book([_row()]) == []


def test_each_broken_rule_is_found():
    cases = {
        "significance": _row(verdict="partially", p=0.17),  # results.verdict's old "partially"
        "id": _row(claim_id="P3-recovery"),
        "word": _row(kind="count", verdict="partially", present=False),
        "ci": _row(measured=0.0156, ci_low=0.0082, ci_high=0.0143),  # Gemma's old estimate
        "present": _row(kind="count", verdict="fewer than claimed", present=True),
    }
    for rule, row in cases.items():
        found = _book([row], page=None)
        assert [f.rule for f in found] == [rule], (rule, found)


def test_a_named_ci_owner_an_untestable_row_and_a_vanish_row_are_exempt():
    rows = [
        _row(measured=0.0156, ci_low=0.0082, ci_high=0.0143, ci_of="the pooled estimate"),
        _row(measured=0.0156, ci_low=0.0082, ci_high=0.0143, verdict="not testable"),
        _row(kind="vanish", verdict="reproduced", p=0.3, present=False),
    ]
    assert _book(rows) == []


def test_a_missing_chapter_the_universal_row_and_the_calibration_page_are_found():
    found = audit_rows([{"chapter": "curvature", "model": "m",
                         "summary": {"claims": [_row()]}}], "")  # fmt: skip
    rules = [f.rule for f in found]
    assert rules.count("not run") == len(CHAPTER_PAPER) - 1
    assert "across" in rules and "calibration" in rules
    # a self-check is lamina's own check, not a claim of the papers: not on the page
    check = _row(claim_id="self-reanalysis-released-ci", kind="self-check", verdict="check passed",
                 present=False, p=None)  # fmt: skip
    assert "calibration" not in [f.rule for f in _book([_row(), check])]


def test_a_chapter_above_the_memory_budget_or_without_a_recorded_peak_is_found(tmp_path):
    """The ``memory`` rule reads each chapter's report: weight_update_signature's 17.1 GiB (its
    peak before issue 52) is a finding, 8.1 GiB is not, and a report without a peak, a damaged
    one or none at all cannot show the budget was kept."""
    from lamina.book.audit import MEMORY_BUDGET_GIB, audit_memory

    (tmp_path / "weight_update_signature.report.json").write_text('{"peak_memory_gib": 17.1}')
    (tmp_path / "layer_anatomy.report.json").write_text('{"peak_memory_gib": 8.1}')
    (tmp_path / "curvature.report.json").write_text('{"seconds": 3}')
    (tmp_path / "convergence.report.json").write_text("{not json")
    chapters = ["weight_update_signature", "layer_anatomy", "curvature", "convergence", "bifurcation"]
    found = {f.claim_id.split(":")[0]: f for f in audit_memory(tmp_path, chapters)}
    assert set(found) == {"weight_update_signature", "curvature", "convergence", "bifurcation"}
    assert all(f.rule == "memory" for f in found.values())
    assert "17.1 GiB" in found["weight_update_signature"].detail and MEMORY_BUDGET_GIB == 12.0
    assert "no recorded peak" in found["bifurcation"].detail


def test_the_memory_rule_covers_every_chapter_of_the_book(tmp_path):
    """Chapters without claims (the tour, the organisms) run kernels too: with no reports at
    all, each chapter of the registry is a finding, not only those of the scorecard."""
    from lamina.book.audit import audit_memory
    from lamina.core import registry

    found = {f.claim_id.split(":")[0] for f in audit_memory(tmp_path)}
    assert found == set(registry.names()) and {"trajectory_tour", "organisms"} <= found
