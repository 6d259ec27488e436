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
targets = ["lm", "sft", "dpo"]  # organism stages compared with base (real models: sft, dpo)
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
objective_steps = 32  # organisms: AdamW steps of each applied objective (LM, SFT, DPO)
objective_batch = 8  # examples per step, every objective
edit_scale = 0.001  # the write edit's norm per write map, relative to ‖W‖_F
real_steps = 16  # real checkpoint: AdamW steps of each applied objective
real_batch = 8  # examples per step
real_lr = 1e-4  # peak learning rate of those runs
real_tokens = 2048  # tokens for the second moments (the LM gradient gets half)
real_max_length = 128  # tokens per sequence
real_layers = 8  # evenly spaced blocks probed (0 means all)
model_budgets = None  # {model: {real_* field: cap}}; None: lamina's defaults (Gemma smaller)
seed = 0  # seeds every random draw
quick = False  # tiny samples and budgets, for CI

# %% tags=["hide-input"]
import altair as alt
import pandas as pd

from lamina.book import setup_altair
from lamina.book.chapter import claims_view, show_notes
from lamina.book.charts import facet, show_figure
from lamina.book.tables import show_details, show_verdicts
from lamina.chapters.weight_update_signature import Config
from lamina.chapters.weight_update_signature.notebook import run_signature
from lamina.weights import tables as T
from lamina.weights.measure import stage_pair
from lamina.weights.measures_signature import beyond_both

setup_altair()
config = Config.from_globals(globals())
result = run_signature(config)  # measures, judges, writes the results, glues the values below
claims = result.claims

# %% [markdown]
# ## Method
#
# For a weight change ΔW the probe is the relative subspace fraction
# (`lamina.weights.relative_subspace_fraction`): read matrices (Q, K, V, MLP gate and up) on
# their input side, in the top-k eigenvectors of the second moment of their own inputs
# (estimated from {glue:text}`ws_n_tokens` tokens of held-out text); write matrices (attention
# output, MLP down) on their output side, in the prediction subspace (top-k right singular
# vectors of W_U). Enrichment is RSF / (k/d), with k = {glue:text}`ws_k`. A Q/K update is
# "enriched" only beyond both of its baselines, matrix by matrix: RSF(ΔW) / max(RSF(W), k/d)
# (an update that is as concentrated as the matrix it updates, as weight decay gives, scores 1),
# averaged over a block's Q and K, which share one estimated subspace: the block is the unit of
# the Q/K rows' Wilcoxon test and t interval.
# "Close to random" is an equivalence test (TOST) of the enrichment within
# [1/{glue:text}`ws_margin`, {glue:text}`ws_margin`]. A claim over parts ("every objective",
# "any single group") is judged on its weakest part. Each row needs the behavioural gate of the
# stage it reads; every verdict comes from the one engine in `lamina.evidence`, from the
# declarations in `lamina.weights.claims`. Models: {glue:text}`ws_models`; the run took
# {glue:text}`ws_seconds` s. The method on one model, Q/K block by block at @sft:

# %% tags=["hide-input"]
deltas = result.tables["deltas"]
one = deltas[deltas["model"] == result.models[0]]
pair = stage_pair(one, "sft") or stage_pair(one, "dpo")
per_block = pd.DataFrame({"ratio": beyond_both(one, config, family="stage", pair=pair)}) if pair else pd.DataFrame({"ratio": []})
show_figure(
    alt.Chart(per_block.reset_index()).mark_point(filled=True).encode(
        x=alt.X("ratio:Q", scale=alt.Scale(type="log"), title="RSF(ΔW) / max(RSF(W), k/d)"),
        y=alt.Y("index:O", title="block (Q and K)"),
    ).properties(height=120, title=f"{result.models[0]}: each Q/K update against its baselines"),
    what="One point per probed block of the first model's @sft update: the concentration of its "
    "Q and K updates in their input principal subspace over the stronger of their two baselines "
    "(geometric mean of the two; log scale).",
    look_at="how many points lie right of 1",
)

