"""Behavioural gates of an alignment run: did each stage add what it was trained for?

Measured on the held-out (instruction, content) items of
:mod:`lamina.sources.organisms.instructions`, whose contents are held out as whole entity pairs
(no held-out content, and no other question about its entity pair, is trained on under any
template). Every CI is a 95% percentile bootstrap over entity pairs (``Content.unit``: the
independent unit; the items of one pair move together), :data:`N_RESAMPLES` resamples.

Per stage (``base`` -> ``sft`` -> ``dpo``; the base is the checkpoint SFT starts from) the
tables give, per held-out item, the greedy SFT hit (:func:`sft_table`) and, per held-out
triple, log pi(chosen) and log pi(rejected) (:func:`preference_table`). Each stage is judged
against the baselines that matter (:func:`stage_gates`):

* ``sft`` passes when its held-out SFT accuracy on the unrestricted items (what SFT trains on;
  the refusal is DPO's to teach, :mod:`lamina.sources.organisms.instructions`) beats every
  content-blind policy of :data:`lamina.sources.organisms.baselines.POLICIES` (fit on the
  training items) and the base, each with the CI of the paired difference above 0;
* ``dpo`` passes when its preference accuracy on the held-out triples (every kind) exceeds
  ``sft``'s, its content probe (P[log pi(correct) > log pi(wrong answer)], both in the instructed
  style, on the reversed pairs of :func:`lamina.sources.organisms.instructions.reversed_pairs`,
  where any policy that reads only the two answers scores 1/2) exceeds the base's, each with the CI of the paired difference above 0, and its
  preference accuracy's CI lies above the best constant-style policy (0.5 by construction). A
  DPO that adds no preference to @sft has taught nothing; one that gains over @sft but ends
  below the base on content has only repaired a degraded @sft. The content probe's gain over
  @sft is reported, not required.

Ties count 1/2. :func:`weight_change` gives ||dW||_F / ||W||_F per matrix group. The gates are
pure functions of the tables, so they can be tested on planted tables; :func:`measure_stages`
builds the tables from models.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from lamina.evidence.decide import GateResult as EngineGate
from lamina.evidence.resampling import index_bootstrap
from lamina.sources.organisms.baselines import POLICIES, fit_policies, policy_hits
from lamina.sources.organisms.checkpoints import write_json
from lamina.sources.organisms.evaluate import sft_hits
from lamina.sources.organisms.instructions import (
    STYLES,
    AlignmentData,
    Item,
    Triple,
    constant_style_accuracy,
)
from lamina.sources.organisms.stages import dpo_margins

__all__ = ["DPO_WITHOUT_BASE", "GATES_FORMAT", "N_RESAMPLES", "OLD_DPO_FORMATS", "STAGE_ORDER", "GateResult",
           "cluster_ci", "dpo_gate", "matrix_group", "measure_stages", "preference_table", "read_gates", "sft_gate", "sft_gate_rows",
           "sft_table", "stage_gates", "stage_measures", "weight_change", "write_gates"]  # fmt: skip

N_RESAMPLES = 2000
GATES_FORMAT = 4
"""Version of the gates record (:func:`write_gates`); 1 was {checkpoint: {"preference", "sft"}};
2 and 3 had the same layout as 4, but 2's DPO gate did not compare @dpo with the base and 3's
did not compare @dpo's preference accuracy with @sft's (their @dpo gates are read as failed,
:func:`read_gates`)."""
OLD_DPO_FORMATS = (2, 3)
"""Gates formats whose records are read, with their @dpo gate failed (:data:`DPO_WITHOUT_BASE`)."""
DPO_WITHOUT_BASE = (
    "its DPO gate was recorded in gates format {fmt}, which did not require @dpo to beat @sft's "
    "preference accuracy and the base's content probe: rebuild the aligned model or organism to "
    "judge @dpo"
)
"""The reason an older record's @dpo gate fails (:func:`read_gates`,
:func:`lamina.weights.aligned.gate_from_record`)."""
STAGE_ORDER = ("base", "sft", "dpo")
"""The stages in training order; each after the first is gated against its predecessor."""


@dataclass(frozen=True)
class GateResult:
    """A stage's gate: passed, its values by name (fractions in [0, 1] or differences of
    fractions; counts as floats), and one line saying why (with the values that decided it).
    :meth:`for_engine` gives the claims engine's gate, named by the stage."""

    passed: bool
    values: dict[str, float] = field(default_factory=dict)
    reason: str = ""

    def for_engine(self) -> EngineGate:
        """The engine's :class:`lamina.evidence.decide.GateResult`: passed, and the reason as
        its values text (what a "not testable" row quotes)."""
        return EngineGate(self.passed, self.reason)


