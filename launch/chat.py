"""Load a backbone from a config and answer a chat question with greedy decoding.

    python launch/chat.py --config=configs/chat_embedded.py [--config.question="..."]
"""

import time

from absl import app
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file("config", "configs/chat_embedded.py",
                                          "ml_collections config file")


def main(argv):
    del argv
    from activemem_jax import schema
    from activemem_jax.config_files import config_errors, flag_value

    cfg = flag_value(_CONFIG)
    with config_errors():  # the model, mesh and sharding sections are the run schema's own
        for name in ("model", "mesh", "sharding"):
            schema.section(schema.SECTIONS[name], cfg[name], name)
        if cfg.max_new_tokens < 1:
            raise schema.ConfigError(f"max_new_tokens={cfg.max_new_tokens}: need >= 1")
    from activemem_jax.tooling import compile_cache

    compile_cache.enable()  # $ACTIVEMEM_COMPILE_CACHE: a directory, or off
    from activemem_jax import build

    t0 = time.perf_counter()
    mesh = build.mesh(cfg)
    model = build.model(cfg, mesh)
    c = model.config
    print(f"loaded {model.path}: {c.model_type}, {c.num_layers} layers, d={c.hidden_size}, "
          f"{c.num_params / 1e6:.1f}M params, {c.dtype}, mesh {dict(mesh.shape)} "
          f"in {time.perf_counter() - t0:.1f}s")
    t0 = time.perf_counter()
    answer = model.generate(cfg.question, max_new_tokens=cfg.max_new_tokens)
    print(f"question: {cfg.question}")
    print(f"answer:   {answer}")
    print(f"(generated in {time.perf_counter() - t0:.1f}s, compile included)")


if __name__ == "__main__":
    app.run(main)
