"""The write-edit row's stage label states the budget of the run it rests on: SFT and DPO come
from the aligned build (PretrainedAlignConfig with real_align), not from the chapter's own
continued-LM budget (real_steps), which the old label reported for every stage."""

from lamina.chapters.weight_update_signature.causal_claims import _run_label
from lamina.chapters.weight_update_signature.config import SignatureConfig
from lamina.sources.organisms.pretrained import PretrainedAlignConfig


def test_aligned_stages_report_the_aligned_build_budget():
    cfg = SignatureConfig()
    a = PretrainedAlignConfig()
    assert _run_label(cfg, "sft") == f" (our {a.sft_steps} steps of {a.batch_size})"
    assert _run_label(cfg, "dpo") == f" (our {a.dpo_steps} steps of {a.batch_size})"


def test_overrides_and_lm_target():
    cfg = SignatureConfig(real_align={"sft_steps": 2, "dpo_steps": 3, "batch_size": 2}, real_steps=5)
    assert _run_label(cfg, "sft") == " (our 2 steps of 2)"
    assert _run_label(cfg, "dpo") == " (our 3 steps of 2)"
    assert _run_label(cfg, "lm") == " (our 5-step run)"
