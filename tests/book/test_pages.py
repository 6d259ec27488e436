"""The book's reading furniture: verdict badges, the chart theme, the verdict matrix, the
scorecard and the pages written from results files (no browser needed)."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from lamina.book.badges import VERDICTS, badge, is_self_check
from lamina.book.charts import (
    FACET_MIN_WIDTH,
    MODEL_COLORS,
    PAGE_WIDTH,
    caption_html,
    facet_columns,
    facet_width,
    model_colors,
    wrap_label,
)
from lamina.book.matrix import matrix_html, scorecard_markdown, section_anchor, summary_line
from lamina.book.scorecard import claims_table, write_pages
from lamina.book.tables import table_html

EMOJI = re.compile("[\u2600-\u27bf\u2b50\u2b55\U0001f300-\U0001faff]")  # emoji blocks


def _row(cid, model, verdict, measured=0.5, **kw):
    return {
        "claim_id": cid,
        "claim": f"claim {cid}",
        "paper_value": "0.4-0.6",
        "model": model,
        "measured": measured,
        "ci_low": measured - 0.1,
        "ci_high": measured + 0.1,
        "p": 0.01,
        "verdict": verdict,
        "effect_name": "a difference (rad)",
        **kw,
    }


def _records():
    return [
        {
            "chapter": "curvature",
            "model": "organism-gpt2",
            "summary": {
                "claims": [
                    _row("curv_gap", "organism-gpt2", "reproduced", 0.41),
                    _row("curv_range", "organism-gpt2", "not reproduced", 1.3),
                ]
            },
        },
        {
            "chapter": "curvature",
            "model": "minilm",
            "summary": {
                "claims": [
                    _row("curv_gap", "minilm", "partially", 0.2),
                    _row("curv_range", "minilm", "not testable", float("nan"), note="no layers"),
                ]
            },
        },
        {
            "chapter": "reanalysis",
            "model": "peer-gpt2",
            "summary": {
                "claims": [
                    _row("reanalysis_released_curvature", "peer-gpt2", "reproduced", 1e-7),
                    _row("own_check", "peer-gpt2", "check passed", 0.0, self_check=True),
                    _row("reanalysis_paper_ci", "peer-gpt2", "not reproduced", 0.17),
                ]
            },
        },
        {
            "chapter": "weight_update_signature",
            "model": "organism-llama",
            "summary": {
                "claims": [
                    _row("P2.qk", "organism-llama", "reproduced", 7.5, stage="sft"),
                    _row("P2.qk", "organism-llama", "partially", 6.9, stage="dpo"),
                ]
            },
        },
    ]


def test_badges_are_words_with_a_class_never_emoji():
    for v in VERDICTS:
        html = badge(v)
        assert re.fullmatch(
            rf'<span class="lamina-verdict lamina-verdict--[a-z-]+">{v}</span>', html
        )
        assert not EMOJI.search(html)
    assert "lamina-verdict--not-reproduced" in badge("not reproduced")
    assert "&lt;" in badge("<b>")  # escaped


def test_self_check_flag_wins_over_the_id_rule():
    assert is_self_check({"claim_id": "reanalysis_released_ci"})
    assert not is_self_check({"claim_id": "reanalysis_paper_ci"})
    assert not is_self_check({"claim_id": "reanalysis_released_ci", "self_check": False})
    assert is_self_check({"claim_id": "P2.qk", "self_check": True})
    assert is_self_check({"claim_id": "x", "self_check": "true"})
    # lamina.evidence.claims.Claim rows carry a kind
    assert is_self_check({"claim_id": "self-reanalysis-curvature", "kind": "self-check"})
    assert not is_self_check({"claim_id": "self-odd", "kind": "paper"})
    assert is_self_check({"claim_id": "self-reanalysis-curvature"})
    assert not is_self_check({"claim_id": "x", "self_check": float("nan")})


def test_model_colours_are_stable_distinct_and_cover_new_models():
    known = model_colors(MODEL_COLORS)
    assert len(set(known.values())) == len(MODEL_COLORS)
    # aliases and variants keep their model's colour
    assert (
        model_colors(["organism-gpt2-micro"])["organism-gpt2-micro"]
        == MODEL_COLORS["organism-gpt2"]
    )
    assert (
        model_colors(["organism-llama@sft"])["organism-llama@sft"] == MODEL_COLORS["organism-llama"]
    )
    assert (
        model_colors(["HuggingFaceTB/SmolLM2-135M-Instruct"])["HuggingFaceTB/SmolLM2-135M-Instruct"]
        == MODEL_COLORS["smollm2-135m-instruct"]
    )
    a = model_colors(["some/new-model", "organism-gpt2"])
    b = model_colors(["organism-gpt2", "some/new-model"])
    assert a == b  # the order a chart lists models in does not change their colours
    assert re.fullmatch(r"#[0-9A-Fa-f]{6}", a["some/new-model"])


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8])
def test_facets_fit_the_page(n):
    for legend in (True, False):
        cols = facet_columns(n, legend=legend)
        width = facet_width(cols, legend=legend)
        assert 1 <= cols <= n
        assert width >= FACET_MIN_WIDTH or cols == 1
        assert cols * width + (cols - 1) * 16 + 60 + (130 if legend else 0) <= PAGE_WIDTH
    assert facet_columns(4) == 2  # balanced rows, not 3 + 1


def test_wrap_label_keeps_every_character():
    for text in ["organism-gpt2", "/tmp/x/quick-book0/tiny-models0/llama", "a b c d e f g"]:
        lines = wrap_label(text, 8)
        assert "".join(lines).replace(" ", "") == text.replace(" ", "")
        assert all(len(line) <= 8 or not re.search(r"[-/_ ]", line[:-1]) for line in lines)


def test_summary_counts_only_claims_of_the_papers():
    table = claims_table(_records())
    line = summary_line(table)
    # paper claims: curv_gap (2 rows), curv_range (2), reanalysis_paper_ci (1), P2.qk (2)
    assert line.startswith("4 claims of the papers, tested on 4 model(s): of the 7 verdicts")
    assert "2 reproduced, 2 partially, 2 not reproduced, 1 not testable." in line
    assert "2 self-checks of lamina itself, 2 of them passed" in line
    assert "Not run:" in line and "layer_anatomy" in line
    by_model = line.split(" By model: ")[1].split(". Not counted")[0]
    assert [part.split("`")[1] for part in by_model.split("; ")] == [
        "peer-gpt2", "minilm", "organism-gpt2", "organism-llama"
    ]  # every model named, in MODEL_ORDER
    counts = [int(n) for n in re.findall(r"(\d+) (?:reproduced|partially|not)", by_model)]
    assert sum(counts) == 7  # the per-model counts add up to the verdicts


def test_the_real_models_lead_the_matrix_and_are_named_in_the_summary():
    rows = [
        {"claim_id": "c", "claim": "c", "verdict": "reproduced", "model": m, "kind": "paper"}
        for m in ("organism-gpt2", "gemma-3-270m", "some/hub-model", "smollm2-135m-instruct")
    ]
    table = claims_table([{"chapter": "curvature", "model": "x", "summary": {"claims": rows}}])
    heads = re.findall(r'<th class="lamina-model"[^>]*>([^<]*)</th>', matrix_html(table))
    assert heads == ["smollm2-135m-instruct", "gemma-3-270m", "organism-gpt2", "some/hub-model"]
    line = summary_line(table)
    assert "By model: `smollm2-135m-instruct` 1 reproduced; `gemma-3-270m` 1 reproduced;" in line


def test_matrix_has_a_row_per_claim_a_column_per_model_and_links():
    table = claims_table(_records())
    html = matrix_html(table)
    assert not EMOJI.search(html)
    heads = re.findall(r'<th class="lamina-model"[^>]*>([^<]*)</th>', html)
    assert heads == ["peer-gpt2", "minilm", "organism-gpt2", "organism-llama"]  # MODEL_ORDER
    assert html.count('href="executed/curvature.html"') == 2  # two curvature claims
    assert f'href="scorecard.html#{section_anchor("curv_gap")}"' in html
    # the two-stage cell counts its stages; a single row shows its value
    assert "lamina-cell--mixed" in html and ">1/2<" in html
    assert ">0.41<" in html
    # self-checks come after the paper claims, in their own group
    assert html.index("Self-checks") > html.index("claim reanalysis_paper_ci")
    assert html.index("claim own_check") > html.index("Self-checks")


def test_scorecard_states_each_claim_once_with_a_row_per_model():
    md = scorecard_markdown(claims_table(_records()))
    assert md.count("### claim curv_gap") == 1
    section = md.split("### claim curv_gap")[1].split("###")[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert len(rows) == 2 and all(line.count("|") == 7 for line in rows)  # ... verdict | OSC |
    assert "lamina-verdict--partially" in section
    assert "no layers" in md  # the not-testable reason is kept
    assert not EMOJI.search(md)


def test_pages_written_from_results_files(tmp_path):
    from lamina.states.io import write_results

    results = tmp_path / "results"
    for rec in _records():
        write_results(rec["chapter"], rec["model"], summary=rec["summary"], config={}, root=results)
    (tmp_path / "book" / "executed").mkdir(parents=True)
    paths = write_pages(tmp_path, results)
    pages = {p.name: p.read_text() for p in paths}
    for name in ("abstract.md", "scorecard.md", "comparison.md"):
        assert 'class="lamina-matrix"' in pages[name], name
        assert not EMOJI.search(pages[name]), name
    assert pages["scorecard.md"].index("lamina-matrix") < pages["scorecard.md"].index("## ")


def test_caption_reads_its_numbers_from_the_claims():
    claims = pd.DataFrame([_row("curv_gap", "organism-gpt2", "partially", 0.112)])
    html = caption_html(
        "Curvature per prompt.", "the gap between the boxes", claims=claims, claim_id="curv_gap"
    )
    assert "0.112 [0.012, 0.212]" in html and "lamina-verdict--partially" in html
    assert html.startswith('<p class="lamina-caption">')
    assert "curv_gap" in html


def test_tables_scroll_and_show_verdicts_as_badges():
    df = pd.DataFrame({"measured": [1.0], "verdict": ["reproduced"], "claim_id": ["<x>"]})
    html = table_html(df)
    assert html.startswith('<div class="lamina-scroll">')
    assert "&lt;x&gt;" in html and "lamina-verdict--reproduced" in html
    # the verdict column comes right after the claim id
    assert html.index("claim_id") < html.index("verdict") < html.index("measured")


def _notebook_cells():
    from pathlib import Path

    import jupytext

    root = Path(__file__).resolve().parents[2] / "notebooks"
    for path in sorted(root.glob("*.py")):
        yield path.stem, jupytext.read(path).cells


def test_every_code_cell_of_every_chapter_is_folded():
    """Code is one click away, never in the reader's way: each code cell is tagged
    hide-input (or remove-input) in the chapter's source, and the first cell is prose."""
    for chapter, cells in _notebook_cells():
        assert cells[0].cell_type == "markdown", chapter
        for i, cell in enumerate(cells):
            if cell.cell_type != "code":
                continue
            tags = set(cell.metadata.get("tags", []))
            assert tags & {"hide-input", "remove-input"}, f"{chapter} cell {i} is not folded"


def test_every_figure_has_a_caption():
    """A cell that draws an Altair chart also writes its caption (show_figure/caption_html)."""
    for chapter, cells in _notebook_cells():
        for i, cell in enumerate(cells):
            if cell.cell_type == "code" and "alt.Chart(" in cell.source:
                assert "show_figure(" in cell.source or "caption_html(" in cell.source, (
                    f"{chapter} cell {i} draws a chart without a caption"
                )


def test_papermills_injected_parameters_are_folded(tmp_path):
    import nbformat

    from lamina.book.execute import fold_injected_parameters

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("a = 1", metadata={"tags": ["parameters", "hide-input"]}),
        nbformat.v4.new_code_cell("a = 2", metadata={"tags": ["injected-parameters"]}),
        nbformat.v4.new_code_cell("print(a)"),
    ]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    fold_injected_parameters(path)
    cells = nbformat.read(path, as_version=4).cells
    assert cells[1].metadata["tags"] == ["injected-parameters", "hide-input"]
    assert "tags" not in cells[2].metadata
