"""Every objective applied to one checkpoint, at one budget (paper 2's third design).

Paper 2 compares the signatures of the updates that several objectives make from one
checkpoint. :func:`run_objectives` trains a continued-LM run, an SFT run and a DPO run from the
same checkpoint with everything but the loss equal: ``objective_steps`` AdamW steps of
``objective_batch`` examples, peak learning rate ``objective_lr`` with one warmup step per ten
steps and cosine decay (:func:`lamina.sources.organisms.train.lr_at`), the same trainable
parameters (all but the input embedding, which is tied to the unembedding in SmolLM2, Gemma and
the GPT-2 organism: the prediction subspace stays the base's), no LM replay in SFT, DPO against
the frozen checkpoint itself. The data are the organisms' (LM windows of the validation split;
the curriculum's SFT pairs and DPO triples), never the evaluation prompts. Each objective's data
are new to the checkpoint: SFT's and DPO's items were never trained on, and neither was the
validation split, while the training split had been seen 4.5 times by an organism's
``final``. (Until organisms-6 LM read the training split, and its gate failed on both organisms:
held-out improvement -0.016 nats on organism-gpt2, 95% bound -0.024; on the validation split
+0.233, bound +0.191, measured on organism-gpt2's organisms-5 ``final``.) The validation split is
disjoint from the held-out split that the gate and the subspaces read. Each run keeps the AdamW
state of the probed maps.

Each run has a gate (:func:`objective_gate`): did the objective take? Its held-out objective is
scored before and after on ``objective_eval`` items (LM: held-out windows, loss; SFT: held-out
pairs, answer loss; DPO: held-out triples, the policy's own preference margin); the gate passes
when the one-sided 95% bootstrap bound of the mean improvement over items is above 0.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from lamina.core.arrays import logit_rows
from lamina.evidence.stats import bootstrap_ci
from lamina.sources.models import input_embeddings
from lamina.sources.organisms.stages import dpo_margins, stage_loss
from lamina.sources.organisms.tokenizer import encode_stream
from lamina.sources.organisms.train import (
    fixed_windows,
    lr_at,
    make_optimizer,
    optimizer_step,
    random_windows,
)
from lamina.weights.adaptation import per_item_sft_loss
from lamina.weights.settings import SignatureSettings

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from lamina.sources.organisms.configs import OrganismConfig
    from lamina.sources.organisms.corpus import Corpus

__all__ = ["OBJECTIVES", "ObjectiveRun", "objective_gate", "run_objectives"]

OBJECTIVES = ("lm", "sft", "dpo")


@dataclass
class ObjectiveRun:
    """One objective applied to the checkpoint: the trained model (eval mode, frozen; its input
    embedding is the checkpoint's own tensor, shared, so edit it only in a context that
    restores it), its training curve (step, lr, loss in nats before the step, examples), the AdamW state of the
    kept parameters ({name: {"step", "exp_avg", "exp_avg_sq"}}), and its gate (passed, values
    as text)."""

    objective: str
    model: nn.Module
    curve: list[dict[str, Any]] = field(default_factory=list)
    adam: dict[str, dict[str, Any]] = field(default_factory=dict)
    gate: tuple[bool, str] = (False, "not measured")


def _stream(tok: Any, docs: list[str], n_tokens: int) -> torch.Tensor:
    """Token ids of as many of ``docs`` as make ``n_tokens`` (each followed by EOS)."""
    stream = torch.zeros(0, dtype=torch.long)
    for i in range(0, len(docs), 32):
        stream = torch.cat([stream, encode_stream(tok, docs[i : i + 32])])
        if len(stream) > n_tokens:
            break
    return stream


def _batches(objective: str, corpus: Any, tok: Any, s: SignatureSettings, context: int) -> list:
    """``s.objective_steps`` batches of ``s.objective_batch`` examples (seeded): LM windows of
    ``context`` tokens from the validation split (text the checkpoint has not trained on);
    SFT pairs; DPO triples (drawn in a shuffled order, repeated when the steps need more)."""
    n, b = s.objective_steps, s.objective_batch
    gen = torch.Generator().manual_seed(s.seed + 11)
    if objective == "lm":
        stream = _stream(tok, list(corpus.val), 4 * n * b * context)
        return [list(random_windows(stream, b, context, gen)) for _ in range(n)]
    items = corpus.sft if objective == "sft" else corpus.dpo
    order = torch.randperm(len(items), generator=gen).tolist()
    order = (order * (n * b // len(order) + 1))[: n * b]
    return [[items[j] for j in order[i * b : (i + 1) * b]] for i in range(n)]


def _held_out_score(
    objective: str, model: nn.Module, tok: Any, corpus: Any, s: SignatureSettings, context: int
) -> np.ndarray:
    """Per held-out item, the objective's score where higher is better (nats): LM: minus the
    loss of ``s.objective_eval`` evenly spaced held-out windows; SFT: minus the answer loss of
    the first held-out pairs; DPO: the policy's own margin log π(chosen) - log π(rejected) of
    the first held-out triples. -> (n,) float64."""
    n = s.objective_eval
    if objective == "lm":
        windows = fixed_windows(_stream(tok, list(corpus.heldout), 2 * n * context), n, context)
        rows = logit_rows(model, windows.shape[1])
        scores = []
        with torch.no_grad():  # in chunks: all n windows' logits at once were 8 GiB on Gemma-3
            for chunk in windows.split(rows):  # (rows, context)
                logits = model(input_ids=chunk).logits[:, :-1].float()  # (rows, context-1, V)
                lp = logits.gather(-1, chunk[:, 1:, None])[..., 0] - logits.logsumexp(-1)
                scores.append(lp.mean(-1).double())
        return torch.cat(scores).numpy()
    if objective == "sft":
        return -per_item_sft_loss(model, tok, list(corpus.sft_eval[:n]), context)
    policy: Any = model  # a PreTrainedModel
    return dpo_margins(policy, None, tok, list(corpus.dpo_eval[:n]), context).double().numpy()


def objective_gate(
    objective: str, base: nn.Module, model: nn.Module, tok: PreTrainedTokenizerBase, corpus: Corpus,
    s: SignatureSettings, context: int,
) -> tuple[bool, str]:
    """Did the run take? (module docstring) -> (passed, "held-out <objective> improvement
    <mean> nats, 95% bound <lower>, n items")."""
    before = _held_out_score(objective, base, tok, corpus, s, context)
    after = _held_out_score(objective, model, tok, corpus, s, context)
    gain = after - before
    if len(gain) < 2:
        return False, f"{len(gain)} held-out items"
    lo = float(bootstrap_ci(gain, n_resamples=s.n_bootstrap, seed=s.seed, method="percentile",
                            confidence=0.90).iloc[0]["ci_low"])  # fmt: skip
    return lo > 0, (f"held-out {objective} improvement {gain.mean():.3g} nats, 95% bound "
                    f"{lo:.3g}, {len(gain)} items")  # fmt: skip


def _train(
    objective: str, base: nn.Module, tok: Any, batches: list, stage_cfg: Any,
    s: SignatureSettings, keep: set[str],
) -> ObjectiveRun:
    # The frozen input embedding (tied to the unembedding where the model ties them) is the
    # base's own tensor, shared rather than copied (0.63 GiB a copy on Gemma 3). Its flag is
    # off while the run trains and restored after, so the base leaves as it came.
    frozen = input_embeddings(base).weight
    was = bool(frozen.requires_grad)
    model: Any = copy.deepcopy(base, {id(frozen): frozen}).train()
    trained = [p for p in model.parameters() if p is not frozen]
    # DPO's reference is the checkpoint itself, in eval mode: it scores under no_grad and is
    # never stepped, so a copy (1 GiB on Gemma 3) would hold the same numbers twice.
    ref: Any = base.eval() if objective == "dpo" else None
    run = ObjectiveRun(objective, model)
    try:
        frozen.requires_grad_(False)
        for p in trained:
            p.requires_grad_(True)
        opt = make_optimizer(model, stage_cfg, s.objective_lr)
        warmup = max(1, s.objective_steps // 10)
        for i, batch in enumerate(batches):
            lr = lr_at(i, s.objective_steps, s.objective_lr, warmup, stage_cfg.min_lr_ratio)
            loss = stage_loss(objective, model, ref, tok, batch, stage_cfg)
            run.curve.append({"objective": objective, "step": i + 1, "lr": lr, "examples": len(batch),
                              "loss": optimizer_step(model, opt, loss, lr, stage_cfg.grad_clip)})  # fmt: skip
    finally:
        model.eval()
        for p in trained:
            p.requires_grad_(False)
        frozen.requires_grad_(was)
    run.adam = {name: {k: (v.detach().clone() if torch.is_tensor(v) else v) for k, v in st.items()}
                for name, p in model.named_parameters() if name in keep and (st := opt.state.get(p))}  # fmt: skip
    return run


def run_objectives(
    base: nn.Module, tok: PreTrainedTokenizerBase, corpus: Corpus, stage_cfg: OrganismConfig,
    s: SignatureSettings,
    keep: set[str], objectives: tuple[str, ...] = OBJECTIVES,
) -> dict[str, ObjectiveRun]:
    """Each objective of ``objectives`` applied to ``base`` at one budget (module docstring),
    with its gate. stage_cfg: an :class:`lamina.sources.organisms.configs.OrganismConfig` whose
    losses (DPO's beta), AdamW betas, weight decay, clip and ``context`` the runs use (its
    replay is ignored: set ``replay_batch_size=0``); keep: names of the parameters whose AdamW
    state is kept. ``base`` is not modified (its values and requires_grad flags leave as they
    came). -> {objective: ObjectiveRun}."""
    context = int(stage_cfg.context)
    out = {}
    for objective in objectives:
        batches = _batches(objective, corpus, tok, s, context)
        run = _train(objective, base, tok, batches, stage_cfg, s, keep)
        run.gate = objective_gate(objective, base, run.model, tok, corpus, s, context)
        out[objective] = run
    return out
