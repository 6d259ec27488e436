"""The landing page's verdict picture, its per-model counts and the folded detailed matrix
(issue 25), from hand-made claims rows (no browser needed; the browser checks of the built
page are in tests/book/test_browser_checks.py)."""

from __future__ import annotations

import re

from lamina.book.matrix import matrix_html, matrix_row_anchor, short_label
from lamina.book.picture import _counts, _split, counts_svg, picture_html
from lamina.book.scorecard import _abstract_md, claims_table
from lamina.evidence.claims import Claim


def _row(cid, model, verdict, claim=None, **kw):
    return {"claim_id": cid, "claim": claim or f"the full text of {cid}", "paper_value": "",
            "model": model, "measured": 0.5, "verdict": verdict, "kind": "paper", **kw}  # fmt: skip


def _table():
    conv = [_row("p1-convergence-peak", m, v) for m, v in
            (("organism-gpt2", "reproduced"), ("minilm", "partially"))]  # fmt: skip
    conv.append(_row("p1-convergence-depth", "organism-gpt2", "not reproduced", short="P1 depth"))
    again = [
        _row("p1-reanalysis-peak", "peer-gpt2", "reproduced", claim="the full text of p1-convergence-peak"),
        _row("self-reanalysis-released-ci", "peer-gpt2", "check passed", kind="self-check"),
    ]  # fmt: skip
    return claims_table([
        {"chapter": "convergence", "model": "x", "summary": {"claims": conv}},
        {"chapter": "reanalysis", "model": "peer-gpt2", "summary": {"claims": again}},
    ])  # fmt: skip


def test_short_labels_come_from_the_declaration_or_the_id():
    assert short_label("p1-convergence-peak", 1) == "P1 convergence peak"
    assert short_label("P2.align_qk_enriched", 2) == "P2 align qk enriched"
    assert short_label("P3-core-max", 3) == "P3 core max"
    assert short_label("self-reanalysis-released-ci", 1) == "check reanalysis released ci"
    assert short_label("curvature:*", 1) == "P1 curvature (not run)"
    assert short_label("p1-convergence-peak", 1, "P1 peak") == "P1 peak"
    fields = {"claim_id": "p1-convergence-peak", "claim": "t", "paper_value": "", "model": "m",
              "measured": 0.1, "verdict": "reproduced"}  # fmt: skip
    assert Claim(**fields, short="P1 peak").row()["short"] == "P1 peak"
    assert "short" not in Claim(**fields).row()
    table = _table()  # a results row's own "short" reaches the table
    assert table.set_index("claim_id").loc["p1-convergence-depth", "short"] == "P1 depth"


def test_picture_has_one_line_per_claim_of_the_papers_and_links_to_the_matrix():
    table = _table()
    pic = picture_html(table)
    labels = re.findall(r'<th class="lamina-pic-claim"[^>]*><a href="#([^"]+)"[^>]*>([^<]*)</a>', pic)
    texts = [text for _, text in labels]
    assert texts[:2] == ["P1 convergence peak", "P1 depth"] and "P1 reanalysis peak" in texts
    assert "P1 curvature (not run)" in texts  # a chapter without results keeps its line
    assert "check" not in " ".join(t for _, t in labels)  # self-checks stay in the matrix
    assert 'title="the full text of p1-convergence-peak"' in pic  # the full text on hover
    detail = matrix_html(table)
    for anchor, _ in labels:  # every label lands on a row of the detailed matrix
        assert f'<tr id="{anchor}">' in detail
    heads = re.findall(r'<th class="lamina-pic-model"[^>]*><span>([^<]*)</span>', pic)
    assert heads[:3] == ["peer-gpt2", "minilm", "organism-gpt2"]  # each column repeats them
    cells = re.findall(r'<td class="lamina-pic-cell lamina-cell--([a-z-]+)"[^>]*>(?:<a [^>]*>)?([^<]*)', pic)
    assert ("reproduced", "Y") in cells and ("partially", "P") in cells
    assert ("not-reproduced", "N") in cells and ("empty", "") in cells
    assert matrix_row_anchor("p1-convergence-peak") == "m-p1-convergence-peak"


