"""Our decoder's logits equal transformers' PyTorch logits on the same tiny random weights."""

import json
import os

import numpy as np
import pytest

from activemem_jax.models import load_pretrained
from tests.models.tiny_hf import FAMILIES, hf_logits, left_padded_batch, make_tiny

TOL = 1e-4


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_logits_match_transformers_left_padded(tmp_path, family, one_device_mesh):
    torch_model = make_tiny(tmp_path, family)
    model = load_pretrained(str(tmp_path), mesh=one_device_mesh)
    ids, mask = left_padded_batch(np.random.default_rng(1), model.config.vocab_size, [24, 17, 5], 24)
    ours = model.logits(ids, mask)
    ref = hf_logits(torch_model, ids, mask)
    real = mask.astype(bool)
    assert ours.shape == ref.shape == (3, 24, model.config.vocab_size)
    assert np.abs(ref[real]).max() > 0.5  # the comparison is not between near-zero logits
    np.testing.assert_allclose(ours[real], ref[real], atol=TOL, rtol=0)


def test_right_padding_gives_the_same_real_logits(tmp_path, one_device_mesh):
    make_tiny(tmp_path, "qwen2_bias_gqa3")
    model = load_pretrained(str(tmp_path), mesh=one_device_mesh)
    left_ids, left_mask = left_padded_batch(np.random.default_rng(2), 256, [12, 6], 12)
    right_ids = np.zeros_like(left_ids)
    right_mask = np.zeros_like(left_mask)
    for i in range(2):
        n = int(left_mask[i].sum())
        right_ids[i, :n] = left_ids[i, 12 - n:]
        right_mask[i, :n] = 1
    left = model.logits(left_ids, left_mask)
    right = model.logits(right_ids, right_mask)
    for i in range(2):
        n = int(left_mask[i].sum())
        np.testing.assert_allclose(left[i, 12 - n:], right[i, :n], atol=1e-5)


def test_sharded_index_checkpoint_loads(tmp_path, one_device_mesh):
    torch_model = make_tiny(tmp_path, "llama_gqa3_llama3rope", max_shard_size="60KB")
    assert os.path.exists(tmp_path / "model.safetensors.index.json")
    assert len(json.load(open(tmp_path / "model.safetensors.index.json"))["weight_map"]) > 5
    model = load_pretrained(str(tmp_path), mesh=one_device_mesh)
    ids, mask = left_padded_batch(np.random.default_rng(3), 256, [9], 9)
    np.testing.assert_allclose(model.logits(ids, mask), hf_logits(torch_model, ids, mask), atol=TOL)


def test_llama3_rope_scaling_is_applied(tmp_path, one_device_mesh):
    """Dropping the Llama-3 scaling must change the logits (the test above can fail)."""
    make_tiny(tmp_path, "llama_gqa3_llama3rope")
    model = load_pretrained(str(tmp_path), mesh=one_device_mesh)
    cfg = json.load(open(tmp_path / "config.json"))
    cfg.pop("rope_scaling", None)
    cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": 500000.0}
    json.dump(cfg, open(tmp_path / "config.json", "w"))
    plain = load_pretrained(str(tmp_path), mesh=one_device_mesh)
    ids = np.arange(3, 30)[None]
    assert np.abs(model.logits(ids) - plain.logits(ids)).max() > 1e-3


def test_bfloat16_params_track_float32(tmp_path, one_device_mesh):
    make_tiny(tmp_path, "qwen3_odd_head_dim")
    f32 = load_pretrained(str(tmp_path), mesh=one_device_mesh)
    bf16 = load_pretrained(str(tmp_path), dtype="bfloat16", mesh=one_device_mesh)
    assert str(bf16.state["embedding"].get_value().dtype) == "bfloat16"
    ids = np.arange(3, 40)[None]
    a, b = f32.logits(ids), bf16.logits(ids)
    assert b.dtype == np.float32
    assert (a.argmax(-1) == b.argmax(-1)).mean() > 0.9
    assert np.abs(a - b).max() < 0.25


@pytest.mark.parametrize("family", ["llama_gqa3_llama3rope", "qwen3_odd_head_dim"])
def test_long_left_padded_prompt_uses_chunked_attention(tmp_path, family, one_device_mesh):
    """Over 128 tokens attention runs in causal chunks; logits still match transformers."""
    torch_model = make_tiny(tmp_path, family, max_position_embeddings=512)
    model = load_pretrained(str(tmp_path), mesh=one_device_mesh)
    ids, mask = left_padded_batch(np.random.default_rng(5), 256, [300, 170], 300)
    real = mask.astype(bool)
    np.testing.assert_allclose(model.logits(ids, mask)[real], hf_logits(torch_model, ids, mask)[real],
                               atol=TOL, rtol=0)