def cluster_ci(x: np.ndarray, units: np.ndarray, seed: int) -> tuple[float, float, float]:
    """(mean, 95% CI low, high) of per-row scores x (n,), resampling whole units (n,) with
    replacement (:func:`lamina.evidence.resampling.index_bootstrap`); NaN for no rows, the
    mean thrice when x is constant."""
    x = np.asarray(x, dtype=float)
    if len(x) == 0:
        return float("nan"), float("nan"), float("nan")
    if len(x) == 1 or np.all(x == x[0]):
        return float(x.mean()), float(x.mean()), float(x.mean())
    r = index_bootstrap(lambda idx: float(x[idx].mean()), len(x), N_RESAMPLES, seed,
                        clusters=np.asarray(units))  # fmt: skip
    return float(r["estimate"]), float(r["ci_low"]), float(r["ci_high"])


def sft_table(model: torch.nn.Module, tokenizer: Any, items: Sequence[Item], max_len: int,
              batch: int = 64) -> pd.DataFrame:  # fmt: skip
    """One row per held-out item: unit (entity pair), template, instruction, style (of the
    required response), hit (greedy decoding reproduces it exactly; 0/1)."""
    hits = sft_hits(model, tokenizer, [(x.prompt, x.target) for x in items], max_len, batch)  # type: ignore[arg-type]
    return pd.DataFrame({
        "unit": [x.content.unit for x in items], "template": [x.content.template for x in items],
        "instruction": [x.instruction for x in items], "style": [x.style for x in items],
        "hit": hits.numpy().astype(float),
    })  # fmt: skip


def preference_table(model: torch.nn.Module, tokenizer: Any, triples: Sequence[Triple],
                     max_len: int, batch: int = 64) -> pd.DataFrame:  # fmt: skip
    """One row per held-out triple: unit, kind, instruction, chosen_style, rejected_style and
    margin = log pi(chosen) - log pi(rejected) (nats, answers with their EOS)."""
    m = dpo_margins(model, None, tokenizer, [t.as_tuple() for t in triples], max_len, batch)  # type: ignore[arg-type]
    return pd.DataFrame({
        "unit": [t.item.content.unit for t in triples], "kind": [t.kind for t in triples],
        "instruction": [t.item.instruction for t in triples],
        "chosen_style": [t.chosen_style for t in triples],
        "rejected_style": [t.rejected_style for t in triples], "margin": m.double().numpy(),
    })  # fmt: skip


def _wins(table: pd.DataFrame) -> np.ndarray:
    d = table["margin"].to_numpy(float)
    return np.where(d > 0, 1.0, np.where(d < 0, 0.0, 0.5))


def _constant_baseline(table: pd.DataFrame) -> float:
    """Best constant-style accuracy on the table's triples (from their styles)."""
    @dataclass(frozen=True)
    class _T:
        chosen_style: str
        rejected_style: str

    ts = [_T(c, r) for c, r in zip(table["chosen_style"], table["rejected_style"], strict=True)]
    return max(constant_style_accuracy(ts, s) for s in STYLES)  # type: ignore[arg-type]


