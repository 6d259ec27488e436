"""Fit the realistic sources' background to a real model, and tune it to the model's hazards.

``python -m lamina.trajectory.fit MODEL`` (about 3 minutes on one core for SmolLM2) extracts
the model's states for the union of paper 1's prompt tables (:func:`paper1_tables`), fits
both poolings (:func:`lamina.trajectory.background.fit_background`), measures the hazards of
:mod:`lamina.trajectory.hazards` on the model's states at the layers the source takes, tunes
the background (:func:`tune`) and prints the fit, the hazards and the model's own effect sizes
(:func:`model_effects`) as Python:
:mod:`lamina.trajectory.fitted` is that output.

**Tuning.** Two shares are estimated as moments of residual cosines, but the hazard each
carries is a statistic of the whole states (the fixed part and the normalisation enter it), so
each is scaled by one factor k, found by bisection on :data:`TUNE_DRAWS` null draws of the
chapter's prompt set, so that the null's mean hazard equals the model's:

* the ``frame`` share (mean pooling) so that the null's ``frame_pull`` on the convergence
  prompts is the model's;
* the ``context`` share (last-token pooling) so that the null's ``pair_ratio_correlation`` on
  the bifurcation pairs is the model's (before, a bare constant 0.69 stood for it);
* on a model with position signal at layer 0 (not ``rotary``), the layer-0 shares of the
  last-token background (the ``context`` tune above leaves layer 0 alone), so that the null's
  ``base_separation`` (the homograph pairs' median delta(0)) is the model's. At layer 0 the
  last token has seen only itself and its position, so what the fit reads there as a context
  shared with the matched control is the shared length (one position); the two senses of a
  homograph end at nearby positions, whose embeddings are alike, which the background, with
  no notion of nearness, cannot share. The tune moves the share 1 - k of the layer-0 context
  to the last word (k = 1: the fit as it is; k = 0: all of it), which sets how much two senses
  share and so the bifurcation ratio's ceiling 2 / delta(0) (untuned on organism-gpt2, the
  null's pairs separated by 0.6-0.7 chord against the model's 0.29).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from lamina.sources.models import load_model
from lamina.sources.prompts import bifurcation_prompts, load_prompts
from lamina.states.extract import extract, pool_token_states
from lamina.trajectory.background import Background, fit_background, sampled_layers
from lamina.trajectory.convergence_stats import ci_profile, distance_stack, item_units
from lamina.trajectory.hazards import hazards
from lamina.trajectory.realistic import Levers, compose, draw, source_tokens
from lamina.trajectory.sizes import CHAPTER_FAMILIES, CHAPTER_POOLING, chapter_prompts

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["TUNE_DRAWS", "TUNED", "chapter_states", "fit_model", "model_effects", "null_hazards",
           "paper1_tables", "render", "tune"]  # fmt: skip

TUNE_DRAWS = 8
TUNE_SEED = 880_001
# (share kind, pooling, chapter, hazard, +1 if the hazard rises with the share else -1, layers):
# the shares tuned, each to one hazard, in this order; layers "all", "after 0" or "0" (layer 0
# alone, the share 1 - k moved to the last word; not on a rotary background, whose layer 0 is
# the last word alone, nor is any rotary layer 0 tuned)
TUNED = (("frame", "mean", "convergence", "frame_pull", 1, "all"),
         ("context", "last", "bifurcation", "pair_ratio_correlation", 1, "after 0"),
         ("context", "last", "bifurcation", "base_separation", 1, "0"))  # fmt: skip


def paper1_tables() -> dict[str, pd.DataFrame]:
    """The prompt tables of paper 1's chapters (:func:`lamina.trajectory.sizes.chapter_prompts`;
    bifurcation: every pair, both positions), keyed by chapter."""
    out = {c: chapter_prompts(c) for c in CHAPTER_FAMILIES if c != "bifurcation"}
    out["bifurcation"] = bifurcation_prompts(load_prompts("ambiguous"))
    return out


def chapter_states(fit: dict[str, Any], chapter: str,
                   n_layers: int = 12) -> tuple[np.ndarray, pd.DataFrame, np.ndarray]:  # fmt: skip
    """A chapter's (states (n, n_layers + 1, d) under its pooling at the layers a source
    takes (:func:`lamina.trajectory.background.sampled_layers`), its prompt table, tokens
    (n,)) from :func:`fit_model`'s ``states``, ``table`` and ``n_tokens``, rows matched by
    prompt text."""
    t = chapter_prompts(chapter)
    row = {p: i for i, p in enumerate(fit["table"]["prompt"])}
    idx = np.array([row[p] for p in t["prompt"]])
    x = fit["states"][CHAPTER_POOLING[chapter]]
    return x[idx][:, sampled_layers(x.shape[1] - 1, n_layers)], t, fit["n_tokens"][idx]


def model_effects(fit: dict[str, Any], n_layers: int = 12) -> dict[str, float]:
    """The model's own effects, measured as their chapters measure them on its states at the
    layers a source takes (:func:`chapter_states`), rounded to 4 decimals: the size at which
    a calibration source carries an effect where the model has it. ``convergence_peak``: the
    peak of the convergence-index profile, an item's own prompts left out (chord units; the
    statistic of :func:`lamina.trajectory.levers.statistic` "peak")."""
    x, t, _ = chapter_states(fit, "convergence", n_layers)  # (n, n_layers + 1, d)
    prof = ci_profile(distance_stack(x), t["category"].to_numpy(), units=item_units(t))
    return {"convergence_peak": round(float(np.nanmax(prof)), 4)}


def null_hazards(backgrounds: dict[str, Background], seeds: range | list[int],
                 lv: Levers | None = None) -> dict[str, Any]:  # fmt: skip
    """The hazards (:func:`lamina.trajectory.hazards.hazards`) of source draws on
    ``backgrounds`` ({pool: Background}) with levers ``lv`` (None: none), averaged over
    ``seeds`` (band means elementwise)."""
    lv = lv or Levers()
    runs = []
    for seed in seeds:
        def states_of(chapter: str, seed: int = seed) -> tuple[np.ndarray, pd.DataFrame, np.ndarray]:
            t, bg = chapter_prompts(chapter), backgrounds[CHAPTER_POOLING[chapter]]
            return compose(t, draw(t, seed, bg), bg, lv), t, source_tokens(t, bg)
        runs.append(hazards(states_of))
    return {k: (tuple(np.mean([r[k] for r in runs], axis=0).round(4)) if isinstance(runs[0][k], tuple)
                else float(np.mean([r[k] for r in runs]))) for k in runs[0]}  # fmt: skip


def _scaled(bg: Background, kind: str, k: float, layers: str = "all") -> Background:
    """``bg`` with the share of ``kind`` times k at the ``layers`` of :data:`TUNED` (clipped to
    1), never at layer 0 of a rotary background (the last word alone there); at "0", the share
    taken from ``kind`` is added to the last word's (``last``)."""
    shares = dict(bg.shares)
    moved = (1.0 - k) * float(shares.get(kind, (0.0,))[0]) if layers == "0" else 0.0

    def one(name: str, j: int, v: float) -> float:
        tuned = {"all": True, "after 0": j > 0, "0": j == 0}[layers] and not (bg.rotary and j == 0)
        if name == "last" and j == 0 and layers == "0" and tuned:
            return round(min(float(v) + moved, 1.0), 4)
        return round(min(float(v) * (k if tuned and name == kind else 1.0), 1.0), 4)
    return dataclasses.replace(bg, shares=tuple(
        (name, tuple(one(name, j, v) for j, v in enumerate(vals))) for name, vals in bg.shares))


