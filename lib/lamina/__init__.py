"""lamina: the geometry of transformer layers, as an executable paper.

Import cost is kept low: heavy submodules (geometry, weights, anatomy, organisms) are
imported on first use, e.g. ``import lamina.geometry``.
"""

from lamina.extract import Trajectories, extract
from lamina.models import ArchAdapter, ModelNotFoundError, get_adapter, load_model

__version__ = "0.1.0"

__all__ = [
    "ArchAdapter",
    "ModelNotFoundError",
    "Trajectories",
    "__version__",
    "extract",
    "get_adapter",
    "load_model",
]
