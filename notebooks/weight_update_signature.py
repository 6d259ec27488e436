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
# # The weight-update signature (paper 2)
#
# :::{admonition} The claims (paper 2, arXiv 2605.16600)
# "Alignment updates to the query and key matrices are enriched in the principal input
# subspace, while its updates to the output matrices are close to random relative to the
# prediction subspace, and the same signature appears in late pretraining and under every
# objective we apply to one checkpoint, so it is a property of the training stage rather than
# of the objective. […] Read gradients therefore inherit the spectrum of the activations,
# which is the same under every objective, while write gradients inherit the geometry of the
# upstream gradients, which point into the prediction subspace only early in pretraining, when
# the output matrices acquire their prediction geometry. The raw read gradient follows the
# activation spectrum, the optimiser attenuates the concentration it inherits, and
# cancellation between tokens sets the scale of the update but not its direction. A write
# direction derived from the unembedding still changes predictions after alignment, and
# adaptation restricted to any single group of matrices remains effective, so the signature
# describes where training places its updates, not which matrices can carry them."
# :::
#
# No code or full text of paper 2 is public. Every choice it leaves open (the subspace
# dimension k, raw or centred second moments, the text sample, the edit's input direction,
# the adaptation budget) is a named parameter below; the sensitivity section shows how the
# verdicts move with k and the moment.
#
# **The models.** The default set: two real pretrained checkpoints, offline as 4-bit GGUF
# files dequantised to fp32, SmolLM2-135M-Instruct (instruction-tuned) and Gemma-3-270m (a
# base model), then lamina's two model organisms, the models with a full training history.
# A real checkpoint alone supports the paper's third design, "every objective we apply to one
# checkpoint"; claims that need a pretraining history read "not testable" there, with the
# reason. The folded box gives the designs, the budgets, and how to run a real base → aligned
# pair.
#
# :::{admonition} The designs, the budgets, and running the chapter on other models
# :class: dropdown
# **The designs.** The default set leads with two real pretrained checkpoints, offline as
# 4-bit GGUF files dequantised to fp32: SmolLM2-135M-Instruct (30 layers, d = 576), which is
# already instruction-tuned, and Gemma-3-270m (18 layers, d = 640, tied 262k-token
# embeddings), a **base** model. No base/instruct pair is available offline, so the claims
# about the base → aligned ΔW and about pretraining cannot be tested on either. What one
# checkpoint supports is the paper's third design, "every objective we apply to one
# checkpoint": we apply a short continued-LM run, an SFT run and a DPO run to it, with equal
# step and example budgets, and compare the signatures of the three deltas; the mechanism
# (read gradients, Adam's update in those runs, cancellation) and the causal tests run on it
# too. The write-direction claim is about predictions "after alignment": on the instruction-
# tuned checkpoint it is tested on the released model and after our SFT and DPO runs; on a
# base checkpoint only after our SFT and DPO runs, its only alignment (the notes below say
# which, per model). Claims that need a pretraining history are "not testable" there, with
# the reason. Then come lamina's two model organisms, the models with a full training
# history: pretraining checkpoints with their AdamW state, and the same three objectives
# applied to the final checkpoint.
#
# A real checkpoint runs under a budget (`real_*` parameters): the short runs train every
# parameter for `real_steps` AdamW steps of `real_batch` examples at sequences of at most
# `real_max_length` tokens, and only `real_layers` evenly spaced blocks are probed;
# `model_budgets` caps these per model (by default Gemma-3-270m, whose full-parameter AdamW
# step and 262k-way logits cost several times SmolLM2's, gets a smaller budget; the notes of
# the Method section give the budget each model ran with). The text is
# never downloaded and never the evaluation prompts: the organisms' held-out split (or
# lamina's generated curriculum), with the curriculum's SFT and DPO items.
#
# When a hub is reachable, the same code runs on a base → aligned pair of one architecture,
# e.g. SmolLM2-135M → SmolLM2-135M-Instruct (`HF_HUB_OFFLINE=0` lets them download once):
#
# ```
# make chapter CH=weight_update_signature MODEL=HuggingFaceTB/SmolLM2-135M \
#     PARAMS="-p aligned_model HuggingFaceTB/SmolLM2-135M-Instruct \
#             -p base_model HuggingFaceTB/SmolLM2-135M"
# ```
#
# (`target` with `MODEL` as the base does the same.) Revisions (an intermediate checkpoint, a
# Pythia `stepN`) are separate parameters, `-p base_revision …` and `-p target_revision …`:
# `name@revision` is not parsed, because `@` already names organism checkpoints
# (`organism-llama@sft`). A pair carries no training history either, so the claims that need
# it (late and early pretraining, several objectives from one checkpoint, Adam's moments) are
# "not testable" there, each with its reason.
# :::

