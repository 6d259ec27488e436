"""Known-answer inputs of paper 2's tests: tables whose answer is known by construction."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from lamina.weights import (
    LinearMap,
    principal_basis,
    random_orthonormal,
    relative_subspace_fraction,
)
from lamina.weights.gradients import adam_update_direction
from lamina.weights.probes import signature_from_deltas


def adam_table(seed: int, steps: int, n: int = 16, d: int = 128, d_out: int = 32, k: int = 8,
               tokens: int = 64, noise_in_subspace: bool = False) -> pd.DataFrame:
    """Adam states (the ``adam`` table's columns) of ``n`` read matrices after ``steps`` AdamW
    steps (betas 0.9, 0.95) on per-step gradients δ aᵀ over ``tokens`` tokens, a ~ N(0, Σ) with
    a decaying spectrum in a random basis, δ fresh zero-mean noise ("unrelated gradients").
    ``noise_in_subspace``: instead, Σ's top-k directions are coordinate axes whose inputs are
    pure noise (zero-mean δ) while a consistent gradient is spread over the other coordinates:
    Adam's v̂ is large exactly in the concentrated directions, so its update is attenuated
    beyond elementwise normalisation (the planted answer)."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for i in range(n):
        if noise_in_subspace:
            lam = torch.cat([torch.full((k,), 30.0), torch.ones(d - k)]).double()
            L = torch.diag(lam.sqrt())
        else:
            Q = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))[0]
            L = Q @ torch.diag(torch.linspace(10, 0.1, d, dtype=torch.float64).sqrt())
        basis = principal_basis(L @ L.T, k)
        mean = torch.randn(d_out, d, generator=g, dtype=torch.float64)
        mean[:, :k] = 0
        m = torch.zeros(d_out, d, dtype=torch.float64)
        v = torch.zeros_like(m)
        for _ in range(steps):
            a = L @ torch.randn(d, tokens, generator=g, dtype=torch.float64)
            grad = torch.randn(d_out, tokens, generator=g, dtype=torch.float64) @ a.T
            if noise_in_subspace:
                grad = grad / tokens**0.5 + 3 * mean
            m, v = 0.9 * m + 0.1 * grad, 0.95 * v + 0.05 * grad * grad
        u = adam_update_direction(m, v, steps, (0.9, 0.95))

        def enr(x: torch.Tensor, basis: torch.Tensor = basis) -> float:
            return relative_subspace_fraction(x, basis, "input") / (k / d)

        rows.append({"state": "sft", "checkpoint": "x", "step": steps, "key": f"layers.{i}.q",
                     "layer": i, "role": "q", "kind": "read", "k": k, "d": d,
                     "enrichment_momentum": enr(m), "enrichment_update": enr(u),
                     "enrichment_sign": enr(torch.sign(m))})  # fmt: skip
    return pd.DataFrame(rows)


def adaptation_table(seed: int, ratio: float, n: int = 64, noise: float = 0.8,
                     groups: tuple[str, ...] = ("qk", "vo", "mlp_in", "mlp_out")) -> pd.DataFrame:
    """The ``adaptation`` table of ``n`` held-out items: full fine-tuning lowers each item's loss
    by about 0.3 nats; each group by ``ratio`` times that, plus item noise."""
    rng = np.random.default_rng(seed)
    full = rng.normal(0.3, 0.2, n)
    rows = []
    for grp in (*groups, "all"):
        red = full if grp == "all" else ratio * full + rng.normal(0, noise * 0.3 * ratio, n)
        rows += [{"group": grp, "item": i, "loss_before": 2.0, "loss_after": 2.0 - red[i],
                  "acc_before": 0.1, "acc_after": 0.3, "n_params": 1000} for i in range(n)]  # fmt: skip
    return pd.DataFrame(rows)


def signature_deltas(seed: int, family: str = "stage", names: tuple[str, ...] = ("lm", "sft", "dpo"),
                     n_layers: int = 8, d: int = 64, k: int = 8) -> pd.DataFrame:
    """A deltas table of pairs final→<name> (``family``): Q/K updates inside the top-k input
    subspace (enriched beyond W, which is isotropic), writes isotropic: the signature, planted."""
    gen = torch.Generator().manual_seed(seed)
    basis = random_orthonormal(d, d, gen)
    moment = basis @ torch.diag(torch.linspace(10, 0.1, d, dtype=torch.float64)) @ basis.T
    pred = random_orthonormal(d, d, gen)
    frames = []
    for name in names:
        maps, deltas, moments, weights = [], {}, {}, {}
        for layer in range(n_layers):
            for role, kind in (("q", "read"), ("k", "read"), ("attn_out", "write"), ("mlp_out", "write")):
                m = LinearMap(layer, role, kind, f"layers.{layer}.{role}")  # type: ignore[arg-type]
                maps.append(m)
                shape = (32, d) if kind == "read" else (d, 32)
                if kind == "read":
                    deltas[m.key] = torch.randn(32, k, generator=gen, dtype=torch.float64) @ basis[:, :k].T
                    moments[m.key] = moment
                else:
                    deltas[m.key] = torch.randn(*shape, generator=gen, dtype=torch.float64)
                weights[m.key] = torch.randn(*shape, generator=gen, dtype=torch.float64)
        tab = signature_from_deltas(deltas, maps, moments, pred[:, :k], [k], weights=weights, cache={})
        pair = f"final→obj-{name}" if family == "objective" else f"final→{name}"
        frames.append(tab.assign(moment="raw", family=family, pair=pair, phase=family))
    return pd.concat(frames, ignore_index=True)
