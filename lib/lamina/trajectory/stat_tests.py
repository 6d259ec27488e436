"""The statistical tests behind paper 1's claims, on state arrays, dispatched by chapter.

The chapters and the calibration harness (:mod:`lamina.trajectory.calibration`) call
:func:`paper1_test`, so the calibration page measures the tests the book uses. Each test
returns a dict of numbers (:mod:`.convergence_stats`, :mod:`.curvature_stats`,
:mod:`.bifurcation_stats`, :mod:`.phase_stats`); :mod:`lamina.trajectory.claims` declares
the claims they are judged against.

Independent units: items (convergence: an item's prompts share its word; resampled within
their category and permuted as a block, and left out of each other's within-category mean),
lexical base words and reasoning prompts (curvature; its gap at equal length is a mixed model
with a random intercept per cluster of them, joined by a shared frame, template or base word),
homograph pairs (bifurcation), lexical
base words and other prompts (phases).
"""

from __future__ import annotations

from typing import Any, TypedDict, Unpack, cast

import numpy as np

from lamina.trajectory.bifurcation_stats import bifurcation_rows, bifurcation_test
from lamina.trajectory.convergence_stats import (
    convergence_test,
    item_units,
    shuffled_distance_stack,
)
from lamina.trajectory.curvature_stats import curvature_clusters, curvature_test
from lamina.trajectory.metrics import layerwise_cosine, mean_curvature
from lamina.trajectory.phase_stats import three_phase_test

__all__ = ["Resampling", "control_summaries", "paper1_test", "shuffle_options", "units_of"]


def units_of(table: Any) -> np.ndarray:
    """(n,) the independent unit of each row: the base word of a lexical variant (families
    ``lexical*``), else the prompt's id (or its row number)."""
    ids = table["id"].astype(str).to_numpy() if "id" in table else np.arange(len(table)).astype(str)
    if "base" in table:
        lex = table["family"].astype(str).str.startswith("lexical").to_numpy() & table["base"].notna().to_numpy()
        return np.where(lex, "base:" + table["base"].astype(str), ids)
    return ids


class Resampling(TypedDict, total=False):
    """The resampling budget of a paper-1 test, as keyword arguments of :func:`paper1_test`,
    which passes them on to the chapter's test (whose own defaults hold for those left out:
    2,000 bootstrap resamples and permutations, seed 0): ``n_bootstrap`` (bootstrap resamples),
    ``n_permutations`` (permutations: the convergence peak)
    and ``seed``."""

    n_bootstrap: int
    n_permutations: int
    seed: int


