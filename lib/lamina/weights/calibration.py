"""Calibration of paper 2's rows: each declared claim judged on known-answer sources through the
chapter's own measurements (:mod:`lamina.weights.measure`'s functions) and judgement
(:func:`lamina.weights.judging.judge_unit`), as a table of runs in the calibration page's format
(:mod:`lamina.evidence.runs`: claim_id, source, seed, verdict, kind, present, reason, covered).

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

Coverage: on the signature source's planted kind, the Q/K rows of :data:`COVERED` say whether
their CI covers the statistic's known value (:func:`lamina.weights.sources.qk_truth`: the
planted doubling, less what the k/d floor takes); NaN on every other row.

The claims declared ``not_calibrated`` get no runs. A "close to 1" row has no half size (its
claimed value is the null of its test's alternative), so its ``half`` runs are left out, and
the gradients source draws none (:data:`SOURCE_KINDS`).

Each (source, seed) is cached under ``<data>/cache/calibration/p2-<key>/`` (the key covers the
source of every lamina module this one imports, transitively, the settings and the library
versions), as JSON with the SHA-256 of its rows, verified on read: a damaged entry is recomputed
with a warning.

CLI: ``python -m lamina.weights.calibration OUT.csv [N_SEEDS] [JOBS]`` writes the runs table.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lamina.core.imports import import_closure
from lamina.core.provenance import atomic_write_text, data_dir
from lamina.core.threads import one_thread_process
from lamina.evidence.declare import Gate
from lamina.evidence.runs import COVERAGE_COLUMN, RUN_COLUMNS, SOURCES, covers
from lamina.weights.claims import ALIGNED_STAGES, CLAIMS
from lamina.weights.edit_effects import edit_batch, score_edits
from lamina.weights.edit_null import scrambled_copy
from lamina.weights.judging import is_present, judge_unit
from lamina.weights.measure import PREFIX, margin
from lamina.weights.measures_causal import kept_measure, single_group, write_edit
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
from lamina.weights.sources import SIZES, qk_truth, signature_source
from lamina.weights.sources_edit import TEXTS, edit_model, faded
from lamina.weights.sources_mechanism import adam_source, adaptation_source, gradients_source
from lamina.weights.summaries import RowSelection

__all__ = ["CALIBRATION_SOURCES", "COVERED", "RUN_COLUMNS", "SOURCES", "cache_key",
           "calibration_runs", "main"]

_CLOSE = {c.id for c in CLAIMS if c.direction == 0}
COVERED = ("align-qk-sft", "align-qk-dpo", "late-pretraining-qk")
"""The rows whose CI coverage the page shows: the Q/K rows whose statistic has a known value
on the signature source (:func:`lamina.weights.sources.qk_truth`). ``every-objective-qk``
reads the weakest of three objectives, a selected minimum with no such value."""


def _signature(kind: str, seed: int, s: SignatureSettings) -> dict[str, dict[str, Any]]:
    d, m = signature_source(kind, seed), margin()
    out: dict[str, dict[str, Any]] = {}
    for t in ("sft", "dpo"):
        where: RowSelection = {"family": "stage", "pair": f"final→{t}"}
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


def _scored(model: Any, stage: str, seed: int, batch: tuple, s: SignatureSettings) -> list[dict[str, Any]]:
    """The edit table's rows of one model at ``stage``: the unembedding edit of every target
    token, and each of ``s.edit_scrambled`` scrambled copies (seeds from ``seed``)."""
    ids, mask, tokens = batch
    rows = score_edits(model, stage, "unembedding", 0, tokens, ids, mask, s)
    for i in range(s.edit_scrambled):
        rows += score_edits(scrambled_copy(model, seed + i), stage, "scrambled", i, tokens, ids, mask, s)
    return rows


def _edit(kind: str, seed: int, s: SignatureSettings) -> dict[str, dict[str, Any]]:
    """The write-edit rows (one draw judges every stage's row alike: on this source the stage
    gate passes) and the kept rows: the base is the source's model, the "aligned" model the
    same model (its scrambled copies drawn afresh), or on ``faded`` the planted model with the
    feedback of all but :data:`lamina.weights.sources_edit.FADED_KEEP` target tokens moved to
    other tokens' directions (:func:`lamina.weights.sources_edit.faded`), whose own edit is
    the kept rows' precondition."""
    model, tok = edit_model("planted" if kind == "faded" else kind, seed)
    batch = edit_batch(model, tok, TEXTS, s)
    aligned = faded(model, batch[2], seed) if kind == "faded" else model
    e = pd.DataFrame(_scored(model, "base", 7919 * seed, batch, s)
                     + _scored(aligned, "aligned", 7919 * seed + 104_729, batch, s))  # fmt: skip
    edit = write_edit(e, "aligned" if kind == "faded" else "base", s)
    kept = kept_measure(e, "aligned", "base", s)
    return ({f"write-edit-{t}": edit for t in ("released", *ALIGNED_STAGES)}
            | {f"write-edit-kept-{t}": kept for t in ALIGNED_STAGES})  # fmt: skip