# %% tags=["parameters", "hide-input"]
model = "default"  # "default": SmolLM2-135M-Instruct, Gemma-3-270m, both organisms; or names
base = "final"  # checkpoint the alignment stages start from; for a real pair, the base model
targets = ["lm", "sft", "dpo"]  # stages compared with base (continued LM, SFT, DPO)
target = None  # a real pair's target (hub name or folder); runs the pair instead of organisms
base_model = None  # a base -> aligned pair of one architecture (hub names or folders)
aligned_model = None
base_revision = None  # a real pair's revisions (branch, tag, commit), e.g. "step143000"
target_revision = None
k = 8  # subspace dimension of the verdicts (reimplementation choice)
k_sweep = [1, 2, 4, 8, 16, 32, 64]  # ks of the enrichment curves
n_tokens = 4096  # tokens of held-out text for the input second moments
text_source = "heldout"  # "heldout" text split or "curriculum" documents
centred = False  # raw E[a aᵀ] and W_U (paper) or centred covariance and mean-free W_U
real_steps = 8  # real checkpoint: AdamW steps per applied objective and per adaptation
real_batch = 4  # examples per step
real_lr = 1e-4  # peak learning rate of those runs
real_tokens = 2048  # tokens for the second moments (the LM gradient gets half)
real_max_length = 128  # tokens per sequence
real_layers = 8  # evenly spaced blocks probed (0 means all)
model_budgets = None  # {model: {real_* field: cap}}; None: lamina's defaults (Gemma smaller)
seed = 0  # seeds every random draw
quick = False  # tiny samples and budgets, for CI

# %% tags=["hide-input"]
from lamina.book import setup_altair
from lamina.book.chapter import show_notes
from lamina.book.tables import show_details, show_verdicts
from lamina.chapters.weight_update_signature import views as V
from lamina.chapters.weight_update_signature.notebook import run_signature, signature_config

setup_altair()
config = signature_config(globals())  # the parameters above
result = run_signature(config)  # measures, writes the results, glues the values quoted below

# %% [markdown]
# ## Method
#
# For a weight change ΔW the probe is the relative subspace fraction
# (`lamina.weights.relative_subspace_fraction`): read matrices (Q, K, V, MLP gate and up) are
# probed on their input side, in the top-k eigenvectors of the second moment of their own
# inputs (`lamina.weights.input_second_moments`, over {glue:text}`ws_n_tokens` tokens of
# {glue:text}`ws_text`); write matrices (attention output, MLP down) on their
# output side, in the prediction subspace, the top-k right singular vectors of W_U.
# Enrichment is RSF / (k/d); an isotropic ΔW gives 1, and so, in expectation, does a random
# k-subspace for any fixed ΔW, which we draw as the empirical null. Verdicts use
# k = {glue:text}`ws_k`; summaries over matrices are geometric means with bootstrap 95% CIs
# and Wilcoxon signed-rank tests; "close to random" means the CI lies within
# [1/m, m] with m = {glue:text}`ws_margin` (reimplementation choice). Models:
# {glue:text}`ws_models` (their notes are folded at the end of the chapter). All the computation is in
# `lamina.chapters.weight_update_signature` (its `views` module draws every figure and table
# below from the run's tables); this run took {glue:text}`ws_seconds` s.

# %% [markdown]
# ## Where alignment puts its updates
#
# :::{admonition} Verdicts
# **Q/K alignment updates are enriched in the principal input subspace.** {glue:text}`ws_align_qk_enriched`
#
# **Alignment updates to the output matrices are close to random.** {glue:text}`ws_align_write_random`
# :::

# %% tags=["hide-input"]
V.enrichment_figure(result)

# %% [markdown]
# The grey band is the 2.5–97.5 % range of the same ΔW against random k-subspaces; the dashed
# line is the mean enrichment of random Gaussian matrices of the same shapes against the same
# subspaces. Both sit at 1 at every k, as they must: the two empirical baselines agree with
# the isotropic one.
#
# ## Late pretraining and every objective
#
# :::{admonition} Verdicts
# **The same signature in late pretraining.** {glue:text}`ws_late_pretraining_signature`
#
# **The same signature under every objective.** {glue:text}`ws_every_objective_signature`
#
# **A property of the stage, not of the objective.** {glue:text}`ws_stage_not_objective`
# :::

# %% [markdown]
# The three deltas side by side: the geometric-mean enrichment at k = {glue:text}`ws_k` of each
# matrix group, for each objective applied to one checkpoint (equal budgets), per model.

