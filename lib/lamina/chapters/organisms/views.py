"""The organisms appendix as the notebook shows it: :func:`run_page` (the run, its results
written, the prose's values glued), then one call per displayed table (returned, so the cell
shows it) or figure (:mod:`~.figures`, displayed with its caption). The notebook only narrates
(issue 24 item 4).
"""

from __future__ import annotations

import os

import pandas as pd

from lamina.book.chapter import show_notes
from lamina.book.tables import show_details
from lamina.chapters.organisms.figures import (
    bpb_figure,
    gates_figure,
    homograph_figure,
    homograph_layers_figure,
    margin_curve_figure,
    perplexity_figure,
    pretraining_figure,
    stages_figure,
)
from lamina.chapters.organisms.narrative import glue_organisms, targets_table
from lamina.chapters.organisms.run import OrganismsConfig, OrganismsResult, run_organisms

__all__ = [
    "GATE_COLUMNS",
    "bpb_figure",
    "bpb_table",
    "build_table",
    "corpus_table",
    "dpo_table",
    "dw_table",
    "gates_figure",
    "gates_table",
    "homograph_figure",
    "homograph_layers_figure",
    "homograph_table",
    "margin_curve_figure",
    "margins_table",
    "notes",
    "overlap_table",
    "policies_table",
    "perplexity_figure",
    "pretraining_figure",
    "problems",
    "quality_table",
    "run_page",
    "samples_table",
    "seeds_table",
    "sft_table",
    "stages_figure",
    "targets_view",
]

GATE_COLUMNS = ("model", "stage", "passed", "sft_accuracy", "sft_accuracy_ci_low",
                "sft_accuracy_ci_high", "gain_over_base", "gain_over_base_ci_low",
                "gain_over_base_ci_high", "gain_over_best_policy", "gain_over_best_policy_ci_low",
                "gain_over_best_policy_ci_high", "content_probe", "content_probe_ci_low",
                "content_probe_ci_high", "content_gain", "content_gain_ci_low",
                "content_gain_ci_high", "content_gain_over_base", "content_gain_over_base_ci_low",
                "content_gain_over_base_ci_high", "preference_accuracy", "preference_accuracy_ci_low",
                "preference_accuracy_ci_high", "preference_gain", "preference_gain_ci_low",
                "preference_gain_ci_high", "preference_gain_over_base",
                "preference_gain_over_base_ci_low", "preference_gain_over_base_ci_high", "refusal_accuracy", "constant_style_baseline", "n_items",
                "n_triples", "n_units", "reason")  # fmt: skip
"""The gates table's columns, in order (those the run has): each stage's measures with their
95% CIs over entity pairs, and its gate's gains over its predecessor, the base and the best
content-blind policy."""


def run_page(
    config: OrganismsConfig, results_root: str | os.PathLike | None = None
) -> OrganismsResult:
    """The chapter's run (:func:`~.run.run_organisms`), its results written under
    ``results_root`` (None: ``lamina.states.io.results_dir()``), and every value the prose
    quotes glued (:func:`~.narrative.glue_organisms`)."""
    result = run_organisms(config)
    result.write(results_root)
    glue_organisms(result)
    return result


def notes(result: OrganismsResult) -> None:
    """Each distinct note of the run, once, as a bullet of a folded list
    (``lamina.book.chapter.show_notes``); the page shows them after its results."""
    show_notes(result.notes)


def build_table(result: OrganismsResult) -> pd.DataFrame:
    """The builds, one column per organism: wall and CPU time, the whole build's and each
    stage's (pretrain, lm, sft, dpo, evaluation), in minutes; the rest as recorded (numbers to
    2 decimals, learning rates in full)."""
    build = result.tables["build"].copy()
    seconds = [c for c in build.columns if c.endswith("_seconds")]
    build[[c[:-8] + "_minutes" for c in seconds]] = build[seconds].to_numpy() / 60
    return build.drop(columns=seconds).round(
        {c: 2 for c in build.columns if not c.endswith("_lr")}
    ).T


