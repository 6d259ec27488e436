"""Known-answer weight stacks for paper 3's claims about the weights: R^2 across depth (raw
entries, gate_proj alone, per-layer summaries) and the delta structure.

Each source is 7 matrix types (the Llama roles, gate_proj among them) of 16 x 24 over 30
layers, measured by the chapter's own code (:func:`lamina.anatomy.model_tables.stack_tables`,
:mod:`lamina.anatomy.measurements`):

* **null** (every row): independent layers that are not identically distributed -- each
  layer's scale an independent log-normal draw (sd 0.5 in log), entries t with 5 df (heavy
  tails) -- so there is no depth order, but the layers are not the exchangeable draws the
  shuffled-order null assumes.
* **R^2 planted / half** (raw entries, gate_proj): W_l = f1(z) B1 + f2(z) B2 + sigma E,
  z = l / 29, f the centred linear and quadratic terms of depth, sigma set so that the
  leave-one-layer-out R^2 is about 0.91 (the paper's) / 0.455 (half).
* **summary planted / half**: W_l = U diag(s(z)) V^T + sigma E with singular values
  s_i(z) = exp(z / 2 - (0.1 + 0.3 z) i) (scale and spectral decay change with depth), sigma
  set so that the summaries' R^2 is about 0.91 / 0.455.
* **delta planted / half**: W_l = (-1)^l a A + E with equal variances, a set so that the
  delta correlation is 0.2 / 0.1 below the independence value -0.5 (lamina's size: the paper
  gives the correlation, -0.50, and no excess).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from lamina.anatomy.measurements import AnatomyTables, MeasureOptions, measure_anatomy
from lamina.anatomy.model_tables import stack_tables
from lamina.anatomy.predictability import RIDGE_ALPHA, matrix_structure

__all__ = ["DELTA_A2", "R2_SIGMA", "ROLES", "weight_rows", "weight_stacks"]

ROLES = ("q", "k", "v", "attn_out", "mlp_gate", "mlp_up", "mlp_out")
SHAPE, N_LAYERS = (16, 24), 30
R2_SIGMA = {"planted": 0.089, "half": 0.296}  # LOO R^2 about 0.91 / 0.455
SUMMARY_SIGMA = {"planted": 0.03, "half": 0.12}  # summaries' LOO R^2 about 0.91 / 0.455
DELTA_A2 = {"planted": 1 / 3, "half": 0.125}  # corr - (-0.5) = -0.2 / -0.1
R2_CLAIMS = ("p3-anatomy-r2", "p3-anatomy-r2-gate")
SUMMARY_CLAIMS = ("p3-anatomy-r2-summary",)
DELTA_CLAIMS = ("p3-anatomy-delta-structure",)
OPTIONS = MeasureOptions(n_bootstrap=1_000, n_permutations=500)


def _null(rng: np.random.Generator) -> np.ndarray:
    """(L, m, n): independent layers, log-normal scales, t(5) entries of unit variance."""
    scale = np.exp(0.5 * rng.standard_normal(N_LAYERS))[:, None, None]
    return scale * rng.standard_t(5, (N_LAYERS, *SHAPE)) / np.sqrt(5 / 3)


def weight_stacks(kind: str, source: str, seed: int) -> dict[str, np.ndarray]:
    """Type -> (L, m, n) matrices over depth of one source (``kind`` "r2", "summary" or
    "delta"; module docstring)."""
    rng = np.random.default_rng(
        [
            seed,
            ("null", "planted", "half").index(source),
            43,
            ("r2", "summary", "delta").index(kind),
        ]
    )
    out = {}
    z = np.arange(N_LAYERS) / (N_LAYERS - 1)
    f = np.stack([z - 0.5, (z - 0.5) ** 2 - 1 / 12])  # (2, L)
    sign = (-1.0) ** np.arange(N_LAYERS)
    for role in ROLES:
        if source == "null":
            out[role] = _null(rng)
        elif kind == "summary":
            u = np.linalg.qr(rng.standard_normal((SHAPE[0], SHAPE[0])))[0]
            v = np.linalg.qr(rng.standard_normal((SHAPE[1], SHAPE[0])))[0]
            i = np.arange(SHAPE[0])
            out[role] = np.stack(
                [u @ np.diag(np.exp(zl / 2 - (0.1 + 0.3 * zl) * i)) @ v.T for zl in z]
            )
            out[role] += SUMMARY_SIGMA[source] * rng.standard_normal((N_LAYERS, *SHAPE))
        elif kind == "r2":
            b = rng.standard_normal((2, *SHAPE))
            out[role] = np.einsum("kl,kmn->lmn", f, b) + R2_SIGMA[source] * rng.standard_normal(
                (N_LAYERS, *SHAPE)
            )
        else:
            a = np.sqrt(DELTA_A2[source]) * rng.standard_normal(SHAPE)
            out[role] = sign[:, None, None] * a + rng.standard_normal((N_LAYERS, *SHAPE))
    return out


def weight_rows(
    source: str, seed: int, run_rows: Callable[..., list[dict[str, object]]]
) -> list[dict[str, object]]:
    """The R^2 and delta-structure calibration rows of one source and seed (``run_rows``:
    :func:`lamina.anatomy.calibration.run_rows`)."""
    out: list[dict[str, object]] = []
    for kind, ids in (("r2", R2_CLAIMS), ("summary", SUMMARY_CLAIMS), ("delta", DELTA_CLAIMS)):
        mats = weight_stacks(kind, source, seed)
        flat = {r: m.reshape(N_LAYERS, -1) for r, m in mats.items()}
        w = stack_tables(
            flat,
            matrix_structure({r: list(m) for r, m in mats.items()}),
            RIDGE_ALPHA,
            2,
            OPTIONS.n_permutations,
            seed,
        )
        t = AnatomyTables(
            _empty_sweep(), np.zeros(0, int), N_LAYERS, w["terms"], w["r2_null"], w["delta"]
        )
        measured, _ = measure_anatomy(t, OPTIONS)
        out += run_rows(source, seed, measured, ids)
    return out


def _empty_sweep() -> Any:
    import pandas as pd

    return pd.DataFrame(
        columns=["layer", "surgery", "delta_pct", "nll_per_seq", "base_nll_per_seq"]
    )
