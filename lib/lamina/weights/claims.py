"""Paper 2's claims (arXiv 2605.16600, the abstract), declared as data.

One declaration per claim row, id ``p2-signature-<name>``: the paper's words, the statistic
and its unit, the independent unit that CIs and tests resample, the test and its sidedness,
the claimed direction and range, the preconditions (a behavioural gate of the stage the claim
reads; another claim's effect present) and the calibration status. The verdict of every row
comes from the one engine (``lamina.evidence``); the measurements are
:mod:`lamina.weights.measures`.

Conventions (reimplementation choices the paper leaves open):

* A conjunction over parts ("under every objective", "any single group", "the same signature":
  Q/K enriched *and* writes close to random) is tested part by part and the row carries the
  part with the weakest evidence (:func:`lamina.weights.summaries.worst`): the
  intersection-union test, whose p is the largest part's.
* "Enriched" beats both baselines at once, matrix by matrix: RSF(ΔW) / max(c RSF(W), k/d)
  (isotropy, and the concentration of the matrix it updates, which a ΔW ∝ W inherits, times
  c, what the estimation of P_A from finite tokens alone gives a gradient-shaped ΔW:
  :mod:`lamina.weights.qk_null`).
* The Q/K rows' unit is the block: Q and K read one input moment, so one estimated P_A and
  its error; their CI is a t interval over the blocks (8 per model).
* "Close to random" (a ratio ≈ 1) is an equivalence claim: two one-sided Wilcoxon tests that
  the log ratio lies within ±log m (TOST, p = the larger), m = ``random_margin``; the
  row's CI is the two-sided 95% bootstrap interval.

Framing statements of the abstract (:data:`FRAMING`) have no row: they have no statistic of
their own.
"""

from __future__ import annotations

import math
from typing import Any

from lamina.evidence.declare import ClaimSpec, Gate, Present, check_declarations

__all__ = ["ALIGNED_STAGES", "CLAIMS", "FRAMING", "GATES", "OBJECTIVES", "claim_ids", "spec_of"]

OBJECTIVES = ("lm", "sft", "dpo")
"""The objectives applied to one checkpoint at one budget (``every_objective``)."""
ALIGNED_STAGES = ("sft", "dpo")
"""The aligned checkpoints (``@sft``; ``@dpo``, SFT then DPO) whose updates the alignment rows
read."""
GATES = {
    "sft": "the @sft checkpoint passed its behavioural gate (recorded by its build)",
    "dpo": "the @dpo checkpoint passed its behavioural gate (recorded by its build)",
    **{f"objective-{o}": f"the applied {o.upper()} run lowered its held-out objective "
       "(paired CI of the improvement above 0)" for o in OBJECTIVES},
    "adaptation": "full fine-tuning lowered the held-out SFT loss (paired CI above 0)",
}  # fmt: skip
"""The behavioural gates paper 2's rows require, by name (``Gate(name)``)."""

FRAMING: dict[str, str] = {
    "shared_frame": "The residual stream gives every matrix a shared coordinate system in which "
    "a weight change can be compared with its input principal subspace and the prediction "
    "subspace",
    "where_not_which": "The signature describes where training places its updates, not which "
    "matrices can carry them (the abstract's conclusion from the write-edit and single-group "
    "rows, which are judged)",
}
"""The abstract's framing statements: no statistic of their own, no row."""

_ENRICHED = dict(
    kind="effect", unit="ratio", resampling="block (its Q and K share one estimated P_A)",
    test="Wilcoxon signed-rank over blocks (log ratio > 0); one-sided t interval",
    sided="greater", direction=1, null=1.0, claimed=(1.0, math.inf),
    statistic="geo-mean over Q, K of ρ̂(ΔW) / max(ρ̂(W), k/d), each RSF read back into the true "
    "P_A through the leakage of its estimate from finite tokens (lamina.weights.qk_null.true_rsf)",
)  # fmt: skip
_CLOSE = dict(
    kind="effect", unit="ratio", resampling="matrix", sided="two-sided", direction=0, null=1.0,
    test="TOST: two one-sided Wilcoxon tests of |log ratio| < log m", claimed=(0.8, 1.25),
)  # fmt: skip
_SYNTH = ("synthetic deltas (lamina.weights.sources): matrices at the real-model size, "
          "second moments estimated from finite token samples")  # fmt: skip


def _spec(name: str, claim: str, paper_value: str, **kw: Any) -> ClaimSpec:
    return ClaimSpec(id=f"p2-signature-{name}", claim=claim, paper_value=paper_value, **kw)