def _bisect(f: Callable[[float], float], target: float, lo: float, hi: float, iters: int = 16) -> float:
    """x in [lo, hi] with increasing f(x) = target (the nearer end when out of range)."""
    if f(lo) >= target:
        return lo
    if f(hi) <= target:
        return hi
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return 0.5 * (lo + hi)


def tune(backgrounds: dict[str, Background], real: dict[str, Any]) -> tuple[dict[str, Background], dict[str, float]]:
    """The backgrounds with the shares of :data:`TUNED` scaled so that the null's hazards
    equal ``real``'s (module docstring), and the factors k found."""
    out, factors = dict(backgrounds), {}
    for kind, pool, chapter, hazard, sign, layers in TUNED:
        t = chapter_prompts(chapter)
        base = out[pool]
        if layers == "0" and base.rotary:
            continue
        first = 1 if base.rotary or layers == "after 0" else 0  # a rotary layer 0 is not tuned
        peak = max((max(v[:1] if layers == "0" else v[first:]) for name, v in base.shares
                    if name == kind), default=0.0)  # fmt: skip
        if peak <= 0:
            continue
        # layer 0: k in [0.01, 1], a share moved (at k = 0 the last word would be all of a
        # state, and two senses of one length identical there, which the fitted model has not)
        low, top = (0.01, 1.0) if layers == "0" else (0.0, 1.0 / peak)

        def measured(k: float, kind: str = kind, pool: str = pool, t: pd.DataFrame = t,
                     base: Background = base, hazard: str = hazard, chapter: str = chapter,
                     sign: int = sign, layers: str = layers) -> float:
            bg = _scaled(base, kind, k, layers)
            got = []
            for seed in range(TUNE_SEED, TUNE_SEED + TUNE_DRAWS):
                x = compose(t, draw(t, seed, bg), bg, Levers())
                tok = source_tokens(t, bg)

                def states_of(_chapter: str, x: np.ndarray = x, tok: np.ndarray = tok,
                              t: pd.DataFrame = t) -> tuple[np.ndarray, pd.DataFrame, np.ndarray]:
                    return x, t, tok

                got.append(hazards(states_of, only=chapter)[hazard])
            return sign * float(np.mean(got))

        k = _bisect(measured, sign * float(real[hazard]), low, top)
        factors[f"{kind} (layer 0)" if layers == "0" else kind] = round(k, 4)
        out[pool] = _scaled(base, kind, k, layers)
    return out, factors


