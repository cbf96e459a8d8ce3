"""Evaluate HyMem and the flat baselines on a benchmark, several tasks in flight.

    python -m launch.eval_agents --config configs/agents_synthetic.py [--config.n_tasks=20]

The command line over `hymem.evaluate` (what it writes under config.out_dir, how a re-run
resumes, trials): the benchmarks are the task families of `activemem_jax.tasks`
(data.name: synthetic | gaia | browsecomp_plus; their options bad_rows, text_only,
balance in activemem_jax/tasks/agents.py). A dead endpoint stops the run with a clear
message; finished rows and the summary are kept.
"""

from __future__ import annotations

import os
import sys

from absl import app
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file("config", "configs/agents_synthetic.py", "agents config file")


def main(argv):
    del argv
    from activemem_jax.config_files import config_errors, flag_value
    from activemem_jax.tooling import compile_cache
    from hymem import run_config
    from hymem.evaluate import evaluate, format_summary
    from hymem.llm import EndpointDown

    cfg = flag_value(_CONFIG)
    with config_errors():
        run_config.load(cfg)  # every field checked once, before a model or a task is read
    compile_cache.enable()  # $ACTIVEMEM_COMPILE_CACHE: a directory, or off
    try:
        summary = evaluate(cfg)
    except EndpointDown as e:
        sys.exit(f"evaluation stopped: {e} (rows so far: {os.path.join(cfg.out_dir, 'results.jsonl')})")
    print(format_summary(summary))
    print(f"wrote {cfg.out_dir}")


if __name__ == "__main__":
    app.run(main)
