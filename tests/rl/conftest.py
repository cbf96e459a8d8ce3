"""A tiny random Llama with the embedded model's tokenizer (fast GRPO / sharding tests)."""

import os

import pytest

TINY = dict(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
            rms_norm_eps=1e-5, tie_word_embeddings=True, bos_token_id=1, eos_token_id=2,
            initializer_range=0.2)


def make_tiny_dir(directory, tokenizer, seed: int = 0):
    import torch
    import transformers

    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**TINY)).eval()
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    return os.fspath(directory)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory, embedded_model):
    return make_tiny_dir(tmp_path_factory.mktemp("tiny_llama"), embedded_model.tokenizer)


@pytest.fixture(scope="session")
def tiny_model(tiny_dir, one_device_mesh):
    from activemem_jax.models import load_pretrained

    return load_pretrained(tiny_dir, mesh=one_device_mesh)


@pytest.fixture(scope="session")
def tiny_engine(tiny_model):
    from activemem_jax.engine import Engine

    with Engine(tiny_model, max_slots=16, max_len=512) as eng:
        yield eng
