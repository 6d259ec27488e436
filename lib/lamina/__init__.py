"""lamina: the geometry of transformer layers, as an executable paper.

Import cost is kept low: the science sub-packages (geometry, weights, anatomy), the chapters
and the book are imported on first use, e.g. ``import lamina.trajectory``.
"""

from lamina.core.version import __version__
from lamina.sources.models import ArchAdapter, ModelNotFoundError, get_adapter, load_model
from lamina.states.extract import Trajectories, extract

__all__ = [
    "ArchAdapter",
    "ModelNotFoundError",
    "Trajectories",
    "__version__",
    "extract",
    "get_adapter",
    "load_model",
]
