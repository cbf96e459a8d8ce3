"""GGUF files of several quant types load to the weights transformers would compute with."""

import gguf
import numpy as np
import pytest

from activemem_jax.models import CheckpointError, load_pretrained
from tests.models.tiny_gguf import write_gguf
from tests.models.tiny_hf import hf_logits, left_padded_batch, make_tiny

Q = gguf.GGMLQuantizationType


@pytest.mark.parametrize("family,arch,qtype", [
    ("llama_tied_mha", "llama", Q.F32),
    ("llama_tied_mha", "llama", Q.Q8_0),
    ("mistral_gqa3", "llama", Q.Q4_1),
    ("mistral_gqa3", "llama", Q.F16),
    ("qwen3_odd_head_dim", "qwen3", Q.Q5_0),
    ("qwen3_odd_head_dim", "qwen3", Q.BF16),
])
def test_gguf_logits_match_transformers(tmp_path, family, arch, qtype, one_device_mesh):
    torch_model = make_tiny(tmp_path / "hf", family)
    path = tmp_path / f"tiny-{qtype.name}.gguf"
    write_gguf(path, torch_model, arch, qtype)  # torch_model now holds the dequantized weights
    model = load_pretrained(str(path), mesh=one_device_mesh)
    assert model.config.tie_word_embeddings == torch_model.config.tie_word_embeddings
    assert model.config.head_dim == torch_model.config.head_dim
    ids, mask = left_padded_batch(np.random.default_rng(4), 256, [16, 11], 16)
    real = mask.astype(bool)
    np.testing.assert_allclose(model.logits(ids, mask)[real], hf_logits(torch_model, ids, mask)[real],
                               atol=1e-4, rtol=0)


def test_gguf_missing_tensor_is_named(tmp_path, one_device_mesh):
    torch_model = make_tiny(tmp_path / "hf", "llama_tied_mha")
    path = tmp_path / "broken.gguf"
    write_gguf(path, torch_model, "llama", Q.F32, drop=("blk.1.ffn_up.weight",))
    with pytest.raises(CheckpointError, match=r"broken\.gguf.*model\.layers\.1\.mlp\.up_proj\.weight"):
        load_pretrained(str(path), mesh=one_device_mesh)


def test_truncated_gguf_is_reported(tmp_path, one_device_mesh):
    torch_model = make_tiny(tmp_path / "hf", "llama_tied_mha")
    path = tmp_path / "cut.gguf"
    write_gguf(path, torch_model, "llama", Q.Q8_0)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(CheckpointError, match=r"cut\.gguf.*(truncated|corrupt)"):
        load_pretrained(str(path), mesh=one_device_mesh)
