"""Calibration of paper 2's rows: each declared claim judged on known-answer sources through the
chapter's own measurements (:mod:`lamina.weights.measure`'s functions) and judgement
(:func:`lamina.weights.judging.judge_unit`), as a table of runs in the calibration page's format
(``lamina.evidence.calibration``: claim_id, source, seed, verdict, kind, present, reason).

Sources (each keeps what threatens its claim, not only the test's own null):

* :func:`lamina.weights.sources.signature_source`: the Q/K and write rows of the alignment
  stages, late pretraining and every objective, with P_A estimated from finite heavy-tailed
  samples at SmolLM2's and Gemma's sizes;
* :func:`lamina.weights.sources_mechanism.gradients_source`: read gradients, the raw read
  gradient, cancellation (scale and direction);
* :func:`lamina.weights.sources_mechanism.adam_source`: the optimiser (Adam's first steps,
  unrelated and consistent gradients);
* :func:`lamina.weights.sources_mechanism.adaptation_source`: single-group adaptation;
* :func:`lamina.weights.sources_edit.edit_model`: the write edit (never-trained models against
  their scrambled copies; a block that feeds unembedding writes back).

The claims declared ``not_calibrated`` get no runs. A "close to 1" row has no half size (its
claimed value is the null of its test's alternative), so its ``half`` runs are left out.

CLI: ``python -m lamina.weights.calibration OUT.csv [N_SEEDS]`` writes the runs table.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from lamina.core.provenance import atomic_write_text
from lamina.weights.claims import CLAIMS
from lamina.weights.edit_effects import _edit_batch, _score
from lamina.weights.edit_null import beyond_scrambled, scrambled_copy
from lamina.weights.judging import is_present, judge_unit
from lamina.weights.measure import PREFIX, margin
from lamina.weights.measures_causal import single_group
from lamina.weights.measures_mechanism import (
    cancellation_direction,
    cancellation_scale,
    optimizer_attenuates,
    raw_read_follows,
    read_grad_inherits,
)
from lamina.weights.measures_signature import (
    every_objective,
    late_pretraining,
    qk_measure,
    writes_measure,
)
from lamina.weights.settings import SignatureSettings
from lamina.weights.sources import signature_source
from lamina.weights.sources_edit import TEXTS, edit_model
from lamina.weights.sources_mechanism import adam_source, adaptation_source, gradients_source

__all__ = ["RUN_COLUMNS", "SOURCES", "calibration_runs", "main"]

RUN_COLUMNS = ("claim_id", "source", "seed", "verdict", "kind", "present", "reason")
SOURCES = ("null", "planted", "half")
_CLOSE = {c["id"] for c in CLAIMS if c.get("direction", 0) == 0}


def _signature(kind: str, seed: int, s: SignatureSettings) -> dict[str, dict[str, Any]]:
    d, m = signature_source(kind, seed), margin()
    out: dict[str, dict[str, Any]] = {}
    for t in ("sft", "dpo"):
        where: dict[str, Any] = {"family": "stage", "pair": f"final→{t}"}
        out[f"align-qk-{t}"] = qk_measure(d, s, **where)
        out[f"align-writes-{t}"] = writes_measure(d, s, m, **where)
    late = late_pretraining(d, s, m)
    out["late-pretraining-qk"], out["late-pretraining-writes"] = late["qk"], late["writes"]
    every = every_objective(d, s, m, {o: f"final→obj-{o}" for o in ("lm", "sft", "dpo")})
    out["every-objective-qk"], out["every-objective-writes"] = every["qk"], every["writes"]
    return out


def _gradients(kind: str, seed: int, s: SignatureSettings) -> dict[str, dict[str, Any]]:
    g, m = gradients_source(kind, seed), margin()
    return {"read-grad-inherits": read_grad_inherits(g, m, s),
            "raw-read-grad-follows": raw_read_follows(g, s),
            "cancellation-scale": cancellation_scale(g, m, s),
            "cancellation-direction": cancellation_direction(g, m, s)}  # fmt: skip


def _optimizer(kind: str, seed: int, s: SignatureSettings) -> dict[str, dict[str, Any]]:
    return {"optimizer-attenuates": optimizer_attenuates(adam_source(kind, seed), "sft", s)}


def _adaptation(kind: str, seed: int, s: SignatureSettings) -> dict[str, dict[str, Any]]:
    return {"single-group": single_group(adaptation_source(kind, seed), s)}


def _edit(kind: str, seed: int, s: SignatureSettings) -> dict[str, dict[str, Any]]:
    model, tok = edit_model(kind, seed)
    ids, mask, tokens = _edit_batch(model, tok, TEXTS, s)
    obs = np.array([r["delta_logp"] for r in _score(model, "x", "u", 0, tokens, ids, mask, s)])
    null = np.array([np.mean([r["delta_logp"] for r in
                              _score(scrambled_copy(model, 7919 * seed + i), "x", "s", i, tokens, ids, mask, s)])
                     for i in range(s.edit_scrambled)])  # fmt: skip
    return {"write-edit-released": beyond_scrambled(obs, null, s.n_bootstrap, s.seed)}


SOURCE_FNS: dict[str, Callable[[str, int, SignatureSettings], dict[str, dict[str, Any]]]] = {
    "signature": _signature, "gradients": _gradients, "optimizer": _optimizer,
    "adaptation": _adaptation, "edit": _edit,
}  # fmt: skip
"""Each known-answer source: (kind, seed, settings) -> {claim name: measurement}."""


def _runs(source: str, kind: str, seed: int, s: SignatureSettings) -> list[dict[str, Any]]:
    measured = {f"{PREFIX}{k}": v for k, v in SOURCE_FNS[source](kind, seed, s).items()}
    gates = {name: (True, "known-answer source") for c in CLAIMS
             for g, name in c.get("requires", ()) if g == "gate"}  # fmt: skip
    rows = judge_unit(f"{source}-{kind}", measured, gates, only=list(measured))
    out = []
    for r in rows.itertuples():
        if kind == "half" and r.claim_id in _CLOSE:
            continue
        out.append({"claim_id": r.claim_id, "source": kind, "seed": seed, "verdict": r.verdict,
                    "kind": "effect", "present": is_present(r), "reason": r.reason})  # fmt: skip
    return out


def calibration_runs(
    seeds: Iterable[int], settings: SignatureSettings | None = None,
    sources: Iterable[str] = tuple(SOURCE_FNS),
) -> pd.DataFrame:
    """The runs table (:data:`RUN_COLUMNS`) of every calibrated paper-2 claim over ``seeds``
    and the three sources; ``attrs["seconds"]``: {source: seconds of computation per seed}.
    settings: the rules' settings (default: bootstrap 500 resamples, 10 scrambled copies, 6
    edit tokens, the chapter's edit scale)."""
    s = settings or SignatureSettings(n_bootstrap=500, edit_tokens=6, edit_texts=len(TEXTS))
    seeds = list(seeds)
    rows: list[dict[str, Any]] = []
    seconds: dict[str, float] = {}
    for source in sources:
        t0 = time.perf_counter()
        for seed in seeds:
            for kind in SOURCES:
                rows += _runs(source, kind, seed, s)
        seconds[source] = (time.perf_counter() - t0) / max(1, len(seeds))
    out = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    out.attrs["seconds"] = seconds
    calibrated = {c["id"] for c in CLAIMS if c.get("calibrated")}
    missing = calibrated - set(out["claim_id"])
    if missing and set(sources) == set(SOURCE_FNS):
        raise ValueError(f"claims declared calibrated without runs: {sorted(missing)}")
    return out


def main(argv: list[str] | None = None) -> None:  # pragma: no cover
    """``python -m lamina.weights.calibration OUT.csv [N_SEEDS]``: write the runs table."""
    import torch

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or len(args) > 2:
        raise SystemExit("usage: python -m lamina.weights.calibration OUT.csv [N_SEEDS]")
    n = int(args[1]) if len(args) == 2 else 20
    if n < 1:
        raise SystemExit(f"N_SEEDS must be at least 1; got {n}")
    torch.set_num_threads(1)
    runs = calibration_runs(range(n))
    print(atomic_write_text(args[0], runs.to_csv(index=False)))
    print({k: round(v, 1) for k, v in runs.attrs["seconds"].items()})


if __name__ == "__main__":  # pragma: no cover
    main()
