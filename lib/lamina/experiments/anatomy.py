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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy import stats

from lamina import anatomy
from lamina.experiments.anatomy_claims import anatomy_claims
from lamina.experiments.trajectory import ExperimentResult
from lamina.models import get_adapter
from lamina.surgery import SURGERIES

__all__ = [
    "AnatomyConfig",
    "corpus_windows",
    "delta_null",
    "loo_hat_matrix",
    "permuted_r2",
    "run_anatomy",
    "threads",
]

CHAPTER = "layer_anatomy"
ALL_SURGERIES = ["skip", "interpolate", "scale", "noise", "reinit", "predicted"]
IMPORTANCE_SURGERIES = ("skip", "interpolate")  # the paper's ablation: removal / neighbour mean


@dataclass
class AnatomyConfig:
    """Parameters of the layer-anatomy experiment (serialised next to its results).

    model: any spec ``lamina.load_model`` accepts (organism spec, hub name, local folder).
    corpus: registered organism whose held-out split supplies the text; None = the model's
        own organism, or ``organism-llama``'s corpus for any other model.
    surgeries: subset of skip, interpolate, scale, noise, reinit, predicted.
    layers: layers to sweep and perturb (None: all), e.g. to save time on a deep model.
    alpha: the scaling factor of ``scale`` (paper: 0.9); noise_scale: relative noise of the
        ``noise`` surgery (paper: 0.5); recovery_noise: relative noise of the recovery
        perturbation (paper: 0.5, which leaves small organisms within tolerance, so there is
        nothing to recover from; the default 2.0 is our choice).
    n_tokens: held-out tokens for perplexity and the skip/interpolate sweep (>= 20k);
        robustness_tokens: tokens for the other surgeries (a subset of the same windows).
    recovery_*: the recovery-speed fine-tune (AdamW steps, lr, batch in windows, evaluation
        period, evaluation tokens); tolerance_pct: "back at baseline" means within this %.
    ridge_alpha, ridge_degree: the depth regression; k_max: predicted weights replace layers
        0..k-1 for k <= k_max (None: all).
    preserve_pct: a strategy "preserves quality" when it raises ppl by less than this at every
        layer; catastrophic_pct: "catastrophic" means a ppl increase above this (our thresholds).
    threads: torch threads (1 is fastest for these small matrices on a shared CPU).
    """

    model: str = "organism-llama"
    corpus: str | None = None
    surgeries: list[str] = field(default_factory=lambda: list(ALL_SURGERIES))
    layers: list[int] | None = None
    alpha: float = 0.9
    noise_scale: float = 0.5
    seq_len: int = 128
    n_tokens: int = 20_480
    robustness_tokens: int = 4_096
    recovery_noise: float = 2.0
    recovery_budget: int = 24
    recovery_lr: float = 1e-4
    recovery_batch: int = 4
    recovery_eval_every: int = 4
    recovery_tokens: int = 1_024
    tolerance_pct: float = 5.0
    ridge_alpha: float = 1.0
    ridge_degree: int = 2
    k_max: int | None = None
    preserve_pct: float = 5.0
    catastrophic_pct: float = 100.0
    n_bootstrap: int = 2_000
    n_permutations: int = 1_000
    seed: int = 0
    threads: int | None = 1
    quick: bool = False

    def __post_init__(self) -> None:
        self.surgeries = (
            [self.surgeries] if isinstance(self.surgeries, str) else list(self.surgeries)
        )
        unknown = [s for s in self.surgeries if s not in SURGERIES]
        if unknown:
            raise ValueError(f"unknown surgery {unknown}; valid: {sorted(SURGERIES)}")
        if "skip" not in self.surgeries:
            raise ValueError("surgeries must include 'skip' (importance is the skip ablation)")
        if self.noise_scale < 0 or self.seq_len < 2 or self.n_tokens < self.seq_len:
            raise ValueError("need noise_scale >= 0, seq_len >= 2 and n_tokens >= seq_len")
        if self.quick:
            self.n_tokens = min(self.n_tokens, 2_048)
            self.robustness_tokens = min(self.robustness_tokens, 1_024)
            self.recovery_budget = min(self.recovery_budget, 4)
            self.recovery_eval_every = min(self.recovery_eval_every, 2)
            self.recovery_tokens = min(self.recovery_tokens, 512)
            self.n_bootstrap = min(self.n_bootstrap, 200)
            self.n_permutations = min(self.n_permutations, 20)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@contextmanager
