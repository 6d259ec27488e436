"""GGUF quantisation as a control: round a model's fp32 weights through Q8_0 / Q4_0 / Q4_1.

The two pretrained models of the book ship as 4-bit GGUF (SmolLM2 Q4_1, Gemma 3 Q4_K_M); the
papers' models were not quantised. Applying the same block quantisation to models whose fp32
weights we have (the organisms) measures how far each headline metric moves under it.

Quantisation follows llama.cpp: each weight matrix is stored in the ``y = W x`` layout
(d_out, d_in) and cut into blocks of 32 consecutive input weights per output row; a block keeps
a scale (Q8_0, Q4_0) or a scale and a minimum (Q4_1) and 8- or 4-bit integers. GPT-2's Conv1D
weights (stored (d_in, d_out)) are transposed first, as llama.cpp's converter does. Norms,
biases and position embeddings stay fp32 (llama.cpp keeps 1-D tensors in F32). The token
embedding is quantised too, with ``embedding_qtype`` (llama.cpp: Q8_0 for Q4 files' tied
embedding in SmolLM2's GGUF); a tied unembedding is the same tensor and is rounded once.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["QTYPES", "dequantize_roundtrip", "quantize_model", "split_quantized_name"]

QTYPES = ("Q8_0", "Q4_0", "Q4_1")


def split_quantized_name(name: str) -> tuple[str, str | None]:
    """``"organism-llama@final+Q4_1"`` -> ``("organism-llama@final", "Q4_1")``; a name without a
    ``+Q…`` suffix -> ``(name, None)``; so is an existing local path (a folder named
    ``tiny+Qwen`` is a folder, not a quantisation). An unknown ``+Q…`` suffix raises ValueError."""
    from pathlib import Path

    if Path(str(name)).expanduser().exists():
        return str(name), None
    base, sep, suffix = str(name).rpartition("+")
    if not sep or not base or not suffix.upper().startswith("Q"):
        return str(name), None
    if suffix not in QTYPES:
        raise ValueError(
            f"unknown quantisation suffix {suffix!r} in {name!r}; choose one of {QTYPES}"
        )
    return base, suffix


def _qtype(name: str) -> Any:
    import gguf

    if name not in QTYPES:
        raise ValueError(f"unsupported quantisation {name!r}; choose one of {QTYPES}")
    return gguf.GGMLQuantizationType[name]


def dequantize_roundtrip(matrix: np.ndarray, qtype: str) -> np.ndarray:
    """``matrix`` (rows, d_in) float32 quantised along d_in to ``qtype`` and back: the values a
    GGUF reader would dequantise. d_in must be a multiple of the block size (32)."""
    import gguf

    q = _qtype(qtype)
    block = gguf.GGML_QUANT_SIZES[q][0]
    if matrix.ndim != 2 or matrix.shape[1] % block:
        raise ValueError(
            f"cannot quantise a {matrix.shape} matrix to {qtype}: rows must be a multiple of "
            f"{block} values"
        )
    data = np.ascontiguousarray(matrix, dtype=np.float32)
    return gguf.quants.dequantize(gguf.quants.quantize(data, q), q).reshape(data.shape)


def _is_conv1d(module: nn.Module) -> bool:
    return type(module).__name__ == "Conv1D"  # transformers.pytorch_utils.Conv1D (GPT-2)


def _quant_target(
    name: str, module: nn.Module, qtype: str, embedding_qtype: str | None
) -> tuple[str, bool] | None:
    """(GGUF type, transpose) for a module whose weight :func:`quantize_model` rounds: every
    ``nn.Linear`` / GPT-2 ``Conv1D`` (transposed: its weight is (d_in, d_out)) at ``qtype``,
    token embeddings at ``embedding_qtype`` (None: embeddings left alone); None otherwise
    (learned position embeddings stay fp32, like norms)."""
    if isinstance(module, nn.Linear) or _is_conv1d(module):
        return qtype, _is_conv1d(module)
    if isinstance(module, nn.Embedding) and embedding_qtype is not None:
        if "position" in name or name.endswith("wpe"):
            return None
        return embedding_qtype, False
    return None


def _round_weight(weight: torch.Tensor, kind: str, transpose: bool) -> float | None:
    """Round ``weight`` in place through GGUF ``kind`` -> its relative Frobenius error
    ||W_q - W|| / ||W||, or None (left alone) when its input dimension is not a multiple of 32."""
    w = weight.detach().to(torch.float32).cpu().numpy()
    w = w.T if transpose else w  # (d_out, d_in) for y = W x
    if w.shape[1] % 32:
        return None
    wq = dequantize_roundtrip(w, kind)
    error = float(np.linalg.norm(wq - w) / max(float(np.linalg.norm(w)), 1e-30))
    wq = wq.T if transpose else wq
    weight.copy_(torch.from_numpy(np.ascontiguousarray(wq)).to(weight.dtype))
    return error


def quantize_model(
    model: nn.Module,
    qtype: str = "Q8_0",
    *,
    inplace: bool = False,
    embeddings: bool = True,
    embedding_qtype: str | None = "Q8_0",
) -> nn.Module:
    """A copy of ``model`` (or ``model`` itself with ``inplace=True``) whose linear weights have
    been rounded through GGUF ``qtype`` quantisation ("Q8_0", "Q4_0" or "Q4_1").

    Every ``nn.Linear`` and GPT-2 ``Conv1D`` weight whose input dimension is a multiple of 32 is
    rounded; with ``embeddings=True`` the token embedding table(s) are rounded with
    ``embedding_qtype`` (None: same as ``qtype``). Tensors shared by several modules (tied
    embeddings) are rounded once. The result carries ``lamina_quantization``: ``{"qtype",
    "embedding_qtype", "tensors": {name: relative Frobenius error ||W_q - W|| / ||W||},
    "skipped": [names]}``, and ``lamina_name`` gains a ``+<qtype>`` suffix so that caches and
    results never mix it with the original.
    """
    _qtype(qtype)
    emb_q = qtype if embedding_qtype is None else embedding_qtype
    _qtype(emb_q)
    out = model if inplace else copy.deepcopy(model)
    seen: set[int] = set()
    errors: dict[str, float] = {}
    skipped: list[str] = []
    if not embeddings:  # a tied unembedding is the embedding table: leave it alone too
        seen |= {m.weight.data_ptr() for m in out.modules() if isinstance(m, nn.Embedding)}
    with torch.no_grad():
        for name, module in out.named_modules():
            target = _quant_target(name, module, qtype, emb_q if embeddings else None)
            if target is None or module.weight.data_ptr() in seen:
                continue
            seen.add(module.weight.data_ptr())
            error = _round_weight(module.weight, *target)
            if error is None:
                skipped.append(f"{name}.weight")
            else:
                errors[f"{name}.weight"] = error
    report = {
        "qtype": qtype,
        "embedding_qtype": emb_q if embeddings else None,
        "tensors": errors,
        "skipped": skipped,
    }
    setattr(out, "lamina_quantization", report)  # noqa: B010 (attribute unknown to the stubs)
    base_name = getattr(model, "lamina_name", None) or getattr(model, "config", None)
    base_name = base_name if isinstance(base_name, str) else getattr(base_name, "_name_or_path")  # noqa: B009
    setattr(out, "lamina_name", f"{base_name}+{qtype}")  # noqa: B010
    return out