def test_a_long_picture_splits_into_two_balanced_columns():
    items = [("group", "Paper 1")] + [("claim", i) for i in range(20)]
    items += [("group", "Paper 2")] + [("claim", i) for i in range(9)]
    first, second = _split(items)
    assert abs(len(first) - len(second)) <= 2 and first[-1][0] == "claim"
    assert second[0] == ("group", "Paper 1 (cont.)")
    assert sum(k == "claim" for k, _ in first + second) == 29  # no claim lost or repeated
    # a paper boundary near the middle is where the columns part
    items = [("group", "Paper 1")] + [("claim", i) for i in range(16)]
    items += [("group", "Paper 2")] + [("claim", i) for i in range(12)]
    first, second = _split(items)
    assert second[0] == ("group", "Paper 2") and len(first) == 17


def test_detailed_matrix_states_a_claim_text_once():
    detail = matrix_html(_table())
    assert detail.count("the full text of p1-convergence-peak") == 1
    assert 'the same claim as <a href="#m-p1-convergence-peak">' in detail
    assert '<span class="lamina-claim-short">P1 reanalysis peak</span>' in detail


def test_counts_per_model_add_up_and_render_offline():
    table = _table()
    counts = _counts(table)
    assert counts["n"].sum() == 4  # the papers' verdicts only: no self-check
    assert counts.groupby("model")["n"].sum().to_dict() == {
        "organism-gpt2": 2, "minilm": 1, "peer-gpt2": 1
    }  # fmt: skip
    svg = counts_svg(table)
    assert svg.startswith("<svg") and "organism-gpt2" in svg and "Verdicts per model" in svg


def test_landing_leads_with_the_picture_then_the_counts_then_the_folded_matrix():
    text = _abstract_md(_table())
    assert text.index("lamina-picture") < text.index("lamina-counts") < text.index("<details")
    assert "<details open" not in text and "1 self-checks" in text.split("<details", 1)[1]
    assert "\n\n" not in text.split("lamina-counts", 1)[1].split("</div>", 1)[0]  # one HTML block


def _legend_words(page: str, css: str) -> list[str]:
    legend = re.search(rf'<p class="lamina-legend{css}">(.*?)</p>', page).group(1)
    return re.findall(r'lamina-cell--([a-z-]+)"', legend)


def test_the_legends_name_every_state_their_cells_show_and_no_other():
    """On 2026-12-04 both legends listed the seven effect words and "mixed" only, so the
    picture's "<", "E", "L" and "U" cells (count, location and vanish rows) had no key."""
    rows = [_row("p1-three-phase-detected", "minilm", "fewer than claimed", kind="count"),
            _row("p1-convergence-peak-depth", "minilm", "located elsewhere", kind="location"),
            _row("p1-convergence-peak", "minilm", "smaller than claimed"),
            _row("p1-convergence-peak", "peer-gpt2", "reproduced", context="sft"),
            _row("p1-convergence-peak", "peer-gpt2", "absent", context="dpo"),
            _row("p1-three-phase-controls-vanish", "minilm", "undecidable at this design",
                 kind="vanish")]
    table = claims_table([{"chapter": "convergence", "model": "x", "summary": {"claims": rows}}])
    shown = ["smaller-than-claimed", "undecidable-at-this-design", "fewer-than-claimed",
             "located-elsewhere", "mixed"]  # fmt: skip
    pic = picture_html(table)
    assert [w for w in _legend_words(pic, " lamina-pic-legend") if w != "not-run"] == shown
    assert ">&lt;</span>fewer than claimed" in pic and ">E</span>located elsewhere" in pic
    words = _legend_words(matrix_html(table), "")
    assert [w for w in words if w != "not-run"] == shown
    assert "reproduced" not in words and "absent" not in words  # only inside the mixed cell