# %% [markdown]
# ## Every verdict
#
# One row per claim, one column per model; the full rows (value, CI, p, reason) are folded
# below the grid. A row that reads a training stage (@sft, @dpo) needs that stage's
# behavioural gate, and reads "not testable" with the gate's values where it failed: the
# table below names each row's gates per model, and every gate's measures, with their 95% CIs
# and gains over the previous stage, the base and the content-blind policies, are in
# {ref}`the organisms chapter <organisms-gates>`.

# %% tags=["hide-input"]
show_verdicts(claims_view(claims))
show_details(result.tables["gates"], "The gates each row requires, per model")

# %% [markdown]
# ## Where alignment puts its updates
#
# :::{admonition} Verdicts
# **Q/K updates enriched (SFT).** {glue:text}`ws_align_qk_sft`
#
# **Q/K updates enriched (SFT then DPO).** {glue:text}`ws_align_qk_dpo`
#
# **Write updates close to random (SFT).** {glue:text}`ws_align_writes_sft`
#
# **Write updates close to random (SFT then DPO).** {glue:text}`ws_align_writes_dpo`
# :::

# %% tags=["hide-input"]
curves = T.enrichment_curves(deltas, config)
curves = curves[curves["group"].isin(["Q, K", "writes (O, down)"])]
show_figure(
    facet(
        alt.Chart(curves).mark_line(point=True).encode(
            x=alt.X("k:Q", scale=alt.Scale(type="log", base=2), title="k"),
            y=alt.Y("enrichment:Q", scale=alt.Scale(type="log"), title="enrichment RSF/(k/d)"),
            color=alt.Color("pair:N", title="ΔW"), strokeDash=alt.StrokeDash("group:N", title="matrices"),
            tooltip=["model", "pair", "group", "k", alt.Tooltip("enrichment:Q", format=".2f")],
        ),
        "model", curves["model"], title="Enrichment of each update in its subspace, across k",
    ),
    what="The geometric-mean enrichment of the Q/K (solid) and write (dashed) updates of each "
    "stage and applied objective against k, one panel per model; 1 is an isotropic update.",
    look_at="how far the Q/K lines sit above 1 and the write lines near it",
)

# %% [markdown]
# ## Late pretraining and every objective
#
# Each objective (LM, SFT, DPO) is applied to the base checkpoint at one budget
# ({glue:text}`ws_objective_budget` for the organisms; a real checkpoint's is in the notes),
# with the input embedding frozen; each must lower its held-out objective (its gate).
#
# :::{admonition} Verdicts
# **Late pretraining: Q/K enriched.** {glue:text}`ws_late_pretraining_qk`
#
# **Late pretraining: writes close to random.** {glue:text}`ws_late_pretraining_writes`
#
# **Every objective: Q/K enriched.** {glue:text}`ws_every_objective_qk`
#
# **Every objective: writes close to random.** {glue:text}`ws_every_objective_writes`
#
# **A property of the stage, not of the objective.** {glue:text}`ws_stage_not_objective`
# :::

# %% tags=["hide-input"]
show_details(T.objective_signatures(deltas, config).round(3), "Enrichment per stage or objective and matrix group")
show_details(T.finetune_summary(result.tables["finetune"]), "The applied-objective runs and the aligned builds: losses")

