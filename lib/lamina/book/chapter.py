"""Blocks the chapter notebooks share: run a trajectory experiment and show its notes, glue a
chapter's head claim for the prose, and the claims table each chapter displays.

The glue names are the chapters' contract with their prose (``{glue:text}`conv_p:.3g```), so
every helper here glues exactly the names documented below.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from lamina.book import glue, setup_altair
from lamina.chapters.results import ExperimentResult
from lamina.chapters.trajectory import TrajectoryConfig

__all__ = [
    "CLAIM_COLUMNS",
    "claims_view",
    "finding_title",
    "fmt_value",
    "glue_claim",
    "glue_claim_strings",
    "run_trajectory_chapter",
    "show_notes",
    "show_quant_control",
]

# the claims table's columns as a chapter shows them
CLAIM_COLUMNS = [
    "claim_id",
    "model",
    "paper_value",
    "measured",
    "ci_low",
    "ci_high",
    "p",
    "effect_size",
    "verdict",
]


def show_notes(notes: Iterable[str]) -> None:
    """Display each distinct note (first occurrence order) as a Markdown bullet."""
    from IPython.display import Markdown, display

    for note in dict.fromkeys(notes):
        display(Markdown(f"- *Note:* {note}"))


def run_trajectory_chapter(
    runner: Callable[[TrajectoryConfig], ExperimentResult], params: Mapping[str, Any]
) -> ExperimentResult:
    """A trajectory chapter's first cell: static Altair charts, a ``TrajectoryConfig`` from
    the fields of it that ``params`` names (a chapter passes ``globals()``, i.e. its papermill
    parameters cell; fields it does not name keep their defaults), ``runner(config)`` (e.g.
    ``run_convergence``), results written under ``params["results_root"]`` (absent or None:
    ``lamina.io.results_dir()``), and the run's notes shown."""

    setup_altair()
    names = {f.name for f in dataclasses.fields(TrajectoryConfig)}
    result = runner(TrajectoryConfig(**{k: v for k, v in params.items() if k in names}))
    result.write(params.get("results_root"))
    show_notes(result.notes)
    return result


def claims_view(claims: pd.DataFrame) -> pd.DataFrame:
    """The claims table as a chapter shows it: :data:`CLAIM_COLUMNS`, rounded to 4 decimals,
    plus "quantisation shift" (``lamina.quant_control``) when a quantised model has rows."""
    cols = list(CLAIM_COLUMNS)
    if "quant_shift" in claims and claims["quant_shift"].fillna("").astype(str).str.len().any():
        cols.append("quant_shift")
    return claims[cols].round(4).rename(columns={"quant_shift": "quantisation shift"})


def show_quant_control(result: ExperimentResult) -> None:
    """The quantisation control of a chapter run (``lamina.quant_control``): which models are
    quantised (from provenance) and the type standing for each, then the shift table. Every
    sentence is computed from the tables, or neutral."""
    from IPython.display import Markdown, display

    qm = result.tables.get("quantised_models", pd.DataFrame())
    shifts = result.tables.get("quantisation", pd.DataFrame())
    lines = []
    for r in qm.itertuples():
        how = (
            "the same type is applied to the organisms"
            if r.same_type
            else f"the `gguf` Python package cannot write this type; {r.control_qtype}, the "
            "closest type it can write, stands for it"
        )
        lines.append(f"- `{r.model}`: weights stored as `{r.quantization}`; {how}.")
    if not lines:
        lines.append("- No model of this run has quantised weights in its provenance.")
    if shifts.empty:
        lines.append("- No organism was run under quantisation in this run (the control needs "
                     "an organism in the model set), so no shift was measured.")
    else:
        flips = shifts[shifts["flipped"].astype(bool)]
        lines.append(f"- Verdicts that change under quantisation of the organisms: {len(flips)} "
                     f"of {len(shifts)} (claim x organism x quantisation).")
    display(Markdown("\n".join(lines)))
    if not shifts.empty:
        display(shifts.round(4))


