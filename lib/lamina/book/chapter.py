"""Blocks the chapter notebooks share: show a run's notes, glue a
chapter's head claim for the prose, and the claims table each chapter displays.

The glue names are the chapters' contract with their prose (``{glue:text}`conv_p:.3g```), so
every helper here glues exactly the names documented below.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from lamina.book import glue
from lamina.book.tables import show_notes_folded

__all__ = [
    "CLAIM_COLUMNS",
    "claims_view",
    "finding_title",
    "fmt_value",
    "glue_claim",
    "glue_claim_strings",
    "show_notes",
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


def show_notes(notes: Iterable[str], summary: str = "Notes on the models") -> None:
    """Display the distinct notes (first occurrence order) as a bulleted list folded in a
    ``<details>`` block (``lamina.book.tables.notes_html``); a chapter shows them after its
    results, under its caveats. Nothing is shown when there are none."""
    show_notes_folded(notes, summary)




def claims_view(claims: pd.DataFrame, columns: Sequence[str] = CLAIM_COLUMNS) -> pd.DataFrame:
    """The claims table as a chapter shows it: ``columns`` (default :data:`CLAIM_COLUMNS`; a
    chapter may show others of the claims table's columns), rounded to 4 decimals, plus
    "quantisation shift" (``lamina.states.quant_control``) when a quantised model has rows."""
    cols = list(columns)
    if "quant_shift" in claims and claims["quant_shift"].fillna("").astype(str).str.len().any():
        cols.append("quant_shift")
    return claims[cols].round(4).rename(columns={"quant_shift": "quantisation shift"})




def glue_claim(
    prefix: str, claims: pd.DataFrame, claim_id: str, *, n_models: int | None = None
) -> None:
    """Glue the head (first) row of claim ``claim_id`` for the prose. Returns nothing, so a
    notebook cell that ends with this call prints no object.

    Names: ``<prefix>_model`` (str), ``<prefix>_measured``, ``_ci_low``, ``_ci_high``, ``_p``,
    ``_effect`` (floats: measured value, its 95% CI, p-value, effect size), ``_verdict`` (str),
    ``_n_models`` (``n_models``; None: the models with a row for the claim),
    ``_n_reproduced`` (rows of the claim judged "reproduced") and ``_reason`` (the verdict's
    reason, from ``lamina.evidence.claims``; "" for rows without one)."""
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