def sft_gate_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of an :func:`sft_table` that the SFT gate judges: the unrestricted items (style
    other than ``refusal``), in order, re-indexed from 0."""
    return table[table["style"] != "refusal"].reset_index(drop=True) if len(table) else table


def stage_measures(sft: pd.DataFrame, pref: pd.DataFrame, seed: int = 0) -> dict[str, float]:
    """One stage's measures with CIs: sft_accuracy (on the unrestricted items, the SFT gate's),
    preference_accuracy, content_probe (each with _ci_low / _ci_high), refusal_accuracy (greedy
    refusals on the restricted items), accuracy_<kind>, constant_style_baseline, n_items (the
    SFT gate's), n_triples, n_units (entity pairs)."""
    out: dict[str, float] = {}
    if len(sft) and (sft["style"] == "refusal").any():
        out["refusal_accuracy"] = float(sft.loc[sft["style"] == "refusal", "hit"].mean())
    sft = sft_gate_rows(sft)
    if len(sft):
        a, lo, hi = cluster_ci(sft["hit"].to_numpy(float), sft["unit"].to_numpy(), seed)
        out |= {"sft_accuracy": a, "sft_accuracy_ci_low": lo, "sft_accuracy_ci_high": hi}
    if len(pref):
        wins, units = _wins(pref), pref["unit"].to_numpy()
        content = (pref["kind"] == "content").to_numpy()
        for name, rows, s in (("preference_accuracy", slice(None), 1), ("content_probe", content, 2)):
            a, lo, hi = cluster_ci(wins[rows], units[rows], seed + s)
            out |= {name: a, f"{name}_ci_low": lo, f"{name}_ci_high": hi}
        for kind in sorted(set(pref["kind"])):
            out[f"accuracy_{kind}"] = float(wins[(pref["kind"] == kind).to_numpy()].mean())
        out["constant_style_baseline"] = _constant_baseline(pref)
    out |= {"n_items": float(len(sft)), "n_triples": float(len(pref)),
            "n_units": float(len(set(sft.get("unit", [])) | set(pref.get("unit", []))))}  # fmt: skip
    return out


def _gain(after: np.ndarray, before: np.ndarray, units: np.ndarray, seed: int,
          name: str) -> dict[str, float]:  # fmt: skip
    d, lo, hi = cluster_ci(after - before, units, seed)
    return {name: d, f"{name}_ci_low": lo, f"{name}_ci_high": hi}


def sft_gate(stage: pd.DataFrame, base: pd.DataFrame, policies: Mapping[str, np.ndarray],
             seed: int = 0) -> GateResult:  # fmt: skip
    """The SFT gate on :func:`sft_table` s of the stage and its base (same items, same order;
    :func:`stage_gates` passes the unrestricted items) and the content-blind policies' hits on
    those items ({name: (N,) 0/1}): passes iff the CI of the paired difference lies above 0
    against every policy and against the base.

    values: sft_accuracy, base_sft_accuracy, policy accuracies (``policy_<i>``, in
    :data:`POLICIES` order), best_policy_accuracy, gain_over_<base|best_policy|policy_<i>>
    with _ci_low / _ci_high, n_items, n_units."""
    if stage.empty:
        return GateResult(False, {"n_items": 0.0}, "not testable: no held-out SFT items")
    if list(stage["unit"]) != list(base["unit"]):
        raise ValueError("sft_gate: the stage and base tables must hold the same items in order")
    if any(len(h) != len(stage) for h in policies.values()):
        raise ValueError("sft_gate: every policy's hits must score the stage table's items")
    hit, units = stage["hit"].to_numpy(float), stage["unit"].to_numpy()
    values = {"sft_accuracy": float(hit.mean()), "base_sft_accuracy": float(base["hit"].mean()),
              "n_items": float(len(stage)), "n_units": float(len(set(units)))}  # fmt: skip
    values |= _gain(hit, base["hit"].to_numpy(float), units, seed, "gain_over_base")
    names = [n for n in POLICIES if n in policies] + [n for n in policies if n not in POLICIES]
    for i, name in enumerate(names):
        values[f"policy_{i}"] = float(np.mean(policies[name]))
        values |= _gain(hit, np.asarray(policies[name], float), units, seed + 1 + i,
                        f"gain_over_policy_{i}")  # fmt: skip
    best = max(range(len(names)), key=lambda i: values[f"policy_{i}"]) if names else None
    fails = [] if values["gain_over_base_ci_low"] > 0 else ["the base"]
    fails += [names[i] for i in range(len(names)) if not values[f"gain_over_policy_{i}_ci_low"] > 0]
    msg = (f"SFT accuracy {hit.mean():.3f} vs base {values['base_sft_accuracy']:.3f} "
           f"({values['gain_over_base']:+.3f} [{values['gain_over_base_ci_low']:+.3f}, "
           f"{values['gain_over_base_ci_high']:+.3f}])")  # fmt: skip
    if best is not None:
        for k in ("", "_ci_low", "_ci_high"):
            values[f"gain_over_best_policy{k}"] = values[f"gain_over_policy_{best}{k}"]
        values["best_policy_accuracy"] = values[f"policy_{best}"]
        msg += (f"; best content-blind policy ({names[best]}) {values['best_policy_accuracy']:.3f}: "
                f"{values['gain_over_best_policy']:+.3f} [{values['gain_over_best_policy_ci_low']:+.3f}, "
                f"{values['gain_over_best_policy_ci_high']:+.3f}]")  # fmt: skip
    msg += f"; n = {len(stage)} items, {len(set(units))} entity pairs"
    head = "passed: " if not fails else f"failed: the CI of the gain reaches 0 against {', '.join(fails)}: "
    return GateResult(not fails, values, head + msg)


def dpo_gate(stage: pd.DataFrame, before: pd.DataFrame, base: pd.DataFrame,
             seed: int = 0) -> GateResult:  # fmt: skip
    """The DPO gate on :func:`preference_table` s of the stage, its predecessor (@sft) and the
    base (same triples, same order): passes iff the preference accuracy's paired gain over the
    predecessor and the content probe's paired gain over the base each have a CI above 0, and
    the preference accuracy's CI lies above the constant-style baseline.

    values: preference_accuracy (+ CI), sft_preference_accuracy, base_preference_accuracy,
    preference_gain (over @sft) and preference_gain_over_base (reported, not required; each +
    CI), content_probe, sft_content_probe, base_content_probe,
    content_gain (over @sft; reported, not required) and content_gain_over_base (each + CI),
    constant_style_baseline, n_triples, n_content, n_units (fractions in [0, 1], gains as
    differences of fractions)."""
    content = (stage["kind"] == "content").to_numpy() if len(stage) else np.zeros(0, bool)
    if stage.empty or not content.any():
        return GateResult(False, {"n_triples": float(len(stage))},
                          "not testable: no held-out triples with a content probe")  # fmt: skip
    if list(stage["unit"]) != list(before["unit"]) or list(stage["unit"]) != list(base["unit"]):
        raise ValueError("dpo_gate: the stage, predecessor and base tables must hold the same triples in order")
    wins, prev, first, units = _wins(stage), _wins(before), _wins(base), stage["unit"].to_numpy()
    style = _constant_baseline(stage)
    pa, pl, ph = cluster_ci(wins, units, seed)
    values = {"content_probe": float(wins[content].mean()), "sft_content_probe": float(prev[content].mean()),
              "base_content_probe": float(first[content].mean()),
              "preference_accuracy": pa, "preference_accuracy_ci_low": pl,
              "preference_accuracy_ci_high": ph, "sft_preference_accuracy": float(prev.mean()),
              "base_preference_accuracy": float(first.mean()),
              "constant_style_baseline": style, "n_triples": float(len(stage)),
              "n_content": float(content.sum()), "n_units": float(len(set(units)))}  # fmt: skip
    values |= _gain(wins[content], prev[content], units[content], seed + 1, "content_gain")
    values |= _gain(wins, prev, units, seed + 2, "preference_gain")
    values |= _gain(wins[content], first[content], units[content], seed + 3, "content_gain_over_base")
    values |= _gain(wins, first, units, seed + 4, "preference_gain_over_base")
    fails = []
    if not values["preference_gain_ci_low"] > 0:
        fails.append("the preference accuracy's gain over @sft has a CI reaching 0")
    if not values["content_gain_over_base_ci_low"] > 0:
        fails.append("the content probe's gain over the base has a CI reaching 0")
    if not pl > style:
        fails.append(f"the preference accuracy's CI reaches the constant-style baseline {style:.3f}")
    msg = (f"preference {pa:.3f} [{pl:.3f}, {ph:.3f}] vs @sft {values['sft_preference_accuracy']:.3f}: "
           f"{values['preference_gain']:+.3f} [{values['preference_gain_ci_low']:+.3f}, "
           f"{values['preference_gain_ci_high']:+.3f}], vs constant style {style:.3f}; content probe "
           f"{values['content_probe']:.3f} vs the base {values['base_content_probe']:.3f}: "
           f"{values['content_gain_over_base']:+.3f} [{values['content_gain_over_base_ci_low']:+.3f}, "
           f"{values['content_gain_over_base_ci_high']:+.3f}] (vs @sft {values['sft_content_probe']:.3f}: "
           f"{values['content_gain']:+.3f}); n = {len(stage)} triples, {int(content.sum())} content, "
           f"{int(values['n_units'])} entity pairs")  # fmt: skip
    return GateResult(not fails, values, ("passed: " if not fails else "failed: " + "; ".join(fails) + ": ") + msg)


def stage_gates(tables: Mapping[str, tuple[pd.DataFrame, pd.DataFrame]],
                policies: Mapping[str, np.ndarray], seed: int = 0) -> dict[str, GateResult]:  # fmt: skip
    """{"sft": gate, "dpo": gate} from {stage: (sft_table, preference_table)} of
    :data:`STAGE_ORDER` (see the module docstring); ``policies``' hits score the SFT tables'
    gate rows (:func:`sft_gate_rows`), in order."""
    return {"sft": sft_gate(sft_gate_rows(tables["sft"][0]), sft_gate_rows(tables["base"][0]), policies, seed),
            "dpo": dpo_gate(tables["dpo"][1], tables["sft"][1], tables["base"][1], seed)}  # fmt: skip


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


def measure_stages(models: Mapping[str, torch.nn.Module], tokenizer: Any, data: AlignmentData,
                   max_len: int, seed: int = 0) -> dict[str, Any]:  # fmt: skip
    """Tables, measures and gates of the stages :data:`STAGE_ORDER` (``models``: {"base",
    "sft", "dpo"}) on ``data``'s held-out items.

    -> {"measures": {stage: :func:`stage_measures` + dW_rel/<group> against the base},
    "policies": {name: held-out accuracy}, "sft": GateResult, "dpo": GateResult,
    "tables": {stage: (sft_table, preference_table)}}.
    """
    if not isinstance(data, AlignmentData):
        raise TypeError(f"data must be an AlignmentData, got {type(data).__name__}")
    tables = {s: (sft_table(models[s], tokenizer, data.heldout, max_len),
                  preference_table(models[s], tokenizer, data.dpo_heldout, max_len))
              for s in STAGE_ORDER}  # fmt: skip
    hits = policy_hits(fit_policies(data.train), data.sft_heldout)
    measures = {s: stage_measures(*tables[s], seed) for s in STAGE_ORDER}
    for s in STAGE_ORDER[1:]:
        measures[s] |= {f"dW_rel/{g}": v for g, v in weight_change(models["base"], models[s]).items()}
    return {"measures": measures, "policies": {k: float(v.mean()) for k, v in hits.items()},
            **stage_gates(tables, hits, seed), "tables": tables}


def write_gates(path: Path, gates: Mapping[str, Any]) -> None:
    """Write :func:`measure_stages`'s result as JSON (atomically): {"format", "measures",
    "policies", "policy_names", "sft": {passed, values, reason}, "dpo": {...}}; its tables, when
    present, beside it as ``<stem>_items.csv`` (one row per stage and held-out item or triple)."""
    record = {"format": GATES_FORMAT, "measures": gates["measures"], "policies": gates["policies"],
              "policy_names": list(gates["policies"]),
              **{s: dataclasses.asdict(gates[s]) for s in STAGE_ORDER[1:]}}  # fmt: skip
    write_json(Path(path), record)
    if gates.get("tables"):
        rows = [t.assign(stage=stage, table=name) for stage, pair in gates["tables"].items()
                for name, t in zip(("sft", "preference"), pair, strict=True)]  # fmt: skip
        items = Path(path).with_name(Path(path).stem + "_items.csv")
        tmp = items.with_name(f".{items.name}.{os.getpid()}.tmp")
        pd.concat(rows, ignore_index=True).to_csv(tmp, index=False)
        os.replace(tmp, items)


def read_gates(record: Mapping[str, Any]) -> dict[str, GateResult]:
    """{"sft": GateResult, "dpo": GateResult} from a gates record (:func:`write_gates`, or the
    ``gates`` of an organism's evaluation.json); a stage whose gate is missing fails, saying
    so; an older record's @dpo gate fails (:data:`OLD_DPO_FORMATS`, :data:`DPO_WITHOUT_BASE`); a record of another
    format raises ValueError naming it."""
    fmt = record.get("format")
    if fmt not in (*OLD_DPO_FORMATS, GATES_FORMAT):
        raise ValueError(f"gates record of format {record.get('format')!r}; this code reads "
                         f"format {GATES_FORMAT} (rebuild the aligned model or organism)")  # fmt: skip
    out = {}
    for stage in STAGE_ORDER[1:]:
        g = record.get(stage)
        if not isinstance(g, Mapping) or "passed" not in g:
            out[stage] = GateResult(False, {}, f"the gate of @{stage} is missing from its record")
            continue
        values = {str(k): float(v) for k, v in dict(g.get("values", {})).items()
                  if isinstance(v, int | float) and not isinstance(v, bool)}  # fmt: skip
        out[stage] = GateResult(bool(g["passed"]), values, str(g.get("reason", "")))
        if stage == "dpo" and fmt != GATES_FORMAT:
            out[stage] = GateResult(False, values, DPO_WITHOUT_BASE.format(fmt=fmt))
    return out