def glue_claim(
    prefix: str, claims: pd.DataFrame, claim_id: str, *, n_models: int | None = None
) -> pd.Series:
    """Glue the head (first) row of claim ``claim_id`` for the prose and return it.

    Names: ``<prefix>_model`` (str), ``<prefix>_measured``, ``_ci_low``, ``_ci_high``, ``_p``,
    ``_effect`` (floats: measured value, its 95% CI, p-value, effect size), ``_verdict`` (str),
    ``_n_models`` (``n_models``; None: the models with a row for the claim),
    ``_n_reproduced`` (rows of the claim judged "reproduced") and ``_reason`` (the verdict's
    reason, from ``lamina.claims``; "" for rows without one)."""
    main = claims[claims["claim_id"] == claim_id].reset_index(drop=True)
    head = main.iloc[0]
    glue(f"{prefix}_model", str(head["model"]))
    glue(f"{prefix}_measured", float(head["measured"]))
    glue(f"{prefix}_ci_low", float(head["ci_low"]))
    glue(f"{prefix}_ci_high", float(head["ci_high"]))
    glue(f"{prefix}_p", float(head["p"]))
    glue(f"{prefix}_effect", float(head["effect_size"]))
    glue(f"{prefix}_verdict", str(head["verdict"]))
    glue(f"{prefix}_n_models", int(main["model"].nunique()) if n_models is None else n_models)
    glue(f"{prefix}_n_reproduced", int((main["verdict"] == "reproduced").sum()))
    glue(f"{prefix}_reason", str(head.get("reason", "") or ""))
    return head


def finding_title(claims: pd.DataFrame, claim_id: str, what: str, spec: str = ".3g") -> str:
    """A chart title computed from the claims table, never typed: for the head row of
    ``claim_id``, "<what> on <model>: <measured> [<ci_low>, <ci_high>] (paper: <paper_value>):
    <model>: <verdict>", plus "; reproduced on k of n sources" when several sources have the
    claim. Neutral ("<what>") when the claim has no row."""
    rows = claims[claims["claim_id"] == claim_id]
    if rows.empty:
        return what
    h = rows.iloc[0]
    ci = f" [{fmt_value(h['ci_low'], spec)}, {fmt_value(h['ci_high'], spec)}]"
    ci = "" if ci == " [n/a, n/a]" else ci
    title = (
        f"{what} on {h['model']}: {fmt_value(h['measured'], spec)}{ci} "
        f"(paper: {h['paper_value']}) — {h['model']}: {h['verdict']}"
    )
    if rows["model"].nunique() > 1:
        k = int((rows["verdict"] == "reproduced").sum())
        title += f"; reproduced on {k} of {rows['model'].nunique()} sources"
    return title


def fmt_value(v: float | None, spec: str = ".3g") -> str:
    """``format(v, spec)``, or "n/a" for None and non-finite values."""
    return "n/a" if v is None or not np.isfinite(v) else format(v, spec)


def glue_claim_strings(prefix: str, claims: pd.DataFrame, *, detail: bool = False) -> None:
    """Glue every claim of a one-model claims table (indexed by ``claim_id``) as text.

    For claim id ``c`` (dashes become underscores), ``<prefix>_<c>_verdict``, ``_measured``,
    ``_ci`` ("[low, high]"), ``_p`` (2 significant digits), ``_effect`` (numbers via
    :func:`fmt_value`), and with ``detail`` also ``_detail`` (the effect's name)."""
    for cid, row in claims.iterrows():
        key = f"{prefix}_" + str(cid).replace("-", "_")
        glue(f"{key}_verdict", row["verdict"])
        glue(f"{key}_measured", fmt_value(row["measured"]))
        glue(f"{key}_ci", f"[{fmt_value(row['ci_low'])}, {fmt_value(row['ci_high'])}]")
        glue(f"{key}_p", fmt_value(row["p"], ".2g"))
        if detail:
            glue(f"{key}_detail", str(row["effect_name"]))
        glue(f"{key}_effect", fmt_value(row["effect_size"]))
