"""The organisms' self-checks, declared as data and judged by :func:`lamina.evidence.decide.decide`.

The organisms (and the aligned real models) are instruments, not findings: the book's claims
about transformers read them. Their checks are self-checks (``self-organisms-*``): the
training text leaks no evaluation prompt; SFT keeps the language model; and each alignment
stage adds what it trains (:mod:`lamina.sources.organisms.gates`). The two stage gates are also
the preconditions ``Gate("sft")`` / ``Gate("dpo")`` of every claim that reads an aligned
checkpoint (:func:`lamina.sources.organisms.gates.GateResult.for_engine`).
"""

from __future__ import annotations

from lamina.evidence.declare import ClaimSpec, check_declarations

__all__ = ["CLAIMS", "DPO_GATE", "NO_LEAK", "SFT_GATE", "SFT_KEEPS_LM", "SFT_PPL_RATIO"]

SFT_PPL_RATIO = 1.25
"""@sft validation perplexity may be at most this multiple of the base's."""

_ONE_RUN = ("a check of one training run against a fixed target, not an estimate of an effect "
            "in a population of models; no null source applies")  # fmt: skip
_GATE = ("a check of one training run; its test (a cluster-bootstrap CI over held-out entity "
         "pairs) is checked by known answers in tests/sources/organisms/test_alignment_gates.py "
         "(a content-blind policy gated as the model fails, a planted gain passes), not by "
         "rates over seeds")  # fmt: skip

NO_LEAK = ClaimSpec(
    id="self-organisms-no-leak", kind="self-check",
    claim="No evaluation prompt, control, gloss or analogy half of data/prompts occurs in any "
    "text a stage trains on (exact or one-word-substituted word 8-grams, whole 5-7-word prompts).",
    paper_value="0", statistic="evaluation items found in the training texts", unit="items",
    not_calibrated="a count over the whole training text, not an estimate", short="no leak",
)  # fmt: skip
SFT_KEEPS_LM = ClaimSpec(
    id="self-organisms-sft-keeps-lm", kind="self-check",
    claim=f"SFT keeps the language model: @sft validation perplexity at most {SFT_PPL_RATIO}x "
    "the base's.", paper_value=f"<= {SFT_PPL_RATIO}", statistic="@sft / base validation perplexity",
    unit="ratio", not_calibrated=_ONE_RUN, short="SFT keeps LM",
)  # fmt: skip
SFT_GATE = ClaimSpec(
    id="self-organisms-sft-gate", kind="self-check",
    claim="@sft answers held-out entity pairs better than the base and than every content-blind "
    "policy (CI of each paired gain above 0).", paper_value="gain > 0",
    statistic="held-out SFT accuracy - the best content-blind policy's", unit="fraction of items",
    resampling="entity pair", not_calibrated=_GATE, short="SFT gate",
)  # fmt: skip
DPO_GATE = ClaimSpec(
    id="self-organisms-dpo-gate", kind="self-check",
    claim="@dpo prefers the required response on held-out entity pairs more often than @sft "
    "did (CI of the preference accuracy's gain above 0), prefers the correct answer more often "
    "than the base does (CI of the content probe's gain above 0), and its preference accuracy "
    "lies above the best constant-style policy.", paper_value="gain > 0",
    statistic="held-out preference accuracy - @sft's", unit="fraction of triples",
    resampling="entity pair", not_calibrated=_GATE, short="DPO gate",
)  # fmt: skip

CLAIMS: tuple[ClaimSpec, ...] = (NO_LEAK, SFT_KEEPS_LM, SFT_GATE, DPO_GATE)
check_declarations(CLAIMS)
