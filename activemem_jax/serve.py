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

from activemem_jax.engine import Engine
from activemem_jax.server import make_app, served_names


def main(argv=None):
    ap = argparse.ArgumentParser(description="OpenAI-compatible server on the activemem-jax engine")
    ap.add_argument("--config", help="ml_collections config file with a `serve` section")
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
    cfg = dict(model="embedded", served_model_name=None, host="127.0.0.1", port=8000, dtype="float32",
               activation_dtype="", quant="", max_slots=8, max_len=2048, max_queue=256)
    if args.config:
        import importlib.util

        spec = importlib.util.spec_from_file_location("serve_config", args.config)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        cfg.update(dict(module.get_config().serve))
    cfg.update({k: v for k, v in vars(args).items() if v is not None and k in cfg})
    from activemem_jax.tooling import compile_cache
    from activemem_jax.models import load_from_config

    cache = compile_cache.enable(args.compile_cache)  # before anything compiles

    model = load_from_config({"path": cfg["model"], "dtype": cfg["dtype"], "activation_dtype": cfg["activation_dtype"],
                              "quant": cfg["quant"]})
    names = served_names(cfg["model"], cfg["served_model_name"])
    engine = Engine(model, max_slots=cfg["max_slots"], max_len=cfg["max_len"], max_queue=cfg["max_queue"])
    import uvicorn

    print(f"serving {', '.join(names)} on http://{cfg['host']}:{cfg['port']}/v1 "
          f"({cfg['max_slots']} slots x {cfg['max_len']} tokens; compilation cache: {cache or 'off'})",
          flush=True)
    uvicorn.run(make_app(engine, names, args.api_key), host=cfg["host"], port=cfg["port"],
                log_level="warning")


if __name__ == "__main__":
    main()
