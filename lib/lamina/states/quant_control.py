"""Quantisation control on the real models themselves: does a verdict survive re-quantisation?

The pretrained models of the book ship as GGUF (SmolLM2-135M-Instruct as Q4_1, Gemma 3 270M
as Q4_K_M) and are dequantised to fp32 for the forward pass; the papers' models were never
quantised. lamina cannot undo the rounding, but it can apply another one of the same size and
see whether a verdict moves: the control loads each quantised model with its dequantised
weights rounded once more through GGUF (``load_model("smollm2-135m-instruct+Q4_0")``,
:mod:`lamina.sources.quantize`) and reruns the claims on it.

**Which quantisations.** :data:`CONTROL_QTYPES` = Q4_0, a 4-bit rounding whose relative error
on the dequantised weights (about 9% per matrix on SmolLM2) is of the order of the rounding the
file already carries; then :data:`FOLLOWUP_QTYPES` = Q8_0, a small perturbation (about 0.6%),
run only for a model with a verdict that flips under Q4_0: it tells a verdict that sits at its
threshold (it flips under Q8_0 too) from one that 4-bit rounding moves (it does not). Where
nothing flips under Q4_0 its entry reads "not run: no verdict of <model> flips under Q4_0".
Re-quantising to the file's own type is no control: SmolLM2's dequantised Q4_1 weights lie on
the Q4_1 grid, so a second Q4_1 pass returns them bit for bit (relative error 0 in
:func:`lamina.sources.quantize.quantize_model`'s report).

**Flip table** (:func:`flip_table`): per claim x model x quantisation, the measured value
before and after, ``shift = measured(re-quantised) - measured(as loaded)`` in the claim's own
units (``unit`` of the claims row), the verdicts before and after and whether they differ.

**The column** (:func:`apply_quant_control`): every claims row of a quantised model (its
provenance names a quantised GGUF file type) gets ``quant_shift``, one entry per control
quantisation: "Q4_0: same (0.41 -> 0.40 rad)", "Q4_0: flips to partially (...)" or
"Q4_0: not run: <reason>". The verdict itself is left as the rules gave it: the column shows
the control next to it. Rows of unquantised models (organisms, fp32 files) get "".
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pandas as pd

__all__ = [
    "CONTEXT_COLUMNS",
    "CONTROL_QTYPES",
    "FOLLOWUP_QTYPES",
    "SHIFT_COLUMNS",
    "apply_quant_control",
    "control_models",
    "flip_table",
    "is_quantised",
    "not_run_control",
    "run_quant_control",
]

CONTROL_QTYPES = ("Q4_0",)  # what each quantised real model is also run as
FOLLOWUP_QTYPES = ("Q8_0",)  # run only for a model with a verdict that flips under the above
SHIFT_COLUMNS = [
    "claim_id", "model", "qtype", "measured_fp32", "measured_quantised", "shift", "unit",
    "verdict_fp32", "verdict_quantised", "flipped",
]


def is_quantised(file_type: str | None) -> bool:
    """Whether a provenance file type (llama.cpp's ``MOSTLY_Q4_1``, ``MOSTLY_Q4_K_M``,
    ``ALL_F32``, or a plain ``Q4_1``) names quantised weights: None, F32, F16, BF16 -> False."""
    if file_type is None or str(file_type) in ("", "nan", "None"):
        return False
    t = re.sub(r"^(MOSTLY|ALL)_", "", str(file_type).upper())
    return not re.fullmatch(r"B?F(16|32)", t)


def control_models(models: Iterable[str], quantization: Mapping[str, str | None]) -> list[str]:
    """The models of a run that the control re-quantises: quantised in their provenance
    (:func:`is_quantised`) and not already a control run (no ``+Q…`` suffix)."""
    return [
        m for m in models
        if is_quantised(quantization.get(str(m))) and not re.search(r"\+Q\w+$", str(m))
    ]


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


CONTEXT_COLUMNS = ("stage",)  # a claim measured per stage has one row per stage


def _key_columns(*frames: pd.DataFrame) -> list[str]:
    """["model", "claim_id"] plus the context columns (:data:`CONTEXT_COLUMNS`) that every
    frame has: the columns that identify one claims row."""
    extra = [c for c in CONTEXT_COLUMNS if all(c in f.columns for f in frames)]
    return ["model", "claim_id", *extra]


def flip_table(claims: pd.DataFrame, requantised: pd.DataFrame) -> pd.DataFrame:
    """The flip table (module docstring; columns :data:`SHIFT_COLUMNS`, plus the context
    columns the claims rows carry, e.g. ``stage``).

    claims: the claims rows of the models as loaded; requantised: the claims rows of their
    control runs, whose ``model`` is ``<model>+<qtype>``. One row per claims row (model x
    claim id x context) present in both; ``measured_*`` and ``shift`` in the claim's units."""
    if requantised.empty or claims.empty:
        return pd.DataFrame(columns=SHIFT_COLUMNS)
    keys = _key_columns(claims, requantised)
    base = claims.drop_duplicates(keys).set_index(keys)
    rows = []
    for _, q in requantised.iterrows():
        model, _, qtype = str(q["model"]).rpartition("+")
        key = (model, *(q[c] for c in keys[1:]))
        if key not in base.index:
            continue
        b = base.loc[key]
        before, after = _num(b["measured"]), _num(q["measured"])
        rows.append({
            "claim_id": q["claim_id"], "model": model, "qtype": qtype,
            "measured_fp32": before, "measured_quantised": after, "shift": after - before,
            "unit": str(b.get("unit", "") or ""),
            "verdict_fp32": str(b["verdict"]), "verdict_quantised": str(q["verdict"]),
            "flipped": str(b["verdict"]) != str(q["verdict"]),
            **{c: q[c] for c in keys[2:]},
        })
    return pd.DataFrame(rows, columns=[*SHIFT_COLUMNS, *keys[2:]])