# %% tags=["hide-input"]
show_details(V.objective_table(result), "Enrichment per objective and matrix group, per model")

# %% [markdown]
# The short runs on a real checkpoint (first and last training loss, tokens read; every
# objective had the same steps and examples):

# %% tags=["hide-input"]
show_details(V.finetune_table(result), "The short objective runs: losses and tokens")

# %% tags=["hide-input"]
V.pretraining_figure(result)

# %% [markdown]
# ## The mechanism: gradients as sums of outer products
#
# ∇W = Σ_t δ_t a_tᵀ. `lamina.weights.gradients.gradient_geometry` measures the summed gradient, the
# per-token terms and their cancellation without forming any outer product, at the base
# checkpoint, under the three objectives.
#
# :::{admonition} Verdicts
# **Read gradients inherit the activation spectrum, under every objective.** {glue:text}`ws_read_grad_inherits`
#
# **The raw read gradient follows the activation spectrum.** {glue:text}`ws_raw_read_grad_follows`
# :::

# %% tags=["hide-input"]
V.read_gradient_figure(result)

# %% [markdown]
# :::{admonition} Verdicts
# **The optimiser attenuates the concentration it inherits.** {glue:text}`ws_optimizer_attenuates`
#
# **Cancellation sets the scale, not the direction.** {glue:text}`ws_cancellation_scale_not_direction`
# :::
#
# Cancellation c = ‖Σ_t g_t‖ / Σ_t ‖g_t‖ is compared with the same terms under random signs
# (`lamina.weights.gradients.sign_null_cancellation`): unrelated terms give about 1/√T, so a
# fixed threshold such as c < 0.5 cannot fail with a thousand tokens. The scale half of the
# verdict asks whether the terms cancel as much as unrelated terms would. The SFT and DPO
# gradients use the losses those stages trained (`lamina.sources.organisms.stages.stage_loss`: EOS
# scored, SFT with its LM replay). The LM gradients come from held-out documents disjoint from
# those the read subspaces are fitted on.

# %% [markdown]
# From one token's term to the update: enrichment at k = {glue:text}`ws_k` (geometric mean over
# matrices) of the per-token terms, their sum, Adam's first moment m and Adam's update, at
# the base checkpoint under the LM objective.

# %% tags=["hide-input"]
show_details(V.mechanism_table(result), "Enrichment of the gradient, its terms and Adam's moments, per model")

# %% tags=["hide-input"]
V.adam_figure(result)

# %% [markdown]
# :::{admonition} Verdicts
# **Write gradients point into the prediction subspace only early.** {glue:text}`ws_write_grad_early_only`
#
# **The output matrices acquire their prediction geometry early.** {glue:text}`ws_write_weights_acquire_early`
# :::

# %% tags=["hide-input"]
V.write_gradient_figure(result)

# %% [markdown]
# ## Causal tests
#
# A rank-1 edit adds, to every attention-output and MLP-down matrix, a write along one
# token's unembedding row (norm {glue:text}`ws_edit_scale` ‖W‖_F per matrix), against random directions of the
# same norm; we score the change in that token's log-probability and the KL from the
# unedited predictions. Single-group adaptation trains only {Q,K}, {V,O}, MLP-in or MLP-out on
# SFT pairs from the base checkpoint with one budget, against full fine-tuning.
#
# :::{admonition} Verdicts
# **A write direction from the unembedding still changes predictions.** {glue:text}`ws_write_edit_after_alignment`
#
# **Adaptation restricted to any single group remains effective.** {glue:text}`ws_single_group_effective`
# :::

# %% tags=["hide-input"]
V.edits_figure(result)

# %% tags=["hide-input"]
V.adaptation_figure(result)

# %% [markdown]
# :::{admonition} Verdict: where training places updates, not which matrices can carry them
# {glue:text}`ws_where_not_which`
# :::
#
# ## Sensitivity
#
# The two stage claims, re-decided at every k of the sweep and with raw or centred subspaces
# (reimplementation choices). "Centred" uses the covariance of each matrix's inputs instead of
# their second moment, and W_U with its mean row removed: the mean row is the direction that
# raises every logit alike, which the softmax ignores.

# %% tags=["hide-input"]
V.sensitivity_figure(result)

# %% tags=["hide-input"]
show_details(V.sensitivity_table(result), "The stage verdicts at every k, raw and centred")