# %% [markdown]
# ## The mechanism: gradients as sums of outer products
#
# ∇W = Σ_t δ_t a_tᵀ (`lamina.weights.gradients.gradient_geometry`), at the base checkpoint,
# under each objective. Cancellation c = ‖Σ_t g_t‖ / Σ_t ‖g_t‖ is compared with the same terms
# under random signs. Adam's update u = m̂/(√v̂+ε) is compared with sign(m̂), the update of pure
# elementwise normalisation (Adam's first step is exactly that, and any gradient's sign is
# less concentrated than the gradient).
#
# :::{admonition} Verdicts
# **Read gradients inherit the activation spectrum.** {glue:text}`ws_read_grad_inherits`
#
# **The raw read gradient follows the spectrum.** {glue:text}`ws_raw_read_grad_follows`
#
# **The optimiser attenuates beyond elementwise normalisation.** {glue:text}`ws_optimizer_attenuates`
#
# **Cancellation sets the scale.** {glue:text}`ws_cancellation_scale`
#
# **Cancellation keeps the direction.** {glue:text}`ws_cancellation_direction`
#
# **Write gradients in the prediction subspace only early.** {glue:text}`ws_write_grad_early_only`
#
# **Output matrices acquire their geometry early.** {glue:text}`ws_write_weights_early`
# :::

# %% tags=["hide-input"]
read = result.tables["gradients"].query("kind == 'read'")
show_figure(
    facet(
        alt.Chart(read).mark_point(filled=True, opacity=0.6).encode(
            x=alt.X("activation_share:Q", title="activation energy in the top-k directions"),
            y=alt.Y("rsf_summed:Q", title="RSF of the summed gradient"),
            color="objective:N", tooltip=["key", "objective", alt.Tooltip("rsf_summed:Q", format=".3f")],
        ),
        "model", read["model"], title="Summed read gradients against the activation energy they inherit",
    ),
    what="Each point is a read matrix under one objective: the share of its input energy in the "
    "top-k directions against the share of its summed gradient there.",
    look_at="whether the points follow the diagonal under every objective",
)

# %% tags=["hide-input"]
adam = result.tables["adam"].query("kind == 'read'")
if len(adam):
    show_figure(
        facet(
            alt.Chart(adam).mark_point(filled=True, opacity=0.6).encode(
                x=alt.X("enrichment_sign:Q", scale=alt.Scale(type="log"), title="enrichment of sign(m̂)"),
                y=alt.Y("enrichment_update:Q", scale=alt.Scale(type="log"), title="enrichment of Adam's update"),
                color=alt.Color("state:N", title="optimiser state"),
            ),
            "model", adam["model"], title="Adam's update against elementwise normalisation, per read matrix",
        ),
        what="Each point is a read matrix in one saved optimiser state: the enrichment of sign(m̂) "
        "against that of Adam's update.",
        look_at="whether the points fall below the diagonal",
    )

# %% tags=["hide-input"]
wg = result.tables["write_gradients"]
if len(wg):
    course = T.write_gradient_course(wg)
    show_figure(
        facet(
            alt.Chart(course).mark_line(point=True).encode(
                x=alt.X("step:Q", scale=alt.Scale(type="symlog"), title="pretraining step"),
                y=alt.Y("median(value):Q", scale=alt.Scale(type="log"), title="enrichment (median)"),
                color="quantity:N",
            ),
            "model", course["model"], title="Write matrices against the prediction subspace across pretraining",
        ),
        what="The enrichment in the prediction subspace of the write matrices' LM gradient and of "
        "the weights themselves across pretraining, per organism.",
        look_at="when the gradient's enrichment falls, and when the weights' rises",
    )

# %% [markdown]
# ## Causal tests
#
# A rank-1 edit adds to every write matrix a write along one token's unembedding row (norm
# {glue:text}`ws_edit_scale` ‖W‖_F per matrix). Adding W_U[t] raises t's logit in any network,
# trained or not, so the null is the same edit on copies of the model whose blocks are
# scrambled (rows and columns of every block matrix permuted; embedding, final norm and
# unembedding kept): a never-trained model is exchangeable with its copies. Single-group
# adaptation trains only {Q,K}, {V,O}, MLP-in or MLP-out on SFT pairs, against full
# fine-tuning, scored on held-out items.
#
# :::{admonition} Verdicts
# **The unembedding edit beyond construction (released checkpoint).** {glue:text}`ws_write_edit_released`
#
# **After SFT.** {glue:text}`ws_write_edit_sft`
#
# **After SFT then DPO.** {glue:text}`ws_write_edit_dpo`
#
# **Its effect beyond construction kept after alignment (SFT; SFT then DPO).** {glue:text}`ws_write_edit_kept_sft` {glue:text}`ws_write_edit_kept_dpo`
#
# **Any single group remains effective.** {glue:text}`ws_single_group`
# :::
#
# The abstract concludes that the signature describes where training places its updates, not
# which matrices can carry them: that conclusion has no statistic of its own, and rests on the
# two rows above.

