"""HyMem vs ReAct / Summary / ReSum on the synthetic multi-hop benchmark.

    python -m launch.eval_agents --config configs/agents_synthetic.py
    python -m launch.eval_agents --config configs/agents_synthetic.py \
        --config.model.base_url=http://127.0.0.1:8000/v1 --config.agents="('hymem','react')"
Agents: any name registered in hymem.protocol (hymem, react, resum, summary, amem, thread,
base); ablations "hymem_no_iso" (w/o isolated reasoning), "hymem_no_memory" (w/o memory).
Sections amem / thread take AMemConfig / ThreadConfig fields.
"""

import ml_collections

from activemem_jax.schema import Data, Engine, defaults
from hymem.run_config import Aux, Endpoint


def get_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.agents = ("hymem", "react", "resum", "summary", "amem", "thread", "base")  # hymem.protocol.names()
    c.trials = 1            # runs per task (paper A.1: >= 3; trial k samples with seed + k)
    # sections checked at load by hymem.run_config (its Endpoint and Aux; engine and data are
    # ActiveMem's schema sections: the same fields a training or evaluation config uses)
    c.model = defaults(Endpoint)  # base_url "": the in-process engine on model.path (embedded), float32
    c.engine = defaults(Engine, max_slots=8, max_len=4096)  # the in-process engine (no base_url)
    c.data = defaults(Data, name="synthetic",  # synthetic | gaia | browsecomp_plus (activemem_jax/tasks/)
                      seed=0, n_entities=2000, split="dev", n_objectives=(1, 4), n_tasks=5)
    # gaia: data.path (its directory), text_only; browsecomp_plus: data.queries, corpus, canary,
    # balance; both: bad_rows strict | skip (drop, one line per reason); retrieval_url: a
    # Search-R1-style retrieval server instead of local BM25
    c.aux = defaults(Aux)  # the auxiliary model of phi(o | d) (paper A.2); base_url "": the main one
    c.hymem = ml_collections.ConfigDict(dict(     # paper Appendix A.2
        planner_turns=12, execute_turns=10, max_iso_reasoning=5, max_iso_reasoning_turn=3,
        context_window=4096,
    ))
    c.baselines = ml_collections.ConfigDict(dict(max_turns=100, context_window=4096, summary_threshold=2048))
    c.sampling = ml_collections.ConfigDict(dict(temperature=0.0, max_tokens=256))
    c.concurrency = 8
    c.out_dir = "runs/agents_synthetic"
    return c
