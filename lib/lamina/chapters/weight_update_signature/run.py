"""The weight-update-signature chapter's run: on every unit (a real checkpoint, an organism, or
a real pair), the applied-objective runs, the measurements of :mod:`lamina.weights`, the gates,
and the claims judged from their declarations. What runs on one unit besides the measurements
(its settings, the applied objectives, the quantisation control) is
:mod:`lamina.weights.unit_runs`."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import pandas as pd
import torch

from lamina.chapters.results import ExperimentResult
from lamina.chapters.weight_update_signature.config import CHAPTER, Config, expand_models
from lamina.core.threads import threads
from lamina.weights.adaptation import single_group_adaptation
from lamina.weights.edit_effects import null_stages, write_edit_effects
from lamina.weights.judging import judge_unit
from lamina.weights.measure import measure_unit, unit_gates
from lamina.weights.mechanism import (
    adam_signature,
    objective_gradients,
    write_gradients_across_training,
)
from lamina.weights.probes import organism_deltas
from lamina.weights.settings import context_length
from lamina.weights.single import SingleCheckpoint
from lamina.weights.tables import sensitivity
from lamina.weights.texts import split_sample, text_sample
from lamina.weights.unit_runs import (
    adopt_objectives,
    release_unit,
    report_part,
    run_part,
    unit_quant_control,
    unit_settings,
)
from lamina.weights.units import Checkpoints, ModelPair, Units

__all__ = ["run"]

def run(config: Config) -> ExperimentResult:
    """Every unit of ``config.model`` (real checkpoints first, each with its aligned build and
    the applied objectives; then the organisms), or the real pair ``config.base`` ->
    ``config.target``: tables ``deltas``, ``gradients``, ``write_gradients``, ``adam``,
    ``edits``, ``adaptation``, ``finetune`` (training curves), ``gates``, ``sensitivity``,
    ``claims`` (and ``quantisation`` for a quantised real checkpoint)."""
    if config.is_pair:
        pair = ModelPair(config.base, str(config.target), config.base_revision,
                         config.target_revision)  # fmt: skip
        units: list[Units] = [pair]
        notes: list[str] = []
        run_config = dataclasses.replace(config, base=pair.base_label,
                                         targets=(pair.target_label,), base_model=None,
                                         aligned_model=None)  # fmt: skip
    else:
        real, names, notes = expand_models(config)
        if not real and not names:
            raise RuntimeError(f"no organism of model={config.model!r} is built: {'; '.join(notes)}")
        units = [SingleCheckpoint(n, config, caps=config.caps(n)) for n in real]
        units += [Checkpoints(n) for n in names]
        run_config = config
    with threads():  # $LAMINA_NUM_THREADS, else torch's default
        return _run(config, run_config, units, notes)


def _run(user: Config, run_config: Config, units: list[Units], notes: list[str]) -> ExperimentResult:
    tables: dict[str, list[pd.DataFrame]] = {}
    claims = []
    torch.manual_seed(run_config.seed)
    for ck in units:
        name, t0 = ck.name, time.perf_counter()
        s = unit_settings(ck, run_config)
        base_model, tok = ck.load(ck.spec(s.base))
        recorded = ck.gates()  # a real checkpoint's SFT/DPO build, if missing, made here
        loading, parts = time.perf_counter() - t0, dict[str, pd.DataFrame]()
        # the adaptation beside the base alone (lamina.weights.unit_runs.run_part)
        run_part(name, "adaptation", single_group_adaptation, (ck, s), parts, tables, s.timings)
        t0 = time.perf_counter()
        objective_curves = adopt_objectives(ck, s, notes)
        for target in s.targets:  # after the objective runs: not held while they train
            ck.load(ck.spec(target))
        s.timings[f"{name}:load and objectives"] = round(loading + time.perf_counter() - t0, 2)
        report_part(name, "load and objectives", s.timings[f"{name}:load and objectives"])
        basis_docs, grad_docs = split_sample(ck.documents(s.text_source), s.seed)
        length = context_length(base_model, s.max_length)
        texts = text_sample(basis_docs, tok, s.n_tokens, s.seed, length)
        grad_texts = text_sample(grad_docs, tok, s.grad_tokens, s.seed, length)
        cache: dict = {}
        passed = [t for t, g in recorded.items() if g.passed] + (
            [s.base] if getattr(ck, "aligned_base", False) else [])  # fmt: skip
        steps: dict[str, tuple[Callable[..., pd.DataFrame], tuple]] = {
            "deltas": (organism_deltas, (ck, texts, s, cache)),
            "gradients": (objective_gradients, (ck, texts, s, cache, grad_texts)),
            "write_gradients": (write_gradients_across_training, (ck, grad_texts, s)),
            "adam": (adam_signature, (ck, texts, s, cache)),
            "edits": (write_edit_effects, (ck, texts, s, [t for t in null_stages(ck, s) if t in passed])),
        }
        for part, (fn, args) in steps.items():
            run_part(name, part, fn, args, parts, tables, s.timings)
        finetune = pd.concat([objective_curves, ck.curves().assign(gate_passed=None, gate="")]
                             if isinstance(ck, SingleCheckpoint) else [objective_curves],
                             ignore_index=True)  # fmt: skip
        tables.setdefault("finetune", []).append(finetune)
        objective_gates = {} if objective_curves.empty else {
            str(o): (bool(g["gate_passed"].iloc[0]), str(g["gate"].iloc[0]))
            for o, g in objective_curves.groupby("objective", sort=False)}  # fmt: skip
        gates = unit_gates(recorded, objective_gates, parts["adaptation"], s)
        tables.setdefault("gates", []).append(pd.DataFrame(
            [{"model": name, "gate": k, "passed": v[0], "values": v[1]} for k, v in gates.items()]))
        notes += [f"{name} gate {k}: {'passed' if v[0] else 'failed'} ({v[1]})"
                  for k, v in gates.items()]  # fmt: skip
        unit_claims = judge_unit(name, measure_unit(parts, s, ck), gates)
        tables.setdefault("sensitivity", []).append(sensitivity(name, parts["deltas"], s))
        if isinstance(ck, SingleCheckpoint) and run_config.quant_control:
            unit_claims, flips = unit_quant_control(ck, base_model, parts, s, texts, cache, gates,
                                                unit_claims, notes)  # fmt: skip
            tables.setdefault("quantisation", []).append(flips)
        claims.append(unit_claims)
        del base_model, cache, parts  # one unit's models at a time (release_unit)
        release_unit(ck)
    claim_table = pd.concat(claims, ignore_index=True) if claims else pd.DataFrame()
    out = {k: pd.concat(v, ignore_index=True) for k, v in tables.items()}
    out["claims"] = claim_table
    return ExperimentResult(CHAPTER, user, claim_table, out, notes, [ck.name for ck in units])
