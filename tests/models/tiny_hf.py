"""Tiny random Hugging Face checkpoints of every supported family, made with transformers."""

import numpy as np
import torch
import transformers

BASE = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            max_position_embeddings=128, rms_norm_eps=1e-5, initializer_range=0.1)

# name -> (config class, overrides)
FAMILIES = {
    "llama_tied_mha": (transformers.LlamaConfig,
                       dict(num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=True)),
    "llama_gqa3_llama3rope": (transformers.LlamaConfig, dict(
        hidden_size=96, num_attention_heads=6, num_key_value_heads=2, head_dim=16,
        tie_word_embeddings=False,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
        rope_theta=500000.0)),
    "qwen2_bias_gqa3": (transformers.Qwen2Config,
                        dict(hidden_size=96, num_attention_heads=6, num_key_value_heads=2,
                             tie_word_embeddings=True)),
    "qwen3_odd_head_dim": (transformers.Qwen3Config,
                           dict(num_attention_heads=4, num_key_value_heads=4, head_dim=24,
                                tie_word_embeddings=False)),
    # layers 1 and 3 NoPE (no_rope_layers[i] = 1 means rotary, as transformers names it)
    "smollm3_nope": (transformers.SmolLM3Config,
                     dict(num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                          no_rope_layers=[1, 0, 1, 0], tie_word_embeddings=True, pad_token_id=0,
                          bos_token_id=1, eos_token_id=2)),
    "mistral_gqa3": (transformers.MistralConfig,
                     dict(hidden_size=96, num_attention_heads=6, num_key_value_heads=2, head_dim=16,
                          sliding_window=None, tie_word_embeddings=False)),
}

# Qwen3-MoE (mixture-of-experts MLPs), kept apart so the dense families' tests do not grow.
_MOE = dict(moe_intermediate_size=32)
MOE_FAMILIES = {
    # every layer sparse, 4 experts, top-2 renormalized; GQA 2
    "qwen3_moe_e4_top2": (transformers.Qwen3MoeConfig, dict(
        _MOE, num_attention_heads=4, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
        norm_topk_prob=True, tie_word_embeddings=False)),
    # layer 1 sparse (decoder_sparse_step 2), layers 0 and 2 dense; 8 experts, top-3 not
    # renormalized; GQA 4, tied embeddings
    "qwen3_moe_e8_top3_step2": (transformers.Qwen3MoeConfig, dict(
        _MOE, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=1, num_experts=8,
        num_experts_per_tok=3, norm_topk_prob=False, decoder_sparse_step=2, tie_word_embeddings=True)),
    # layer 0 dense (mlp_only_layers), layers 1 and 2 sparse; 6 experts, top-1; head_dim 24
    "qwen3_moe_e6_top1_mlp_only": (transformers.Qwen3MoeConfig, dict(
        _MOE, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=24,
        num_experts=6, num_experts_per_tok=1, norm_topk_prob=False, mlp_only_layers=[0],
        tie_word_embeddings=False)),
}


def make_tiny(directory, family: str, seed: int = 0, max_shard_size=None, **overrides):
    """Build a random tiny model, save it to `directory`; return the torch model (f32, eval)."""
    cls, fam = {**FAMILIES, **MOE_FAMILIES}[family]
    kwargs = {**BASE, **fam, **overrides}
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    config = cls(**kwargs)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    with torch.no_grad():  # make biases and norms non-trivial so a dropped term shows
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    save_kwargs = {} if max_shard_size is None else {"max_shard_size": max_shard_size}
    model.save_pretrained(directory, **save_kwargs)
    return model


def hf_logits(model, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    positions = np.maximum(np.cumsum(mask, axis=-1) - 1, 0)
    with torch.no_grad():
        out = model(input_ids=torch.tensor(ids, dtype=torch.long),
                    attention_mask=torch.tensor(mask, dtype=torch.long),
                    position_ids=torch.tensor(positions, dtype=torch.long))
    return out.logits.float().numpy()


def left_padded_batch(rng: np.random.Generator, vocab: int, lengths, width: int):
    ids = np.zeros((len(lengths), width), np.int32)
    mask = np.zeros((len(lengths), width), np.int32)
    for i, n in enumerate(lengths):
        ids[i, width - n:] = rng.integers(3, vocab, n)
        mask[i, width - n:] = 1
    return ids, mask


def save_word_tokenizer(directory, vocab_size: int):
    """A word-level tokenizer over `vocab_size` tokens "t0".."tN" (ids = numbers), so an
    engine over a tiny checkpoint can detokenize; eos "t2"."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(vocab_size)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0", bos_token="t1",
                                                eos_token="t2", pad_token="t0")
    fast.save_pretrained(directory)