CALIBRATION_SOURCES: dict[str, str] = {
    "signature": "deltas at SmolLM2's and Gemma's sizes whose probe subspaces are estimated from "
    "2,048 or 512 heavy-tailed tokens; null: ΔW as concentrated as W (gradient-shaped), writes "
    "as concentrated as W, one objective of three null; planted: twice W's concentration (the Q/K "
    "statistic's known value: the doubling less what the k/d floor takes, "
    "lamina.weights.sources.qk_truth)",
    "gradients": "per-token gradient terms of heavy-tailed inputs whose read basis comes from a "
    "separate finite sample; null: two objectives of three whose terms share a direction (one "
    "unrelated to the activation share, one 1.5 × beyond it); planted: δ_t unrelated to a_t",
    "optimizer": "simulated AdamW states; null: unrelated or consistent gradients after 1 to 120 "
    "steps (elementwise normalisation alone); planted: gradient noise concentrated in the subspace",
    "adaptation": "per-item held-out losses of 64 items; null: one group at a quarter of full "
    "fine-tuning's reduction; planted: every group as effective",
    "edit": "never-trained GPT-2-style models against their scrambled copies (null: exchangeable); "
    "planted: a block that feeds unembedding writes back; the kept rows (judged only where the "
    "edit is beyond construction) on their conditional null, faded: the planted model as the "
    "base and, as the aligned one, the same with the feedback of 4 of its 6 target tokens moved to "
    "other tokens' directions (the block's scale kept)",
}
"""What each source's null keeps (a line each, for the calibration page)."""

SOURCE_FNS: dict[str, Callable[[str, int, SignatureSettings], dict[str, dict[str, Any]]]] = {
    "signature": _signature, "gradients": _gradients, "optimizer": _optimizer,
    "adaptation": _adaptation, "edit": _edit,
}  # fmt: skip
"""Each known-answer source: (kind, seed, settings) -> {claim name: measurement}."""
SOURCE_KINDS: dict[str, tuple[str, ...]] = {"gradients": ("null", "planted"),
                                            "edit": (*SOURCES, "faded")}
"""Sources without a ``half`` kind: the gradient rows claim no size (a correlation above 0,
ratios close to 1), so there is no half-size effect to draw."""


def _covered(source: str, kind: str, seed: int, row: Any) -> float:
    """:data:`COVERAGE_COLUMN` of a judged row: on the signature source's planted kind, for the
    rows of :data:`COVERED`, whether its CI covers :func:`~lamina.weights.sources.qk_truth` at
    the seed's size; NaN for every other row."""
    if source != "signature" or kind != "planted" or row.claim_id.removeprefix(PREFIX) not in COVERED:
        return float("nan")
    return covers(row.ci_low, row.ci_high, qk_truth(kind, SIZES[seed % len(SIZES)]))


def _runs(source: str, kind: str, seed: int, s: SignatureSettings) -> list[dict[str, Any]]:
    measured = {f"{PREFIX}{k}": v for k, v in SOURCE_FNS[source](kind, seed, s).items()}
    gates = {r.name: (True, "known-answer source") for c in CLAIMS for r in c.requires
             if isinstance(r, Gate)}  # fmt: skip
    rows = judge_unit(f"{source}-{kind}", measured, gates, only=list(measured))
    out = []
    for r in rows.itertuples():
        if kind == "half" and r.claim_id in _CLOSE:
            continue
        out.append({"claim_id": r.claim_id, "source": kind, "seed": seed, "verdict": r.verdict,
                    "kind": "effect", "present": is_present(r), "reason": r.reason,
                    COVERAGE_COLUMN: _covered(source, kind, seed, r)})  # fmt: skip
    return out


def _default_settings() -> SignatureSettings:
    return SignatureSettings(n_bootstrap=500, edit_tokens=6, edit_texts=len(TEXTS))