def _fmt(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:.4g}"


def _describe(r: Mapping[str, Any]) -> str:
    """"Q4_0: same (0.41 -> 0.40 rad)" or "Q4_0: flips to partially (0.41 -> 0.38 rad)"."""
    unit = f" {r['unit']}" if r["unit"] else ""
    word = f"flips to {r['verdict_quantised']}" if r["flipped"] else "same"
    return (
        f"{r['qtype']}: {word} ({_fmt(r['measured_fp32'])} -> "
        f"{_fmt(r['measured_quantised'])}{unit})"
    )


def apply_quant_control(
    claims: pd.DataFrame,
    shifts: pd.DataFrame,
    quantization: Mapping[str, str | None],
    *,
    qtypes: Iterable[str] = (*CONTROL_QTYPES, *FOLLOWUP_QTYPES),
    not_run: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """The claims table with the column ``quant_shift`` (text; module docstring).

    quantization: model -> its file type from provenance (absent/None: not quantised);
    shifts: :func:`flip_table`; not_run: ``{"<model>+<qtype>" or qtype: reason}`` for control
    runs that did not happen (a qtype entry applies to every model). A claim of a quantised
    model that a control run did not report reads "<qtype>: not run: <reason>". Verdicts are
    not changed; unquantised models get ""."""
    out = claims.copy()
    out["quant_shift"] = ""
    not_run = dict(not_run or {})
    for i, row in out.iterrows():
        model = str(row["model"])
        if not is_quantised(quantization.get(model)):
            continue
        mine = shifts[(shifts["model"] == model) & (shifts["claim_id"] == row["claim_id"])]
        for c in _key_columns(out, shifts)[2:]:
            mine = mine[mine[c] == row[c]]
        parts = []
        for q in qtypes:
            hit = mine[mine["qtype"] == q]
            if len(hit):
                parts.append(_describe(hit.iloc[0]))
            else:
                why = not_run.get(f"{model}+{q}") or not_run.get(q) or "the claim has no row there"
                parts.append(f"{q}: not run: {why}")
        out.at[i, "quant_shift"] = "; ".join(parts)
    return out


def not_run_control(
    claims: pd.DataFrame, quantization: Mapping[str, str | None], reason: str,
    *, qtypes: Iterable[str] = (*CONTROL_QTYPES, *FOLLOWUP_QTYPES),
) -> pd.DataFrame:
    """``claims`` with ``quant_shift`` = "<qtype>: not run: <reason>" on every row of a
    quantised model (for claims whose control costs more than the book's budget)."""
    qtypes = tuple(qtypes)
    return apply_quant_control(
        claims, pd.DataFrame(columns=SHIFT_COLUMNS), quantization, qtypes=qtypes,
        not_run=dict.fromkeys(qtypes, reason),
    )


def run_quant_control(
    models: Iterable[str],
    claims: pd.DataFrame,
    quantization: Mapping[str, str | None],
    run_claims: Callable[[str], pd.DataFrame],
    *,
    qtypes: Iterable[str] = CONTROL_QTYPES,
    followup: Iterable[str] = FOLLOWUP_QTYPES,
    notes: list[str] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The whole control for any chapter: ``run_claims("<model>+<qtype>")`` (-> that model's
    claims rows re-measured on its re-quantised weights) for every quantised model of
    ``models`` (:func:`control_models`) and every ``qtypes``, then every ``followup`` qtype
    for a model with a verdict that flipped; then :func:`flip_table` and
    :func:`apply_quant_control`. -> (claims with ``quant_shift``, flip table).

    A control run that fails is recorded in ``notes`` (when given; else it raises) and its
    claims read "not run: <the error>"."""
    qtypes, followup = tuple(qtypes), tuple(followup)
    parts: list[pd.DataFrame] = []
    skipped: dict[str, str] = {}
    for model in control_models(models, quantization):
        for qtype in qtypes:
            _control_run(f"{model}+{qtype}", run_claims, parts, skipped, notes)
        first = flip_table(claims, pd.concat(parts, ignore_index=True) if parts else pd.DataFrame())
        flipped = first[(first["model"] == model) & first["flipped"].astype(bool)]
        for qtype in followup:
            if flipped.empty:
                skipped[f"{model}+{qtype}"] = (
                    f"no verdict of {model} flips under {', '.join(qtypes)}"
                )
            else:
                _control_run(f"{model}+{qtype}", run_claims, parts, skipped, notes)
    requantised = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    shifts = flip_table(claims, requantised)
    out = apply_quant_control(
        claims, shifts, quantization, qtypes=(*qtypes, *followup), not_run=skipped
    )
    return out, shifts


def _control_run(
    name: str,
    run_claims: Callable[[str], pd.DataFrame],
    parts: list[pd.DataFrame],
    skipped: dict[str, str],
    notes: list[str] | None,
) -> None:
    """Append ``run_claims(name)`` (its ``model`` column set to ``name``) to ``parts``; a run
    that raises goes to ``skipped`` and ``notes`` (re-raised when ``notes`` is None)."""
    try:
        part = run_claims(name)
    except Exception as exc:  # one failed control run must not sink the chapter
        if notes is None:
            raise
        skipped[name] = f"{type(exc).__name__}: {exc}"
        notes.append(f"quantisation control {name} failed: {skipped[name]}")
        return
    parts.append(part.assign(model=name))
