"""HyMem vs ReAct / Summary / ReSum on the synthetic multi-hop benchmark.

    python -m launch.eval_agents --config configs/agents_synthetic.py
    python -m launch.eval_agents --config configs/agents_synthetic.py \
        --config.model.base_url=http://127.0.0.1:8000/v1 --config.agents="('hymem','react')"
Agents: any name registered in hymem.protocol (hymem, react, resum, summary, amem, thread,
base); ablations "hymem_no_iso" (w/o isolated reasoning), "hymem_no_memory" (w/o memory).
Sections amem / thread take AMemConfig / ThreadConfig fields.
"""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.agents = ("hymem", "react", "resum", "summary", "amem", "thread", "base")  # hymem.protocol.names()
    c.trials = 1            # runs per task (paper A.1: >= 3; trial k samples with seed + k)
    c.model = ml_collections.ConfigDict(dict(
        base_url="",        # an OpenAI-compatible endpoint; empty: in-process engine on `path`
        name="", api_key="",
        path="embedded",
        dtype="float32", activation_dtype="", quant="",   # in-process engine precision (load_from_config)
        timeout=600.0,                # seconds per HTTP call
        retries=2, backoff_s=1.0,     # transient endpoint errors: retried with backoff 1 s, 2 s
        max_consecutive_failures=3,   # failed calls in a row that stop the run (a dead server)
    ))
    c.engine = ml_collections.ConfigDict(dict(max_slots=8, max_len=4096))  # the in-process engine (no base_url)
    c.benchmark = ml_collections.ConfigDict(dict(
        name="synthetic",   # synthetic | gaia | browsecomp_plus
        seed=0, n_entities=2000, split="dev", n_objectives=(1, 4), n_tasks=5,
        path="", queries="", corpus="", canary="",   # gaia dir / browsecomp files
        bad_rows="strict",  # gaia metadata / browsecomp queries rows: strict | skip (drop, one line per reason)
        text_only="",       # gaia (paper A.1): "" all | no_attachment | readable_attachment
        balance="",         # browsecomp_plus (A.1: n_tasks=150, 1:1:1): "" first n | a level field | evidence_terciles
    ))
    c.aux = ml_collections.ConfigDict(dict(  # the auxiliary model of phi(o | d) (paper A.2); empty: the main one
        base_url="", name="", api_key="", timeout=600.0))
    c.retrieval_url = ""    # a Search-R1-style retrieval server instead of local BM25
    c.hymem = ml_collections.ConfigDict(dict(     # paper Appendix A.2
        planner_turns=12, execute_turns=10, max_iso_reasoning=5, max_iso_reasoning_turn=3,
        context_window=4096,
    ))
    c.baselines = ml_collections.ConfigDict(dict(max_turns=100, context_window=4096, summary_threshold=2048))
    c.sampling = ml_collections.ConfigDict(dict(temperature=0.0, max_tokens=256))
    c.concurrency = 8
    c.out_dir = "runs/agents_synthetic"
    return c
