"""One decode step's attention, compiled alone for one TPU chip without a TPU: what XLA
counts for the engine's block-wise attention (`models/decoder.attend`) at each cache block
size, against the floor a paged decode kernel would have (reading the keys and values
once). docs/attention_kernels.md ("Decode: no kernel, and why") quotes it.

    python launch/aot_decode_attention.py                      # Qwen2.5-1.5B per chip on v5p-8
    python launch/aot_decode_attention.py --slots 16 --kv-heads 8 --group 4 --blocks 256,8192

Shapes are per chip (a paper config's slots over its fsdp axis, its KV heads over its
tensor axis). Needs libtpu (bash launch/install.sh tpu, or the test extra).
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # the TPU device comes from the topology, not the host
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--topology", default="v5p-8")
    p.add_argument("--slots", type=int, default=16, help="decode rows on the chip (64 slots over fsdp 4)")
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--group", type=int, default=6, help="query heads per KV head")
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--positions", type=int, default=8192, help="cache length (engine.max_len)")
    p.add_argument("--blocks", default="256,1024,8192", help="cache block sizes to compile (the engine's: 256)")
    args = p.parse_args()

    import jax
    import jax.numpy as jnp
    from jax.sharding import SingleDeviceSharding

    from activemem_jax.models.decoder import attend
    from activemem_jax.tooling import topologies

    sl = topologies.get_slice(args.topology)
    on = SingleDeviceSharding(topologies.slice_devices(sl.name)[0])
    b, kv, g, d, s = args.slots, args.kv_heads, args.group, args.head_dim, args.positions
    cache = 2 * b * kv * s * d * 2  # keys and values, bf16
    floor_ms = cache / (sl.chip.hbm_gbps * 1e9) * 1e3
    print(f"{sl.chip.name}: {b} slots x {kv} KV heads x {g} x head dim {d}, {s} positions; keys and values "
          f"{cache / 1e9:.3f} GB, read once at {sl.chip.hbm_gbps:g} GB/s: {floor_ms:.3f} ms (a kernel's floor)")
    print("| block rows | blocks | GB accessed | x the cache | est ms | temp MiB |")
    print("|---|---|---|---|---|---|")
    for n in (int(x) for x in args.blocks.split(",")):
        if s % n:
            raise SystemExit(f"--blocks {n}: does not divide --positions {s}")
        q = jax.ShapeDtypeStruct((b, 1, kv * g, d), jnp.bfloat16, sharding=on)
        blocks = [jax.ShapeDtypeStruct((b, kv, n, d), jnp.bfloat16, sharding=on) for _ in range(s // n)]
        ok = jax.ShapeDtypeStruct((b, 1, s), jnp.bool_, sharding=on)
        step = jax.jit(lambda q, k, v, ok: attend(q, k, v, ok, False))
        compiled = step.lower(q, blocks, blocks, ok).compile()
        cost = compiled.cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        moved = float(cost.get("bytes accessed", 0.0))
        est = float(cost.get("optimal_seconds", 0.0)) * 1e3 or moved / (sl.chip.hbm_gbps * 1e9) * 1e3
        temp = compiled.memory_analysis().temp_size_in_bytes / 2**20
        print(f"| {n} | {s // n} | {moved / 1e9:.3f} | {moved / cache:.2f} | {est:.3f} | {temp:.1f} |", flush=True)


if __name__ == "__main__":
    main()
