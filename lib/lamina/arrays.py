"""Array conventions shared by the library: conversion of numpy / torch inputs to numpy."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def to_numpy(x: Any, name: str) -> np.ndarray:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        t = x.detach().cpu()
        if t.dtype in (torch.bfloat16, torch.float16):
            t = t.float()
        x = t.numpy()
    arr = np.asarray(x)
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(f"{name} must be a real numeric array; got dtype {arr.dtype}")
    return arr
