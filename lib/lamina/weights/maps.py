"""The read/write map of a transformer: every linear map with its role, and weight deltas.

Every linear map of a model is listed once, with its role (paper 2):

* **read** maps take the residual stream in: ``q``, ``k``, ``v``, ``mlp_gate``, ``mlp_up``
  (and the unembedding, ``unembed``);
* **write** maps put their output back in: ``attn_out``, ``mlp_out`` (and the token
  embedding, ``embed``).

Matrices are always in the ``y = W x`` convention, shape (d_out, d_in), fp32. GPT-2's
``Conv1D`` (stored (d_in, d_out)) is transposed and its fused ``c_attn`` split into Q, K and V;
grouped-query K/V are (n_kv_heads * head_dim, d_model); tied embeddings are listed once.
Read matrices are probed in the principal subspace of their own inputs, write matrices in
the prediction subspace of the unembedding. The probe subspaces are in
:mod:`lamina.weights.subspaces`, the probe itself (RSF, enrichment, nulls, k sweep) in
:mod:`lamina.weights.subspace_fraction`, gradient factors in :mod:`lamina.weights.gradients`,
causal edits in :mod:`lamina.weights.edits`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from lamina.core.types import Matrix, Vector
from lamina.sources.models import get_adapter, hf_config, weight_of

__all__ = [
    "POST_NORMS",
    "READ_ROLES",
    "SHARED_INPUT",
    "WRITE_ROLES",
    "LinearMap",
    "linear_maps",
    "norm_gain",
    "post_norm_gain",
    "weight_deltas",
]

READ_ROLES = ("q", "k", "v", "mlp_gate", "mlp_up")
WRITE_ROLES = ("attn_out", "mlp_out")
# maps of one block that read the very same tensor: its second moment is accumulated once
SHARED_INPUT = {
    "q": "attn_in",
    "k": "attn_in",
    "v": "attn_in",
    "mlp_gate": "mlp_in",
    "mlp_up": "mlp_in",
}
# Architectures whose write maps write *before* a per-sublayer RMSNorm (model type -> write
# role -> that norm's path inside the block): Gemma 3 (see :func:`linear_maps`).
POST_NORMS: dict[str, dict[str, str]] = {
    "gemma3_text": {
        "attn_out": "post_attention_layernorm",
        "mlp_out": "post_feedforward_layernorm",
    },
}


def norm_gain(norm: nn.Module) -> Vector | None:
    """The elementwise gain (d,) fp32 that a norm module multiplies by: its weight γ, or
    1 + γ for Gemma's RMSNorm (``Gemma*RMSNorm`` computes ``x / rms(x) * (1 + γ)``, γ = 0 at
    initialisation); None for a norm without a weight."""
    w = getattr(norm, "weight", None)
    if not isinstance(w, torch.Tensor):
        return None
    w = w.detach().float()
    return 1.0 + w if type(norm).__name__.startswith("Gemma") else w


def post_norm_gain(model: nn.Module, m: LinearMap) -> Vector | None:
    """The gain (d_model,) of the norm between write map ``m`` and the residual stream
    (:data:`POST_NORMS`; Gemma 3's post-attention / post-feedforward RMSNorm, 1 + γ), or None
    where the map writes straight into the stream (every other architecture)."""
    path = POST_NORMS.get(hf_config(model).model_type, {}).get(m.role)
    if path is None or m.layer is None:
        return None
    block = m.module[: -len(get_adapter(model).write[m.role])]
    return norm_gain(model.get_submodule(block + path))


@dataclass(frozen=True)
class LinearMap:
    """One linear map of a model.

    layer: block index, or None for the embedding / unembedding.
    role: ``q k v mlp_gate mlp_up attn_out mlp_out embed unembed``.
    kind: ``read`` (takes the residual stream in) or ``write`` (adds to it).
    module: dotted path of the module from the top model (``model.get_submodule(module)``).
    rows: (start, stop) slice of the module's output dimension (GPT-2's fused ``c_attn``), or None.
    transposed: the parameter is stored (d_in, d_out) (GPT-2 ``Conv1D``, and the embedding
        table, whose map one-hot token -> d_model is ``W_E.T``).
    tied: the embedding and unembedding share this parameter (listed once, as ``unembed``).
    """

    layer: int | None
    role: str
    kind: Literal["read", "write"]
    module: str
    rows: tuple[int, int] | None = None
    transposed: bool = False
    tied: bool = False

    @property
    def key(self) -> str:
        """``"<layer>.<role>"`` for block maps (``"3.q"``), the role for the others."""
        return self.role if self.layer is None else f"{self.layer}.{self.role}"

    @property
    def parameter(self) -> str:
        """Dotted name of the weight parameter, as in ``model.named_parameters()``."""
        return f"{self.module}.weight"

    def as_matrix(self, tensor: torch.Tensor) -> Matrix:
        """A parameter-shaped tensor (weight, its grad, an Adam moment) as this map's (d_out, d_in)
        matrix. A *view* when possible, so in-place edits of the result edit the parameter."""
        m = tensor.T if self.transposed else tensor
        return m if self.rows is None else m[self.rows[0] : self.rows[1]]

    def as_bias(self, tensor: torch.Tensor) -> torch.Tensor:
        """A bias-shaped tensor (d_out_module,) restricted to this map's rows."""
        return tensor if self.rows is None else tensor[self.rows[0] : self.rows[1]]

    def weight(self, model: nn.Module) -> Matrix:
        """This map's weight: (d_out, d_in) fp32, a detached copy on the model's device."""
        param = weight_of(model.get_submodule(self.module))
        return self.as_matrix(param.detach()).to(torch.float32).clone()


