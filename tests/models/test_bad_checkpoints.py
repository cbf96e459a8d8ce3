"""Bad checkpoints and configs raise errors that name the file, the tensor or the field."""

import json

import numpy as np
import pytest

from activemem_jax.models import CheckpointError, ModelConfig, UnsupportedModelError, load_pretrained
from tests.models.tiny_hf import make_tiny


def _edit_config(directory, **changes):
    path = directory / "config.json"
    cfg = json.loads(path.read_text())
    cfg.update(changes)
    path.write_text(json.dumps(cfg))


def test_truncated_safetensors(tmp_path, one_device_mesh):
    make_tiny(tmp_path, "llama_tied_mha")
    f = tmp_path / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[: len(data) - 1000])
    with pytest.raises(CheckpointError, match=r"model\.safetensors: tensor '.*' ends at byte .* truncated"):
        load_pretrained(str(tmp_path), mesh=one_device_mesh)


def test_garbage_safetensors_header(tmp_path, one_device_mesh):
    make_tiny(tmp_path, "llama_tied_mha")
    (tmp_path / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    with pytest.raises(CheckpointError, match=r"model\.safetensors: corrupt safetensors header"):
        load_pretrained(str(tmp_path), mesh=one_device_mesh)


def test_unknown_architecture(tmp_path, one_device_mesh):
    make_tiny(tmp_path, "llama_tied_mha")
    _edit_config(tmp_path, model_type="gpt_neox", architectures=["GPTNeoXForCausalLM"])
    with pytest.raises(UnsupportedModelError, match=r"config\.json: unknown architecture model_type='gpt_neox'"):
        load_pretrained(str(tmp_path), mesh=one_device_mesh)


def test_shape_mismatch_names_tensor_and_shapes(tmp_path, one_device_mesh):
    make_tiny(tmp_path, "llama_tied_mha")
    _edit_config(tmp_path, intermediate_size=96)
    with pytest.raises(CheckpointError,
                       match=r"model\.safetensors: tensor 'model\.layers\.0\.mlp\.(gate|up|down)_proj\.weight' "
                             r"has shape .*128.* expects .*96"):
        load_pretrained(str(tmp_path), mesh=one_device_mesh)


def test_missing_shard_file(tmp_path, one_device_mesh):
    make_tiny(tmp_path, "llama_tied_mha", max_shard_size="60KB")
    shard = sorted(tmp_path.glob("model-*.safetensors"))[-1]
    shard.unlink()
    with pytest.raises(CheckpointError, match=rf"shard files that do not exist: .*{shard.name}"):
        load_pretrained(str(tmp_path), mesh=one_device_mesh)


def test_missing_path_and_missing_config(tmp_path, one_device_mesh):
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_pretrained(str(tmp_path / "nope"), mesh=one_device_mesh)
    with pytest.raises(CheckpointError, match="no config.json"):
        load_pretrained(str(tmp_path), mesh=one_device_mesh)


@pytest.mark.parametrize("changes,field", [
    ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4}}, "rope_type='yarn'"),
    ({"model_type": "mistral", "sliding_window": 16, "max_position_embeddings": 128}, "sliding_window=16"),
    ({"mlp_bias": True}, "mlp_bias"),
    ({"hidden_act": "gelu"}, "hidden_act='gelu'"),
])
def test_unsupported_fields_raise_not_implemented_naming_the_field(changes, field):
    base = dict(model_type="llama", vocab_size=32, hidden_size=16, intermediate_size=32,
                num_hidden_layers=1, num_attention_heads=2)
    with pytest.raises(NotImplementedError, match=field.replace("(", r"\(")):
        ModelConfig.from_hf_dict({**base, **changes})


def test_smollm3_nope_layers_are_read_and_checked():
    base = dict(model_type="smollm3", vocab_size=32, hidden_size=16, intermediate_size=32,
                num_hidden_layers=8, num_attention_heads=2)
    every_fourth = ModelConfig.from_hf_dict(base)  # transformers' default: every 4th layer NoPE
    assert every_fourth.rope_layers == (True, True, True, False) * 2
    assert ModelConfig.from_hf_dict({**base, "model_type": "llama"}).rope_layers == ()
    with pytest.raises(UnsupportedModelError, match="no_rope_layers has 3 entries for num_hidden_layers=8"):
        ModelConfig.from_hf_dict({**base, "no_rope_layers": [1, 0, 1]})


def test_logits_rejects_out_of_vocab_ids(tmp_path, one_device_mesh):
    make_tiny(tmp_path, "llama_tied_mha")
    model = load_pretrained(str(tmp_path), mesh=one_device_mesh)
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 256\)"):
        model.logits(np.array([[1, 2, 999]]))
