"""Behavioural gates of an aligned checkpoint: did alignment take, on held-out items?

Measured per checkpoint on the held-out (instruction, content) items of
:mod:`lamina.sources.organisms.instructions`, each with a 95% percentile-bootstrap CI over items:

* preference accuracy: P[log pi(chosen | x) > log pi(rejected | x)] over every held-out triple
  (ties count 1/2); sequence log-probabilities in nats include the EOS;
* content probe: the same on the ``content`` triples only (correct vs wrong, same style);
* constant-style baseline: the best accuracy of a policy that always prefers one response style
  (:func:`lamina.sources.organisms.instructions.constant_style_accuracy`; 0.5 by construction);
* SFT task accuracy: greedy (teacher-forced argmax) reproduction of the required response, against
  the majority baseline, which answers every item with the most common training response for its
  instruction; the CI is that of the paired per-item difference;
* ||dW||_F / ||W||_F per matrix group (q, k, v, o, qkv, up, gate, down, fc, proj, embed, norm):
  sqrt(sum over the group's tensors of ||W_aligned - W_base||_F^2) / sqrt(sum ||W_base||_F^2).

Gates (:func:`preference_gate`, :func:`sft_gate`) are pure functions of per-item tables, so they
can be tested on planted tables; :func:`measure_checkpoint` builds the tables from a model.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from lamina.evidence.stats import bootstrap_ci
from lamina.sources.organisms.evaluate import sft_hits
from lamina.sources.organisms.instructions import (
    STYLES,
    AlignmentData,
    Item,
    Triple,
    constant_style_accuracy,
)
from lamina.sources.organisms.qa import format_answer, format_prompt
from lamina.sources.organisms.stages import completion_logprob

__all__ = ["CONTENT_TARGET", "PREFERENCE_TARGET", "GateResult", "majority_targets",
           "matrix_group", "measure_checkpoint", "preference_gate", "preference_table",
           "sft_gate", "sft_table", "weight_change"]  # fmt: skip

PREFERENCE_TARGET = 0.75
CONTENT_TARGET = 0.70
N_RESAMPLES = 2000


@dataclass(frozen=True)
class GateResult:
    """A gate's outcome. Field names match ``AlignmentGate(passed, values, reason)``:
    convert with ``AlignmentGate(**dataclasses.asdict(result))`` or :meth:`to`."""
    passed: bool
    values: dict[str, float] = field(default_factory=dict)
    reason: str = ""

    def to(self, cls: type) -> object:
        """An instance of ``cls(passed=..., values=..., reason=...)`` (e.g. AlignmentGate)."""
        return cls(passed=self.passed, values=dict(self.values), reason=self.reason)


def _ci(x: np.ndarray, seed: int) -> tuple[float, float, float]:
    """(mean, 95% CI low, high) of per-item scores x (n,), percentile bootstrap over items."""
    if len(x) == 0:
        return float("nan"), float("nan"), float("nan")
    if len(x) == 1 or np.all(x == x[0]):
        return float(x.mean()), float(x.mean()), float(x.mean())
    row = bootstrap_ci(x.astype(float), n_resamples=N_RESAMPLES, seed=seed, method="percentile")
    return float(row["estimate"].iloc[0]), float(row["ci_low"].iloc[0]), float(row["ci_high"].iloc[0])


@torch.no_grad()
def _logprobs(model: torch.nn.Module, tok: object, prompts: list[str], comps: list[str],
              max_len: int, batch: int) -> np.ndarray:  # fmt: skip
    out = [completion_logprob(model, tok, prompts[i : i + batch], comps[i : i + batch], max_len)  # type: ignore[arg-type]
           for i in range(0, len(prompts), batch)]  # fmt: skip
    return torch.cat(out).double().numpy() if out else np.zeros(0)


def preference_table(model: torch.nn.Module, tokenizer: object, triples: Sequence[Triple],
                     max_len: int, heldout_contents: frozenset[str] = frozenset(),
                     batch: int = 64) -> pd.DataFrame:  # fmt: skip
    """One row per triple: kind, instruction, chosen_style, rejected_style, whole_content (its
    content is held out under every instruction), logp_chosen, logp_rejected (nats, with EOS)."""
    model.eval()
    prompts = [format_prompt(t.item.prompt) for t in triples]
    lc = _logprobs(model, tokenizer, prompts, [format_answer(t.chosen) for t in triples], max_len, batch)
    lr = _logprobs(model, tokenizer, prompts, [format_answer(t.rejected) for t in triples], max_len, batch)
    return pd.DataFrame({
        "kind": [t.kind for t in triples], "instruction": [t.item.instruction for t in triples],
        "chosen_style": [t.chosen_style for t in triples],
        "rejected_style": [t.rejected_style for t in triples],
        "whole_content": [t.item.content.question in heldout_contents for t in triples],
        "logp_chosen": lc, "logp_rejected": lr,
    })  # fmt: skip


def _wins(table: pd.DataFrame) -> np.ndarray:
    d = table["logp_chosen"].to_numpy(float) - table["logp_rejected"].to_numpy(float)
    return np.where(d > 0, 1.0, np.where(d < 0, 0.0, 0.5))


def _constant_baseline(table: pd.DataFrame) -> float:
    """Best constant-style accuracy on the table's triples (from their styles)."""
    @dataclass(frozen=True)
    class _T:
        chosen_style: str
        rejected_style: str

    ts = [_T(c, r) for c, r in zip(table["chosen_style"], table["rejected_style"], strict=True)]
    return max(constant_style_accuracy(ts, s) for s in STYLES)  # type: ignore[arg-type]


