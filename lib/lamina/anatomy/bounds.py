"""The ranges of the layer-anatomy and Growth Training parameters (:mod:`lamina.core.bounds`),
declared once: the chapters' configs (:class:`lamina.chapters.layer_anatomy.config.AnatomyConfig`,
:class:`lamina.chapters.growth_training.config.GrowthConfig`) check them in ``__post_init__``,
in the notebook and before any kernel starts (:mod:`lamina.book.preflight`)."""

from __future__ import annotations

from lamina.core.bounds import COUNT, POSITIVE, SEED, Bound

__all__ = ["ANATOMY_BOUNDS", "GROWTH_BOUNDS"]

ANATOMY_BOUNDS: dict[str, Bound] = {
    **dict.fromkeys(("alpha", "noise_scale", "recovery_noise", "tolerance_pct", "ridge_alpha",
                     "preserve_pct", "catastrophic_pct"), Bound(0)),
    "seq_len": Bound(2, integer=True),
    "n_tokens": Bound(2, integer=True, optional=True),
    **dict.fromkeys(("robustness_tokens", "recovery_budget", "recovery_batch",
                     "recovery_eval_every", "recovery_tokens", "k_max", "threads"),
                    Bound(1, integer=True, optional=True)),
    "recovery_lr": POSITIVE,
    "ridge_degree": COUNT,
    "n_bootstrap": COUNT,
    "n_permutations": COUNT,
    "seed": SEED,
    "layers": Bound(0, integer=True, each=True, optional=True),
}  # fmt: skip
"""Each numeric field's type and range (:func:`lamina.core.bounds.check_bounds`), checked
first in ``AnatomyConfig.__post_init__`` (the layer-list-or-count fields are checked there by hand)."""

GROWTH_BOUNDS: dict[str, Bound] = {
    **dict.fromkeys(("n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "total_steps",
                     "n_groups", "importance_steps", "importance_tokens", "batch_size",
                     "eval_every", "val_tokens"), COUNT),
    "context": Bound(2, integer=True),
    "lr": POSITIVE,
    "val_shuffle_seed": SEED,
    "seeds": Bound(SEED.low, SEED.high, integer=True, each=True),
    "threads": Bound(1, integer=True, optional=True),
}  # fmt: skip
"""Each numeric field's type and range (:func:`lamina.core.bounds.check_bounds`), checked
first in ``GrowthConfig.__post_init__`` (a single seed counts as a list of one)."""
