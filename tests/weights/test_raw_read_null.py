"""The null of ``raw-read-grad-follows`` is a null: on the gradients source's null, the LM
summed read gradient's concentration is set by a shared direction alone, unrelated to the
activation share (lamina.weights.sources_mechanism.lm_null_delta). Before, the independent
part's own sum stayed in it (a tenth of its energy), so its RSF followed the share a little
(Spearman ρ ≈ 0.08 in truth), which 20 matrices rejected 9% of the time."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats as sps

from lamina.weights.sources_mechanism import D_OUT, lm_null_delta
from lamina.weights.subspace_fraction import random_orthonormal
from lamina.weights.subspaces import principal_basis

D, T, K = 48, 256, 8


def _draw(gen: torch.Generator, decay: float) -> tuple[torch.Tensor, torch.Tensor, float, float]:
    """(summed gradient (D_OUT, D), frame (D, K), u's share, activation share) of one matrix
    of the LM null, inputs of spectrum i^-decay."""
    lam = torch.arange(1, D + 1, dtype=torch.float64) ** -decay
    basis = random_orthonormal(D, D, gen)
    sample = torch.randn(4 * T, D, generator=gen, dtype=torch.float64) * lam.sqrt() @ basis.T
    frame = principal_basis(sample.T @ sample, K)
    a = torch.randn(T, D, generator=gen, dtype=torch.float64) * lam.sqrt() @ basis.T
    delta = torch.randn(T, D_OUT, generator=gen, dtype=torch.float64)
    norm = float(torch.linalg.matrix_norm(delta.T @ a))
    new, share = lm_null_delta(gen, a, delta, frame, norm)
    act = float(((a @ frame) ** 2).sum() / (a**2).sum())
    return new.T @ a, frame, share, act


def _rsf(g: torch.Tensor, frame: torch.Tensor) -> float:
    return float(((g @ frame) ** 2).sum() / (g**2).sum())


def test_lm_null_sum_has_exactly_the_drawn_share() -> None:
    gen = torch.Generator().manual_seed(0)
    for decay in (0.4, 0.7, 1.0, 1.3):
        g, frame, share, _ = _draw(gen, decay)
        assert _rsf(g, frame) == pytest.approx(share, abs=1e-8)


def test_lm_null_rsf_is_unrelated_to_the_activation_share() -> None:
    """Over matrices of four input spectra (activation shares from about 0.1 to 0.7), the
    summed gradient's RSF minus the drawn share carries nothing of the activation share."""
    gen = torch.Generator().manual_seed(1)
    rows = [_draw(gen, decay) for decay in (0.4, 0.7, 1.0, 1.3) for _ in range(6)]
    act = np.array([r[3] for r in rows])
    excess = np.array([_rsf(r[0], r[1]) - r[2] for r in rows])
    assert act.max() - act.min() > 0.3
    assert np.abs(excess).max() < 1e-8


def test_lm_null_keeps_the_threat() -> None:
    """The terms still exist token by token and their sum is the shared direction's, 3 × the
    independent sum's norm: they do not cancel like unrelated terms."""
    gen = torch.Generator().manual_seed(2)
    lam = torch.arange(1, D + 1, dtype=torch.float64) ** -0.7
    a = torch.randn(T, D, generator=gen, dtype=torch.float64) * lam.sqrt()
    delta = torch.randn(T, D_OUT, generator=gen, dtype=torch.float64)
    norm = float(torch.linalg.matrix_norm(delta.T @ a))
    frame = principal_basis(a.T @ a, K)
    new, _ = lm_null_delta(gen, a, delta, frame, norm)
    assert float(torch.linalg.matrix_norm(new.T @ a)) == pytest.approx(3 * norm, rel=1e-8)
    terms = new.norm(dim=1) * a.norm(dim=1)
    assert float(terms.sum()) > 3 * norm


def test_the_row_reads_the_permutation_p() -> None:
    """raw-read-grad-follows' p is Spearman's permutation p (exact size), not scipy's t
    approximation (5.2% at 20 matrices)."""
    import pandas as pd

    from lamina.evidence.stats import spearman_permutation
    from lamina.weights.measures_mechanism import raw_read_follows
    from lamina.weights.settings import SignatureSettings

    rng = np.random.default_rng(3)
    t = pd.DataFrame({"objective": "lm", "activation_share": rng.random(20),
                      "rsf_summed": rng.random(20), "enrichment_summed": 1 + rng.random(20)})  # fmt: skip
    s = SignatureSettings(n_bootstrap=200)
    m = raw_read_follows(t, s)
    want = spearman_permutation(t["activation_share"], t["rsf_summed"], alternative="greater", seed=s.seed)
    assert m["p"] == pytest.approx(want[1])
    t_approx = sps.spearmanr(t["activation_share"], t["rsf_summed"], alternative="greater")[1]
    assert m["p"] != pytest.approx(float(t_approx), abs=1e-6)