def threads(n: int | None) -> Iterator[None]:
    """Run the body with ``torch.set_num_threads(n)`` (None: unchanged)."""
    old = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def corpus_windows(
    organism: str, tokenizer: Any, split: str, n_tokens: int | None, seq_len: int
) -> torch.Tensor:
    """Non-overlapping windows (n, seq_len) of the ``split`` ("train", "val", "heldout") text
    of a registered organism's corpus, tokenised by ``tokenizer`` (EOS between documents);
    the first ceil(n_tokens / seq_len) windows (all with None). Raises if too few tokens."""
    from lamina.organisms import ORGANISMS
    from lamina.organisms.corpus import load_corpus

    name = organism.partition("@")[0]
    if name not in ORGANISMS:
        raise ValueError(f"corpus {organism!r} is not a registered organism: {sorted(ORGANISMS)}")
    docs = getattr(load_corpus(ORGANISMS[name]), split)
    if n_tokens is None:
        return anatomy.chunk_tokens(tokenizer, docs, seq_len)
    need = -(-n_tokens // seq_len)
    chars = np.cumsum([len(d) for d in docs])
    head = docs[: int(np.searchsorted(chars, 8 * need * seq_len)) + 1]  # >= 1 token / 8 chars
    windows = anatomy.chunk_tokens(tokenizer, head, seq_len)
    if windows.shape[0] < need and len(head) < len(docs):
        windows = anatomy.chunk_tokens(tokenizer, docs, seq_len)
    if windows.shape[0] < need:
        raise ValueError(
            f"{organism} {split} text gives {windows.numel()} tokens; {n_tokens} were asked for"
        )
    return windows[:need]


def delta_null(model: torch.nn.Module) -> pd.DataFrame:
    """Delta correlation expected if each layer's weights were independent draws:

        rho0(l) = -s2(l+1) / sqrt((s2(l) + s2(l+1)) (s2(l+1) + s2(l+2))),

    s2(l) = the centred variance of layer l's flattened weight (-0.5 when all are equal).
    Returns columns matrix, layer, corr_null (same rows as ``anatomy.delta_correlation``)."""
    from lamina.predictability import matrix_types, stacked_weights

    rows = []
    for role in matrix_types(model):
        s2 = stacked_weights(model, role).var(axis=1)
        for l in range(len(s2) - 2):
            den = np.sqrt((s2[l] + s2[l + 1]) * (s2[l + 1] + s2[l + 2]))
            rows.append({"matrix": role, "layer": l, "corr_null": float(-s2[l + 1] / den)})
    return pd.DataFrame(rows)


def loo_hat_matrix(n_layers: int, alpha: float, degree: int) -> np.ndarray:
    """(L, L) H with What_j = sum_i H[j, i] W_i: the leave-one-layer-out ridge prediction of
    ``lamina.predictability.ridge_depth_fit`` is linear in the other layers' weights, with
    coefficients that depend on depth only (H[j, j] = 0)."""
    from lamina.predictability import _ridge, depth_features

    x = depth_features(np.arange(n_layers), n_layers, degree)
    h = np.zeros((n_layers, n_layers))
    for j in range(n_layers):
        keep = np.arange(n_layers) != j
        h[j, keep] = x[j] @ _ridge(x[keep], np.eye(n_layers - 1), alpha)
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


def _permuted_r2(model: torch.nn.Module, config: AnatomyConfig) -> np.ndarray:
    from lamina.predictability import matrix_types, stacked_weights

    stacks = [stacked_weights(model, r) for r in matrix_types(model)]
    return permuted_r2(
        stacks, config.ridge_alpha, config.ridge_degree, config.n_permutations, config.seed
    )


def _sweep(model: torch.nn.Module, windows: torch.Tensor, config: AnatomyConfig) -> pd.DataFrame:
    """Skip/interpolate on all windows, the other surgeries on the robustness subset."""
    opts = {
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
    from lamina.organisms import ORGANISMS

    return name if name in ORGANISMS else "organism-llama"


def run_anatomy(config: AnatomyConfig) -> ExperimentResult:
    """The five diagnostics of paper 3 on ``config.model`` (see the module docstring).

    Tables (each with a ``model`` column): perplexity, sweep (surgery x layer), predictability,
    delta (with its independence null), replacement (predicted weights for layers 0..k-1),
    recovery, structure, spectra. Claims: one row per claim of paper 3's abstract (1)-(4).
    """
    import lamina

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
        seq_len = min(config.seq_len, int(max_pos))
        corpus = _corpus_name(config)
        windows = corpus_windows(corpus, tok, "heldout", config.n_tokens, seq_len)
        notes.append(
            f"Held-out text: {windows.numel():,} tokens of the {corpus} corpus's "
            f"held-out split, {windows.shape[0]} windows of {seq_len}."
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
        if not few:
            tables["predictability"] = anatomy.weight_predictability(
                model, alpha=config.ridge_alpha, degree=config.ridge_degree
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
            r2_null = _permuted_r2(model, config)
            lap["predictability"] = time.perf_counter() - t0 - sum(lap.values())
        else:
            r2_null = np.array([])
        n_train = max(4 * config.recovery_budget * config.recovery_batch, 1) * seq_len
        train = corpus_windows(corpus, tok, "train", n_train, seq_len)
        evals = windows[: max(1, -(-config.recovery_tokens // seq_len))]
        tables["recovery"] = _recovery(model, train, evals, config)
        tables["structure"] = anatomy.layer_structure(model)
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