def cache_key(settings: SignatureSettings) -> str:
    """sha256 (hex) of what the runs depend on: the source of every lamina module this one
    imports, transitively (:func:`lamina.core.imports.import_closure`, read from the sources:
    imports inside functions count; every module of ``lamina/weights`` and
    ``lamina/evidence`` when this file does not parse), the settings, and the numpy / scipy /
    pandas / torch / transformers versions. A module the runs never import (the page's rates,
    :mod:`lamina.evidence.calibration`) does not count, so editing it keeps the 2 h of runs."""
    import scipy
    import torch
    import transformers

    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]
    closure = import_closure(Path(__file__))
    files = (sorted(closure.values()) if closure is not None else
             [f for part in ("weights", "evidence") for f in sorted((root / part).glob("*.py"))])
    for f in files:
        h.update(f.resolve().relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    fields = {k: v for k, v in dataclasses.asdict(settings).items() if k != "timings"}
    h.update(json.dumps(fields, sort_keys=True, default=str).encode())
    h.update(repr((np.__version__, scipy.__version__, pd.__version__, torch.__version__,
                   transformers.__version__)).encode())  # fmt: skip
    return h.hexdigest()


def _digest(rows: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()


def _seed_rows(args: tuple[str, int, SignatureSettings, str | None]) -> list[dict[str, Any]]:
    """The runs of one source and seed (all three kinds), read from / written to the cache
    folder (None: no cache)."""
    source, seed, s, folder = args
    path = Path(folder) / f"{source}-seed-{seed}.json" if folder else None
    if path is not None and path.is_file():
        try:
            entry = json.loads(path.read_text())
            if entry["sha256"] == _digest(entry["rows"]):
                return list(entry["rows"])
            why = "its rows do not match their SHA-256"
        except (ValueError, KeyError, TypeError) as exc:
            why = f"unreadable ({exc})"
        warnings.warn(f"damaged calibration cache entry {path}: {why}; recomputed", stacklevel=2)
    rows = [r for kind in SOURCE_KINDS.get(source, SOURCES) for r in _runs(source, kind, seed, s)]
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"sha256": _digest(rows), "rows": rows}))
    return rows


def _init_worker() -> None:
    one_thread_process()


def calibration_runs(
    n_seeds: int, *, jobs: int = 1, settings: SignatureSettings | None = None,
    sources: Iterable[str] = tuple(SOURCE_FNS), cache: str | Path | None = "default",
) -> pd.DataFrame:
    """The runs table (:data:`RUN_COLUMNS` and :data:`COVERAGE_COLUMN`, :func:`_covered`) of
    every calibrated paper-2 claim over seeds 0..n_seeds-1 and the three sources, computed in
    ``jobs`` worker processes (one thread each). settings: the rules' settings (default:
    bootstrap 500 resamples, 10 scrambled copies, 6 edit tokens). cache: a folder (default
    ``<data>/cache/calibration``; None: no cache) under which each (source, seed) is kept
    (module docstring)."""
    if n_seeds < 1:
        raise ValueError(f"n_seeds must be at least 1; got {n_seeds}")
    s = settings or _default_settings()
    sources = list(sources)
    unknown = sorted(set(sources) - set(SOURCE_FNS))
    if unknown:
        raise ValueError(f"unknown calibration sources {unknown}; known: {list(SOURCE_FNS)}")
    root = data_dir() / "cache" / "calibration" if cache == "default" else cache
    folder = str(Path(root) / f"p2-{cache_key(s)[:20]}") if root is not None else None
    tasks = [(src, seed, s, folder) for src in sources for seed in range(n_seeds)]
    if jobs > 1:
        with ProcessPoolExecutor(jobs, initializer=_init_worker) as pool:
            parts = list(pool.map(_seed_rows, tasks))
    else:
        parts = [_seed_rows(t) for t in tasks]
    out = pd.DataFrame([r for p in parts for r in p], columns=[*RUN_COLUMNS, COVERAGE_COLUMN])
    calibrated = {c.id for c in CLAIMS if c.calibrated}
    missing = calibrated - set(out["claim_id"])
    if missing and set(sources) == set(SOURCE_FNS):
        raise ValueError(f"claims declared calibrated without runs: {sorted(missing)}")
    return out


def main(argv: list[str] | None = None) -> None:  # pragma: no cover
    """``python -m lamina.weights.calibration OUT.csv [N_SEEDS] [JOBS]``: write the runs
    table (default 20 seeds, 1 process)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or len(args) > 3:
        raise SystemExit("usage: python -m lamina.weights.calibration OUT.csv [N_SEEDS] [JOBS]")
    n = int(args[1]) if len(args) >= 2 else 20
    jobs = int(args[2]) if len(args) == 3 else 1
    if n < 1 or jobs < 1:
        raise SystemExit(f"N_SEEDS and JOBS must be at least 1; got {n}, {jobs}")
    one_thread_process()
    runs = calibration_runs(n, jobs=jobs)
    print(atomic_write_text(args[0], runs.to_csv(index=False)))


if __name__ == "__main__":  # pragma: no cover
    main()