def _base_prefix(model: nn.Module) -> str:
    base = get_adapter(model).base(model)
    for name, module in model.named_modules():
        if module is base:
            return f"{name}." if name else ""
    raise ValueError("model.base_model is not a submodule of model")


def linear_maps(model: nn.Module, *, embeddings: bool = True) -> list[LinearMap]:
    """Every linear map of ``model`` with its role, each exactly once, in depth order.

    Block maps come from the adapter's ``read``/``write`` table. With ``embeddings=True`` the
    token embedding (``embed``, write, (d_model, vocab)) and the unembedding (``unembed``,
    read, (vocab, d_model)) are added; when they are tied only ``unembed`` is listed, with
    ``tied=True``. Learned position embeddings and BERT's pooler are not listed.

    Gemma 3 (``gemma3_text``), where the block is ``h + N_post(W_O attn(N_in(h)))`` and then
    ``h + N_post'(W_down mlp(N_pre'(h)))``:

    * *layer l* is the residual stream after block l, before the final norm; layer 0 is the
      embedding **after** its √d_model scale (the embedding module applies it);
    * a *read matrix* (q, k, v, mlp_gate, mlp_up) reads the RMS-normed stream, exactly as in
      Llama (``input_layernorm`` / ``pre_feedforward_layernorm``), so its input subspace is that
      of the normed stream;
    * a *write matrix* (attn_out, mlp_out) writes into the space *before* the post-sublayer
      RMSNorm (``post_attention_layernorm`` / ``post_feedforward_layernorm``): what reaches the
      stream is ``diag(1 + γ) W x / rms(W x)``, a per-token rescaling plus a fixed diagonal
      gain, so directions are kept up to that diagonal but norms are not;
    * ``embed`` (tied with ``unembed``) is the unscaled table; the stream sees √d_model times it.
      Sliding-window and global layers have the same maps; ``config.layer_types[l]`` says
      which one block l is.
    """
    adapter = get_adapter(model)
    prefix = _base_prefix(model)
    maps: list[LinearMap] = []
    for layer in range(adapter.n_layers(model)):
        block = f"{prefix}{adapter.blocks}.{layer}."
        for kind, table in (("read", adapter.read), ("write", adapter.write)):
            for role, path in table.items():
                module = block + path
                if path == adapter.fused_qkv:
                    d_out = weight_of(model.get_submodule(module)).shape[1 if adapter.conv1d else 0]
                    third = d_out // 3
                    for i, sub in enumerate(("q", "k", "v")):
                        maps.append(
                            LinearMap(
                                layer,
                                sub,
                                "read",
                                module,
                                (i * third, (i + 1) * third),
                                adapter.conv1d,
                            )
                        )
                else:
                    maps.append(LinearMap(layer, role, kind, module, None, adapter.conv1d))  # type: ignore[arg-type]
    if embeddings:
        maps = _with_embedding_maps(model, maps)
    return maps