def preference_gate(table: pd.DataFrame, seed: int = 0,
                    preference_target: float = PREFERENCE_TARGET,
                    content_target: float = CONTENT_TARGET) -> GateResult:  # fmt: skip
    """Gate on a :func:`preference_table`: passes iff preference accuracy >= preference_target,
    content-probe accuracy >= content_target, and both CIs lie above the constant-style baseline.

    values: preference_accuracy (+ _ci_low/_ci_high), content_probe (+ CI), constant_style_baseline,
    per-kind accuracies (accuracy_<kind>), the whole-content subset's accuracies, n_triples.
    """
    if table.empty or not (table["kind"] == "content").any():
        return GateResult(False, {"n_triples": float(len(table))},
                          "not testable: no held-out triples with a content probe")  # fmt: skip
    wins = _wins(table)
    content = (table["kind"] == "content").to_numpy()
    pa, pl, ph = _ci(wins, seed)
    ca, cl, ch = _ci(wins[content], seed + 1)
    base = _constant_baseline(table)
    values = {"preference_accuracy": pa, "preference_ci_low": pl, "preference_ci_high": ph,
              "content_probe": ca, "content_ci_low": cl, "content_ci_high": ch,
              "constant_style_baseline": base, "n_triples": float(len(table)),
              "n_content": float(content.sum())}  # fmt: skip
    for kind in sorted(set(table["kind"])):
        values[f"accuracy_{kind}"] = float(wins[(table["kind"] == kind).to_numpy()].mean())
    whole = table["whole_content"].to_numpy(bool)
    if whole.any():
        values["preference_accuracy_whole_content"] = float(wins[whole].mean())
        if (whole & content).any():
            values["content_probe_whole_content"] = float(wins[whole & content].mean())
    fails = []
    if not pa >= preference_target:
        fails.append(f"preference accuracy {pa:.3f} < {preference_target}")
    if not ca >= content_target:
        fails.append(f"content probe {ca:.3f} < {content_target}")
    if not (pl > base and cl > base):
        fails.append(f"a CI reaches the constant-style baseline {base:.3f}")
    msg = (f"preference {pa:.3f} [{pl:.3f}, {ph:.3f}], content probe {ca:.3f} [{cl:.3f}, {ch:.3f}]"
           f", constant-style baseline {base:.3f}, n = {len(table)}")  # fmt: skip
    return GateResult(not fails, values, ("passed: " if not fails else "failed: "
                                          + "; ".join(fails) + ": ") + msg)  # fmt: skip


def majority_targets(train: Sequence[Item]) -> dict[str, str]:
    """instruction -> the most common required response among the training items (ties: first seen)."""
    counts: dict[str, Counter[str]] = {}
    for x in train:
        counts.setdefault(x.instruction, Counter())[x.target] += 1
    return {i: c.most_common(1)[0][0] for i, c in counts.items()}


