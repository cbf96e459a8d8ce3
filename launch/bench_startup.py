"""Server start to first token, with an empty persistent compilation cache (cold) and with
the one the cold start filled (warm), against the cache turned off, in one run.

Each start is a fresh `python -m activemem_jax.serve` process; the clock runs from its
launch to the first streamed token of one chat request (greedy, 8 tokens), so it holds
the model load, every compile the request needs, prefill and the first decode step.

    python -m launch.bench_startup [--model embedded] [--starts 2] [--out bench_results/startup.json]
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # launch/, configs/

import argparse
import http.client
import json
import socket
import subprocess
import tempfile
import time

from launch.bench_report import write_json

REQUEST = {"messages": [{"role": "user", "content": "Name three colours."}], "max_tokens": 8,
           "temperature": 0, "stream": True}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def first_token_after_start(model: str, cache: str, timeout: float = 900) -> dict:
    port = free_port()
    env = {**os.environ, "ACTIVEMEM_COMPILE_CACHE": cache}
    t0 = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-m", "activemem_jax.serve", "--model", model, "--port", str(port),
                               "--max-slots", "4", "--max-len", "1024", "--compile-cache", cache],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        while True:  # until the server accepts connections
            if server.poll() is not None:
                raise RuntimeError(f"the server exited: {server.stderr.read()[-2000:]}")
            if time.perf_counter() - t0 > timeout:
                raise TimeoutError("the server did not start")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        listening = time.perf_counter() - t0
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        conn.request("POST", "/v1/chat/completions", body=json.dumps(REQUEST),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        first = None
        for line in resp:
            if not line.startswith(b"data: {"):
                continue
            delta = json.loads(line[6:])["choices"]
            if delta and delta[0]["delta"].get("content"):
                first = time.perf_counter() - t0
                break
        conn.close()
        if first is None:
            raise RuntimeError("the stream ended without a token")
        return {"listening_s": round(listening, 2), "first_token_s": round(first, 2)}
    finally:
        server.terminate()
        server.wait(timeout=60)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--starts", type=int, default=2, help="warm starts to time (the cold one is one)")
    ap.add_argument("--out", default="bench_results/startup.json")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as cache:
        res = {"off": first_token_after_start(args.model, "off"),
               "cold": first_token_after_start(args.model, cache)}
        res["files"] = len(os.listdir(cache))
        res["warm"] = [first_token_after_start(args.model, cache) for _ in range(args.starts)]
    best = min(w["first_token_s"] for w in res["warm"])
    res["cold_over_warm"] = round(res["cold"]["first_token_s"] / best, 2)
    for k in ("off", "cold"):
        print(f"{k:5} listening {res[k]['listening_s']:6.1f} s  first token {res[k]['first_token_s']:6.1f} s")
    for w in res["warm"]:
        print(f"warm  listening {w['listening_s']:6.1f} s  first token {w['first_token_s']:6.1f} s")
    print(f"cache files {res['files']}; cold / warm time to first token: {res['cold_over_warm']}x")
    write_json(args.out, res)


if __name__ == "__main__":
    main()
