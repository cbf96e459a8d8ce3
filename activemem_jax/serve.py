"""OpenAI-compatible model server on the engine (FastAPI + uvicorn).

    python -m activemem_jax.serve --model embedded --port 8000 [--api-key KEY]
    python -m activemem_jax.serve --config configs/serve_embedded.py

POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health.
Binds 127.0.0.1 unless --host says otherwise. Every field is checked against its real
bounds before it reaches the engine, and a bad request gets a 4xx JSON error in OpenAI's
shape; a full queue gets 503 with Retry-After; a request the engine failed on gets a 500
(a stream: an error event, then [DONE]), never a normal finish; /health answers 503 when
the engine thread has stopped. A client that disconnects (streaming or not) cancels its
request and frees its slots; a refused batch cancels what of it was already accepted.
The app itself (request schema, errors, routes) is `activemem_jax.server`.
"""

from __future__ import annotations

import argparse
import os

from activemem_jax.server import make_app, served_names


FLAGS = {"model": "model.path", "dtype": "model.dtype", "activation_dtype": "model.activation_dtype",
         "quant": "model.quant", "max_slots": "engine.max_slots", "max_len": "engine.max_len",
         "max_queue": "engine.max_queue", "served_model_name": "serve.served_model_name", "host": "serve.host",
         "port": "serve.port"}  # command-line flag -> config field


def default_config():
    """The server's config: a training config's model and engine sections (schema.py), and
    a serve section (served_model_name, host, port)."""
    import ml_collections

    from activemem_jax import schema

    c = ml_collections.ConfigDict()
    c.model = schema.defaults(schema.Model, dtype="float32", remat=False)
    c.engine = schema.defaults(schema.Engine, max_slots=8, max_len=2048)
    c.serve = ml_collections.ConfigDict(dict(served_model_name="", host="127.0.0.1", port=8000))
    return c


def server_config(args):
    """The config file's sections over the defaults, the flags over both; checked (a bad
    field stops here, named)."""
    from activemem_jax import schema
    from activemem_jax.config_files import apply_overrides, load_config

    cfg = default_config()
    if args.config:
        given = load_config(args.config)
        unknown = sorted(set(given.keys()) - set(cfg.keys()))
        if unknown:
            raise SystemExit(f"config error: {args.config}: no such section {unknown[0]!r} (model, engine, serve)")
        try:
            apply_overrides(cfg, [(f"{name}.{k}", v) for name in given.keys() for k, v in given[name].items()])
        except KeyError as e:
            raise SystemExit(f"config error: {args.config}: {e.args[0]}") from None
    apply_overrides(cfg, [(field, getattr(args, flag)) for flag, field in FLAGS.items()
                          if getattr(args, flag) is not None])
    try:
        schema.section(schema.Model, cfg.model, "model")
        schema.section(schema.Engine, cfg.engine, "engine")
    except schema.ConfigError as e:
        raise SystemExit(f"config error: {e}") from None
    return cfg


def main(argv=None):
    ap = argparse.ArgumentParser(description="OpenAI-compatible server on the activemem-jax engine")
    ap.add_argument("--config", help="ml_collections config file with model / engine / serve sections "
                                     "(configs/serve_embedded.py)")
    ap.add_argument("--model", default=None, help="HF directory, .gguf file, or 'embedded'")
    ap.add_argument("--served-model-name", default=None,
                    help="more ids the model answers to, comma-separated (the --model value always works)")
    ap.add_argument("--host", default=None)
    ap.add_argument("--port", type=int, default=None)
    ap.add_argument("--api-key", default=os.environ.get("ACTIVEMEM_API_KEY"))
    ap.add_argument("--dtype", default=None, help="weights: float32 | bfloat16")
    ap.add_argument("--activation-dtype", default=None,
                    help="float32 with --dtype bfloat16: bf16 weights, f32 activations (fast on CPU)")
    ap.add_argument("--quant", default=None, help="int8: int8 weights, W8A8 matmuls (fastest batch-1 decode on CPU)")
    ap.add_argument("--max-slots", type=int, default=None)
    ap.add_argument("--max-len", type=int, default=None)
    ap.add_argument("--max-queue", type=int, default=None)
    ap.add_argument("--compile-cache", default=None,
                    help="persistent compilation cache directory, or 'off' (default: $ACTIVEMEM_COMPILE_CACHE, "
                         "else ~/.cache/activemem-jax/xla): a restart loads its compiled shapes")
    args = ap.parse_args(argv)
    cfg = server_config(args)
    from activemem_jax import build
    from activemem_jax.tooling import compile_cache

    cache = compile_cache.enable(args.compile_cache)  # before anything compiles
    model = build.model(cfg)
    names = served_names(cfg.model.path, cfg.serve.served_model_name or None)
    engine = build.engine(cfg, model)
    import uvicorn

    print(f"serving {', '.join(names)} on http://{cfg.serve.host}:{cfg.serve.port}/v1 "
          f"({cfg.engine.max_slots} slots x {cfg.engine.max_len} tokens; compilation cache: {cache or 'off'})",
          flush=True)
    uvicorn.run(make_app(engine, names, args.api_key), host=cfg.serve.host, port=cfg.serve.port,
                log_level="warning")


if __name__ == "__main__":
    main()