def sft_table(model: torch.nn.Module, tokenizer: object, items: Sequence[Item],
              majority: dict[str, str], max_len: int, batch: int = 64) -> pd.DataFrame:  # fmt: skip
    """One row per item: instruction, style, hit (greedy reproduces the required response),
    majority_hit (the instruction's majority training response is the required one)."""
    hits = sft_hits(model, tokenizer, [(x.prompt, x.target) for x in items], max_len, batch)  # type: ignore[arg-type]
    return pd.DataFrame({
        "instruction": [x.instruction for x in items], "style": [x.style for x in items],
        "hit": hits.numpy().astype(float),
        "majority_hit": [float(majority.get(x.instruction) == x.target) for x in items],
    })  # fmt: skip


def sft_gate(table: pd.DataFrame, seed: int = 0) -> GateResult:
    """Gate on an :func:`sft_table`: passes iff the 95% CI of mean(hit - majority_hit) excludes 0
    from above. values: sft_accuracy, majority_baseline, difference (+ CI), n_items."""
    if table.empty:
        return GateResult(False, {"n_items": 0.0}, "not testable: no held-out SFT items")
    hit, base = table["hit"].to_numpy(float), table["majority_hit"].to_numpy(float)
    d, lo, hi = _ci(hit - base, seed)
    values = {"sft_accuracy": float(hit.mean()), "majority_baseline": float(base.mean()),
              "difference": d, "difference_ci_low": lo, "difference_ci_high": hi,
              "n_items": float(len(table))}  # fmt: skip
    msg = (f"SFT accuracy {hit.mean():.3f} vs majority {base.mean():.3f}: difference {d:+.3f} "
           f"[{lo:+.3f}, {hi:+.3f}], n = {len(table)}")  # fmt: skip
    passed = bool(lo > 0)
    return GateResult(passed, values, ("passed: " if passed else "failed: CI of the difference "
                                       "does not exclude 0: ") + msg)  # fmt: skip


_GROUPS = (("q", r"q_proj"), ("k", r"k_proj"), ("v", r"v_proj"), ("o", r"o_proj|attn\.c_proj"),
           ("qkv", r"c_attn"), ("up", r"up_proj"), ("gate", r"gate_proj"),
           ("down", r"down_proj|mlp\.c_proj"), ("fc", r"c_fc|fc1|fc2"), ("embed", r"embed|wte|wpe"),
           ("norm", r"norm|ln_"))  # fmt: skip


def matrix_group(name: str) -> str:
    """The matrix group of a parameter name (see :data:`_GROUPS`); ``other`` if none matches."""
    for group, pattern in _GROUPS:
        if re.search(pattern, name):
            return group
    return "other"


@torch.no_grad()
def weight_change(base: torch.nn.Module, aligned: torch.nn.Module) -> dict[str, float]:
    """||dW||_F / ||W_base||_F per matrix group (dimensionless); raises on mismatched tensors."""
    b, a = dict(base.named_parameters()), dict(aligned.named_parameters())
    if set(b) != set(a):
        raise ValueError(f"parameter names differ: {sorted(set(b) ^ set(a))[:5]}")
    num: dict[str, float] = {}
    den: dict[str, float] = {}
    for name, w in b.items():
        if w.shape != a[name].shape:
            raise ValueError(f"{name}: shape {tuple(w.shape)} vs {tuple(a[name].shape)}")
        g = matrix_group(name)
        num[g] = num.get(g, 0.0) + float((a[name].double() - w.double()).pow(2).sum())
        den[g] = den.get(g, 0.0) + float(w.double().pow(2).sum())
    return {g: float(np.sqrt(num[g] / den[g])) if den[g] > 0 else float("nan") for g in sorted(num)}


def measure_checkpoint(model: torch.nn.Module, base: torch.nn.Module, tokenizer: object,
                       data: object, max_len: int, seed: int = 0) -> dict[str, GateResult]:  # fmt: skip
    """Both gates of one checkpoint on ``data`` (an AlignmentData); the preference gate's values
    also carry ``dW_rel/<group>`` from :func:`weight_change` (model vs base)."""
    if not isinstance(data, AlignmentData):
        raise TypeError(f"data must be an AlignmentData, got {type(data).__name__}")
    pref = preference_gate(preference_table(model, tokenizer, data.dpo_heldout, max_len,
                                            data.heldout_contents), seed)  # fmt: skip
    sft = sft_gate(sft_table(model, tokenizer, data.heldout, majority_targets(data.train), max_len),
                   seed)  # fmt: skip
    dw = {f"dW_rel/{g}": v for g, v in weight_change(base, model).items()}
    return {"preference": GateResult(pref.passed, {**pref.values, **dw}, pref.reason), "sft": sft}
