"""Quantisation control: how far each claim's verdict moves when fp32 weights go 4- or 8-bit.

The pretrained models of the book ship as GGUF (SmolLM2-135M-Instruct as Q4_1, Gemma 3 270M
as Q4_K_M) and are dequantised to fp32 for the forward pass; the papers' models were never
quantised. The organisms have fp32 weights, so a chapter can run each organism twice more,
with its weights rounded through GGUF Q4_1 and Q8_0 (``load_model("organism-gpt2+Q4_1")``,
:mod:`lamina.sources.quantize`), and compare the claims rows.

**Shift table** (:func:`shift_table`): per claim x organism x quantisation, the measured value
before and after, ``shift = measured(quantised) - measured(fp32)`` in the claim's own units
(``unit`` of the claims row, e.g. rad), and the verdicts before and after.

**Which quantisation stands for a model** (:func:`proxy_qtype`) comes from the model's
provenance (``lamina_source["quantization"]``, llama.cpp's ``general.file_type``, e.g.
``MOSTLY_Q4_K_M``), never from a list of names: an fp32/fp16/bf16 file is not quantised;
a type that :mod:`lamina.sources.quantize` can produce stands for itself (exact); any other type of
8 bits or more is stood for by Q8_0, and any type under 8 bits by Q4_1, the closest 4-bit type
the ``gguf`` Python package can write (it cannot write the k-quants such as Q4_K_M).

**The flip rule** (:func:`apply_quant_control`): a claim whose verdict word differs between
an organism's fp32 run and its run under a model's proxy quantisation, on at least one
organism, is "not testable on quantised weights" for that (quantised) model: its verdict
becomes "not testable", its reason names the organism, the quantisation, the verdict before
-> after and the shift; the measured value, CI and p are kept, and the verdict the rules gave
is kept in ``verdict_unquantised_rules``. Every row of a quantised model gets ``quant_shift``:
the shifts of its claim on every organism under its proxy (text), or why none was measured.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pandas as pd

from lamina.sources.quantize import QTYPES

__all__ = [
    "CONTROL_QTYPES",
    "SHIFT_COLUMNS",
    "apply_quant_control",
    "control_organisms",
    "proxy_qtype",
    "run_quant_control",
    "shift_table",
]

CONTROL_QTYPES = ("Q4_1", "Q8_0")  # what each organism is also run as
SHIFT_COLUMNS = [
    "claim_id", "model", "qtype", "measured_fp32", "measured_quantised", "shift", "unit",
    "verdict_fp32", "verdict_quantised", "flipped",
]


def proxy_qtype(file_type: str | None) -> tuple[str | None, bool]:
    """(the quantisation that stands for ``file_type``, whether it is the same type).

    ``file_type``: llama.cpp's name (``MOSTLY_Q4_1``, ``MOSTLY_Q4_K_M``, ``ALL_F32``) or a
    plain type (``Q4_1``); None, F32, F16 and BF16 -> (None, True): not quantised. Rules in
    the module docstring."""
    if file_type is None:
        return None, True
    t = re.sub(r"^(MOSTLY|ALL)_", "", str(file_type).upper())
    if re.fullmatch(r"B?F(16|32)", t):
        return None, True
    if t in QTYPES:
        return t, True
    bits = re.search(r"Q(\d+)", t)
    if bits and int(bits.group(1)) >= 8:
        return "Q8_0", False
    return "Q4_1", False  # under 8 bits, or a type lamina cannot name: the 4-bit proxy


def control_organisms(models: Iterable[str]) -> list[str]:
    """The models of a run whose fp32 weights the control rounds: organisms (``organism-*``)
    not already quantised (no ``+Q…`` suffix)."""
    return [m for m in models if str(m).startswith("organism-") and "+" not in str(m)]


def _num(x: Any) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v


def shift_table(claims: pd.DataFrame, quantised: pd.DataFrame) -> pd.DataFrame:
    """The shift table (module docstring; columns :data:`SHIFT_COLUMNS`).

    claims: the claims rows of the fp32 organisms (other models' rows are ignored);
    quantised: the claims rows of their quantised runs, whose ``model`` is
    ``<organism>+<qtype>``. One row per claim id present in both."""
    rows = []
    if quantised.empty or claims.empty:
        return pd.DataFrame(columns=SHIFT_COLUMNS)
    base = claims.drop_duplicates(["model", "claim_id"]).set_index(["model", "claim_id"])
    for _, q in quantised.iterrows():
        organism, _, qtype = str(q["model"]).rpartition("+")
        key = (organism, q["claim_id"])
        if key not in base.index:
            continue
        b = base.loc[key]
        before, after = _num(b["measured"]), _num(q["measured"])
        rows.append({
            "claim_id": q["claim_id"], "model": organism, "qtype": qtype,
            "measured_fp32": before, "measured_quantised": after, "shift": after - before,
            "unit": str(b.get("unit", "") or ""),
            "verdict_fp32": str(b["verdict"]), "verdict_quantised": str(q["verdict"]),
            "flipped": str(b["verdict"]) != str(q["verdict"]),
        })
    return pd.DataFrame(rows, columns=SHIFT_COLUMNS)


def _fmt(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:.4g}"


def _describe(r: Mapping[str, Any]) -> str:
    unit = f" {r['unit']}" if r["unit"] else ""
    shift = "n/a" if not math.isfinite(r["shift"]) else f"{r['shift']:+.3g}{unit}"
    return (
        f"{r['model']} {r['qtype']}: {_fmt(r['measured_fp32'])} -> "
        f"{_fmt(r['measured_quantised'])}{unit} (shift {shift}), "
        f"verdict {r['verdict_fp32']} -> {r['verdict_quantised']}"
    )


def apply_quant_control(
    claims: pd.DataFrame,
    shifts: pd.DataFrame,
    quantization: Mapping[str, str | None],
) -> pd.DataFrame:
    """The claims table with the flip rule applied to the rows of quantised models.

    quantization: model -> its file type from provenance (None or absent: not quantised;
    see :func:`proxy_qtype`). Adds the columns ``quant_shift`` (text; "" for unquantised
    models) and ``verdict_unquantised_rules`` (the verdict before the rule; "" where the rule
    did not apply). Rows of unquantised models are unchanged."""
    out = claims.copy()
    out["quant_shift"] = ""
    out["verdict_unquantised_rules"] = ""
    if out.empty:
        return out
    for i, row in out.iterrows():
        file_type = quantization.get(str(row["model"]))
        proxy, exact = proxy_qtype(file_type)
        if proxy is None:
            continue
        how = f"{file_type}, " + ("the same type" if exact else f"proxy {proxy}")
        mine = shifts[(shifts["claim_id"] == row["claim_id"]) & (shifts["qtype"] == proxy)]
        if mine.empty:
            out.at[i, "quant_shift"] = f"no organism measured under {proxy} ({how})"
            continue
        out.at[i, "quant_shift"] = f"[{how}] " + "; ".join(_describe(r) for _, r in mine.iterrows())
        flips = mine[mine["flipped"].astype(bool)]
        if flips.empty:
            continue
        out.at[i, "verdict_unquantised_rules"] = str(row["verdict"])
        out.at[i, "verdict"] = "not testable"
        out.at[i, "reason"] = (
            f"not testable on quantised weights ({how}): the verdict flips under {proxy} on "
            + "; ".join(_describe(r) for _, r in flips.iterrows())
            + f". Without this rule: {row['verdict']} ({row.get('reason', '')})"
        )
    return out


def run_quant_control(
    models: Iterable[str],
    claims: pd.DataFrame,
    quantization: Mapping[str, str | None],
    run_claims: Callable[[str], pd.DataFrame],
    *,
    qtypes: Iterable[str] = CONTROL_QTYPES,
    notes: list[str] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The whole control for any chapter: run ``run_claims("<organism>+<qtype>")`` (-> that
    model's claims rows, its ``model`` column the quantised name) for every organism of
    ``models`` (:func:`control_organisms`) and every ``qtypes``, build the shift table and
    apply the flip rule to ``claims``. -> (claims with the rule applied, shift table).

    A quantised run that fails is recorded in ``notes`` (when given) and left out; the claims
    it would have measured then carry "no organism measured" rather than a verdict."""
    parts = []
    for organism in control_organisms(models):
        for qtype in qtypes:
            name = f"{organism}+{qtype}"
            try:
                part = run_claims(name)
            except Exception as exc:  # one failed control run must not sink the chapter
                if notes is None:
                    raise
                notes.append(f"quantisation control {name} failed: {type(exc).__name__}: {exc}")
                continue
            parts.append(part.assign(model=name))
    quantised = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    shifts = shift_table(claims, quantised)
    return apply_quant_control(claims, shifts, quantization), shifts