# %% tags=["hide-input"]
edits = result.tables["edits"]
per = edits.groupby(["model", "stage", "direction", "direction_id"], as_index=False)["delta_logp"].mean()
show_figure(
    facet(
        alt.Chart(per).mark_tick(thickness=2).encode(
            x=alt.X("delta_logp:Q", title="mean Δ log p(target), nats"),
            y=alt.Y("stage:N", title=None), color=alt.Color("direction:N", title="edit"),
        ),
        "model", per["model"], title="The unembedding edit on the model, on its scrambled copies, and along random directions",
    ),
    what="Each tick is one model or copy: the mean change of the target tokens' log-probability "
    "under the edit (unembedding: the model; scrambled: a copy with scrambled blocks; random: a "
    "random direction), per stage.",
    look_at="whether the model's tick lies right of its scrambled copies'",
)

# %% tags=["hide-input"]
gain = T.adaptation_gain(result.tables["adaptation"])
show_figure(
    facet(
        alt.Chart(gain).mark_bar().encode(
            x=alt.X("reduction:Q", title="mean held-out SFT-loss reduction, nats"),
            y=alt.Y("group:N", title=None, sort=["qk", "vo", "mlp_in", "mlp_out", "all"]),
            tooltip=["group", "n_params", alt.Tooltip("reduction:Q", format=".3f")],
        ),
        "model", gain["model"], legend=False, title="Held-out SFT-loss reduction when training one group",
    ),
    what="The mean reduction of the held-out SFT loss when only one group of matrices is "
    "trained, and under full fine-tuning (all), with one budget.",
    look_at="each group's bar against half of the bar of full fine-tuning",
)

# %% [markdown]
# ## Sensitivity
#
# The alignment and objective measurements again at every k, with raw or centred second
# moments and with the final norm's gain folded into W_U (reimplementation choices), folded:

# %% tags=["hide-input"]
show_details(result.tables["sensitivity"].round(3), "Q/K and write measurements at every k, moment and prediction basis")

# %% [markdown]
# ## Caveats
#
# :::{admonition} Caveats: the models, the budgets, the thresholds
# :class: dropdown
# - SmolLM2-135M-Instruct is already aligned and Gemma-3-270m is a base model; offline
#   neither has a partner, so their alignment rows read our SFT and DPO builds
#   (`make aligned`), and their objective runs are short (each model's budget is in the notes).
#   Their weights are 4-bit (Q4_1, Q4_K_M) dequantised to fp32; the paper's were not quantised.
# - The text is the organisms' (plays and a synthetic curriculum), not the model's own training
#   distribution; the probe subspaces are estimated from a finite sample, whose noise the
#   calibration page's nulls include.
# - "Close to random" and "effective" need thresholds the paper does not give; ours are in the
#   declarations (`lamina.weights.claims`).
# - The scrambled copies of the write edit's null keep each matrix's norm and singular values
#   but not the stream's scale: a model whose trained blocks keep its stream small can lose to
#   its copies for that reason alone.
# - Adam's "raw gradient" is its first moment m; the update is m̂/(√v̂+ε) from the saved state.
#   A real checkpoint's optimiser row needs the Adam state kept by its aligned build.
# - Groups differ in parameter count; GPT-2's fused `c_attn` is trained row-masked.
# :::

# %% tags=["hide-input"]
show_notes(result.notes)
