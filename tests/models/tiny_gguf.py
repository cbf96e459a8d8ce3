"""Write a tiny HF model as a GGUF file the way llama.cpp's converter lays it out."""

import re

import gguf
import numpy as np
import torch

_HF_TO_GGUF = [
    (r"model\.embed_tokens\.weight", "token_embd.weight"),
    (r"model\.norm\.weight", "output_norm.weight"),
    (r"lm_head\.weight", "output.weight"),
    (r"model\.layers\.(\d+)\.self_attn\.q_proj\.(\w+)", r"blk.\1.attn_q.\2"),
    (r"model\.layers\.(\d+)\.self_attn\.k_proj\.(\w+)", r"blk.\1.attn_k.\2"),
    (r"model\.layers\.(\d+)\.self_attn\.v_proj\.(\w+)", r"blk.\1.attn_v.\2"),
    (r"model\.layers\.(\d+)\.self_attn\.o_proj\.(\w+)", r"blk.\1.attn_output.\2"),
    (r"model\.layers\.(\d+)\.self_attn\.q_norm\.weight", r"blk.\1.attn_q_norm.weight"),
    (r"model\.layers\.(\d+)\.self_attn\.k_norm\.weight", r"blk.\1.attn_k_norm.weight"),
    (r"model\.layers\.(\d+)\.mlp\.gate_proj\.weight", r"blk.\1.ffn_gate.weight"),
    (r"model\.layers\.(\d+)\.mlp\.up_proj\.weight", r"blk.\1.ffn_up.weight"),
    (r"model\.layers\.(\d+)\.mlp\.down_proj\.weight", r"blk.\1.ffn_down.weight"),
    (r"model\.layers\.(\d+)\.input_layernorm\.weight", r"blk.\1.attn_norm.weight"),
    (r"model\.layers\.(\d+)\.post_attention_layernorm\.weight", r"blk.\1.ffn_norm.weight"),
]


def _gguf_name(hf):
    for pat, rep in _HF_TO_GGUF:
        if re.fullmatch(pat, hf):
            return re.sub(pat, rep, hf)
    raise KeyError(hf)


def _permute(w, n_head):  # llama.cpp convert_hf_to_gguf.py LlamaModel.permute
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(path, torch_model, arch: str, qtype: gguf.GGMLQuantizationType, drop=()):
    """Write `torch_model` to `path`; replace its weights in place by what the file holds
    after quantization (so the torch model is the exact reference); return nothing."""
    cfg = torch_model.config
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_key_length(cfg.head_dim)
    w.add_value_length(cfg.head_dim)
    w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(cfg.vocab_size)
    state = torch_model.state_dict()
    for hf_name, tensor in state.items():
        if hf_name == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        name = _gguf_name(hf_name)
        if name in drop:
            continue
        arr = tensor.float().numpy()
        if arch == "llama" and name.endswith("attn_q.weight"):
            arr = _permute(arr, cfg.num_attention_heads)
        if arch == "llama" and name.endswith("attn_k.weight"):
            arr = _permute(arr, cfg.num_key_value_heads)
        if arr.ndim == 2 and qtype != gguf.GGMLQuantizationType.F32:
            q = gguf.quants.quantize(arr, qtype)
            w.add_tensor(name, q, raw_dtype=qtype)
            back = gguf.quants.dequantize(q, qtype).reshape(arr.shape)
        else:
            w.add_tensor(name, arr.astype(np.float32))
            back = arr
        if arch == "llama" and name.endswith(("attn_q.weight", "attn_k.weight")):
            n = cfg.num_attention_heads if name.endswith("attn_q.weight") else cfg.num_key_value_heads
            back = back.reshape(n, back.shape[0] // n // 2, 2, -1).swapaxes(1, 2).reshape(back.shape)
        with torch.no_grad():
            tensor.copy_(torch.from_numpy(np.ascontiguousarray(back)))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
