"""The mechanism of paper 2: gradients as sums of per-token outer products.

For a linear map y = W x, the gradient of a loss over tokens t is

    ∇W = Σ_t g_t,   g_t = δ_t a_tᵀ,

with a_t (d_in,) the map's input and δ_t = ∂loss/∂y_t (d_out,) the gradient with respect to
its output at token t. :func:`gradient_factors` captures a_t and δ_t with hooks in one
backward pass; :func:`gradient_geometry` measures where the per-token terms and their sum lie
without ever forming a per-token outer product, using ‖δ aᵀ‖_F = ‖δ‖ ‖a‖ and
‖δ aᵀ B‖_F = ‖δ‖ ‖Bᵀ a‖ (input side), ‖Bᵀ δ aᵀ‖_F = ‖Bᵀ δ‖ ‖a‖ (output side).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

import numpy as np
import torch
from torch import nn

from lamina.core.types import Acts, Basis, Deltas, Matrix
from lamina.states import hooks
from lamina.states.hooks import map_point
from lamina.weights.maps import LinearMap
from lamina.weights.subspace_fraction import Side, relative_subspace_fraction
from lamina.weights.subspaces import token_batches

__all__ = [
    "GradientFactors",
    "LossFn",
    "SignNull",
    "GradientGeometry",
    "adam_update_direction",
    "gradient_factors",
    "gradient_geometry",
    "gradient_geometry_reference",
    "loss_factors",
    "sign_null_cancellation",
]

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

LossFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class SignNull(TypedDict):
    """What :func:`sign_null_cancellation` returns: the (n,) float64 draws of c_s and their
    median and 97.5% quantile (dimensionless; NaN without live terms)."""

    draws: np.ndarray
    median: float
    q975: float


@dataclass
class GradientFactors:
    """Per-token factors of one map's gradient over the non-padding tokens.

    acts: (T, d_in) float32, the map's inputs a_t; deltas: (T, d_out) float32, δ_t = ∂loss/∂y_t.
    The summed gradient deltasᵀ @ acts is ∂loss/∂W in the (d_out, d_in) convention.
    """

    acts: Acts
    deltas: Deltas

    def summed(self) -> Matrix:
        """Σ_t δ_t a_tᵀ -> (d_out, d_in)."""
        return self.deltas.T @ self.acts


def gradient_factors(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    maps: Sequence[LinearMap],
    loss: LossFn,
    *,
    max_length: int | None = 256,
) -> dict[str, GradientFactors]:
    """Capture a_t and δ_t for every map in ``maps`` with hooks, in one forward and one
    backward pass over all of ``texts`` (one padded batch).

    loss: a callable ``(logits (B, T, V), input_ids (B, T), attention_mask (B, T)) -> scalar``,
    e.g. :func:`lamina.sources.organisms.objectives.lm_loss` (next-token cross-entropy, nats).
    -> {map key: GradientFactors} over the non-padding tokens (T = their count). Parameter
    ``.grad`` fields are left untouched (gradients are taken with ``torch.autograd.grad``).
    """
    if not callable(loss):
        raise TypeError(
            f"loss must be a callable (logits, input_ids, attention_mask) -> scalar, got {loss!r}"
        )
    loss_fn: LossFn = loss
    ids, mask = next(token_batches(model, tokenizer, texts, len(texts), max_length))

    def run() -> torch.Tensor:
        return loss_fn(model(input_ids=ids, attention_mask=mask).logits, ids, mask)

    return loss_factors(model, maps, run, keep=mask)


def loss_factors(
    model: nn.Module,
    maps: Sequence[LinearMap],
    run: Callable[[], torch.Tensor],
    *,
    keep: torch.Tensor | None = None,
) -> dict[str, GradientFactors]:
    """a_t and δ_t of every map in ``maps`` for the scalar loss that ``run()`` computes.

    ``run`` calls ``model`` any number of times (e.g. :func:`lamina.sources.organisms.stages.stage_loss`:
    an SFT batch plus an LM replay batch, or DPO's chosen and rejected rows) and returns the
    loss (scalar, nats); other models it calls (a DPO reference) are not hooked. The rows of
    every call are stacked in call order: T = Σ_calls B·T_call positions, padding included
    (a padded position's δ_t is 0, so its term g_t = 0, which :func:`gradient_geometry`
    ignores). keep: (B, T) mask of the rows to keep, for a single call only.
    -> {map key: GradientFactors}. The input embedding's output is made part of the graph,
    so frozen parameters still give δ_t.
    """
    if any(m.role == "embed" for m in maps):
        raise ValueError(
            "the embedding reads one-hot token ids; its gradient factors are not supported"
        )
    by_module: dict[str, list[LinearMap]] = {}
    for m in maps:
        by_module.setdefault(m.module, []).append(m)
    inputs: dict[str, list[torch.Tensor]] = {p: [] for p in by_module}
    outputs: dict[str, list[torch.Tensor]] = {p: [] for p in by_module}

    def into_graph(embedded: torch.Tensor) -> torch.Tensor:
        return embedded.detach().requires_grad_(True)  # makes every output part of the graph

    def keep_input(path: str) -> Callable[[torch.Tensor], None]:
        return lambda a: inputs[path].append(a.detach())

    attach: list[tuple[str, Callable]] = []
    for path, ms in by_module.items():  # the maps of one module (GPT-2's c_attn) share its hooks
        attach.append((map_point(ms[0].layer, ms[0].role, "in"), keep_input(path)))
        attach.append((map_point(ms[0].layer, ms[0].role, "out"), outputs[path].append))
    attach.append(("embed", into_graph))
    with hooks.attached(model, attach), torch.enable_grad():
        value = run()
        paths = list(by_module)
        flat = [o for p in paths for o in outputs[p]]
        grads = list(torch.autograd.grad(value, flat, allow_unused=True))
    if keep is not None and any(len(outputs[p]) != 1 for p in paths):
        raise ValueError("keep= needs run() to call the model exactly once")
    out: dict[str, GradientFactors] = {}
    for path in paths:
        a_parts, g_parts = [], []
        for a, o in zip(inputs[path], outputs[path], strict=True):
            g = grads.pop(0)
            g = torch.zeros_like(o) if g is None else g.detach()
            rows = keep.bool() if keep is not None else torch.ones(a.shape[:-1], dtype=torch.bool)
            a_parts.append(a[rows].float())
            g_parts.append(g[rows].float())
        a_all, g_all = torch.cat(a_parts), torch.cat(g_parts)
        for m in by_module[path]:
            out[m.key] = GradientFactors(a_all, m.as_bias(g_all.T).T.contiguous())
    return out


@dataclass(frozen=True)
class GradientGeometry:
    """Where a gradient Σ_t g_t and its per-token terms g_t = δ_t a_tᵀ lie relative to a basis.

    rsf_summed: RSF of G = Σ_t g_t.
    rsf_token_mean: mean over tokens (with g_t ≠ 0) of RSF(g_t).
    rsf_token_pooled: Σ_t ‖proj g_t‖²_F / Σ_t ‖g_t‖²_F (tokens weighted by their energy).
    cancellation: ‖Σ_t g_t‖_F / Σ_t ‖g_t‖_F, in [0, 1]; 1 = all terms aligned.
    n_tokens: tokens with g_t ≠ 0; norm_summed: ‖G‖_F; norm_terms: Σ_t ‖g_t‖_F.
    cancellation_random: the same ratio for sign-randomised terms Σ_t ε_t g_t (ε_t = ±1),
        in root-mean-square: sqrt(Σ_t ‖g_t‖²_F) / Σ_t ‖g_t‖_F, since E‖Σ_t ε_t g_t‖²_F =
        Σ_t ‖g_t‖²_F. About 1/√T for terms of similar size: unrelated terms cancel this much.
    """

    rsf_summed: float
    rsf_token_mean: float
    rsf_token_pooled: float
    cancellation: float
    n_tokens: int
    norm_summed: float
    norm_terms: float
    cancellation_random: float = float("nan")


def gradient_geometry(
    deltas: Deltas, acts: Acts, basis: Basis, side: Side
) -> GradientGeometry:
    """Geometry of G = Σ_t δ_t a_tᵀ and of its terms, in O(T·d·k), no per-token outer product.

    deltas: (T, d_out), acts: (T, d_in); basis: (d_in, k) for side="input", (d_out, k) for
    side="output", orthonormal columns. Per-token RSF (see
    :func:`lamina.weights.relative_subspace_fraction`) factorises:
    input side ‖Bᵀ a_t‖² / ‖a_t‖², output side ‖Bᵀ δ_t‖² / ‖δ_t‖²; ‖g_t‖_F = ‖δ_t‖ ‖a_t‖.
    G itself (d_out, d_in) is formed once as deltasᵀ @ acts. Computed in float64.
    """
    if deltas.shape[0] != acts.shape[0]:
        raise ValueError(
            f"deltas {tuple(deltas.shape)} and acts {tuple(acts.shape)} must have the same T"
        )
    deltas, acts = deltas.to(torch.float64), acts.to(torch.float64)
    basis = basis.to(deltas.device, torch.float64)
    norm_d2 = (deltas * deltas).sum(1)  # (T,)
    norm_a2 = (acts * acts).sum(1)
    factor = acts if side == "input" else deltas
    proj2 = ((factor @ basis) ** 2).sum(1)  # ‖Bᵀ a_t‖² or ‖Bᵀ δ_t‖²
    own2 = norm_a2 if side == "input" else norm_d2
    other2 = norm_d2 if side == "input" else norm_a2
    term2 = norm_d2 * norm_a2  # ‖g_t‖²_F
    live = term2 > 0
    rsf_t = proj2[live] / own2[live]
    pooled = float((proj2 * other2).sum() / term2.sum()) if bool(live.any()) else float("nan")
    summed = deltas.T @ acts
    norm_summed = float(torch.linalg.matrix_norm(summed))
    norm_terms = float(term2.sqrt().sum())
    return GradientGeometry(
        rsf_summed=relative_subspace_fraction(summed, basis, side),
        rsf_token_mean=float(rsf_t.mean()) if len(rsf_t) else float("nan"),
        rsf_token_pooled=pooled,
        cancellation=norm_summed / norm_terms if norm_terms > 0 else float("nan"),
        n_tokens=int(live.sum()),
        norm_summed=norm_summed,
        norm_terms=norm_terms,
        cancellation_random=(
            float(term2.sum().sqrt()) / norm_terms if norm_terms > 0 else float("nan")
        ),
    )


def sign_null_cancellation(
    deltas: Deltas, acts: Acts, *, n: int = 200, seed: int = 0
) -> SignNull:
    """Null distribution of the cancellation of unrelated terms: the same per-token terms
    g_t = δ_t a_tᵀ with independent random signs s_t = ±1,

        c_s = ‖Σ_t s_t g_t‖_F / Σ_t ‖g_t‖_F,

    whose square's expectation is Σ_t ‖g_t‖² / (Σ_t ‖g_t‖)² (about 1/T for equal norms).
    ‖Σ_t s_t g_t‖²_F = sᵀ M s with M = (D Dᵀ) ∘ (A Aᵀ) (T, T), so no outer product is formed.
    deltas: (T, d_out), acts: (T, d_in) (zero terms are dropped). Observed terms that share a
    direction give c far above this null; cancellation as strong as between unrelated terms
    gives c inside it. -> {"draws": (n,) float64, "median", "q975"}; NaNs without live terms.
    """
    d, a = deltas.to(torch.float64), acts.to(torch.float64)
    norms = d.norm(dim=1) * a.norm(dim=1)  # (T,) ‖g_t‖_F
    live = norms > 0
    if not bool(live.any()):
        nan = float("nan")
        return {"draws": np.full(n, nan), "median": nan, "q975": nan}
    d, a, norms = d[live], a[live], norms[live]
    gram = (d @ d.T) * (a @ a.T)  # (T, T)
    gen = torch.Generator().manual_seed(seed)
    draws = []
    for i in range(0, n, 50):
        s = torch.randint(0, 2, (min(50, n - i), len(norms)), generator=gen).to(torch.float64)
        s = 2 * s - 1  # (b, T) signs
        draws.append(((s @ gram) * s).sum(1).clamp_min(0).sqrt() / norms.sum())
    v = torch.cat(draws).numpy()
    return {"draws": v, "median": float(np.median(v)), "q975": float(np.quantile(v, 0.975))}


def gradient_geometry_reference(
    deltas: Deltas, acts: Acts, basis: Basis, side: Side, *, chunk: int = 64
) -> GradientGeometry:
    """The same quantities as :func:`gradient_geometry`, computed naively by materialising
    every per-token outer product g_t = δ_t a_tᵀ (``chunk`` at a time, float64).
    O(T·d_out·d_in·k): a reference for tests and the benchmark, not for analysis."""
    deltas, acts = deltas.to(torch.float64), acts.to(torch.float64)
    basis = basis.to(deltas.device, torch.float64)
    summed = torch.zeros(deltas.shape[1], acts.shape[1], dtype=torch.float64, device=deltas.device)
    rsfs, proj_sum, energy, norm_terms = [], 0.0, 0.0, 0.0
    for i in range(0, deltas.shape[0], chunk):
        g = deltas[i : i + chunk, :, None] * acts[i : i + chunk, None, :]  # (c, d_out, d_in)
        summed += g.sum(0)
        proj = g @ basis if side == "input" else basis.T @ g
        p2 = (proj * proj).sum((1, 2))
        n2 = (g * g).sum((1, 2))
        live = n2 > 0
        rsfs.append((p2[live] / n2[live]).cpu().numpy())
        proj_sum += float(p2.sum())
        energy += float(n2.sum())
        norm_terms += float(n2.sqrt().sum())
    rsf_t = np.concatenate(rsfs)
    norm_summed = float(torch.linalg.matrix_norm(summed))
    return GradientGeometry(
        rsf_summed=relative_subspace_fraction(summed, basis, side),
        rsf_token_mean=float(rsf_t.mean()) if len(rsf_t) else float("nan"),
        rsf_token_pooled=proj_sum / energy if energy > 0 else float("nan"),
        cancellation=norm_summed / norm_terms if norm_terms > 0 else float("nan"),
        n_tokens=len(rsf_t),
        norm_summed=norm_summed,
        norm_terms=norm_terms,
        cancellation_random=np.sqrt(energy) / norm_terms if norm_terms > 0 else float("nan"),
    )


def adam_update_direction(
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    step: int,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
) -> torch.Tensor:
    """The direction of the update a saved Adam state applies next (weight decay excluded).

    u = m̂ / (√v̂ + ε),  m̂ = m / (1 - β1^step),  v̂ = v / (1 - β2^step);
    the parameter moves by -lr · u (torch.optim.Adam/AdamW convention, ``step`` = the
    optimiser's step count after the update being reproduced).
    exp_avg, exp_avg_sq: parameter-shaped moments (use :meth:`LinearMap.as_matrix` to get a
    map's (d_out, d_in) block) -> same shape, float32.
    """
    if step < 1:
        raise ValueError(f"step must be >= 1 (Adam's bias correction), got {step}")
    beta1, beta2 = betas
    m_hat = exp_avg.float() / (1 - beta1**step)
    v_hat = exp_avg_sq.float() / (1 - beta2**step)
    return m_hat / (v_hat.sqrt() + eps)
