"""Paper 1's released models, one ``peer-<folder>`` name per model folder of the release.

The release (github Vishal-sys-code/latent-trajectories) stores, per model, last-token
trajectories under ``data/trajectories/<folder>/<id>.pt`` and, for some prompts, every token's
states under ``data/hidden_states/<folder>/<id>.pt``. The copy kept beside this project has
``gpt2`` only; a user who clones the full release also has ``qwen2.5`` and ``tinyllama``, and
each folder present becomes a model name ``peer-<folder>`` (``peer-gpt2``, ``peer-qwen2.5``,
``peer-tinyllama``).

Conventions per folder (:data:`PEER_CONVENTIONS`): every released ``trajectory`` is Hugging
Face's ``hidden_states[1:]``, so its last row is **after** the model's final norm (GPT-2's
``ln_f``, the Llama/Qwen2 RMSNorm ``model.norm``), and ``embedding_state`` is layer 0 (token plus
learned position embedding for GPT-2; the bare token embedding for the rotary models). The files'
own ``num_layers`` / ``hidden_dim`` fields are checked against the tensors. Files are read with
:func:`lamina.states.peer_states.safe_torch_load` (``weights_only``, numpy reconstruction allowlisted only).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PEER_CONVENTIONS",
    "PeerConvention",
    "default_peer_root",
    "is_peer",
    "peer_convention",
    "peer_folder",
    "peer_models",
]

PREFIX = "peer-"


def default_peer_root() -> Path:
    """``<repo>/../shared/peer/latent-trajectories`` (the release beside the checkout)."""
    return Path(__file__).resolve().parents[3].parent / "shared" / "peer" / "latent-trajectories"


@dataclass(frozen=True)
class PeerConvention:
    """How one released model's states were taken.

    hf_model: the Hugging Face model the release names (for reruns on a hub machine);
    architecture: its ``model_type``; final_norm: what the last released row has passed;
    layer0: what ``embedding_state`` holds.
    """

    hf_model: str
    architecture: str
    final_norm: str
    layer0: str
    final_row_post_norm: bool = True


PEER_CONVENTIONS: dict[str, PeerConvention] = {
    "gpt2": PeerConvention("gpt2", "gpt2", "LayerNorm ln_f", "token + learned position embedding"),
    "qwen2.5": PeerConvention(
        "Qwen/Qwen2.5-0.5B", "qwen2", "RMSNorm model.norm", "token embedding (rotary positions)"
    ),
    "tinyllama": PeerConvention(
        "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        "llama",
        "RMSNorm model.norm",
        "token embedding (rotary positions)",
    ),
}


def is_peer(name: str) -> bool:
    """Whether ``name`` is a ``peer-<folder>`` model name."""
    return isinstance(name, str) and name.startswith(PREFIX) and len(name) > len(PREFIX)


def peer_folder(name: str) -> str:
    """``"peer-qwen2.5"`` -> ``"qwen2.5"``."""
    if not is_peer(name):
        raise ValueError(f"{name!r} is not a peer model name (peer-<folder>)")
    return name[len(PREFIX) :]


def peer_models(root: str | os.PathLike) -> list[str]:
    """``peer-<folder>`` for every model folder under ``<root>/data/trajectories`` that holds at
    least one ``.pt`` file, sorted (GPT-2 first when present)."""
    base = Path(root) / "data" / "trajectories"
    if not base.is_dir():
        return []
    folders = [p.name for p in base.iterdir() if p.is_dir() and any(p.glob("*.pt"))]
    return [PREFIX + f for f in sorted(folders, key=lambda f: (f != "gpt2", f))]


def peer_convention(folder: str) -> PeerConvention:
    """The convention of a released folder; an unknown folder gets the release code's generic
    one (``hidden_states[1:]``: final row post-norm), with ``hf_model`` set to the folder."""
    return PEER_CONVENTIONS.get(
        folder, PeerConvention(folder, "unknown", "the model's final norm", "embedding output")
    )
