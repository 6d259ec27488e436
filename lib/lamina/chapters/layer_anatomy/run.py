"""Paper 3's five layer diagnostics on one causal LM, with the claims table of its abstract.

:func:`run_anatomy` takes one :class:`AnatomyConfig` and returns an ``ExperimentResult``
(tables, claims, notes) whose ``.write()`` saves them with ``lamina.io.write_results``.
All metrics come from :mod:`lamina.anatomy`; this module chooses data, runs them and turns
the numbers into verdicts. Mapping the paper's 30-layer positions (critical core L8-11,
anti-layers L14/L17) onto another depth by relative position is a reimplementation choice.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Any, cast

import numpy as np
import pandas as pd
import torch
from scipy import stats

import lamina
from lamina import anatomy
from lamina.anatomy.predictability import (
    depth_features,
    matrix_types,
    ridge,
    stacked_weights,
    summary_predictability,
    summary_stacks,
)
from lamina.chapters.layer_anatomy.claims import anatomy_claims
from lamina.chapters.layer_anatomy.config import (
    CHAPTER,
    IMPORTANCE_SURGERIES,
    AnatomyConfig,
)
from lamina.chapters.results import ExperimentResult
from lamina.chapters.runtime import corpus_windows, threads
from lamina.models import get_adapter
from lamina.organisms import ORGANISMS

__all__ = ["delta_null", "loo_hat_matrix", "permuted_r2", "run_anatomy"]


def delta_null(model: torch.nn.Module) -> pd.DataFrame:
    """Delta correlation expected if each layer's weights were independent draws:

        rho0(l) = -s2(l+1) / sqrt((s2(l) + s2(l+1)) (s2(l+1) + s2(l+2))),

    s2(l) = the centred variance of layer l's flattened weight (-0.5 when all are equal).
    Returns columns matrix, layer, corr_null (same rows as ``anatomy.delta_correlation``)."""

    rows = []
    for role in matrix_types(model):
        s2 = stacked_weights(model, role).var(axis=1)
        for l in range(len(s2) - 2):
            den = np.sqrt((s2[l] + s2[l + 1]) * (s2[l + 1] + s2[l + 2]))
            rows.append({"matrix": role, "layer": l, "corr_null": float(-s2[l + 1] / den)})
    return pd.DataFrame(rows)


def loo_hat_matrix(n_layers: int, alpha: float, degree: int) -> np.ndarray:
    """(L, L) H with What_j = sum_i H[j, i] W_i: the leave-one-layer-out ridge prediction of
    ``lamina.anatomy.predictability.ridge_depth_fit`` is linear in the other layers' weights, with
    coefficients that depend on depth only (H[j, j] = 0)."""

    x = depth_features(np.arange(n_layers), n_layers, degree)
    h = np.zeros((n_layers, n_layers))
    for j in range(n_layers):
        keep = np.arange(n_layers) != j
        h[j, keep] = x[j] @ ridge(x[keep], np.eye(n_layers - 1), alpha)
    return h


def permuted_r2(
    stacks: list[np.ndarray], alpha: float, degree: int, n_permutations: int, seed: int
) -> np.ndarray:
    """(n_permutations,) mean LOO R^2 over matrix types with the layer order shuffled: the
    null of "weights follow depth". stacks: one (L, P) array per type. Uses the Gram matrix
    G = W W^T: SSE = tr((I - H) G_perm (I - H)^T), SST = tr(G) - 1^T G 1 / L."""
    n = stacks[0].shape[0]
    resid = np.eye(n) - loo_hat_matrix(n, alpha, degree)
    grams = [w @ w.T for w in stacks]
    sst = [np.trace(g) - g.sum() / n for g in grams]
    rng = np.random.default_rng(seed)
    null = np.empty(n_permutations)
    for b in range(n_permutations):
        order = rng.permutation(n)
        r2 = [
            1 - np.trace(resid @ g[np.ix_(order, order)] @ resid.T) / t
            for g, t in zip(grams, sst, strict=True)
        ]
        null[b] = np.mean(r2)
    return null


def _permuted_r2(
    model: torch.nn.Module, structure: pd.DataFrame, config: AnatomyConfig
) -> dict[str, np.ndarray]:
    """{target: permutation null of the mean R²}: "raw entries" (the weights) and "layer
    summaries" (:func:`lamina.anatomy.predictability.summary_stacks`), each its own null."""
    targets = {
        "raw entries": [stacked_weights(model, r) for r in matrix_types(model)],
        "layer summaries": list(summary_stacks(structure).values()),
    }
    return {
        name: permuted_r2(
            stacks, config.ridge_alpha, config.ridge_degree, config.n_permutations, config.seed
        )
        if stacks
        else np.array([])
        for name, stacks in targets.items()
    }


