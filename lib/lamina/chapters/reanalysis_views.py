"""The reanalysis chapter as the notebook shows it (``notebooks/reanalysis.py``): one run of
:class:`lamina.chapters.reanalysis.Config` with its results written and the values the prose
quotes glued (:func:`run_page`), then one call
per displayed section. Every view takes the run's result, or None when paper 1's released
states are absent, and then says so; the notebook only narrates (issue 24 item 4). Titles come
from the claims (``lamina.book.chapter.finding_title``) and captions name what to look at,
never a finding.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import altair as alt
import pandas as pd

from lamina.book.chapter import claims_view, finding_title
from lamina.book.charts import caption_html, fit_titles, show_figure
from lamina.book.glue import glue
from lamina.book.tables import details_html, show_verdicts
from lamina.chapters.reanalysis import Config, peer_available, run
from lamina.chapters.results import ExperimentResult
from lamina.sources.gguf_models import OFFLINE_GGUF
from lamina.trajectory.analyses.reanalysis import curvature_per_category
from lamina.trajectory.analyses.reanalysis_models import curvature_range_summary, headline_table

__all__ = [
    "GLUED_CLAIMS",
    "bootstrap_table",
    "claims_table",
    "convergence_section",
    "curvature_section",
    "glue_reanalysis",
    "real_models_section",
    "Config",
    "run_page",
]

GLUED_CLAIMS = {
    "self-reanalysis-released-curvature": "re_curv",
    "self-reanalysis-bootstrap-table-source": "re_boot",
    "self-reanalysis-released-ci": "re_ci",
    "p1-reanalysis-gap": "re_gap",
    "p1-reanalysis-reasoning-range": "re_reason",
    "p1-reanalysis-lexical-range": "re_lex",
    "p1-reanalysis-peak": "re_peak",
}
"""claim_id -> glue name of the claims the prose quotes (``<name>``: measured value,
``<name>_verdict``, ``<name>_reason``)."""


def _display(*objects: Any) -> None:
    """Display ``objects``; a chart's titles are wrapped to the page first (``fit_titles``)."""
    from IPython.display import display

    display(*(fit_titles(o) if isinstance(o, alt.TopLevelMixin) else o for o in objects))


def _folded(frame: pd.DataFrame, summary: str) -> None:
    from IPython.display import HTML

    _display(HTML(details_html(frame, summary)))


def _markdown(text: str) -> None:
    from IPython.display import Markdown

    _display(Markdown(text))


def _caption(what: str, look_at: str, claims: pd.DataFrame, claim_id: str) -> None:
    from IPython.display import HTML

    _display(HTML(caption_html(what, look_at, claims=claims, claim_id=claim_id)))


def run_page(config: Config, results_root: str | os.PathLike | None = None) -> ExperimentResult | None:
    """The chapter's run (:func:`~lamina.chapters.reanalysis.run`) with its results written
    under ``results_root`` (None: ``lamina.states.io.results_dir()``), or None when the
    released states are absent; then :func:`glue_reanalysis`."""
    available = peer_available(config)
    result = run(config) if available else None
    if result is not None:
        result.write(results_root)
    glue("re_available", "present" if available else "absent")
    glue_reanalysis(result)
    return result


def glue_reanalysis(result: ExperimentResult | None) -> None:
    """Glue each claim of :data:`GLUED_CLAIMS` (measured value, verdict, reason; NaN, "not
    testable" and "released data absent" without a result) and ``re_other_min_diff``: the
    smallest per-prompt curvature difference (rad) from the released values over the
    conventions other than the released code's."""
    for cid, key in GLUED_CLAIMS.items():
        rows = None if result is None else result.claims[result.claims["claim_id"] == cid]
        if rows is None or rows.empty:
            glue(key, float("nan"))
            glue(key + "_verdict", "not testable")
            glue(key + "_reason", "released data absent")
            continue
        glue(key, float(rows["measured"].iloc[0]))
        glue(key + "_verdict", str(rows["verdict"].iloc[0]))
        glue(key + "_reason", str(rows["reason"].iloc[0]))
    if result is None:
        glue("re_other_min_diff", float("nan"))
        return
    match = result.tables["per_prompt_match"]
    others = match[match["convention"] != "released code"]["curvature_max_diff"]
    glue("re_other_min_diff", float(others.min()) if len(others) else float("nan"))


def curvature_section(result: ExperimentResult | None) -> None:
    """Mean curvature (rad) per category and convention (bars, with its caption), the three
    parts of the curvature claim with single-token prompts excluded and included, and the
    per-prompt agreement with the released metrics table."""
    if result is None:
        _markdown("*The released states are absent; nothing to reanalyse.*")
        return
    chart = (
        alt.Chart(result.tables["curvature"])
        .mark_bar()
        .encode(
            x=alt.X("mean_curvature:Q", title="mean curvature (rad)"),
            y=alt.Y("convention:N", title=None),
            color="category:N",
            yOffset="category:N",
        )
        .properties(title="Mean curvature per category under each representation convention")
    )
    _display(chart)
    _caption(
        "The mean curvature (radians) of each released prompt category under each "
        "representation convention.",
        "which conventions put reasoning in the paper's 0.71-0.83 rad and lexical "
        "variation in its 0.27-0.31 rad",
        result.claims,
        "p1-reanalysis-gap",
    )
    _markdown(
        "Paper 1's curvature claim has three parts: reasoning in 0.71–0.83 rad, lexical "
        "variation (here the released single-word prompts) in 0.27–0.31 rad, and a gap of at "
        "least 0.40 rad. Each convention, with single-token prompts excluded (released "
        "`metadata.parquet` token counts, or a position-0 state recognised by its norm) and "
        "included:"
    )
    _display(result.tables["curvature_parts"].round(3))
    _folded(
        result.tables["per_prompt_match"].round(6),
        "Per-prompt agreement with the released metrics table (max absolute difference)",
    )