def fit_model(name: str, n_layers: int = 12) -> dict[str, Any]:
    """Extract ``name``'s states (``lamina.load_model``, fp32, every token, cached) for the
    union of paper 1's prompt tables (:func:`paper1_tables`, each prompt once), fit both
    poolings and tune them: {"mean": Background, "last": Background, "hazards": the model's,
    "factors": the tuning factors, "effects": :func:`model_effects`, "states": {pool:
    (n, L+1, d)}, "table": the union table, "n_tokens": (n,)}."""
    import torch

    table = pd.concat(paper1_tables().values(), ignore_index=True).drop_duplicates("prompt")
    table = table.reset_index(drop=True)
    model, loaded = load_model(name, dtype=torch.float32)
    tokenizer = cast("PreTrainedTokenizerBase", loaded)
    texts = table["prompt"].tolist()
    traj = extract(model, tokenizer, texts, pool="none", progress=False, cache=True)
    pooled = pool_token_states(model, tokenizer, texts, list(traj.states))
    tok = np.maximum(pooled["n_content"], 1)
    out: dict[str, Any] = {"table": table, "n_tokens": tok,
                           "states": {p: pooled[p] for p in ("mean", "last")}}
    fitted = {p: fit_background(pooled[p], table, tok, p, n_layers,
                                source=f"{name}, {p} pooling, {len(table)} prompts")
              for p in ("mean", "last")}  # fmt: skip
    out["hazards"] = hazards(lambda chapter: chapter_states(out, chapter, n_layers))
    out["effects"] = model_effects(out, n_layers)
    tuned, out["factors"] = tune(fitted, out["hazards"])
    return out | tuned


def render(name: str, value: Any) -> str:
    """``name = value`` as wrapped Python source (numbers kept on shared lines)."""
    import textwrap

    def fmt(v: Any, indent: int) -> str:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            inner = ",\n".join(" " * (indent + 4) + f"{f.name}={fmt(getattr(v, f.name), indent + 4)}"
                                for f in dataclasses.fields(v))
            return f"{type(v).__name__}(\n{inner},\n{' ' * indent})"
        if isinstance(v, dict):
            inner = ",\n".join(" " * (indent + 4) + f"{k!r}: {fmt(x, indent + 4)}" for k, x in v.items())
            return "{\n" + inner + ",\n" + " " * indent + "}"
        if isinstance(v, tuple) and v and all(isinstance(x, tuple) for x in v):
            inner = ",\n".join(" " * (indent + 4) + fmt(x, indent + 4) for x in v)
            return "(\n" + inner + ",\n" + " " * indent + ")"
        text = repr(tuple(float(x) for x in v)) if isinstance(v, tuple) and all(
            isinstance(x, (int, float)) for x in v) else repr(v)
        lines = textwrap.wrap(text, 100 - indent - 4, break_on_hyphens=False)
        return ("\n" + " " * (indent + 4)).join(lines)

    return f"{name} = {fmt(value, 0)}"


def main(argv: list[str] | None = None) -> None:  # pragma: no cover
    """``python -m lamina.trajectory.fit MODEL``: print the tuned fits and the model's
    hazards as Python (the body of :mod:`lamina.trajectory.fitted`)."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        raise SystemExit("usage: python -m lamina.trajectory.fit MODEL")
    fit = fit_model(args[0])
    print("# fmt: off")
    for pool in ("mean", "last"):
        print(render(pool.upper(), fit[pool]) + "\n")
    print(render("HAZARDS", fit["hazards"]) + "\n")
    print(render("EFFECTS", fit["effects"]) + "\n")
    print(render("TUNING", fit["factors"]))
    print("# fmt: on")


if __name__ == "__main__":  # pragma: no cover
    main()
