"""Weight-update signature (paper 2): the read/write map (:mod:`~lamina.weights.maps`), the
probe subspaces (:mod:`~lamina.weights.subspaces`), the relative subspace fraction and its
nulls (:mod:`~lamina.weights.subspace_fraction`), gradient factors
(:mod:`~lamina.weights.gradients`) and causal edits (:mod:`~lamina.weights.edits`).

The public names of the maps, subspaces and subspace fraction are re-exported here as
``lamina.weights.X``: each module's ``__all__`` is the one list of them.
"""

from lamina.weights import maps, subspace_fraction, subspaces
from lamina.weights.maps import *  # noqa: F403
from lamina.weights.subspace_fraction import *  # noqa: F403
from lamina.weights.subspaces import *  # noqa: F403

__all__: list[str] = []
__all__ += maps.__all__
__all__ += subspace_fraction.__all__
__all__ += subspaces.__all__