# %% [markdown]
# Two baselines beside the stage verdicts, at k = {glue:text}`ws_k`. **RSF of W itself**: the
# k/d, random-subspace and random-matrix nulls all have expectation k/d, so none of them can
# tell an update concentrated in the input subspace from one that is concentrated there only
# because the matrix it updates is (a ΔW ∝ W, as weight decay gives, scores 1 here).
# `qk_vs_weight` is the geo-mean of RSF(ΔW) / RSF(W) over Q and K. **Final-norm gain**: the
# logits read the residual stream through the final norm, so the rows with prediction
# "W_U diag(gamma)" redo the write verdict with γ folded into W_U.

# %% tags=["hide-input"]
show_details(V.baselines_table(result), "The two baselines, per model and stage")

# %% [markdown]
# ## All verdicts
#
# Every verdict, one row per claim and one column per model and stage; the claims table
# written to the results file follows, folded:

# %% tags=["hide-input"]
show_verdicts(V.claims_view(result), columns=["model", "stage"])

# %% [markdown]
# ## Caveats
#
# :::{admonition} Caveats: the models, the budgets, the thresholds
# :class: dropdown
# - SmolLM2-135M-Instruct is already aligned and Gemma-3-270m is a base model; offline
#   neither has a partner. Their objective runs are short (a few AdamW steps at short
#   sequences, on CPU; each model's budget is in the notes), so their deltas are the first
#   steps of each objective, not a full alignment recipe, and only a subset of blocks is
#   probed. Their weights are 4-bit (Q4_1, Q4_K_M) dequantised to fp32; the paper's models
#   were not quantised.
# - Gemma 3 normalises each sublayer's output (RMSNorm with gain 1 + γ) before adding it to
#   the stream: its write matrices write into the space before that norm, and both the
#   probes and the rank-1 write edit work in that space (the stream receives the edit's
#   direction times the gain, up to the per-token rms; the gain 1 + γ can be 0 in some
#   dimensions, so the edit is not divided by it); the prediction subspace with the final norm
#   folded in uses 1 + γ. Its embedding is scaled by √d inside the embedding module, which every hook sees.
# - The organisms are small (12 layers, d = 128) and their alignment stages short (100
#   steps); the paper's SmolLM2, Qwen2.5, Pythia and OLMo pairs run through the same code
#   (`base_model`, `aligned_model` and their revisions; see the top of the chapter) when their
#   weights are available, and may behave differently. On a real model the text is the
#   organisms' (plays and a synthetic curriculum), not the model's training distribution.
# - "Close to random" and "effective" need thresholds that the paper does not give; ours
#   (margin, the fraction of full fine-tuning) are parameters of `SignatureConfig`.
# - "Early" pretraining is the first {glue:text}`ws_early_fraction` of the steps. With tied
#   embeddings the prediction subspace itself is random at initialisation and forms during
#   that window, so "early" write gradients are measured against a subspace still being
#   built; the write-gradient figure shows the whole course rather than one cut.
# - Adam's "raw gradient" is its first moment m, an exponential average of clipped
#   gradients; the update is m̂/(√v̂+ε) from the saved state.
# - Groups differ in parameter count (see the tooltip of the adaptation chart); GPT-2's fused
#   `c_attn` is trained row-masked, so its count includes rows that do not move.
# :::
#
# ## Closing note: every claim
#
# :::{admonition} Every claim of paper 2 with its verdicts
# :class: dropdown
# | claim | verdict |
# |---|---|
# | shared coordinate frame | framing of the paper, not a tested claim (not counted) |
# | Q/K alignment updates enriched | {glue:text}`ws_align_qk_enriched` |
# | write alignment updates random | {glue:text}`ws_align_write_random` |
# | same signature in late pretraining | {glue:text}`ws_late_pretraining_signature` |
# | same signature under every objective | {glue:text}`ws_every_objective_signature` |
# | stage, not objective | {glue:text}`ws_stage_not_objective` |
# | read gradients inherit the activations | {glue:text}`ws_read_grad_inherits` |
# | write gradients in the prediction subspace only early | {glue:text}`ws_write_grad_early_only` |
# | output matrices acquire prediction geometry early | {glue:text}`ws_write_weights_acquire_early` |
# | raw read gradient follows the spectrum | {glue:text}`ws_raw_read_grad_follows` |
# | optimiser attenuates | {glue:text}`ws_optimizer_attenuates` |
# | cancellation: scale, not direction | {glue:text}`ws_cancellation_scale_not_direction` |
# | unembedding write still changes predictions | {glue:text}`ws_write_edit_after_alignment` |
# | any single group adapts | {glue:text}`ws_single_group_effective` |
# | where, not which | {glue:text}`ws_where_not_which` |
# :::

# %% tags=["hide-input"]
show_notes(result.notes)