def _stage_specs() -> list[ClaimSpec]:
    out = []
    for t in ALIGNED_STAGES:
        label = "SFT" if t == "sft" else "SFT then DPO"
        out += [
            _spec(f"align-qk-{t}", "Alignment updates to the query and key matrices are enriched "
                  f"in the principal input subspace ({label})", "enriched (> 1)", **_ENRICHED,
                  requires=(Gate(t),), main=t == "sft", short=f"Q/K enriched @{t}",
                  calibrated=_SYNTH + "; null: ΔW as concentrated as W; planted: twice W's"),
            _spec(f"align-writes-{t}", "Alignment updates to the output matrices are close to "
                  f"random relative to the prediction subspace ({label})", "≈ 1 (random)",
                  **_CLOSE, statistic="geo-mean over O, down of the write enrichment",
                  requires=(Gate(t),), short=f"writes random @{t}",
                  calibrated=_SYNTH + "; null: writes as concentrated as W; planted: isotropic"),
        ]  # fmt: skip
    return out


CLAIMS: tuple[ClaimSpec, ...] = (
    *_stage_specs(),
    _spec("late-pretraining-qk", "The same signature appears in late pretraining: Q/K updates "
          "enriched", "enriched (> 1)", **_ENRICHED, short="late pretraining Q/K",
          calibrated=_SYNTH + "; the align-qk rule on late pretraining pairs"),
    _spec("late-pretraining-writes", "The same signature appears in late pretraining: write "
          "updates close to random", "≈ 1 (random)", **_CLOSE,
          statistic="geo-mean over O, down of the write enrichment", short="late pretraining writes",
          calibrated=_SYNTH + "; the align-writes rule on late pretraining pairs"),
    _spec("every-objective-qk", "The same signature appears under every objective applied to "
          "one checkpoint: Q/K updates enriched", "enriched (> 1) under LM, SFT and DPO",
          **(_ENRICHED | {"statistic": "the objective with the weakest evidence: geo-mean over "
                          "Q, K of RSF(ΔW) / max(c RSF(W), k/d)"}),
          requires=tuple(Gate(f"objective-{o}") for o in OBJECTIVES), short="every objective Q/K",
          calibrated=_SYNTH + "; three objectives drawn, one of them null"),
    _spec("every-objective-writes", "The same signature appears under every objective applied "
          "to one checkpoint: write updates close to random", "≈ 1 under LM, SFT and DPO",
          **(_CLOSE | {"statistic": "the objective with the weakest evidence: geo-mean write "
                       "enrichment"}),
          requires=tuple(Gate(f"objective-{o}") for o in OBJECTIVES),
          short="every objective writes",
          calibrated=_SYNTH + "; three objectives drawn, one of them concentrated"),
    _spec("stage-not-objective", "The signature is a property of the training stage rather than "
          "of the objective", "stage-specific", kind="effect",
          statistic="geo-mean over write matrices of their early / late pretraining update "
          "enrichment", unit="ratio", resampling="matrix",
          test="Wilcoxon signed-rank (per matrix, log early - log late > 0)",
          sided="greater", direction=1, null=1.0, claimed=(1.0, math.inf),
          requires=(*(Gate(f"objective-{o}") for o in OBJECTIVES),
                    Present("p2-signature-every-objective-writes")),
          short="stage, not objective",
          not_calibrated="needs a pretraining history per draw (organisms only)"),
    _spec("read-grad-inherits", "Read gradients inherit the spectrum of the activations, the same "
          "under every objective", "≈ activation share", **(_CLOSE | {
              "statistic": "the objective with the weakest evidence: geo-mean over read "
              "matrices of RSF(summed gradient) / activation share (the energy share of the "
              "gradient's own input tokens in the read basis)"}),
          short="read gradients inherit",
          calibrated="synthetic gradient factors (lamina.weights.sources): per-token terms whose "
          "inputs follow a known spectrum; null: gradients concentrated beyond it"),
    _spec("write-grad-early-only", "Write gradients point into the prediction subspace only "
          "early in pretraining", "early only", kind="effect",
          statistic="geo-mean over write matrices of their write-gradient enrichment, early / "
          "late checkpoints", unit="ratio", resampling="matrix",
          test="Wilcoxon signed-rank (per matrix, log early - log late > 0)", sided="greater",
          direction=1, null=1.0, claimed=(1.0, math.inf), short="write gradients early",
          not_calibrated="needs a pretraining history per draw (organisms only)"),
    _spec("write-weights-early", "The output matrices acquire their prediction geometry early in "
          "pretraining", "most of the final gain early", kind="effect",
          statistic="share of the final gain of log write-weight enrichment reached at the "
          "last early checkpoint", unit="fraction", resampling="matrix",
          test="Wilcoxon signed-rank (early gain - half the final gain > 0)", sided="greater",
          direction=1, null=0.5, claimed=(0.5, math.inf), short="write weights early",
          not_calibrated="needs a pretraining history per draw (organisms only)"),
    _spec("raw-read-grad-follows", "The raw read gradient follows the activation spectrum",
          "follows (ρ > 0)", kind="effect",
          statistic="Spearman ρ(activation share, summed LM-gradient RSF) over read matrices",
          unit="ρ", resampling="matrix", test="Spearman (ρ > 0)", sided="greater", direction=1,
          null=0.0, claimed=(0.0, 1.0), short="raw read gradient follows",
          calibrated="synthetic gradient factors; null: gradient RSF unrelated to the share"),
    _spec("optimizer-attenuates", "The optimiser attenuates the concentration it inherits",
          "update less concentrated", kind="effect",
          statistic="geo-mean over read matrices of enrichment(Adam update) / enrichment("
          "sign(m̂)), the state of the aligned SFT run", unit="ratio", resampling="matrix",
          test="Wilcoxon signed-rank (log ratio < 0)", sided="less", direction=-1, null=1.0,
          claimed=(0.0, 1.0), requires=(Gate("sft"),), short="optimiser attenuates",
          calibrated="simulated Adam runs (lamina.weights.sources): unrelated and consistent "
          "gradients at 1 to 120 steps (null); noise concentrated in the subspace (planted)"),
    _spec("cancellation-scale", "Cancellation between tokens sets the scale of the update",
          "cancels like unrelated terms (≈ 1)", **(_CLOSE | {
              "statistic": "the objective with the weakest evidence: geo-mean over matrices of "
              "cancellation / its sign-randomised median"}),
          short="cancellation sets the scale",
          calibrated="synthetic gradient factors; null: terms sharing a direction"),
    _spec("cancellation-direction", "Cancellation between tokens does not set the update's "
          "direction", "≈ 1 (direction kept)", **(_CLOSE | {
              "statistic": "the objective with the weakest evidence: geo-mean over matrices of "
              "RSF(summed) / RSF(per-token, pooled)"}),
          short="cancellation keeps the direction",
          calibrated="synthetic gradient factors; null: the sum concentrated beyond its terms"),
    *(
        _spec(f"write-edit-{t}", "A write direction derived from the unembedding still changes "
              f"predictions after alignment ({t})", "changes predictions", kind="effect",
              statistic="mean Δlog p(target) of the unembedding edit minus the mean over "
              "copies with scrambled blocks", unit="nats", resampling="target token; copy",
              test="prediction-interval t test against the scrambled copies", sided="greater",
              direction=1, null=0.0, claimed=(0.0, math.inf),
              requires=(Gate(t),) if t != "released" else (), short=f"write edit @{t}",
              calibrated="random-initialised models (null: exchangeable with their scrambled "
              "copies); planted: a shared residual direction the edit's input fires on")
        for t in ("released", *ALIGNED_STAGES)
    ),
    *(
        _spec(f"write-edit-kept-{t}", "The unembedding edit's effect after alignment is at least "
              f"half its effect before ({t})", "≥ 0.5 of the base's", kind="effect",
              statistic="mean Δlog p(target) beyond the scrambled copies' mean, aligned / "
              "base", unit="ratio",
              resampling="target token; copy", sided="greater", direction=1, null=0.0,
              claimed=(0.5, math.inf),
              requires=(Gate(t), Present(f"p2-signature-write-edit-{t}")),
              short=f"edit kept @{t}",
              calibrated="the edit's known-answer models: planted, the edit model against "
              "itself (kept whole); conditional null (faded), the planted model against itself "
              "with the feedback of 4 of 6 target tokens moved to other tokens' directions (about a "
              "third kept)",
              conditional_null="faded")
        for t in ALIGNED_STAGES
    ),
    _spec("single-group", "Adaptation restricted to any single group of matrices remains "
          "effective", "≥ 0.5 of full fine-tuning", kind="effect",
          statistic="the group with the weakest evidence: held-out SFT-loss reduction / full "
          "fine-tuning's", unit="ratio", resampling="held-out item",
          test="Wilcoxon signed-rank (reduction - 0.5 × full reduction > 0)", sided="greater",
          direction=1, null=0.5, claimed=(0.5, math.inf), requires=(Gate("adaptation"),),
          short="any single group adapts",
          calibrated="synthetic per-item losses (lamina.weights.sources): groups at a quarter "
          "(null) or the whole (planted) of full fine-tuning's reduction"),
)
"""Every claim row of paper 2, in the abstract's order (a ``Present`` precondition names a row
declared before it, so one :class:`lamina.evidence.decide.Judge` pass judges them all)."""
_BY_ID = check_declarations(CLAIMS)


def claim_ids() -> list[str]:
    """The declared ids, in order."""
    return [c.id for c in CLAIMS]


def spec_of(claim_id: str) -> ClaimSpec:
    """The declaration of ``claim_id`` (KeyError naming the known ids)."""
    if claim_id not in _BY_ID:
        raise KeyError(f"no paper-2 claim {claim_id!r}; declared: {claim_ids()}")
    return _BY_ID[claim_id]