def corpus_table(result: OrganismsResult) -> pd.DataFrame:
    """The corpus cards, one row per distinct card with the organisms that share it."""
    corpus = result.tables["corpus"]
    return (
        corpus.groupby([c for c in corpus.columns if c != "model"], dropna=False, sort=False)[
            "model"
        ]
        .agg(", ".join)
        .reset_index()
        .rename(columns={"model": "organisms"})
    )


def overlap_table(result: OrganismsResult) -> pd.DataFrame:
    """The shared word 8-grams per training text, as the builds counted them."""
    return result.tables["overlap"]


def quality_table(result: OrganismsResult) -> pd.DataFrame:
    """Perplexities per checkpoint (3 decimals)."""
    return result.tables["quality"].round(3)


def bpb_table(result: OrganismsResult) -> pd.DataFrame:
    """Bits per byte of every model, checkpoint and source, with CIs (3 decimals)."""
    return result.tables["bits_per_byte"].drop(columns=["passages"]).round(3)


def samples_table(result: OrganismsResult) -> None:
    """The generated samples, columns up to 200 characters wide, folded in ``<details>``."""
    samples = result.tables["samples"].fillna("")
    with pd.option_context("display.max_colwidth", 200):
        show_details(samples, "The generated samples, per model and checkpoint")


def sft_table(result: OrganismsResult) -> pd.DataFrame:
    """Held-out SFT accuracy: a row per organism, component and n, a column per stage and for
    the best content-blind policy (3 decimals), and every policy's accuracy on all items."""
    acc = result.tables["sft_accuracy"]
    table = acc.pivot_table(index=["model", "component", "n"], columns="checkpoint",
                            values="accuracy", sort=False).reset_index()  # fmt: skip
    return table.round(3)


def policies_table(result: OrganismsResult) -> pd.DataFrame:
    """Every content-blind policy's held-out SFT accuracy, one column per organism."""
    return result.tables["policies"].pivot_table(index="policy", columns="model", values="accuracy",
                                                 sort=False).round(3)  # fmt: skip


def margins_table(result: OrganismsResult) -> pd.DataFrame:
    """DPO reward margins on training and held-out pairs (3 decimals)."""
    return result.tables["dpo_margins"].round(3)


def dpo_table(result: OrganismsResult) -> pd.DataFrame:
    """Preference accuracy per organism, stage and kind of triple (Wilson 95% CIs, binomial p
    against 1/2; 3 decimals)."""
    return result.tables["dpo_accuracy"].round(3)


def gates_table(result: OrganismsResult) -> pd.DataFrame:
    """The behavioural gates: :data:`GATE_COLUMNS` that the run has (3 decimals)."""
    gates = result.tables["gates"]
    return gates[[c for c in GATE_COLUMNS if c in gates.columns]].round(3)


def dw_table(result: OrganismsResult) -> pd.DataFrame:
    """‖ΔW‖/‖W‖ per matrix group of @sft and @dpo against the base (4 decimals)."""
    gates = result.tables["gates"]
    dw = gates[gates["stage"] != "base"].filter(regex=r"^(model|stage|dW_rel/.*)$")
    return dw.round(4)


def seeds_table(result: OrganismsResult) -> pd.DataFrame:
    """Each built training seed's build-time numbers (3 decimals)."""
    return result.tables["seeds"].round(3)


def homograph_table(result: OrganismsResult) -> pd.DataFrame:
    """Each homograph's separation and its control's (3 decimals)."""
    return result.tables["homographs"].round(3)


def targets_view(result: OrganismsResult) -> pd.DataFrame:
    """Every self-check of every organism with its value, threshold and verdict."""
    return targets_table(result)


def problems(result: OrganismsResult) -> None:
    """The run's ``problems`` per organism as a Markdown list, or a line saying there are
    none."""
    from IPython.display import Markdown, display

    S = result.summaries
    lines = [f"- `{m}`: {p}" for m in S for p in S[m]["problems"]]
    display(Markdown("\n".join(lines) if lines else "Nothing: every check passed."))
