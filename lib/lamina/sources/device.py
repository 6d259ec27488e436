"""The device a model runs on: ``device="auto"`` and ``$LAMINA_DEVICE``, checked before any
file is read (:func:`resolve_device`)."""

from __future__ import annotations

import os

import torch

__all__ = ["check_device", "resolve_device"]


def check_device(device: str | torch.device, label: str | None = None) -> torch.device:
    """``device`` as a ``torch.device`` that exists on this machine; ValueError for a name that
    is not a device, RuntimeError for CUDA/MPS that is not available, each naming ``label``
    (default ``device=<value>``)."""
    label = label or f"device={str(device)!r}"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"{label} is not a torch device (use cpu, cuda, cuda:N or mps): {exc}"
        ) from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"{label} requested but CUDA is not available here; use cpu")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise RuntimeError(f"{label} requested but only {torch.cuda.device_count()} CUDA device(s)")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise RuntimeError(f"{label} requested but MPS is not available here")
    return dev


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``"auto"`` (or None) -> ``$LAMINA_DEVICE`` if set, else CUDA when available, else CPU;
    anything else is passed to ``torch.device``. The device is checked (:func:`check_device`);
    an unusable ``$LAMINA_DEVICE`` is an error naming the variable."""
    if device is None or str(device) == "auto":
        env = os.environ.get("LAMINA_DEVICE", "").strip()
        if env:
            return check_device(env, f"$LAMINA_DEVICE={env!r}")
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return check_device(device)