def _sweep(model: torch.nn.Module, windows: torch.Tensor, config: AnatomyConfig) -> pd.DataFrame:
    """Skip/interpolate on all windows, the other surgeries on the robustness subset."""
    opts: dict[str, Any] = {
        "scale": {"alpha": config.alpha},
        "noise": {"rel_scale": config.noise_scale, "seed": config.seed},
        "reinit": {"seed": config.seed},
        "predicted": {"alpha": config.ridge_alpha, "degree": config.ridge_degree},
    }
    frames = []
    main = [s for s in config.surgeries if s in IMPORTANCE_SURGERIES]
    rest = [s for s in config.surgeries if s not in IMPORTANCE_SURGERIES]
    n_rob = min(windows.shape[0], -(-config.robustness_tokens // windows.shape[1]))
    for names, ids in ((main, windows), (rest, windows[:n_rob])):
        if not names:
            continue
        df = anatomy.ablation_sweep(
            model,
            ids,
            names,
            config.layers,
            batch_size=16,
            n_bootstrap=config.n_bootstrap,
            seed=config.seed,
            **{k: v for k, v in opts.items() if k in names},
        )
        df["n_tokens"] = int(ids.numel())
        df["base_nll_per_seq"] = [np.asarray(df.attrs["baseline_nll_per_seq"])] * len(df)
        df["sweep_seconds"] = df.attrs["seconds"]
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def _recovery(
    model: torch.nn.Module, train: torch.Tensor, evals: torch.Tensor, config: AnatomyConfig
) -> pd.DataFrame:
    rows = []
    layers = config.layers
    for l in range(get_adapter(model).n_layers(model)) if layers is None else layers:
        r = anatomy.recovery_steps(
            model,
            train,
            evals,
            l,
            rel_noise=config.recovery_noise,
            budget_steps=config.recovery_budget,
            lr=config.recovery_lr,
            batch_size=config.recovery_batch,
            tolerance_pct=config.tolerance_pct,
            eval_every=config.recovery_eval_every,
            seed=config.seed,
        )
        final = r["curve"][-1][1]
        rows.append(
            {
                "layer": l,
                "baseline_ppl": r["baseline_ppl"],
                "perturbed_ppl": r["perturbed_ppl"],
                "steps_to_recover": r["steps_to_recover"],
                "recovered": r["recovered"],
                "final_ppl": final,
                "budget_steps": config.recovery_budget,
                # censored runs rank after every recovered one
                "steps_ranked": r["steps_to_recover"]
                if r["recovered"]
                else config.recovery_budget + config.recovery_eval_every,
                "curve_steps": [int(s) for s, _ in r["curve"]],
                "curve_ppl": [float(p) for _, p in r["curve"]],
            }
        )
    return pd.DataFrame(rows)


def _corpus_name(config: AnatomyConfig) -> str:
    if config.corpus:
        return config.corpus
    name = config.model.partition("@")[0]

    return name if name in ORGANISMS else "organism-llama"


def run_anatomy(config: AnatomyConfig) -> ExperimentResult:
    """The five diagnostics of paper 3 on ``config.model`` (see the module docstring).

    Tables (each with a ``model`` column): perplexity, sweep (surgery x layer), predictability,
    delta (with its independence null), replacement (predicted weights for layers 0..k-1),
    recovery, structure, spectra. Claims: one row per claim of paper 3's abstract (1)-(4).
    """

    t0 = time.perf_counter()
    notes: list[str] = []
    with threads(config.threads), warnings.catch_warnings():
        # BCa intervals of degenerate resamples (e.g. an ablation that changes nothing) are
        # reported as NaN; scipy's warnings about them would only clutter the chapter
        warnings.simplefilter("ignore", category=stats.DegenerateDataWarning)
        warnings.simplefilter("ignore", category=stats.ConstantInputWarning)
        model, tok = lamina.load_model(config.model, dtype=torch.float32)
        adapter = get_adapter(model)
        n_layers = adapter.n_layers(model)
        if config.layers is not None:
            checked = [anatomy.check_layer(model, l) for l in config.layers]
            config = dataclasses.replace(config, layers=checked)
        max_pos = getattr(model.config, "max_position_embeddings", None) or getattr(
            model.config, "n_positions", config.seq_len
        )
        seq_len = min(config.seq_len, int(cast(int, max_pos)))
        corpus = _corpus_name(config)
        windows = corpus_windows(
            corpus, tok, "heldout", config.n_tokens, seq_len, shuffle_seed=config.seed
        )
        notes.append(
            f"Held-out text: {windows.numel():,} tokens of the {corpus} corpus's "
            f"held-out split (plays cut into passages and shuffled with the curriculum's "
            f"documents, seed {config.seed}), {windows.shape[0]} windows of {seq_len}; "
            "the bootstraps resample windows."
        )
        few = n_layers < config.ridge_degree + 2
        if few and "predicted" in config.surgeries:
            config = dataclasses.replace(
                config, surgeries=[s for s in config.surgeries if s != "predicted"]
            )
            notes.append(
                f"{n_layers} layers are too few for a leave-one-out depth fit of "
                f"degree {config.ridge_degree}: predictability not testable."
            )
        base = anatomy.perplexity(
            model, windows, batch_size=16, n_bootstrap=config.n_bootstrap, seed=config.seed
        )
        ppl = pd.DataFrame(
            [
                {
                    "ppl": base.ppl,
                    "ci_low": base.ci_low,
                    "ci_high": base.ci_high,
                    "nll": base.nll,
                    "n_tokens": base.n_tokens,
                    "n_sequences": len(base.nll_per_seq),
                }
            ]
        )
        lap = {"setup": time.perf_counter() - t0}
        sweep = _sweep(model, windows, config)
        lap["sweep"] = time.perf_counter() - t0 - sum(lap.values())
        tables: dict[str, pd.DataFrame] = {"perplexity": ppl}
        structure = anatomy.layer_structure(model)
        if not few:
            alpha, degree = config.ridge_alpha, config.ridge_degree
            tables["predictability"] = pd.concat(
                [
                    anatomy.weight_predictability(model, alpha=alpha, degree=degree),
                    summary_predictability(structure, alpha=alpha, degree=degree),
                ],
                ignore_index=True,
            )
            delta = anatomy.delta_correlation(model).merge(
                delta_null(model), on=["matrix", "layer"]
            )
            tables["delta"] = delta
            n_rob = min(windows.shape[0], -(-config.robustness_tokens // seq_len))
            tables["replacement"] = anatomy.predicted_replacement_curve(
                model,
                windows[:n_rob],
                k_max=config.k_max,
                alpha=config.ridge_alpha,
                degree=config.ridge_degree,
                batch_size=16,
            )
            r2_null = _permuted_r2(model, structure, config)
            lap["predictability"] = time.perf_counter() - t0 - sum(lap.values())
        else:
            r2_null = {}
        n_train = max(4 * config.recovery_budget * config.recovery_batch, 1) * seq_len
        train = corpus_windows(corpus, tok, "train", n_train, seq_len)
        evals = windows[: max(1, -(-config.recovery_tokens // seq_len))]
        tables["recovery"] = _recovery(model, train, evals, config)
        tables["structure"] = structure
        tables["spectra"] = pd.DataFrame(
            [
                {"matrix": m, "layer": l, "index": i, "singular_value": float(v)}
                for m, s in anatomy.singular_spectra(model).items()
                for l, row in enumerate(s)
                for i, v in enumerate(row)
            ]
        )
    tables["sweep"] = sweep.drop(columns=["nll_per_seq", "base_nll_per_seq"]).assign(
        depth=lambda d: d["layer"] / max(n_layers - 1, 1)
    )
    claims = anatomy_claims(config, sweep, tables, r2_null, n_layers)
    lap["recovery+structure+claims"] = time.perf_counter() - t0 - sum(lap.values())
    notes.append(
        f"Elapsed {time.perf_counter() - t0:.0f} s ("
        + ", ".join(f"{k} {v:.0f} s" for k, v in lap.items())
        + f"; {torch.get_num_threads() if config.threads is None else config.threads} thread(s))."
    )
    for t in tables.values():
        t.insert(0, "model", config.model)
    claims["model"] = config.model
    return ExperimentResult(CHAPTER, config, claims, tables, notes, [config.model])
