"""Charts sized to their data and detail folded (issue 25): titles wrapped to the page,
per-layer charts on relative depth when models differ in depth, zoomed scales, and detail
tables / model notes inside <details>. Tests read the returned Altair spec or HTML."""

from __future__ import annotations

import altair as alt
import pandas as pd

from lamina.book.charts import (
    PAGE_WIDTH,
    TITLE_CHAR_WIDTH,
    facet,
    fit_titles,
    layer_axis,
    wrap_title,
    zoomed,
)
from lamina.book.tables import details_html, notes_html

LONG = (
    "Peak convergence index on smollm2-135m-instruct: 0.123 [0.1, 0.15] (paper: 0.41-0.58) "
    "— smollm2-135m-instruct: not reproduced; reproduced on 0 of 5 sources"
)


def _fits(lines: object) -> bool:
    lines = [lines] if isinstance(lines, str) else lines
    return all(len(s) * TITLE_CHAR_WIDTH <= PAGE_WIDTH for s in lines)  # type: ignore[union-attr]


def test_wrap_title_breaks_a_long_title_into_lines_that_fit_and_keeps_every_word():
    lines = wrap_title(LONG)
    assert isinstance(lines, list) and len(lines) >= 2
    assert _fits(lines)
    assert " ".join(lines).split() == LONG.split()
    assert wrap_title("Short title") == "Short title"
    params = alt.TitleParams("x")
    assert wrap_title(params) is params


def test_fit_titles_wraps_titles_at_every_level_of_the_spec():
    df = pd.DataFrame({"model": ["a", "b"], "x": [0, 1], "y": [1, 2]})
    line = alt.Chart(df).mark_line().encode(x="x:Q", y="y:Q").properties(title=LONG)
    layered = (line + line).properties(title=LONG)
    chart = alt.Chart(df).mark_point().encode(x="x:Q").properties(title=LONG)
    out = fit_titles(alt.vconcat(layered, chart).properties(title=LONG)).to_dict()
    assert _fits(out["title"]) and isinstance(out["title"], list)
    first = out["vconcat"][0]
    assert _fits(first["title"]) and _fits(first["layer"][0]["title"])
    assert _fits(out["vconcat"][1]["title"])
    faceted = facet(line, "model", df["model"], title=LONG).to_dict()
    assert isinstance(faceted["title"], list) and _fits(faceted["title"])


def test_layer_axis_is_relative_depth_when_models_differ_in_depth():
    df = pd.DataFrame(
        {"model": ["s"] * 3 + ["d"] * 5, "layer": [0, 1, 2, 0, 1, 2, 3, 4], "v": range(8)}
    )
    out, x, tip = layer_axis(df)
    assert x.to_dict()["field"] == "depth"
    assert x.to_dict()["scale"]["domain"] == [0, 1]
    assert out.groupby("model")["depth"].max().tolist() == [1.0, 1.0]
    assert out.loc[out["model"] == "d", "depth"].tolist() == [0, 0.25, 0.5, 0.75, 1.0]
    assert tip.to_dict()["field"] == "layer"  # the absolute layer stays in the tooltip
    same, x_same, _ = layer_axis(df[df["model"] == "d"])
    assert x_same.to_dict()["field"] == "layer"
    explicit, _, _ = layer_axis(df.assign(n=[3] * 3 + [9] * 5), n_layers="n")
    assert explicit.loc[explicit["model"] == "d", "depth"].max() == 0.5


def test_zoomed_scale_shows_a_small_difference_without_zero():
    spec = zoomed([0.70, 0.75, 0.72]).to_dict()
    assert spec["zero"] is False
    lo, hi = spec["domain"]
    assert 0.6 < lo < 0.70 and 0.75 < hi < 0.85  # 0.05 rad spans most of the axis
    assert zoomed([float("nan")]).to_dict() == {"zero": False}


def test_detail_tables_and_notes_are_folded_in_details():
    df = pd.DataFrame({"layer": range(12), "value": range(12)})
    text = details_html(df, "Per-layer values")
    assert text.startswith('<details class="lamina-details"><summary>Per-layer values (12 rows)')
    assert text.rstrip().endswith("</details>") and "lamina-table" in text
    notes = notes_html(["first `x` <b>", "second", "first `x` <b>"])
    assert notes.count("<li>") == 2 and "(2)" in notes and "<code>x</code>" in notes
    assert "&lt;b&gt;" in notes and notes.startswith("<details")
    assert notes_html([]) == ""


def test_verdict_grid_has_a_row_per_claim_a_column_per_model_and_badges():
    from lamina.book.badges import badge
    from lamina.book.tables import verdict_grid_html

    claims = pd.DataFrame(
        {
            "claim_id": ["c1", "c1", "c2"],
            "model": ["m1", "m2", "m1"],
            "verdict": ["reproduced", "not reproduced", "partially reproduced"],
        }
    )
    text = verdict_grid_html(claims)
    assert text.count("<tr>") == 3  # header + two claims
    assert text.count("<td>") == 4 and "<td>–</td>" in text  # c2 has no m2 row
    # each cell's badge carries its claim, by which the calibration marks' stylesheet finds it
    assert badge("not reproduced", claim="c1") in text
    assert badge("partially reproduced", claim="c2") in text
    staged = verdict_grid_html(
        claims.assign(stage=["sft", "sft", "dpo"]), columns=["model", "stage"]
    )
    assert "m1 · sft" in staged and "m1 · dpo" in staged


def test_figure_html_is_a_static_svg_with_its_caption():
    from lamina.book.charts import figure_html

    df = pd.DataFrame({"x": [0, 1], "y": [1, 2]})
    chart = alt.Chart(df).mark_line().encode(x="x:Q", y="y:Q").properties(title=LONG)
    text = figure_html(chart, what="A line.", look_at="its slope")
    assert "<svg" in text and "lamina-caption" in text and "A line." in text
    assert wrap_title(LONG)[0] in text and wrap_title(LONG)[-1] in text  # one text per line