def bootstrap_table(result: ExperimentResult | None) -> None:
    """The released bootstrap table beside the means it may come from (nothing without a
    result)."""
    if result is not None:
        _display(result.tables["bootstrap_source"].round(4))


def convergence_section(result: ExperimentResult | None) -> None:
    """The mean per-prompt convergence index per layer, one line per convention (titled by the
    peak claim, with its caption), then the sensitivity table (nothing without a result)."""
    if result is None:
        return
    claims = result.claims
    _display(
        alt.Chart(result.tables["convergence"])
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:Q"),
            y=alt.Y("ci:Q", title="mean per-prompt CI"),
            color="convention:N",
        )
        .properties(
            title=finding_title(claims, "p1-reanalysis-peak", "Highest peak CI over conventions")
        )
    )
    _caption(
        "The mean per-prompt convergence index at each layer of the released GPT-2 "
        "states, one line per representation convention.",
        "the height of each peak against the paper's 0.41-0.58",
        claims,
        "p1-reanalysis-peak",
    )
    _folded(
        result.tables["sensitivity"].drop(columns=["definition"]).round(4),
        "The convergence index under every convention",
    )


def claims_table(result: ExperimentResult | None) -> None:
    """Every claim and self-check of the run as the other chapters show theirs: the verdict
    grid, then the full table folded (:func:`lamina.book.tables.show_verdicts`; nothing
    without a result)."""
    if result is not None:
        show_verdicts(claims_view(result.claims))


def real_models_section(
    result: ExperimentResult | None, real_models: str | Sequence[str] | None
) -> None:
    """The released prompts on other models: the run's notes about ``real_models``, which
    models ran and each row kind, the headline chart (curvature and peak CI per convention and
    model, 95% CIs) with its caption, the curvature-range summary, then, folded, the headline
    table and the curvature per released category."""
    if result is None:
        _markdown("*Not testable: released prompts absent.*")
        return
    real = result.tables["real_models"]
    ran = [m for m in real["model"].unique() if m != "peer-gpt2"]
    names = _requested(real_models)
    for note in result.notes:
        if any(note.startswith(m) for m in names):
            _markdown(f"*{note}*")
    _markdown(
        "Models run on the released prompts: " + (", ".join(f"`{m}`" for m in ran) or "none")
        + ". Row kinds: " + "; ".join(
            f"**{m}**: {r}" for m, r in real.groupby("model", sort=False)["role"].first().items())
        + "."
    )  # fmt: skip
    show_figure(
        _headline_chart(real),
        what="Over all released prompts of each convention's pooling: mean curvature (rad) and "
        "the peak of the prompt-mean convergence index (chord units), per model ("
        + ", ".join(real["model"].unique()) + ").",
        look_at="where the other models' curvature falls against peer-gpt2's under the same "
        "convention, and against 0.27-0.83 rad (paper text) and 0.94-1.27 rad (released)",
    )
    _markdown("\n".join(f"- {line}" for line in curvature_range_summary(real)))
    if not ran:
        _markdown("*No other model was run (`real_models` is empty).*")
    _folded(headline_table(real),
            "All prompts, estimate [95% CI], per convention and model (peer-gpt2 first)")
    _folded(curvature_per_category(real).reset_index(),
            "Curvature (rad) per released category, estimate [95% CI], per convention and model")


def _requested(real_models: str | Sequence[str] | None) -> list[str]:
    """The model names ``real_models`` asks for (``"default"``: every offline GGUF alias, run
    or skipped), whose notes the section shows."""
    if isinstance(real_models, str):
        return list(OFFLINE_GGUF) if real_models == "default" else [real_models]
    return list(real_models or [])


def _headline_chart(real: pd.DataFrame) -> alt.FacetChart:
    """Estimate and 95% CI of each headline metric over all prompts (length excluded: it is in
    each model's own state units), convention by model, one panel per metric."""
    headline = real[(real["category"] == "all") & (real["metric"] != "length")].copy()
    headline["what"] = headline["metric"]
    models = list(real["model"].unique())
    return (
        (
            alt.Chart()
            .mark_point(filled=True)
            .encode(
                x=alt.X("estimate:Q", title="value (95% CI)", scale=alt.Scale(zero=False)),
                y=alt.Y("convention:N", title=None),
                color=alt.Color("model:N", title="model", sort=models),
                yOffset=alt.YOffset("model:N", sort=models),
                tooltip=["model", "convention", "metric", "n_prompts",
                         alt.Tooltip("estimate:Q", format=".3f"),
                         alt.Tooltip("ci_low:Q", format=".3f"),
                         alt.Tooltip("ci_high:Q", format=".3f")],
            )
            + alt.Chart().mark_rule().encode(
                x="ci_low:Q", x2="ci_high:Q", y="convention:N",
                color=alt.Color("model:N", sort=models),
                yOffset=alt.YOffset("model:N", sort=models),
            )
        )
        .properties(width=320, height=220)
        .facet(column=alt.Column("what:N", title=None), data=headline)
        .resolve_scale(x="independent")
        .properties(title="Curvature and peak convergence index per convention and model")
    )  # fmt: skip
