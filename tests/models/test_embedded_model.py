"""The embedded SmolLM2-135M-Instruct GGUF against transformers' own GGUF loader."""

import numpy as np
import pytest
import torch

from activemem_jax.models import greedy_generate

pytestmark = pytest.mark.slow

PROMPT = ("The history of the city begins with a small river settlement. Over the centuries "
          "merchants, scholars and travellers arrived, building bridges, libraries and markets "
          "that still shape the streets today. In the modern era the city became")


def _prompt_ids(tokenizer, n=64):
    ids = tokenizer(PROMPT * 3)["input_ids"][:n]
    assert len(ids) == n
    return np.asarray(ids, np.int32)


def test_config_from_gguf_metadata(embedded_model):
    c = embedded_model.config
    assert (c.model_type, c.num_layers, c.hidden_size, c.intermediate_size) == ("llama", 30, 576, 1536)
    assert (c.num_heads, c.num_kv_heads, c.head_dim, c.vocab_size) == (9, 3, 64, 49152)
    assert c.tie_word_embeddings and c.rope.theta == 100000.0


def test_logits_match_transformers_gguf_loader(embedded_model, embedded_hf_model):
    ids = _prompt_ids(embedded_model.tokenizer)
    ours = embedded_model.logits(ids[None])[0]
    with torch.no_grad():
        ref = embedded_hf_model(torch.tensor(ids[None], dtype=torch.long)).logits[0].float().numpy()
    assert ours.shape == ref.shape == (64, 49152)
    np.testing.assert_array_equal(ours.argmax(-1), ref.argmax(-1))
    assert np.abs(ours - ref).max() <= 1e-3


def test_greedy_answer_names_paris(embedded_model):
    text = embedded_model.generate("What is the capital of France? Answer in one word.",
                                   max_new_tokens=16)
    assert "Paris" in text


def test_cached_greedy_decode_equals_full_recompute(embedded_model):
    """The KV-cache decode path picks the same tokens as re-running the full sequence."""
    tok = embedded_model.tokenizer
    prompts = [tok("The capital of Italy is")["input_ids"], tok("1, 2, 3, 4,")["input_ids"]]
    outs = greedy_generate(embedded_model, prompts, max_new_tokens=6, eos_token_ids=())
    for prompt, out in zip(prompts, outs):
        assert len(out) == 6
        seq = list(prompt)
        width = 32  # right-padded to one width: one compile for every step
        for _ in range(6):
            ids = np.zeros((1, width), np.int32)
            ids[0, :len(seq)] = seq
            mask = (np.arange(width) < len(seq)).astype(np.int32)[None]
            seq.append(int(embedded_model.logits(ids, mask)[0, len(seq) - 1].argmax()))
        assert out == seq[len(prompt):]


def test_embeds_input_equals_token_input(embedded_model):
    ids = np.asarray(embedded_model.tokenizer("Latent vectors go here")["input_ids"], np.int32)[None]
    by_ids, hid_ids = embedded_model.forward(tokens=ids)
    embeds = embedded_model.module.embed_tokens(ids)
    by_embeds, hid_embeds = embedded_model.forward(embeds=embeds)
    np.testing.assert_array_equal(np.asarray(by_ids), np.asarray(by_embeds))
    np.testing.assert_array_equal(np.asarray(hid_ids), np.asarray(hid_embeds))
    assert hid_ids.shape == (1, ids.shape[1], 576)


def test_tokenizer_from_hf_directory_applies_chat_template(tmp_path, embedded_model):
    from activemem_jax.models import load_pretrained
    from tests.models.tiny_hf import make_tiny

    make_tiny(tmp_path, "llama_tied_mha", vocab_size=49152)
    embedded_model.tokenizer.save_pretrained(tmp_path)
    model = load_pretrained(str(tmp_path), mesh=embedded_model.mesh)
    ids = model.encode_chat("Hello there")
    text = model.tokenizer.decode(ids)
    assert "<|im_start|>user\nHello there<|im_end|>" in text
    assert text.rstrip().endswith("<|im_start|>assistant")
