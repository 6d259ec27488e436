"""Paper 3's Growth Training chapter: importance-ordered phased training against uniform
training (:func:`run_growth`, configured by :class:`GrowthConfig`).

Modules: :mod:`.config` (the config and schedule names), :mod:`.importance` (skip-ablation
importance of the organism or of real pretrained models, mapped by relative depth),
:mod:`.claims` (budget comparisons and claim rows), :mod:`.run` (schedules and the
experiment), :mod:`.figures` (the importance-profile figure).

The public names of config, importance, claims and run are re-exported here: each module's
``__all__`` is the one list of them.
"""

from lamina.chapters.growth_training import claims, config, importance, run
from lamina.chapters.growth_training.claims import *  # noqa: F403
from lamina.chapters.growth_training.config import *  # noqa: F403
from lamina.chapters.growth_training.importance import *  # noqa: F403
from lamina.chapters.growth_training.run import *  # noqa: F403

__all__: list[str] = []
__all__ += config.__all__
__all__ += importance.__all__
__all__ += claims.__all__
__all__ += run.__all__
