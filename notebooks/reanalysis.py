# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Reanalysis of the released GPT-2 states
#
# :::{admonition} Released numbers vs the paper's text
# Paper 1's repository reports GPT-2 last-token curvature of 0.94–1.27 rad and peak convergence
# indices of 0.14–0.23 (across its three models); the paper's text says 0.27–0.83 rad and
# 0.41–0.58.
# :::
#
# Here lamina's own metrics run on the states that paper 1 released (170 prompts, last token;
# 50 prompts with every token), under each representation convention, beside the released tables.
# The same released prompts then run through other models (by default the real pretrained causal
# LMs SmolLM2-135M-Instruct and Gemma-3-270m), whose values sit beside the released GPT-2 states'.

# %% tags=["parameters", "hide-input"]
model = "peer-gpt2"  # fixed: this chapter reads paper 1's released GPT-2 states only
pooling = "last"  # unused: every convention is computed
seed = 0  # seeds the bootstraps and permutations
quick = False  # unused: the released data are small
n_bootstrap = 1000  # bootstrap resamples for 95% CIs (at most 1000)
peer_root = None  # paper 1's released data; None: ../shared/peer/latent-trajectories
real_models = ["smollm2-135m-instruct", "gemma-3-270m"]  # also run the released prompts through these; [] skips
results_root = None  # where results are written; None: lamina.states.io.results_dir()

# %% tags=["hide-input"]
import altair as alt
from IPython.display import HTML, Markdown, display

from lamina.book import glue, setup_altair
from lamina.book.chapter import finding_title
from lamina.book.charts import caption_html, show_figure
from lamina.chapters.reanalysis import peer_available, run_reanalysis
from lamina.chapters.reanalysis_models import curvature_range_summary, headline_table
from lamina.chapters.trajectory import TrajectoryConfig

setup_altair()
config = TrajectoryConfig(
    model=model, pooling=pooling, seed=seed, quick=quick, peer_root=peer_root, n_bootstrap=n_bootstrap
)
available = peer_available(config)
result = run_reanalysis(config, real_models) if available else None
if result is not None:
    result.write(results_root)
glue("re_available", "present" if available else "absent")

# %% [markdown]
# The released data are {glue:text}`re_available`. When they are absent, this page only says so:
# lamina never depends on them.
#
# Two kinds of rows follow. **Self-checks** test lamina against the released numbers (its
# metrics, the source of the released tables); they never count as reproductions of paper 1.
# **Claims** test paper 1's statements on the released states.
#
# ## Curvature: which convention gives which number

# %% tags=["hide-input"]
if result is None:
    display(Markdown("*The released states are absent; nothing to reanalyse.*"))
else:
    claims = result.claims
    curv = result.tables["curvature"]
    chart = (
        alt.Chart(curv)
        .mark_bar()
        .encode(
            x=alt.X("mean_curvature:Q", title="mean curvature (rad)"),
            y=alt.Y("convention:N", title=None),
            color="category:N",
            yOffset="category:N",
        )
        .properties(title="Mean curvature per category under each representation convention")
    )
    display(chart)
    display(
        HTML(
            caption_html(
                "The mean curvature (radians) of each released prompt category under each "
                "representation convention.",
                "which conventions put reasoning in the paper's 0.71-0.83 rad and lexical "
                "variation in its 0.27-0.31 rad",
                claims=claims,
                claim_id="p1-reanalysis-gap",
            )
        )
    )
    display(
        Markdown(
            "Paper 1's curvature claim has three parts: reasoning in 0.71–0.83 rad, lexical "
            "variation (here the released single-word prompts) in 0.27–0.31 rad, and a gap of at "
            "least 0.40 rad. Each convention, with single-token prompts excluded (released "
            "`metadata.parquet` token counts, or a position-0 state recognised by its norm) and "
            "included:"
        )
    )
    display(result.tables["curvature_parts"].round(3))
    display(
        Markdown("Per-prompt agreement with the released metrics table (max absolute difference):")
    )
    display(result.tables["per_prompt_match"].round(6))

# %% [markdown]
# ## The released bootstrap table
# `results/statistics/bootstrap_ci.csv` gives category means of curvature. The table below sets
# them beside the means over the prompts of the released per-prompt metrics table
# (`gpt2_trajectory_metrics.csv`) and over all 170 released trajectories.

