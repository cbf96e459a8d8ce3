"""`python -m activemem_jax.serve`'s config: the model and engine sections are a training
config's, the file's fields over the defaults and the flags over both, a bad one named."""

import argparse

import pytest

from activemem_jax import serve


def args(**kw):
    base = {k: None for k in serve.FLAGS}
    base.update(config=None, compile_cache=None)
    base.update(kw)
    return argparse.Namespace(**base)


def test_flags_over_the_file_over_the_defaults():
    cfg = serve.server_config(args())
    assert (cfg.model.path, cfg.model.dtype, cfg.engine.max_slots, cfg.serve.port) == ("embedded", "float32", 8, 8000)
    cfg = serve.server_config(args(config="configs/serve_embedded.py"))
    assert cfg.serve.served_model_name == "smollm2-135m-instruct" and cfg.engine.max_len == 2048
    cfg = serve.server_config(args(config="configs/serve_embedded.py", max_slots=4, quant="int8", port=9000))
    assert (cfg.engine.max_slots, cfg.model.quant, cfg.serve.port, cfg.engine.max_len) == (4, "int8", 9000, 2048)


def test_a_bad_field_or_section_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match="config error: model.dtype='float64'"):
        serve.server_config(args(dtype="float64"))
    with pytest.raises(SystemExit, match="config error: engine.max_slots=0: need >= 1"):
        serve.server_config(args(max_slots=0))
    old = tmp_path / "old.py"  # the layout before the model / engine sections
    old.write_text("import ml_collections\n\ndef get_config():\n    c = ml_collections.ConfigDict()\n"
                   "    c.serve = ml_collections.ConfigDict(dict(model='embedded'))\n    return c\n")
    with pytest.raises(SystemExit, match=r"serve\.model: no such config field"):
        serve.server_config(args(config=str(old)))
