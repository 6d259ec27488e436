"""The write edit's null: what adding an unembedding row does by construction.

A rank-1 edit that writes along W_U[t] raises token t's logit in *any* network with a residual
stream and that unembedding, trained or not: the write reaches the final norm and W_U through
the residual path. (On a randomly initialised, never-trained 4-layer Llama the edit gives
Δlog p(t) = 0.51 nats, far above random directions of the same norm; the claim "still changes
predictions after alignment" cannot fail against random directions.)

The null keeps that construction and removes what training put in the blocks:
:func:`scrambled_copy` permutes, independently in every block, the rows and the columns of each
block matrix and the entries of each block vector (norm gains, biases), and leaves the
embedding, the final norm and the unembedding as they are. Each matrix keeps its singular
values and norm (so a relative edit has the same size), the residual path and the unembedding
are the model's own, and whatever the trained blocks do with a write along W_U[t] is gone.
A randomly initialised model is exchangeable with its scrambled copies (its block entries are
i.i.d.), so its edit beats them with probability alpha: the test's false-positive rate is
exact there.

:func:`beyond_scrambled` compares the model's mean effect over the target tokens with the
copies' (one value per copy, the copy being the unit): a one-sided prediction-interval t test,
t = (x - mean(null)) / (sd(null) sqrt(1 + 1/n)) with n - 1 degrees of freedom, which reaches
small p with a few copies (each costs a copy of the blocks and one forward pass per token).
Its CI is the same prediction interval, so that the CI and the p share their unit (the copy)
and their sidedness: the lower end is above 0 exactly when p < 0.05.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from scipy import stats as sps
from torch import nn

from lamina.sources.models import get_adapter

__all__ = ["beyond_scrambled", "scrambled_copy"]


def scrambled_copy(model: nn.Module, seed: int) -> nn.Module:
    """A copy of ``model`` whose blocks are scrambled (module docstring): in every block
    (``get_adapter(model).block_list``), each 2-D parameter has its rows and its columns
    permuted (independent permutations per parameter) and each 1-D parameter its entries; the
    embedding, final norm and unembedding are shared values (copied unchanged). Seeded by
    ``seed``; ``model`` is not modified."""
    out = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(int(seed))
    blocks = get_adapter(out).block_list(out)
    with torch.no_grad():
        for p in blocks.parameters():
            if p.dim() == 2:
                rows = torch.randperm(p.shape[0], generator=gen)
                cols = torch.randperm(p.shape[1], generator=gen)
                p.copy_(p[rows][:, cols])
            elif p.dim() == 1:
                p.copy_(p[torch.randperm(p.shape[0], generator=gen)])
    return out.eval()


def beyond_scrambled(observed: np.ndarray, null: np.ndarray) -> dict[str, object]:
    """The edit's effect beyond construction: observed (T,) Δlog p(t) of the unembedding edit
    per target token on the model (nats); null (n,) the mean over the same tokens on each
    scrambled copy. -> Measurement fields: estimate = mean(observed) - mean(null) (nats);
    p and p_opposite of the one-sided prediction-interval t test (module docstring); its CI,
    estimate ± t(0.95, n - 1) sd(null) sqrt(1 + 1/n) (nats: two-sided 90%, so each end is
    the one-sided 95% bound of the test: ci_low > 0 exactly when p < 0.05, ci_high < 0
    exactly when p_opposite < 0.05); effect_size = mean(observed) / mean(null). The tokens
    are the same on the model and on every copy, so the copies' spread is the test's noise
    (a bootstrap over tokens would hold the copies fixed). Untestable with fewer than 2
    tokens or 3 copies."""
    observed = np.asarray(observed, dtype=np.float64)
    null = np.asarray(null, dtype=np.float64)
    if len(observed) < 2 or len(null) < 3:
        return {"untestable": f"{len(observed)} target tokens and {len(null)} scrambled "
                "copies: the test needs at least 2 and 3"}  # fmt: skip
    mu, sd, n = float(null.mean()), float(null.std(ddof=1)), len(null)
    obs = float(observed.mean())
    scale = sd * np.sqrt(1 + 1 / n)
    t = (obs - mu) / scale if scale > 0 else (np.inf if obs > mu else -np.inf)
    half = float(sps.t.ppf(0.95, n - 1)) * scale  # (nats) the test's one-sided 95% margin
    return {
        "estimate": obs - mu, "ci_low": obs - mu - half, "ci_high": obs - mu + half,
        "sided": "greater", "p": float(sps.t.sf(t, n - 1)), "p_opposite": float(sps.t.cdf(t, n - 1)),
        "n_units": n, "effect_size": obs / mu if mu > 0 else float("nan"),
        "effect_name": "edit effect / scrambled copies' effect",
        "detail": f"Δlog p {obs:.3g} nats on the model, {mu:.3g} ± {sd:.2g} on {n} copies "
                  "with scrambled blocks (CI: the copies' prediction interval)",
    }  # fmt: skip