# %% tags=["hide-input"]
if result is not None:
    display(result.tables["bootstrap_source"].round(4))

# %% [markdown]
# ## Convergence index profile

# %% tags=["hide-input"]
if result is not None:
    ci = result.tables["convergence"]
    display(
        alt.Chart(ci)
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
    display(
        HTML(
            caption_html(
                "The mean per-prompt convergence index at each layer of the released GPT-2 "
                "states, one line per representation convention.",
                "the height of each peak against the paper's 0.41-0.58",
                claims=claims,
                claim_id="p1-reanalysis-peak",
            )
        )
    )
    display(result.tables["sensitivity"].drop(columns=["definition"]).round(4))

# %% tags=["hide-input"]
names = {
    "self-reanalysis-released-curvature": "re_curv",
    "self-reanalysis-bootstrap-table-source": "re_boot",
    "self-reanalysis-released-ci": "re_ci",
    "p1-reanalysis-gap": "re_gap",
    "p1-reanalysis-reasoning-range": "re_reason",
    "p1-reanalysis-lexical-range": "re_lex",
    "p1-reanalysis-peak": "re_peak",
}
for cid, key in names.items():
    rows = result.claims[result.claims["claim_id"] == cid] if result is not None else []
    found = len(rows) > 0
    glue(key, float(rows["measured"].iloc[0]) if found else float("nan"))
    glue(key + "_verdict", str(rows["verdict"].iloc[0]) if found else "not testable")
    glue(key + "_reason", str(rows["reason"].iloc[0]) if found else "released data absent")
if result is not None:
    match = result.tables["per_prompt_match"]
    others = match[match["convention"] != "released code"]["curvature_max_diff"]
    glue("re_other_min_diff", float(others.min()) if len(others) else float("nan"))
    display(result.claims.drop(columns=["claim"]).round(4))
else:
    glue("re_other_min_diff", float("nan"))

# %% [markdown]
# ## The released prompts on other models
# Each model of `real_models` reads the released prompts (the 170 last-token prompts; the 50
# released with every token for the mean-pooled conventions) through lamina's extraction. Rows
# of peer-gpt2 are the released GPT-2 states: the self-checks above (matching released values)
# apply to them only. Rows of any other model are that model's own values; there is no released
# value to match them to. Each value has a 95% CI resampling prompts (stratified by category);
# the peak convergence index re-selects its peak layer in every resample.

# %% tags=["hide-input"]
if result is None:
    display(Markdown("*Not testable: released prompts absent.*"))
else:
    real = result.tables["real_models"]
    ran = [m for m in real["model"].unique() if m != "peer-gpt2"]
    for note in result.notes:
        if any(note.startswith(m) for m in real_models):
            display(Markdown(f"*{note}*"))
    display(Markdown(
        "Models run on the released prompts: " + (", ".join(f"`{m}`" for m in ran) or "none")
        + ". Row kinds: " + "; ".join(
            f"**{m}**: {r}" for m, r in real.groupby("model", sort=False)["role"].first().items())
        + "."
    ))
    # length is in each model's own state units: in the tables below, not on a shared axis
    headline = real[(real["category"] == "all") & (real["metric"] != "length")].copy()
    headline["what"] = headline["metric"]
    chart = (
        (
            alt.Chart()
            .mark_point(filled=True)
            .encode(
                x=alt.X("estimate:Q", title="value (95% CI)", scale=alt.Scale(zero=False)),
                y=alt.Y("convention:N", title=None),
                color=alt.Color("model:N", title="model", sort=list(real["model"].unique())),
                yOffset=alt.YOffset("model:N", sort=list(real["model"].unique())),
                tooltip=["model", "convention", "metric", "n_prompts",
                         alt.Tooltip("estimate:Q", format=".3f"),
                         alt.Tooltip("ci_low:Q", format=".3f"),
                         alt.Tooltip("ci_high:Q", format=".3f")],
            )
            + alt.Chart().mark_rule().encode(
                x="ci_low:Q", x2="ci_high:Q", y="convention:N",
                color=alt.Color("model:N", sort=list(real["model"].unique())),
                yOffset=alt.YOffset("model:N", sort=list(real["model"].unique())),
            )
        )
        .properties(width=320, height=220)
        .facet(column=alt.Column("what:N", title=None), data=headline)
        .resolve_scale(x="independent")
        .properties(title="Curvature and peak convergence index per convention and model")
    )
    show_figure(
        chart,
        what="Over all released prompts of each convention's pooling: mean curvature (rad) and "
        "the peak of the prompt-mean convergence index (chord units), per model (" + ", ".join(real["model"].unique()) + ").",
        look_at="where the other models' curvature falls against peer-gpt2's under the same "
        "convention, and against 0.27-0.83 rad (paper text) and 0.94-1.27 rad (released)",
    )
    display(Markdown("\n".join(f"- {line}" for line in curvature_range_summary(real))))
    if not ran:
        display(Markdown("*No other model was run (`real_models` is empty).*"))
    display(Markdown("All prompts, estimate [95% CI], per convention (peer-gpt2 first):"))
    display(headline_table(real))
    display(Markdown("Curvature (rad) per released category, estimate [95% CI]:"))
    per_cat = real[(real["metric"] == "curvature (rad)") & (real["category"] != "all")]
    display(
        per_cat.assign(value=[f"{e:.3f} [{lo:.3f}, {hi:.3f}]" for e, lo, hi in zip(
            per_cat["estimate"], per_cat["ci_low"], per_cat["ci_high"], strict=True)])
        .pivot_table(index=["convention", "model"], columns="category", values="value",
                     aggfunc="first", sort=False)
    )

# %% [markdown]
# :::{admonition} Self-checks (lamina against the released numbers)
# :class: note
# - With the released code's convention (last token, no layer 0, post-norm final state),
#   lamina's per-prompt curvature is within {glue:text}`re_curv:.2g` rad of the released values:
#   **{glue:text}`re_curv_verdict`** ({glue:text}`re_curv_reason`); the closest other convention
#   misses by {glue:text}`re_other_min_diff:.3f` rad.
# - The released bootstrap table's curvature means differ from the means over the prompts of
#   the released per-prompt table by at most {glue:text}`re_boot:.2g` rad:
#   **{glue:text}`re_boot_verdict`** ({glue:text}`re_boot_reason`).
# - lamina's convergence profile is within {glue:text}`re_ci:.3f` of the released one:
#   **{glue:text}`re_ci_verdict`** ({glue:text}`re_ci_reason`).
# :::
#
# :::{admonition} Paper 1's claims on the released states
# :class: important
# - Curvature gap (reasoning − lexical, paper text's convention, single-token prompts
#   excluded): {glue:text}`re_gap:.3f` rad, **{glue:text}`re_gap_verdict`**
#   ({glue:text}`re_gap_reason`).
# - Reasoning in 0.71–0.83 rad: {glue:text}`re_reason:.3f`, **{glue:text}`re_reason_verdict`**;
#   lexical in 0.27–0.31 rad: {glue:text}`re_lex:.3f`, **{glue:text}`re_lex_verdict`**.
# - Peak CI 0.41–0.58: under the paper text's convention (fixed in advance) the peak is
#   {glue:text}`re_peak:.3f`,
#   **{glue:text}`re_peak_verdict`** ({glue:text}`re_peak_reason`).
# :::
#
# ## Caveats
# - The released final state is post-norm; the raw state after block 12 was not released, so the
#   raw-final conventions end at block 11.
# - Mean pooling is available only for the 50 prompts whose every token was released.
# - The peak claim is judged under the paper text's convention, fixed before the data were
#   seen; the other conventions' peaks are in the sensitivity table, not in the verdict.
# - The other models' rows come from lamina's extraction of the released prompt texts: their
#   mean pooling covers every token the tokenizer adds (a BOS token where the model has one), and
#   `smollm2-135m-instruct` and `gemma-3-270m` carry 4-bit GGUF weights dequantised to fp32.
#   Trajectory length is in each model's own state units and is not comparable across models.
# - The peak convergence index's interval resamples prompts and re-selects the peak layer; a
#   repeated prompt in a resample is not counted as a second member of its own category.
