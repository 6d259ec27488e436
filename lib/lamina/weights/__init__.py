"""Weight-update signature (paper 2).

Methods: the read/write map (:mod:`~lamina.weights.maps`), the probe subspaces
(:mod:`~lamina.weights.subspaces`), the relative subspace fraction and its nulls
(:mod:`~lamina.weights.subspace_fraction`), gradient factors (:mod:`~lamina.weights.gradients`),
causal edits (:mod:`~lamina.weights.edits`).

The experiment: its settings (:mod:`~lamina.weights.settings`), the units it measures
(:mod:`~lamina.weights.units`: an organism's checkpoints, a real pair; :mod:`~lamina.weights.
single`: one real checkpoint with its aligned build; :mod:`~lamina.weights.texts`), the applied
objectives at one budget (:mod:`~lamina.weights.objective_runs`), ΔW probed
(:mod:`~lamina.weights.probes`), gradients and Adam (:mod:`~lamina.weights.mechanism`), the write
edit and its null (:mod:`~lamina.weights.edit_effects`, :mod:`~lamina.weights.edit_null`),
single-group adaptation (:mod:`~lamina.weights.adaptation`), the aligned builds
(:mod:`~lamina.weights.aligned`).

The claims: declared as data (:mod:`~lamina.weights.claims`), measured
(:mod:`~lamina.weights.measure` and ``measures_*``, :mod:`~lamina.weights.summaries`), judged by
the one engine (:mod:`~lamina.weights.judging`), calibrated on known-answer sources
(:mod:`~lamina.weights.calibration`, ``sources*``); figure tables (:mod:`~lamina.weights.tables`).

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
