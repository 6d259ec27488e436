"""What the weight-update-signature chapter runs on one unit before and after measuring it:
the settings it runs with (:func:`unit_settings`), the applied objectives trained from its base
and adopted into it (:func:`adopt_objectives`), each measurement with its time and progress line
(:func:`run_part`, :func:`report_part`), the release of its models once measured (:func:`release_unit`), and the
quantisation control of a quantised
real checkpoint (:func:`unit_quant_control`: the claims of :data:`SUBSPACE_CLAIMS` recomputed
with the base's subspaces from its weights re-quantised)."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

import pandas as pd
import torch

from lamina.core.machine import peak_memory_gib
from lamina.core.progress import say
from lamina.sources.models import get_adapter
from lamina.states.quant_control import not_run_control, run_quant_control
from lamina.weights.judging import judge_unit
from lamina.weights.measure import PREFIX, measure_unit
from lamina.weights.objective_runs import run_objectives
from lamina.weights.probes import organism_deltas, probed_maps
from lamina.weights.settings import SignatureSettings, context_length, real_budget
from lamina.weights.single import SingleCheckpoint
from lamina.weights.units import ModelPair, Units

__all__ = ["SUBSPACE_CLAIMS", "adopt_objectives", "release_unit", "report_part", "run_part",
           "unit_quant_control", "unit_settings"]  # fmt: skip

SUBSPACE_CLAIMS = tuple(f"{PREFIX}{c}" for c in (
    "align-qk-sft", "align-qk-dpo", "align-writes-sft", "align-writes-dpo",
    "late-pretraining-qk", "late-pretraining-writes", "every-objective-qk",
    "every-objective-writes", "stage-not-objective"))  # fmt: skip
"""The claims computed from the deltas table alone (ΔW probed in the base's subspaces): the
ones the quantisation control recomputes."""


def unit_settings(ck: Units, config: SignatureSettings) -> SignatureSettings:
    """The settings one unit runs with: the organisms' as given, a real unit's under the
    ``real_*`` budget."""
    if isinstance(ck, SingleCheckpoint):
        return ck.run_config()
    if isinstance(ck, ModelPair):
        model = ck.load(ck.spec(config.base))[0]
        return real_budget(config, get_adapter(model).n_layers(model))
    return config


def adopt_objectives(ck: Units, s: SignatureSettings, notes: list[str]) -> pd.DataFrame:
    """Train the applied objectives from ``s.base`` (:func:`lamina.weights.objective_runs.
    run_objectives`), adopt them into ``ck`` -> their curves and gates (a real pair applies
    none: its ``every_objective`` rows say why); a note on them is appended to ``notes``."""
    if isinstance(ck, ModelPair):
        return pd.DataFrame()
    base_spec = ck.spec(s.base)
    base, tok = ck.load(base_spec)
    cfg = ck.stage_config.replace(context=context_length(base, s.max_length), replay_batch_size=0)
    keep = {m.parameter for m in probed_maps(base, s)}
    runs = run_objectives(base, tok, ck.corpus(), cfg, s, keep)
    rows = []
    for o, r in runs.items():
        ck.adopt(o, base_spec, r.model, tok, r.adam)
        rows += [{**row, "model": ck.name, "gate_passed": r.gate[0], "gate": r.gate[1]}
                 for row in r.curve]  # fmt: skip
    notes.append(f"{ck.name}: applied objectives, each {s.objective_steps} AdamW steps of "
                 f"{s.objective_batch} examples at peak lr {s.objective_lr:g}; gates: "
                 + "; ".join(f"{o} {'passed' if r.gate[0] else 'failed'} ({r.gate[1]})"
                             for o, r in runs.items()))  # fmt: skip
    return pd.DataFrame(rows)


def unit_quant_control(
    ck: SingleCheckpoint, base_model: torch.nn.Module, parts: dict[str, pd.DataFrame],
    s: SignatureSettings, texts: list[str], cache: dict, gates: dict,
    claims: pd.DataFrame, notes: list[str],
) -> tuple[pd.DataFrame, pd.DataFrame]:  # fmt: skip
    """The quantisation control of a quantised real checkpoint (``lamina.states.quant_control``):
    the claims of :data:`SUBSPACE_CLAIMS` recomputed with the base's subspaces taken from its
    weights re-quantised (same ΔW); the others read "not run: cost". -> (claims with
    ``quant_shift``, flip table)."""
    quantization = {ck.name: (getattr(base_model, "lamina_source", None) or {}).get("quantization")}

    def run_claims(name: str) -> pd.DataFrame:
        deltas = organism_deltas(ck, texts, s, cache, requantise=name.rpartition("+")[2])
        out = judge_unit(name, measure_unit({**parts, "deltas": deltas}, s, ck), gates)
        return out[out["claim_id"].isin(SUBSPACE_CLAIMS)]

    t0 = time.perf_counter()
    out, flips = run_quant_control([ck.name], claims, quantization, run_claims, notes=notes)
    cost = ("cost: it needs new gradients, training or edits on the re-quantised checkpoint, "
            "beyond the book's budget")  # fmt: skip
    rest = ~out["claim_id"].isin(SUBSPACE_CLAIMS)
    out.loc[rest, "quant_shift"] = not_run_control(out[rest], quantization, cost)["quant_shift"]
    s.timings[f"{ck.name}:quant_control"] = round(time.perf_counter() - t0, 2)
    return out, flips


def report_part(unit: str, part: str, seconds: float) -> None:
    """One progress line per measurement of a unit: its wall time (s) and the process's peak
    resident memory so far (GiB; :func:`lamina.core.machine.peak_memory_gib`). Under
    ``lamina run`` the terminal prefixes it with the chapter's name."""
    peak = peak_memory_gib()
    say(f"{unit}: {part} in {seconds:.0f} s"
        + (f"; peak memory so far {peak:.1f} GiB" if peak is not None else ""))  # fmt: skip


def run_part(name: str, part: str, fn: Callable[..., pd.DataFrame], args: tuple,
             parts: dict[str, pd.DataFrame], tables: dict[str, list[pd.DataFrame]],
             timings: dict[str, float]) -> None:  # fmt: skip
    """One measurement of unit ``name``: ``fn(*args)``'s table into ``parts[part]`` and
    ``tables[part]``, its wall time (s) into ``timings``, one progress line
    (:func:`report_part`). The chapter runs the single-group adaptation first, while the base
    is the only model its unit holds: its full-parameter AdamW copy is four models' worth of
    memory, and beside the stage targets and the three objective runs it set the chapter's
    peak (17.1 GiB on Gemma 3). Every measurement seeds its own generator, so the order
    changes no table (organism-gpt2's ten tables were identical, benchmarks/HISTORY.md)."""
    t1 = time.perf_counter()
    parts[part] = fn(*args).assign(model=name)
    timings[f"{name}:{part}"] = round(time.perf_counter() - t1, 2)
    report_part(name, part, timings[f"{name}:{part}"])
    tables.setdefault(part, []).append(parts[part])


def release_unit(ck: Units) -> None:
    """Drop a measured unit's models (:meth:`lamina.weights.units.Adopting.release`) and
    collect them, so that a run over several units holds one unit's models at a time. Without
    it, SmolLM2's copies sat beside Gemma-3-270m's, and the chapter on its default models went
    past 22 GiB and was killed on the 24 GiB machine."""
    ck.release()
    gc.collect()