def _with_embedding_maps(model: nn.Module, maps: list[LinearMap]) -> list[LinearMap]:
    """``maps`` with the token embedding first (``embed``, write, (d_model, vocab); left out
    when tied) and the unembedding last (``unembed``, read, (vocab, d_model); ``tied`` set)."""
    adapter = get_adapter(model)
    embed_path = _base_prefix(model) + adapter.embedding
    embed = model.get_submodule(embed_path)
    if not isinstance(embed, nn.Embedding):  # BERT's embeddings block
        embed_path += ".word_embeddings"
        embed = model.get_submodule(embed_path)
    unembed = adapter.unembedding_module(model)
    tied = unembed is not None and unembed.weight is embed.weight
    if not tied:
        maps.insert(0, LinearMap(None, "embed", "write", embed_path, None, True))
    if unembed is not None:
        maps.append(LinearMap(None, "unembed", "read", str(adapter.unembedding), None, False, tied))
    return maps


def _check_same_architecture(model_a: nn.Module, model_b: nn.Module) -> None:
    type_a, type_b = hf_config(model_a).model_type, hf_config(model_b).model_type
    if type_a != type_b:
        raise ValueError(
            f"cannot compare checkpoints of different architectures: model_a is {type_a!r}, model_b is {type_b!r}"
        )


def weight_deltas(
    model_a: nn.Module, model_b: nn.Module, *, maps: Sequence[LinearMap] | None = None
) -> dict[str, Matrix]:
    """ΔW = W_b - W_a for every linear map, in fp32 on the CPU.

    model_a, model_b: two checkpoints of one architecture and shape (e.g. base and aligned).
    -> {map key: (d_out, d_in) fp32}. Tied embeddings give one ``unembed`` entry.
    Raises ValueError naming the parameter when the architectures, the maps or a shape differ.
    """
    _check_same_architecture(model_a, model_b)
    maps_a = list(maps) if maps is not None else linear_maps(model_a)
    keys_b = {m.key: m for m in linear_maps(model_b)} if maps is None else {m.key: m for m in maps}
    out: dict[str, torch.Tensor] = {}
    for lm in maps_a:
        other = keys_b.get(lm.key)
        if other is None:
            raise ValueError(f"{lm.parameter} ({lm.key}) exists in model_a but not in model_b")
        try:
            w_b_param = weight_of(model_b.get_submodule(other.module))
        except AttributeError as exc:
            raise ValueError(f"{other.parameter} ({lm.key}) is missing from model_b") from exc
        w_a_param = weight_of(model_a.get_submodule(lm.module))
        if w_a_param.shape != w_b_param.shape:
            raise ValueError(
                f"parameter {lm.parameter} ({lm.key}) has shape {tuple(w_a_param.shape)} in model_a "
                f"but {tuple(w_b_param.shape)} in model_b"
            )
        w_a, w_b = lm.weight(model_a).cpu(), other.weight(model_b).cpu()
        out[lm.key] = w_b - w_a
    extra = set(keys_b) - {m.key for m in maps_a}
    if extra:
        raise ValueError(f"model_b has linear maps that model_a lacks: {sorted(extra)[:5]}")
    return out