def paper1_test(
    name: str,
    x: np.ndarray,
    table: Any,
    layers: list[int],
    *,
    n_tokens: Any | None = None,
    distances: np.ndarray | None = None,
    **budget: Unpack[Resampling],
) -> dict[str, Any]:
    """Run the test of chapter ``name`` ("convergence", "curvature", "bifurcation",
    "three_phase") on states x (n, m, d) of the rows of ``table`` with the resampling
    ``budget`` (:class:`Resampling`); the result also holds ``effect`` and ``effect_p``: the
    headline effect (peak CI; the matched reasoning - lexical gap, or the paper's gap without
    token counts; median homograph ratio over its control's - 1; SIM margin), its p and
    ``effect_ci`` (its CI: each end a one-sided bound at >= 95%), from which control fractions
    and their bounds are taken (:func:`lamina.trajectory.judging.control_result`).
    ``distances``: convergence only, the (m, n, n) distance stack to test instead of x's own
    (:func:`lamina.trajectory.convergence_stats.convergence_test`)."""
    if distances is not None and name != "convergence":
        raise ValueError(f"distances are tested by the convergence chapter only, not {name!r}")
    ints = cast(dict[str, int], budget)  # every value of a Resampling is an int
    kw = {k: v for k, v in ints.items() if k != "n_permutations"}
    if name == "convergence":
        s = convergence_test(
            x, table["category"].to_numpy(), layers, units=item_units(table),
            distances=distances, **budget,
        )
        s["effect"], s["effect_p"] = s["peak"], s["p"]
        s["effect_ci"] = (s["ci_low"], s["ci_high"])  # one-sided 95% bounds
    elif name == "curvature":
        s = curvature_test(
            mean_curvature(x), table["family"].to_numpy(), units_of(table), n_tokens=n_tokens,
            clusters=curvature_clusters(table), **budget,
        )
        matched = n_tokens is not None and s.get("matched_p") is not None
        s["effect"] = s["matched"] if matched else s["difference"]
        s["effect_p"] = s["matched_p"] if matched else s["p"]
        s["effect_ci"] = ((s["matched_low"], s["matched_high"]) if matched
                          else (s["diff_low"], s["diff_high"]))  # fmt: skip
    elif name == "bifurcation":
        a, b, ca, cb = bifurcation_rows(table)
        s = bifurcation_test(x[a], x[b], x[ca], x[cb], **kw)
        s["effect"], s["effect_p"] = s["excess"] - 1, s["p"]
        s["effect_ci"] = (s["excess_low"] - 1, s["excess_high"] - 1)
    elif name == "three_phase":
        s = three_phase_test(np.asarray(layerwise_cosine(x)), units=units_of(table), **kw)
        s["effect"], s["effect_p"] = s["margin"], s["p"]
        s["effect_ci"] = (s["margin_low"], s["margin_high"])
    else:
        raise ValueError(f"unknown paper-1 test {name!r}")
    return s


def shuffle_options(name: str, table: Any, s: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments of :func:`lamina.states.controls.shuffle_layers` for chapter
    ``name``'s shuffled-layers control: for bifurcation, the ratio's baseline (layers
    0..base of summary ``s``) stays in place and one permutation is shared by the four rows of
    a pair (a homograph's two contexts and its control's), so that delta still compares two
    states of one layer and delta(L) is not exchangeable with delta(base); else none (each
    prompt's layers permuted on their own)."""
    if name != "bifurcation":
        return {}
    return {"fixed": tuple(range(int(s["base_layer"]) + 1)),
            "groups": table["pair_id"].astype(str).to_numpy()}


def control_summaries(
    name: str,
    controls: dict[str, np.ndarray],
    table: Any,
    layers: list[int],
    *,
    n_tokens: Any | None = None,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """:func:`paper1_test` of chapter ``name`` on each control's states ((n, m, d) of the same
    rows), with fewer resamples (100 bootstrap, 200 permutations: the control's p decides at
    the vanish rows' alpha 0.05). Convergence's shuffled layers (no layer fixed:
    :func:`shuffle_options`) are tested on the expected distances over all shuffles
    (:func:`lamina.trajectory.convergence_stats.shuffled_distance_stack`), which the one
    shuffle in ``controls`` gives as well as the unshuffled states: a single shuffle's noise
    raises the profile's maximum over layers by about the real models' peak (0.014-0.042 on
    the background fitted to SmolLM2, 180 prompts), so a convergence of each layer's own
    could not be seen to be removed. That expectation holds only for free permutations: a
    ValueError is raised if :func:`shuffle_options` ever fixes a layer or a group for
    convergence."""
    expected = name == "convergence" and "shuffled layers" in controls
    if expected and shuffle_options(name, table, {}):
        raise ValueError(
            "control_summaries: convergence's shuffled layers are tested on the expectation over "
            "free permutations of each prompt's layers, but shuffle_options now fixes layers or "
            f"groups ({sorted(shuffle_options(name, table, {}))}): that expectation would be wrong"
        )

    def test(k: str, xc: np.ndarray) -> dict[str, Any]:
        dist = shuffled_distance_stack(xc) if expected and k == "shuffled layers" else None
        return paper1_test(name, xc, table, layers, n_tokens=n_tokens, distances=dist,
                           n_bootstrap=100, n_permutations=200, seed=seed)

    return {k: test(k, xc) for k, xc in controls.items()}
