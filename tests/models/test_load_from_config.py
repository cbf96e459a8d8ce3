"""One loading path from a config's `model` section."""

import ml_collections
import numpy as np
import pytest

from activemem_jax.models import load_from_config, load_pretrained
from tests.models.tiny_hf import make_tiny


def test_config_section_sets_every_loading_option(tmp_path):
    make_tiny(tmp_path, "qwen2_bias_gqa3")
    section = ml_collections.ConfigDict(dict(path=str(tmp_path), dtype="bfloat16", activation_dtype="float32",
                                             remat=True, scan_layers=True, remat_policy="dots_saveable",
                                             max_slots=8))  # fields loading does not use are ignored
    model = load_from_config(section)
    c = model.config
    assert (c.dtype, c.activation_dtype, c.scan_layers, c.remat_policy) == ("bfloat16", "float32", True,
                                                                           "dots_saveable")
    ref = load_pretrained(str(tmp_path), dtype="bfloat16", activation_dtype="float32", remat=True,
                          scan_layers=True, remat_policy="dots_saveable")
    ids = np.arange(1, 9, dtype=np.int32)[None]
    np.testing.assert_array_equal(model.logits(ids), ref.logits(ids))
    plain = load_from_config({"path": str(tmp_path)}, remat=False)  # a dict works; override wins
    assert (plain.config.dtype, plain.config.scan_layers) == ("float32", False)


def test_missing_path_names_the_field():
    with pytest.raises(ValueError, match="model.path"):
        load_from_config({"dtype": "float32"})
