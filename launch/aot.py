"""Compile a training config's jitted steps for a TPU slice, without a TPU, and say
whether each fits the chip's HBM (MaxText's train_compile.py technique).

    python launch/aot.py --config configs/activemem_qwen2_5_1_5b.py    # on the config's own `topology`
    python launch/aot.py --config configs/activemem_qwen2_5_1_5b.py --topology v5p-8
    python launch/aot.py --config configs/activemem_qwen3_8b.py --topology v5p-16 --config.mesh.tensor=4
    python launch/aot.py --config ... --topology v5e-16 --only update_grpo,decode --length 4096
    python launch/aot.py --config ... --topology v5p-8 --layouts both     # unrolled vs scanned layers

Compiles the run's own jitted functions at the config's shapes, mesh and rules: the GRPO
and SFT update steps (one mini-batch, micro-batches and remat as configured), the old /
reference log-prob pass, the controller step, the engine's prefill and decode steps
(`activemem_jax/tooling/aot.py` builds their abstract inputs). Rows are `--length` tokens
(default engine.max_len: the longest turn a run can meet). Prints one row per function:
per-device HBM (arguments, temporaries, outputs, total) against the chip's HBM, TFLOP and
bytes accessed per device, the time estimate, the MFU and tokens/s that estimate implies,
and the compile time here; writes the rows as JSON (--json).

Two corrections to XLA's own counts (activemem_jax/tooling/aot_report.py): a splash attention
kernel's FLOPs, bytes and roofline time are modelled and added (the "kernels" column gives
their share of the time; MFU is then an upper bound, "<="); with scanned layers each model
row is also compiled unrolled at 1 and 2 layers and its counts extended to all layers
(--whole_model, on by default; "L" marks those counts).

Needs libtpu (bash launch/install.sh tpu, or the test extra). Exits 1 when a function
does not fit, 2 on bad input (unknown topology, a mesh that does not cover the slice, an
unknown model), each with a one-line error.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # the TPU devices come from the topology, not the host
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # configs/

from absl import app, flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from activemem_jax.tooling.aot_report import fmt_gib, print_table  # noqa: E402

FUNCTIONS = ("update_grpo", "update_sft", "logprobs", "controller", "prefill", "decode")
_CONFIG = config_flags.DEFINE_config_file("config", "configs/activemem_qwen2_5_1_5b.py", "training config file")
_TOPOLOGY = flags.DEFINE_string("topology", "", "TPU slice, e.g. v4-8, v5e-8, v5e-16, v5p-8, v5p-16, v6e-8 "
                                "(default: the config's `topology`, else v5p-8)")
_LENGTH = flags.DEFINE_integer("length", 0, "tokens per training row (0: engine.max_len)")
_ONLY = flags.DEFINE_list("only", [], f"compile only these: {', '.join(FUNCTIONS)}")
_LAYOUTS = flags.DEFINE_enum("layouts", "config", ["config", "both"],
                             "both: also compile the GRPO update with unrolled and scanned layers "
                             "(when the loader has scan_layers) and print both compile times")
_JSON = flags.DEFINE_string("json", "", "write the rows here as JSON")
_WHOLE = flags.DEFINE_bool("whole_model", True, "scanned layers: also compile each model step unrolled at 1 and 2 "
                           "layers and report the whole model's counts")


def main(argv):
    del argv
    from activemem_jax import build, schema
    from activemem_jax.config_files import flag_value
    from activemem_jax.models import UnsupportedModelError
    from activemem_jax.models.attention import resolve
    from activemem_jax.models.decode_kernel import resolve_decode
    from activemem_jax.tooling import aot, topologies

    cfg = flag_value(_CONFIG)
    only = [f.strip() for f in _ONLY.value if f.strip()]
    unknown = sorted(set(only) - set(FUNCTIONS))
    try:
        schema.load(cfg)  # every field checked before libtpu loads
        if unknown:
            raise topologies.TopologyError(f"--only {unknown}: choose from {', '.join(FUNCTIONS)}")
        sl = topologies.get_slice(_TOPOLOGY.value or schema.part(cfg, "topology") or "v5p-8")
        m = cfg.mesh
        topologies.mesh_sizes(sl.name, sl.chips, m.data, m.fsdp, m.tensor)  # before libtpu: fast errors
        runtime = aot.runtime_options(cfg.model)
        model_cfg = aot.model_config(cfg.model.path, runtime)
        length = _LENGTH.value or int(cfg.engine.max_len)
        devices = topologies.slice_devices(sl.name)
        mesh = topologies.slice_mesh(sl.name, devices, m.data, m.fsdp, m.tensor)
    except (topologies.TopologyError, FileNotFoundError, UnsupportedModelError, NotImplementedError,
            ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    import jax

    rules = build.rules(cfg)
    gen_mesh = aot.engine_mesh(mesh, devices, sl.hosts)
    chip = sl.chip
    want = set(only or FUNCTIONS)

    def model_steps(mc):
        steps = aot.named_train_functions(cfg, mc, mesh, rules, length, want)
        return steps + [c for c in (aot.engine_functions(cfg, mc, gen_mesh, rules) if {"prefill", "decode"} & want
                                    else []) if c.name.split()[0] in want]

    todo = model_steps(model_cfg)
    # scanned layers: the same steps unrolled at 1 and 2 layers give the whole model's counts
    if model_cfg.scan_layers and _WHOLE.value:
        layer_steps = list(zip(*(model_steps(mc) for mc in aot.layer_configs(model_cfg))))
    else:
        layer_steps = [None] * len(todo)
    if "controller" in want:
        todo.append(aot.controller_function(cfg, model_cfg, gen_mesh))
        layer_steps.append(None)

    m_sizes = dict(mesh.shape)
    HEADER_SKIPS = ("dtype", "attention", "decode_attention")  # printed resolved
    active = model_cfg.num_active_params
    size = f"{model_cfg.num_params / 1e9:.2f}B" + (f", {active / 1e9:.2f}B active" if active != model_cfg.num_params
                                                   else "")
    header = (f"{os.path.basename(cfg.model.path)} ({size}, {model_cfg.dtype}, "
              f"{', '.join(f'{k}={v}' for k, v in runtime.items() if k not in HEADER_SKIPS)}, "
              f"attention={resolve(model_cfg.attention, 'tpu', model_cfg.act_dtype)}, "
              f"decode={resolve_decode(model_cfg.decode_attention, 'tpu')}) on {sl.name} "
              f"({sl.topology}, {sl.chips} x {chip.name}, {chip.hbm_gib:g} GiB HBM, {chip.peak_tflops:g} TFLOP/s "
              f"bf16, {sl.hosts} host(s)); training mesh {m_sizes}; engine mesh {dict(gen_mesh.shape)}; "
              f"jax {jax.__version__}")
    print(header, flush=True)
    reports = []
    for c, unrolled in zip(todo, layer_steps):
        try:
            r, _ = aot.compile_report(c.name, c.jitted, c.args, c.kwargs, c.work, c.mesh, chip, c.note)
            if unrolled is not None:
                one, two = (aot.compile_report(x.name, x.jitted, x.args, x.kwargs, x.work, x.mesh, chip)[0]
                            for x in unrolled)
                r = aot.whole_model(r, one, two, model_cfg.num_layers)
        except Exception as e:  # the TPU compiler refuses programs that exceed HBM
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            reports.append((c.name, f"compile failed: {first[:200]}"))
            print(f"  {c.name}: {reports[-1][1]}", flush=True)
            continue
        reports.append(r)
        print(f"  {c.name}: {fmt_gib(r.total)} GiB/device ({'fits' if r.fits else 'DOES NOT FIT'}), "
              f"compiled in {r.compile_s:.0f} s", flush=True)

    if _LAYOUTS.value == "both":
        for scan in (False, True):
            mc = aot.model_config(cfg.model.path, aot.runtime_options(cfg.model, with_scan=scan))
            c = aot.train_functions(cfg, mc, mesh, rules, length, ("grpo",))[0]
            r, _ = aot.compile_report(f"{c.name} scan_layers={scan}", c.jitted, c.args, c.kwargs, c.work,
                                      c.mesh, chip, c.note)
            reports.append(r)
            print(f"  {r.name}: compiled in {r.compile_s:.0f} s", flush=True)

    print()
    print_table(reports, chip, f"per device on {sl.name}: GiB of {chip.hbm_gib:g}; MFU and tok/s at the "
                               f"time estimate (~: XLA gave none, roofline of its counts); TFLOP, bytes and time "
                               f"include the kernels' modelled counts")
    done = [r for r in reports if not isinstance(r, tuple)]
    if any(r.per_layer for r in done):
        print("¹ scanned layers: XLA counts the loop body once, so TFLOP, bytes and the time estimate cover one "
              "layer and give no MFU or tok/s (the memory is whole); --whole_model scales them")
    if any(r.layers for r in done):
        print(f"L whole model: the same step unrolled, compiled at 1 and 2 layers: counts(1) + "
              f"{model_cfg.num_layers - 1} x (counts(2) - counts(1)); memory is the scanned program's own")
    if any(r.modelled for r in done):
        print("kernels: the share of the time estimate that is the Pallas kernels' modelled roofline (splash "
              "attention; the paged decode kernel reading every page up to kv_len once) "
              "(max(FLOPs / peak, bytes / HBM bandwidth) per call, models/kernel_costs.py): XLA does not count "
              "inside a Pallas kernel, so those rows' MFU and tok/s are upper bounds (<=)")
    if _JSON.value:
        from launch.bench_report import write_json

        write_json(_JSON.value, {"topology": sl.name, "config": header, "rows": [
            {"name": r[0], "error": r[1]} if isinstance(r, tuple) else r.to_json() for r in reports]})
    bad = [r[0] if isinstance(r, tuple) else r.name for r in reports if isinstance(r, tuple) or not r.fits]
    if bad:
        print(f"does not fit {sl.name} ({chip.hbm_gib:g} GiB per chip): {', '.join(bad)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    app.run(main)
