"""Weight-update signature (paper 2): the read/write map (:mod:`~lamina.weights.maps`), the
probe subspaces (:mod:`~lamina.weights.subspaces`), the relative subspace fraction and its
nulls (:mod:`~lamina.weights.subspace_fraction`), gradient factors
(:mod:`~lamina.weights.gradients`) and causal edits (:mod:`~lamina.weights.edits`).

The maps, subspaces and probe are re-exported here as ``lamina.weights.X``.
"""

from lamina.weights.maps import (
    READ_ROLES,
    WRITE_ROLES,
    LinearMap,
    linear_maps,
    norm_gain,
    post_norm_gain,
    weight_deltas,
)
from lamina.weights.subspace_fraction import (
    Baseline,
    Side,
    enrichment,
    k_sweep,
    random_matrix_baseline,
    random_matrix_null,
    random_orthonormal,
    random_subspace_baseline,
    random_subspace_null,
    relative_subspace_fraction,
)
from lamina.weights.subspaces import (
    input_second_moments,
    prediction_basis,
    principal_basis,
    probe_bases,
    token_batches,
)

__all__ = [
    "READ_ROLES",
    "WRITE_ROLES",
    "Baseline",
    "LinearMap",
    "Side",
    "enrichment",
    "input_second_moments",
    "k_sweep",
    "linear_maps",
    "norm_gain",
    "post_norm_gain",
    "prediction_basis",
    "principal_basis",
    "probe_bases",
    "random_matrix_baseline",
    "random_matrix_null",
    "random_orthonormal",
    "random_subspace_baseline",
    "random_subspace_null",
    "relative_subspace_fraction",
    "token_batches",
    "weight_deltas",
]
